package function_test

import (
	"strings"
	"testing"

	"github.com/sless-dev/sless/pkg/adapter/resources"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// The revision template can change while the Function's generation does
// not: an upgraded sless rebuilds with a new runtime wrapper, or the
// operator changes a controller setting. Knative refuses a changed
// template that keeps its revision name, so such a change must roll out
// under a new name, not leave the Function Failed (or, before, Deploying)
// until the user happens to edit it. The test bed's apiserver runs
// Knative's own validation, which refuses that.
func TestTemplateChangeWithoutNewGenerationRollsOut(t *testing.T) {
	w := newWorld(t)
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
