package tekton

import (
	"context"
	"strings"
	"testing"
	"time"

	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"knative.dev/pkg/apis"
)

const goodDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func run(cond *apis.Condition, results map[string]string) *tektonv1.PipelineRun {
	pr := &tektonv1.PipelineRun{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "f-0123456789"}}
	start := metav1.NewTime(time.Unix(1000, 0))
	pr.Status.StartTime = &start
	if cond != nil {
		pr.Status.SetCondition(cond)
	}
	for k, v := range results {
		pr.Status.Results = append(pr.Status.Results, tektonv1.PipelineRunResult{Name: k, Value: *tektonv1.NewStructuredValues(v)})
	}
	return pr
}

func TestState(t *testing.T) {
	succeeded := &apis.Condition{Type: apis.ConditionSucceeded, Status: corev1.ConditionTrue, Reason: "Succeeded"}
	tests := []struct {
		name                       string
		pr                         *tektonv1.PipelineRun
		done, ok                   bool
		image, reason, msgContains string
	}{
		{name: "not picked up", pr: run(nil, nil), reason: ReasonPending, msgContains: "waiting for Tekton"},
		{name: "started", pr: run(&apis.Condition{Type: apis.ConditionSucceeded, Status: corev1.ConditionUnknown, Reason: "Started"}, nil),
			reason: ReasonRunning, msgContains: "PipelineRun f-0123456789 is running"},
		// Tekton's counts change while it runs; the message does not.
		{name: "running", pr: run(&apis.Condition{Type: apis.ConditionSucceeded, Status: corev1.ConditionUnknown, Reason: "Running", Message: "Tasks Completed: 0"}, nil),
			reason: ReasonRunning, msgContains: "PipelineRun f-0123456789 is running"},
		{name: "held by Tekton", pr: run(&apis.Condition{Type: apis.ConditionSucceeded, Status: corev1.ConditionUnknown, Reason: "PipelineRunPending", Message: "PipelineRun \"f\" is pending"}, nil),
			reason: ReasonRunning, msgContains: `PipelineRun f-0123456789: PipelineRunPending: PipelineRun "f" is pending`},
		{name: "succeeded", pr: run(succeeded, map[string]string{"IMAGE_DIGEST": goodDigest + "\n", "IMAGE_URL": "reg/ns/f"}),
			done: true, ok: true, image: "reg/ns/f@" + goodDigest, reason: "Succeeded"},
		{name: "digest not sha256", pr: run(succeeded, map[string]string{"IMAGE_DIGEST": "sha256:xyz", "IMAGE_URL": "reg/ns/f"}),
			done: true, reason: ReasonBadResult, msgContains: `IMAGE_DIGEST="sha256:xyz"`},
		{name: "no URL", pr: run(succeeded, map[string]string{"IMAGE_DIGEST": goodDigest}),
			done: true, reason: ReasonBadResult, msgContains: `IMAGE_URL=""`},
		{name: "URL already pinned", pr: run(succeeded, map[string]string{"IMAGE_DIGEST": goodDigest, "IMAGE_URL": "reg/ns/f@" + goodDigest}),
			done: true, reason: ReasonBadResult},
		{name: "timed out, no TaskRun", pr: run(&apis.Condition{Type: apis.ConditionSucceeded, Status: corev1.ConditionFalse, Reason: "PipelineRunTimeout", Message: `PipelineRun "f" failed to finish within "15m0s"`}, nil),
			done: true, reason: "PipelineRunTimeout", msgContains: "failed to finish within"},
		{name: "cancelled by hand", pr: func() *tektonv1.PipelineRun {
			pr := run(&apis.Condition{Type: apis.ConditionSucceeded, Status: corev1.ConditionFalse, Reason: "Cancelled", Message: `PipelineRun "f-0123456789" was cancelled`}, nil)
			pr.Spec.Status = tektonv1.PipelineRunSpecStatusCancelled
			return pr
		}(), done: true, reason: "Cancelled", msgContains: "f-0123456789 was stopped by hand (spec.status Cancelled); delete it, or change the Function's spec.rebuild, to build this source again"},
	}
	b := &Builder{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := b.state(context.Background(), tc.pr)
			if st.Done != tc.done || st.Succeeded != tc.ok || st.Image != tc.image || st.Reason != tc.reason ||
				!strings.Contains(st.Message, tc.msgContains) || st.Name != tc.pr.Name || !st.Started || st.StartTime == nil {
				t.Errorf("state %+v", st)
			}
		})
	}
}
