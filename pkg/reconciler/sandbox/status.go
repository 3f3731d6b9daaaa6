package sandbox

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The conditions the reconciler keeps on a Namespace's status, beside
// Kubernetes' own (which it sets only while a namespace is deleted).
const (
	// ConditionNetworkPolicies is True while the namespace holds the
	// NetworkPolicies sless's workloads there need.
	ConditionNetworkPolicies corev1.NamespaceConditionType = "sless.dev/NetworkPolicies"
	// ConditionPodSecurity is True while a tenant namespace carries Pod
	// Security Admission labels.
	ConditionPodSecurity corev1.NamespaceConditionType = "sless.dev/PodSecurity"
)

// Reasons of the conditions.
const (
	ReasonPoliciesKept      = "PoliciesKept"
	ReasonAPIServiceMissing = "APIServiceMissing"
	ReasonPolicyWriteFailed = "PolicyWriteFailed"
	ReasonLabelled          = "Labelled"
	ReasonLabelWriteFailed  = "LabelWriteFailed"
	ReasonTurnedOff         = "TurnedOff"
)

// Status is a Namespace's status as the sandbox reconciler tells it.
type Status struct {
	*corev1.NamespaceStatus
}

// MarkPoliciesKept: every policy the namespace needs is in place.
func (s Status) MarkPoliciesKept(msg string) {
	s.set(ConditionNetworkPolicies, corev1.ConditionTrue, ReasonPoliciesKept, msg)
}

// MarkAPIServiceMissing: sless api's Service, whose pods the ingress
// policy admits, cannot be read.
func (s Status) MarkAPIServiceMissing(msg string) {
	s.set(ConditionNetworkPolicies, corev1.ConditionFalse, ReasonAPIServiceMissing, msg)
}

// MarkPolicyWriteFailed: the apiserver refused a policy's write.
func (s Status) MarkPolicyWriteFailed(msg string) {
	s.set(ConditionNetworkPolicies, corev1.ConditionFalse, ReasonPolicyWriteFailed, msg)
}

// MarkPoliciesTurnedOff: the site keeps no policies (--network-policies=false).
func (s Status) MarkPoliciesTurnedOff() {
	s.set(ConditionNetworkPolicies, corev1.ConditionFalse, ReasonTurnedOff, "the controller runs with --network-policies=false")
}

// MarkLabelled: the namespace carries Pod Security Admission labels.
func (s Status) MarkLabelled(msg string) {
	s.set(ConditionPodSecurity, corev1.ConditionTrue, ReasonLabelled, msg)
}

// MarkLabelWriteFailed: the labels could not be written.
func (s Status) MarkLabelWriteFailed(msg string) {
	s.set(ConditionPodSecurity, corev1.ConditionFalse, ReasonLabelWriteFailed, msg)
}

// MarkPodSecurityTurnedOff: the site labels no namespaces (--pod-security=false).
func (s Status) MarkPodSecurityTurnedOff() {
	s.set(ConditionPodSecurity, corev1.ConditionFalse, ReasonTurnedOff, "the controller runs with --pod-security=false")
}

// Condition is the condition of type t, or nil.
func (s Status) Condition(t corev1.NamespaceConditionType) *corev1.NamespaceCondition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			return &s.Conditions[i]
		}
	}
	return nil
}

// set writes a condition, keeping its transition time while its status holds.
func (s Status) set(t corev1.NamespaceConditionType, st corev1.ConditionStatus, reason, msg string) {
	if c := s.Condition(t); c != nil {
		if c.Status != st {
			c.LastTransitionTime = metav1.Now()
		}
		c.Status, c.Reason, c.Message = st, reason, msg
		return
	}
	s.Conditions = append(s.Conditions, corev1.NamespaceCondition{Type: t, Status: st, Reason: reason, Message: msg, LastTransitionTime: metav1.Now()})
}
