package function_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"knative.dev/pkg/apis"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/adapter/resources"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/names"
	"github.com/sless-dev/sless/pkg/reconciler/function"
	"github.com/sless-dev/sless/test/testbed"
)

// watchStatus records every status of Function name the apiserver stores
// from now on, as its watch delivers them, so that a test can tell what
// the Function never was, not only what it ended as. stop ends the watch
// and returns them in order.
func (w *world) watchStatus(name string) (stop func() []slessv1alpha1.FunctionStatus) {
	w.t.Helper()
	c, err := client.NewWithWatch(w.kube.Config, client.Options{Scheme: w.kube.Scheme})
	if err != nil {
		w.t.Fatal(err)
	}
	wt, err := c.Watch(context.Background(), &slessv1alpha1.FunctionList{}, client.InNamespace(w.ns), client.MatchingFields{"metadata.name": name})
	if err != nil {
		w.t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []slessv1alpha1.FunctionStatus
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range wt.ResultChan() {
			if fn, ok := ev.Object.(*slessv1alpha1.Function); ok && ev.Type != watch.Deleted {
				mu.Lock()
				seen = append(seen, fn.Status)
				mu.Unlock()
			}
		}
	}()
	var once sync.Once
	stop = func() []slessv1alpha1.FunctionStatus {
		once.Do(func() { wt.Stop(); <-done })
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
	w.t.Cleanup(func() { stop() })
	return stop
}

// neverFailed fails the test if any status seen had the Function Failed.
func neverFailed(t *testing.T, seen []slessv1alpha1.FunctionStatus) {
	t.Helper()
	for _, st := range seen {
		if st.Phase == slessv1alpha1.FunctionPhaseFailed {
			t.Errorf("the Function was Failed: %+v", st.Conditions)
			return
		}
	}
}

// waitBuilding awaits generation gen of Function name building, and the
// simulator running its build, whose name it returns.
func (w *world) waitBuilding(name string, gen int64) string {
	w.t.Helper()
	var ref string
	w.eventually(fmt.Sprintf("%s generation %d building", name, gen), func() (bool, string) {
		fn := w.fn(name)
		ref = fn.Status.BuildRef
		return fn.Generation == gen && fn.Status.ObservedGeneration == gen && fn.Status.Phase == slessv1alpha1.FunctionPhaseBuilding &&
			ref != "" && w.tekton.Started(w.ns, ref) > 0, describe(fn)
	})
	return ref
}

// waitCancelled awaits run ended by Tekton's cancel, marked superseded by
// generation gen.
func (w *world) waitCancelled(run string, gen int64) {
	w.t.Helper()
	w.eventually("PipelineRun "+run+" cancelled", func() (bool, string) {
		pr := &tektonv1.PipelineRun{}
		if err := w.kube.Client.Get(context.Background(), client.ObjectKey{Namespace: w.ns, Name: run}, pr); err != nil {
			return false, err.Error()
		}
		c := pr.Status.GetCondition(apis.ConditionSucceeded)
		return pr.Spec.Status == tektonv1.PipelineRunSpecStatusCancelled &&
				pr.Annotations[resources.AnnotationSupersededBy] == fmt.Sprint(gen) &&
				c != nil && c.Status == corev1.ConditionFalse && c.Reason == string(tektonv1.PipelineRunReasonCancelled),
			fmt.Sprintf("spec.status %q annotations %v condition %+v", pr.Spec.Status, pr.Annotations, c)
	})
}

func withBody(body string) func(*slessv1alpha1.Function) {
	return func(fn *slessv1alpha1.Function) {
		fn.Spec.Source.Inline.Files["main.py"] = "def handler(event, context):\n    return " + body + "\n"
	}
}

// Three quick edits while builds run: the builds of the first two sources
// are cancelled as each edit supersedes them, with an Event each, and only
// the last source is built and served.
func TestEditsDuringBuildCancelOlderBuilds(t *testing.T) {
	w := newWorld(t)
	w.tekton.SetPolicy(w.ns, testbed.BuildPolicy{Mode: testbed.BuildHold})
	w.startController()
	seen := w.watchStatus("edits")
	w.create(pythonFunction(w.ns, "edits", `"v1"`))
	run1 := w.waitBuilding("edits", 1)
	w.update("edits", withBody(`"v2"`))
	run2 := w.waitBuilding("edits", 2)
	w.update("edits", withBody(`"v3"`))
	run3 := w.waitBuilding("edits", 3)
	w.waitCancelled(run1, 2)
	w.waitCancelled(run2, 3)

	var running []string
	for _, pr := range w.pipelineRuns("edits") {
		if !pr.IsDone() {
			running = append(running, pr.Name)
		}
	}
	if len(running) != 1 || running[0] != run3 {
		t.Errorf("unfinished PipelineRuns %v, want only %s", running, run3)
	}

	if err := w.tekton.Succeed(context.Background(), w.ns, run3); err != nil {
		t.Fatal(err)
	}
	got := w.waitReady("edits")
	if got.Status.BuildRef != run3 || got.Status.ServingImage != got.Status.Image || !strings.HasSuffix(got.Status.Image, "@"+builtDigest(t, w, run3)) {
		t.Errorf("served %s (serving %s) from build %s, want the image of %s", got.Status.Image, got.Status.ServingImage, got.Status.BuildRef, run3)
	}
	neverFailed(t, seen())

	var cancelled []string
	for _, e := range w.functionEvents("edits") {
		switch e.Reason {
		case function.EventBuildCancelled:
			checkEvent(t, e, corev1.EventTypeNormal, "Build")
			cancelled = append(cancelled, e.Note)
		case function.EventBuildFailed:
			t.Errorf("BuildFailed Event: %s", e.Note)
		}
	}
	want := []string{
		"cancelled build " + run1 + ": superseded by generation 2 of the Function",
		"cancelled build " + run2 + ": superseded by generation 3 of the Function",
	}
	if fmt.Sprint(cancelled) != fmt.Sprint(want) {
		t.Errorf("BuildCancelled notes %q, want %q", cancelled, want)
	}
}

// builtDigest is the image digest the simulator reported for run.
func builtDigest(t *testing.T, w *world, run string) string {
	t.Helper()
	pr := &tektonv1.PipelineRun{}
	if err := w.kube.Client.Get(context.Background(), client.ObjectKey{Namespace: w.ns, Name: run}, pr); err != nil {
		t.Fatal(err)
	}
	return result(pr, testbed.SimResultDigest)
}

// Edit A → B while A builds, then B → A: A's cancelled run never yields
// the image, so A is built again by a new run and served; the Function
// waits on no cancelled run and is never Failed.
func TestRevertToCancelledSourceBuildsAgain(t *testing.T) {
	w := newWorld(t)
	w.tekton.SetPolicy(w.ns, testbed.BuildPolicy{Mode: testbed.BuildHold})
	w.startController()
	seen := w.watchStatus("revert")
	w.create(pythonFunction(w.ns, "revert", `"A"`))
	runA := w.waitBuilding("revert", 1)
	digestA := w.fn("revert").Status.SourceDigest
	w.update("revert", withBody(`"B"`))
	runB := w.waitBuilding("revert", 2)
	w.waitCancelled(runA, 2)

	w.update("revert", withBody(`"A"`))
	again := w.waitBuilding("revert", 3)
	fn := w.fn("revert")
	if want := names.PipelineRun(fn, digestA, 1); again != want || fn.Status.SourceDigest != digestA {
		t.Errorf("building %s of %s, want a new run %s of %s", again, fn.Status.SourceDigest, want, digestA)
	}
	w.waitCancelled(runB, 3)

	if err := w.tekton.Succeed(context.Background(), w.ns, again); err != nil {
		t.Fatal(err)
	}
	got := w.waitReady("revert")
	if got.Status.BuildRef != again || !strings.HasSuffix(got.Status.Image, "@"+builtDigest(t, w, again)) {
		t.Errorf("served %s from build %s, want the image of %s", got.Status.Image, got.Status.BuildRef, again)
	}
	if n := len(w.pipelineRuns("revert")); n != 3 {
		t.Errorf("%d PipelineRuns, want 3", n)
	}
	neverFailed(t, seen())
	for _, e := range w.functionEvents("revert") {
		if e.Reason == function.EventBuildFailed {
			t.Errorf("BuildFailed Event: %s", e.Note)
		}
	}
}

// A source edited away from and back while the edit's build runs: the
// finished build of the serving source is used again as it is, never
// patched, and the revision serving it never changes; only the unfinished
// build is cancelled.
func TestRevertToServedSourceLeavesFinishedBuildAlone(t *testing.T) {
	w := newWorld(t)
	w.startController()
	w.create(pythonFunction(w.ns, "keep", `"A"`))
	served := w.waitReady("keep")
	runA := served.Status.BuildRef
	before := &tektonv1.PipelineRun{}
	if err := w.kube.Client.Get(context.Background(), client.ObjectKey{Namespace: w.ns, Name: runA}, before); err != nil {
		t.Fatal(err)
	}

	seen := w.watchStatus("keep")
	w.tekton.SetPolicy(w.ns, testbed.BuildPolicy{Mode: testbed.BuildHold})
	w.update("keep", withBody(`"B"`))
	runB := w.waitBuilding("keep", 2)
	w.update("keep", withBody(`"A"`))
	w.waitCancelled(runB, 3)
	got := w.waitReady("keep")
	if got.Status.BuildRef != runA || got.Status.Image != served.Status.Image || got.Status.LatestReadyRevision != served.Status.LatestReadyRevision {
		t.Errorf("after the revert: build %s image %s revision %s; want %s %s %s", got.Status.BuildRef, got.Status.Image,
			got.Status.LatestReadyRevision, runA, served.Status.Image, served.Status.LatestReadyRevision)
	}

	after := &tektonv1.PipelineRun{}
	if err := w.kube.Client.Get(context.Background(), client.ObjectKey{Namespace: w.ns, Name: runA}, after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before.ResourceVersion || after.Spec.Status != "" {
		t.Errorf("finished run %s touched: resourceVersion %s → %s, spec.status %q", runA, before.ResourceVersion, after.ResourceVersion, after.Spec.Status)
	}
	for _, st := range seen() {
		if st.Phase == slessv1alpha1.FunctionPhaseFailed || st.LatestReadyRevision != served.Status.LatestReadyRevision ||
			st.ServingImage != served.Status.ServingImage {
			t.Errorf("serving disturbed: phase %s, revision %s, serving image %s", st.Phase, st.LatestReadyRevision, st.ServingImage)
			break
		}
	}
}

// The spec moves from a source being built to one that needs no build of
// it: the build is cancelled as superseded all the same, and the new spec
// has its own outcome.
func TestSourceMovedOffABuildCancelsIt(t *testing.T) {
	img := "registry.test.local/prebuilt/app@sha256:" + strings.Repeat("ab", 32)
	tests := []struct {
		name   string
		mutate func(*slessv1alpha1.Function)
		phase  slessv1alpha1.FunctionPhase
	}{
		{"prebuilt-image", func(fn *slessv1alpha1.Function) {
			fn.Spec.Source = slessv1alpha1.FunctionSource{Image: img}
		}, slessv1alpha1.FunctionPhaseReady},
		{"refused-source", func(fn *slessv1alpha1.Function) {
			fn.Spec.Source.Inline.Files = map[string]string{"other.py": "x = 1\n"}
		}, slessv1alpha1.FunctionPhaseFailed},
	}
	w := newWorld(t)
	w.tekton.SetPolicy(w.ns, testbed.BuildPolicy{Mode: testbed.BuildHold})
	w.startController()
	for _, tc := range tests {
		w.create(pythonFunction(w.ns, tc.name, `"v1"`))
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			run := w.waitBuilding(tc.name, 1)
			w.update(tc.name, tc.mutate)
			w.waitCancelled(run, 2)
			got := w.waitPhase(tc.name, tc.phase)
			if tc.phase == slessv1alpha1.FunctionPhaseReady && got.Status.Image != img {
				t.Errorf("serving %s, want %s", got.Status.Image, img)
			}
			e := w.waitEvent(tc.name, function.EventBuildCancelled)
			checkEvent(t, e, corev1.EventTypeNormal, "Build", "cancelled build "+run+": superseded by generation 2")
		})
	}
}

// A build someone cancels by hand (tkn pipelinerun cancel) stays stopped:
// the Function says so, and is not built again behind their back; deleting
// the run builds the source again.
func TestHandCancelledBuildStaysStopped(t *testing.T) {
	w := newWorld(t)
	w.tekton.SetPolicy(w.ns, testbed.BuildPolicy{Mode: testbed.BuildHold})
	w.startController()
	ctx := context.Background()
	w.create(pythonFunction(w.ns, "hand", `"v1"`))
	run := w.waitBuilding("hand", 1)
	pr := &tektonv1.PipelineRun{}
	if err := w.kube.Client.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: run}, pr); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(pr.DeepCopy())
	pr.Spec.Status = tektonv1.PipelineRunSpecStatusCancelled
	if err := w.kube.Client.Patch(ctx, pr, patch); err != nil {
		t.Fatal(err)
	}
	failed := w.waitPhase("hand", slessv1alpha1.FunctionPhaseFailed)
	c := condition(failed, slessv1alpha1.FunctionConditionBuildSucceeded)
	if want := "PipelineRun " + run + " was stopped by hand (spec.status Cancelled); delete it, or change the Function's spec.rebuild, to build this source again"; c.Reason != "Cancelled" || c.Message != want {
		t.Errorf("BuildSucceeded %+v, want reason Cancelled and message %q", c, want)
	}
	if n := len(w.pipelineRuns("hand")); n != 1 {
		t.Errorf("%d PipelineRuns, want the cancelled one only", n)
	}

	w.tekton.SetPolicy(w.ns, testbed.BuildPolicy{})
	if err := w.kube.Client.Delete(ctx, pr); err != nil {
		t.Fatal(err)
	}
	got := w.waitReady("hand")
	if got.Status.BuildRef != run || !strings.HasSuffix(got.Status.Image, "@"+builtDigest(t, w, run)) {
		t.Errorf("served %s from build %s, want a new %s", got.Status.Image, got.Status.BuildRef, run)
	}
}
