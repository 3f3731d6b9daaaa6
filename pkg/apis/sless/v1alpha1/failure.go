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
	return failure(&fn.Status, fn.Generation)
}

// Failure tells whether the SlessService's current generation failed, as
// Function.Failure does.
func (s *SlessService) Failure() (reason, message string, failed bool) {
	return failure(&s.Status, s.Generation)
}

func failure(st *FunctionStatus, generation int64) (reason, message string, failed bool) {
	if st.Phase != FunctionPhaseFailed || st.ObservedGeneration != generation {
		return "", "", false
	}
	c := meta.FindStatusCondition(st.Conditions, FunctionConditionReady)
	if c == nil || c.Status != metav1.ConditionFalse {
		return "", "", false
	}
	return c.Reason, c.Message, true
}
