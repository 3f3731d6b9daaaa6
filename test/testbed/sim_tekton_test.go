package testbed_test

import (
	"context"
	"testing"

	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	"knative.dev/pkg/apis"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/test/testbed"
)

// The simulator plays Tekton's cancel: a run whose spec.status is set to
// Cancelled ends with Succeeded False, reason Cancelled and Tekton's
// message, whether it was running or not started yet.
func TestTektonSimulatorCancel(t *testing.T) {
	k := testbed.SharedKube(t)
	sim := testbed.SharedTekton(t)
	ctx := context.Background()
	ns := k.Namespace(t)
	sim.SetPolicy(ns, testbed.BuildPolicy{Mode: testbed.BuildHold})

	cancel := func(name string) {
		t.Helper()
		pr := getPR(t, k, ns, name)
		patch := client.MergeFrom(pr.DeepCopy())
		pr.Spec.Status = tektonv1.PipelineRunSpecStatusCancelled
		if err := k.Client.Patch(ctx, pr, patch); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name  string
		setup func(name string)
	}{
		{"running", func(name string) {
			if err := k.Client.Create(ctx, newPipelineRun(ns, name)); err != nil {
				t.Fatal(err)
			}
			eventually(t, "PipelineRun running", func() (bool, error) { return getPR(t, k, ns, name).HasStarted(), nil })
			cancel(name)
		}},
		{"never-started", func(name string) {
			pr := newPipelineRun(ns, name)
			pr.Spec.Status = tektonv1.PipelineRunSpecStatusCancelled
			if err := k.Client.Create(ctx, pr); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.setup(tc.name)
			eventually(t, "PipelineRun cancelled", func() (bool, error) { return getPR(t, k, ns, tc.name).IsDone(), nil })
			pr := getPR(t, k, ns, tc.name)
			c := pr.Status.GetCondition(apis.ConditionSucceeded)
			if c.Status != corev1.ConditionFalse || c.Reason != string(tektonv1.PipelineRunReasonCancelled) ||
				c.Message != `PipelineRun "`+tc.name+`" was cancelled` {
				t.Errorf("condition %+v", c)
			}
			if pr.Status.StartTime == nil || pr.Status.CompletionTime == nil {
				t.Errorf("start %v completion %v", pr.Status.StartTime, pr.Status.CompletionTime)
			}
			if err := sim.Succeed(ctx, ns, tc.name); err == nil {
				t.Error("Succeed of a cancelled run did not fail")
			}
		})
	}
}
