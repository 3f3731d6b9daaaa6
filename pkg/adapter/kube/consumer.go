package kube

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Reasons the Deployment controller gives on a Deployment's Progressing
// condition (k8s.io/kubernetes/pkg/controller/deployment/util).
const (
	deploymentRolledOut        = "NewReplicaSetAvailable"
	deploymentDeadlineExceeded = "ProgressDeadlineExceeded"
)

// consumerReadiness reads a queue trigger's consumer Deployment as
// `kubectl rollout status` does: ready once the Deployment controller has
// seen its current spec and every replica it asks for is of that spec and
// available. A consumer replica is ready only while connected to the broker
// and consuming (its readiness probe), so this is whether messages are
// taken as the trigger now says. Unknown while the Deployment rolls out;
// False when the rollout ran out of its progress deadline, or when a
// rolled-out consumer lost its readiness (the broker went away).
func consumerReadiness(d *appsv1.Deployment, what string) (metav1.ConditionStatus, string) {
	want := ptr.Deref(d.Spec.Replicas, 1)
	st := d.Status
	if st.ObservedGeneration < d.Generation {
		return metav1.ConditionUnknown, fmt.Sprintf("the consumer Deployment %s is rolling out: its controller has yet to see generation %d", d.Name, d.Generation)
	}
	why := fmt.Sprintf("a consumer is ready once connected to the broker and consuming %s; `kubectl logs deployment/%s` says why not", what, d.Name)
	progressing := deploymentCondition(st, appsv1.DeploymentProgressing)
	if progressing != nil && progressing.Status == corev1.ConditionFalse && progressing.Reason == deploymentDeadlineExceeded {
		return metav1.ConditionFalse, fmt.Sprintf("the consumer Deployment %s did not roll out within its progress deadline: %d of %d replicas ready; %s",
			d.Name, st.AvailableReplicas, want, why)
	}
	if st.UpdatedReplicas < want {
		return metav1.ConditionUnknown, fmt.Sprintf("the consumer Deployment %s is rolling out: %d of %d replicas updated", d.Name, st.UpdatedReplicas, want)
	}
	if st.Replicas > st.UpdatedReplicas {
		return metav1.ConditionUnknown, fmt.Sprintf("the consumer Deployment %s is rolling out: %d old replicas still run", d.Name, st.Replicas-st.UpdatedReplicas)
	}
	if st.AvailableReplicas < want {
		status := metav1.ConditionUnknown
		if progressing == nil || progressing.Reason == deploymentRolledOut {
			// Rolled out before, not ready now: not a rollout under way.
			status = metav1.ConditionFalse
		}
		return status, fmt.Sprintf("%d of %d replicas of the consumer Deployment %s ready: %s", st.AvailableReplicas, want, d.Name, why)
	}
	return metav1.ConditionTrue, ""
}

func deploymentCondition(st appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}
