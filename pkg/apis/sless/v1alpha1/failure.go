package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Failure tells whether the Function's current generation failed (phase
// Failed, Ready False for this generation) and, if so, the Ready
// condition's reason and message. A failed generation gets no image or
// revision until its spec changes, so whatever waits on it (a call, a run)
// waits for a fix, not for time; an older revision may still serve.
func (fn *Function) Failure() (reason, message string, failed bool) {
	if fn.Status.Phase != FunctionPhaseFailed || fn.Status.ObservedGeneration != fn.Generation {
		return "", "", false
	}
	c := meta.FindStatusCondition(fn.Status.Conditions, FunctionConditionReady)
	if c == nil || c.Status != metav1.ConditionFalse {
		return "", "", false
	}
	return c.Reason, c.Message, true
}
