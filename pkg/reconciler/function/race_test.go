package function_test

import (
	"context"
	"fmt"
	"testing"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/test/testbed"
)

// Two controllers (as during a leader hand-over) reconcile the same
// Functions at once: each source digest gets exactly one PipelineRun.
func TestRacingControllersBuildOncePerDigest(t *testing.T) {
	w := newWorld(t)
	w.tekton.SetPolicy(w.ns, testbed.BuildPolicy{Mode: testbed.BuildHold})
	w.startController()
	w.startController()
	const n = 8
	for i := range n {
		w.create(pythonFunction(w.ns, fmt.Sprintf("race-%d", i), fmt.Sprint(i)))
	}
	for i := range n {
		name := fmt.Sprintf("race-%d", i)
		fn := w.waitPhase(name, slessv1alpha1.FunctionPhaseBuilding)
		prs := w.pipelineRuns(name)
		if len(prs) != 1 {
			t.Fatalf("%s: %d PipelineRuns, want 1", name, len(prs))
		}
		// The simulator marks the run started on its own watch, which may
		// come after the Function shows the run.
		w.eventually(name+" run started", func() (bool, string) {
			s := w.tekton.Started(w.ns, prs[0].Name)
			return s > 0, fmt.Sprintf("simulator started %d runs", s)
		})
		if s := w.tekton.Started(w.ns, prs[0].Name); s != 1 {
			t.Errorf("%s: simulator started %d runs", name, s)
		}
		if err := w.tekton.Succeed(context.Background(), w.ns, fn.Status.BuildRef); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		w.waitReady(fmt.Sprintf("race-%d", i))
		if prs := w.pipelineRuns(fmt.Sprintf("race-%d", i)); len(prs) != 1 {
			t.Errorf("race-%d: %d PipelineRuns after the builds", i, len(prs))
		}
	}
}

// A controller stopped mid-build and a new one started find the running
// build and wait for it rather than starting another.
func TestRestartMidBuild(t *testing.T) {
	w := newWorld(t)
	w.tekton.SetPolicy(w.ns, testbed.BuildPolicy{Mode: testbed.BuildHold})
	stop := w.startController()
	w.create(pythonFunction(w.ns, "restart", `"r"`))
	fn := w.waitPhase("restart", slessv1alpha1.FunctionPhaseBuilding)
	stop()

	// The new controller's initial sync reconciles the Function; it finds
	// the running build, and only it.
	w.startController()
	w.eventually("the new controller to report the running build", func() (bool, string) {
		got := w.fn("restart")
		return got.Status.BuildRef == fn.Status.BuildRef && got.Status.Phase == slessv1alpha1.FunctionPhaseBuilding, describe(got)
	})
	if prs := w.pipelineRuns("restart"); len(prs) != 1 {
		t.Fatalf("%d PipelineRuns after the restart, want 1", len(prs))
	}
	if err := w.tekton.Succeed(context.Background(), w.ns, fn.Status.BuildRef); err != nil {
		t.Fatal(err)
	}
	w.waitReady("restart")
	if prs := w.pipelineRuns("restart"); len(prs) != 1 {
		t.Errorf("%d PipelineRuns, want 1", len(prs))
	}
}
