package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConditionSet names a kind's conditions: Ready, the one kubectl shows, and
// the steps it is derived from (none when Ready is written directly). The
// Mark… verbs of each kind's *_lifecycle.go are the only writers of
// conditions, so a reconciler says what happened and never spells a type,
// status and reason together (Knative's apis.ConditionSet, for the
// metav1.Condition that sless's statuses hold).
//
// +kubebuilder:object:generate=false
type ConditionSet struct {
	Ready string
	Steps []string
}

// conditions writes the conditions of one status, each stamped with the
// generation the status describes (its observedGeneration).
type conditions struct {
	list       *[]metav1.Condition
	generation int64
}

func (c conditions) set(typ string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(c.list, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: c.generation,
	})
}

func (c conditions) markTrue(typ, reason, message string) {
	c.set(typ, metav1.ConditionTrue, reason, message)
}

func (c conditions) markFalse(typ, reason, message string) {
	c.set(typ, metav1.ConditionFalse, reason, message)
}

func (c conditions) markUnknown(typ, reason, message string) {
	c.set(typ, metav1.ConditionUnknown, reason, message)
}

func (c conditions) remove(typ string) {
	meta.RemoveStatusCondition(c.list, typ)
}

// stepsSummary is where a set's steps stand for the generation: the first
// False step, else the first one not yet True for it (missing, Unknown, or
// of an older generation) and its index among the steps; both nil when all
// are True.
func (s ConditionSet) stepsSummary(list []metav1.Condition, generation int64) (failed, pending *metav1.Condition, pendingStep int) {
	pendingStep = -1
	for i, t := range s.Steps {
		c := meta.FindStatusCondition(list, t)
		switch {
		case c == nil:
			if pending == nil {
				pending, pendingStep = &metav1.Condition{Type: t, Reason: "Pending"}, i
			}
		case c.Status == metav1.ConditionFalse:
			if failed == nil {
				failed = c
			}
		case c.Status == metav1.ConditionUnknown || c.ObservedGeneration != generation:
			if pending == nil {
				pending, pendingStep = c, i
			}
		}
	}
	return failed, pending, pendingStep
}

// orDefault is reason, or def when the adapter that reported gave none.
func orDefault(reason, def string) string {
	if reason == "" {
		return def
	}
	return reason
}
