package function_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/reconciler/function/resources"
	"github.com/sless-dev/sless/test/testbed"
)

// knativeKeepsNames is Knative's webhook rule that a changed revision
// template needs a new revision name, which the simulator does not enforce.
func knativeKeepsNames(w *world) {
	probe := &servingv1.Service{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}
	probe.Spec.Template.Name = "probe-00001"
	probe.Spec.Template.Spec.Containers = []corev1.Container{{Image: "registry.test.local/probe@sha256:" + strings.Repeat("0", 64)}}
	w.kube.Refuse(w.t, w.ns, testbed.Refusal{Group: "serving.knative.dev", Version: "v1", Resource: "services",
		// On create, the probe's name "probe-00001" plays an existing
		// revision of that name with another template.
		Expression: "request.operation == 'CREATE' ? object.spec.template.metadata.name != 'probe-00001' : " +
			"(object.spec.template.metadata.name != oldObject.spec.template.metadata.name || object.spec.template == oldObject.spec.template)",
		Message: "Saw the following changes without a name change (-old +new)", Probe: probe})
}

// The revision template can change while the Function's generation does
// not: an upgraded sless rebuilds with a new runtime wrapper, or the
// operator changes a controller setting. Knative refuses a changed
// template that keeps its revision name, so such a change must roll out
// under a new name, not leave the Function Failed (or, before, Deploying)
// until the user happens to edit it.
func TestTemplateChangeWithoutNewGenerationRollsOut(t *testing.T) {
	w := newWorld(t)
	knativeKeepsNames(w)
	stop := w.startController()
	w.create(pythonFunction(w.ns, "steady", `"ok"`))
	first := w.waitReady("steady")
	if first.Status.LatestReadyRevision != "steady-00001" {
		t.Fatalf("first revision %q, want steady-00001", first.Status.LatestReadyRevision)
	}
	stop()

	// The operator sets a service account for function pods; the Function
	// is as it was.
	w.configure = func(c *resources.Config) { c.ServiceAccount = "fn-runner" }
	stop = w.startController()
	var fn *slessv1alpha1.Function
	w.eventually("a new revision with the service account ready", func() (bool, string) {
		fn = w.fn("steady")
		svc, err := w.service("steady")
		if err != nil {
			return false, err.Error()
		}
		return fn.IsReady() && fn.Status.LatestReadyRevision != "steady-00001" &&
			svc.Spec.Template.Spec.ServiceAccountName == "fn-runner", describe(fn)
	})
	second := fn.Status.LatestReadyRevision
	if fn.Generation != first.Generation {
		t.Fatalf("the Function changed: generation %d, was %d", fn.Generation, first.Generation)
	}
	if len(second) > 58 || !strings.HasPrefix(second, "steady-") {
		t.Errorf("revision %q: want steady-<suffix>, room left for -warm", second)
	}
	stop()

	// A second change of the same generation takes a name of its own too.
	w.configure = func(c *resources.Config) { c.ServiceAccount = "fn-runner-2" }
	w.startController()
	w.eventually("a third revision ready", func() (bool, string) {
		fn = w.fn("steady")
		r := fn.Status.LatestReadyRevision
		return fn.IsReady() && r != "steady-00001" && r != second, describe(fn)
	})
}
