package function_test

import (
	"strings"
	"testing"

	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/test/testbed"
)

// A child the apiserver or a webhook refuses is refused again on every
// retry until the spec or the cluster changes: the Function is Failed with
// the refusal, not Deploying or Building for ever with Ready Unknown (which
// `kubectl wait --for=condition=Ready` would wait out), and it recovers once
// the spec no longer asks for what is refused.
func TestRejectedChildFailsTheFunction(t *testing.T) {
	for _, tc := range []struct {
		name string
		// refusal is put in force for the test; none where Knative's own
		// validation, which the test bed runs, refuses.
		refusal *testbed.Refusal
		message string
		// timeout is the Function's timeoutSeconds, before and after the
		// user's fix.
		timeout, fixed int32
		condition      string
		reason         string
		phase          slessv1alpha1.FunctionPhase
	}{{
		// Knative's default max-revision-timeout-seconds is below sless's
		// own maximum of 900.
		name:    "Knative refuses the Service",
		message: "expected 0 <= 900 <= 600: spec.template.spec.timeoutSeconds",
		timeout: 900, fixed: 600,
		condition: slessv1alpha1.FunctionConditionServiceReady, reason: slessv1alpha1.FunctionReasonServiceRejected,
	}, {
		name: "the PipelineRun is refused",
		refusal: &testbed.Refusal{Group: "tekton.dev", Version: "v1", Resource: "pipelineruns",
			Expression: "!has(object.spec.timeouts) || !has(object.spec.timeouts.pipeline) || object.spec.timeouts.pipeline != '15m0s'",
			Message:    "builds of 15 minutes are not allowed here",
			Probe: &tektonv1.PipelineRun{ObjectMeta: metav1.ObjectMeta{Name: "probe"},
				Spec: tektonv1.PipelineRunSpec{Timeouts: &tektonv1.TimeoutFields{Pipeline: &metav1.Duration{Duration: 900e9}}}}},
		message:   "builds of 15 minutes are not allowed here",
		condition: slessv1alpha1.FunctionConditionBuildSucceeded, reason: slessv1alpha1.FunctionReasonBuildRejected,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			if tc.refusal != nil {
				w.kube.Refuse(t, w.ns, *tc.refusal)
			}
			w.startController()

			fn := pythonFunction(w.ns, "refused", `"ok"`)
			if tc.timeout != 0 {
				fn.Spec.TimeoutSeconds = ptr.To(tc.timeout)
			}
			w.create(fn)
			got := w.waitPhase("refused", slessv1alpha1.FunctionPhaseFailed)
			for _, typ := range []string{tc.condition, slessv1alpha1.FunctionConditionReady} {
				c := condition(got, typ)
				if c.Status != metav1.ConditionFalse || c.Reason != tc.reason || !strings.Contains(c.Message, tc.message) ||
					c.ObservedGeneration != got.Generation {
					t.Errorf("%s = %s %s %q (generation %d), want False %s with the refusal %q (generation %d)",
						typ, c.Status, c.Reason, c.Message, c.ObservedGeneration, tc.reason, tc.message, got.Generation)
				}
			}

			// The user fixes the spec: what was refused is written, and the
			// Function becomes Ready.
			w.update("refused", func(fn *slessv1alpha1.Function) {
				if tc.fixed != 0 {
					fn.Spec.TimeoutSeconds = ptr.To(tc.fixed)
				} else {
					fn.Spec.BuildTimeoutSeconds = ptr.To[int32](600)
				}
			})
			w.waitReady("refused")
		})
	}
}
