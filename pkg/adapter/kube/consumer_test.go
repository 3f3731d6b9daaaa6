package kube

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// consumerReadiness reads a consumer Deployment's status as `kubectl
// rollout status` does, and tells a rollout under way (Unknown) from one
// that failed or a consumer that stopped being ready (False).
func TestConsumerReadiness(t *testing.T) {
	progressing := func(status corev1.ConditionStatus, reason string) []appsv1.DeploymentCondition {
		return []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: status, Reason: reason}}
	}
	for _, tc := range []struct {
		name     string
		replicas *int32
		gen      int64
		status   appsv1.DeploymentStatus
		want     metav1.ConditionStatus
		message  string
	}{
		{name: "not yet observed", gen: 2, status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1},
			want: metav1.ConditionUnknown, message: "yet to see generation 2"},
		{name: "rolled out", gen: 2, status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
			Conditions: progressing(corev1.ConditionTrue, deploymentRolledOut)}, want: metav1.ConditionTrue},
		{name: "new pod not yet created", gen: 2, status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 0, AvailableReplicas: 1,
			Conditions: progressing(corev1.ConditionTrue, "ReplicaSetUpdated")}, want: metav1.ConditionUnknown, message: "0 of 1 replicas updated"},
		{name: "old pod available, new not ready", gen: 2, status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 1, AvailableReplicas: 1,
			Conditions: progressing(corev1.ConditionTrue, "ReplicaSetUpdated")}, want: metav1.ConditionUnknown, message: "1 old replicas still run"},
		{name: "starting", gen: 1, status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1,
			Conditions: progressing(corev1.ConditionTrue, "NewReplicaSetCreated")}, want: metav1.ConditionUnknown, message: "0 of 1 replicas of the consumer Deployment orders-consumer ready"},
		{name: "rolled out, then not ready", gen: 1, status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1,
			Conditions: progressing(corev1.ConditionTrue, deploymentRolledOut)}, want: metav1.ConditionFalse, message: "kubectl logs deployment/orders-consumer"},
		{name: "progress deadline exceeded", gen: 1, status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1,
			Conditions: progressing(corev1.ConditionFalse, deploymentDeadlineExceeded)}, want: metav1.ConditionFalse, message: "progress deadline: 0 of 1 replicas ready"},
		{name: "no conditions, not ready", gen: 1, status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1},
			want: metav1.ConditionFalse, message: "0 of 1 replicas"},
		{name: "three replicas, two ready", replicas: ptr.To[int32](3), gen: 1, status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 2,
			Conditions: progressing(corev1.ConditionTrue, deploymentRolledOut)}, want: metav1.ConditionFalse, message: "2 of 3 replicas"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "orders-consumer", Generation: tc.gen},
				Spec: appsv1.DeploymentSpec{Replicas: tc.replicas}, Status: tc.status}
			got, msg := consumerReadiness(d, "queue orders")
			if got != tc.want || !strings.Contains(msg, tc.message) {
				t.Errorf("%s %q, want %s with %q", got, msg, tc.want, tc.message)
			}
		})
	}
}
