package testbed_test

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/sless-dev/sless/test/testbed"
)

// The Deployment simulator writes the status the Deployment controller
// would: ready pods make a complete rollout, pods failing their probe
// after it turn Available False while Progressing stays
// NewReplicaSetAvailable, and a new template whose pods fail leaves the
// old ready pod running beside it.
func TestDeploymentSimulator(t *testing.T) {
	k := testbed.SharedKube(t)
	sim := testbed.SharedDeployments(t)
	ns := k.Namespace(t)
	sim.Manage(ns)
	ctx := context.Background()
	labels := map[string]string{"app": "c"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img:1"}}}},
	}}
	if err := k.Client.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	status := func(want func(*appsv1.Deployment) bool, what string) {
		t.Helper()
		eventually(t, what, func() (bool, error) {
			got := &appsv1.Deployment{}
			if err := k.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "c"}, got); err != nil {
				return false, err
			}
			return want(got), fmt.Errorf("status %+v", got.Status)
		})
	}
	cond := func(d *appsv1.Deployment, typ appsv1.DeploymentConditionType) string {
		for _, c := range d.Status.Conditions {
			if c.Type == typ {
				return string(c.Status) + "/" + c.Reason
			}
		}
		return ""
	}
	status(func(d *appsv1.Deployment) bool {
		s := d.Status
		return s.ObservedGeneration == d.Generation && s.Replicas == 1 && s.UpdatedReplicas == 1 && s.AvailableReplicas == 1 &&
			cond(d, appsv1.DeploymentProgressing) == "True/NewReplicaSetAvailable" && cond(d, appsv1.DeploymentAvailable) == "True/MinimumReplicasAvailable"
	}, "rolled out")

	sim.SetReady(ns, "c", false)
	status(func(d *appsv1.Deployment) bool {
		return d.Status.AvailableReplicas == 0 && cond(d, appsv1.DeploymentProgressing) == "True/NewReplicaSetAvailable" &&
			cond(d, appsv1.DeploymentAvailable) == "False/MinimumReplicasUnavailable"
	}, "pods failing their probe after the rollout")

	sim.SetReadiness(ns, "c", func(p *corev1.PodTemplateSpec) bool { return p.Spec.Containers[0].Image == "img:1" })
	status(func(d *appsv1.Deployment) bool { return d.Status.AvailableReplicas == 1 }, "ready again")
	cur := &appsv1.Deployment{}
	if err := k.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "c"}, cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec.Template.Spec.Containers[0].Image = "img:2"
	if err := k.Client.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	status(func(d *appsv1.Deployment) bool {
		s := d.Status
		return s.ObservedGeneration == d.Generation && s.Replicas == 2 && s.UpdatedReplicas == 1 && s.AvailableReplicas == 1 &&
			cond(d, appsv1.DeploymentProgressing) == "True/ReplicaSetUpdated"
	}, "a new template whose pod is not ready beside the old one")
	sim.SetReady(ns, "c", true)
	status(func(d *appsv1.Deployment) bool {
		s := d.Status
		return s.Replicas == 1 && s.AvailableReplicas == 1 && cond(d, appsv1.DeploymentProgressing) == "True/NewReplicaSetAvailable"
	}, "the new template rolled out, the old pod gone")
}
