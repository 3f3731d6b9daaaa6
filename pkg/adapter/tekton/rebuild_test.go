package tekton

import (
	"context"
	"testing"

	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	"k8s.io/utils/ptr"

	"github.com/sless-dev/sless/pkg/adapter"
	"github.com/sless-dev/sless/pkg/adapter/resources"
	"github.com/sless-dev/sless/pkg/names"
)

// A failed build is kept for its source until the Function asks for it
// again: a spec.rebuild it was not made for, or a buildTimeoutSeconds above
// the one it timed out at, makes the next attempt's run; anything else
// finds the failed run again.
func TestFailedBuildRunsAgainWhenAskedTo(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reason  string // the failed run's Tekton reason
		ask     func(w *cancelWorld)
		again   bool
		message string
	}{
		{name: "same spec", reason: "Failed", ask: func(*cancelWorld) {}},
		{name: "rebuild set", reason: "Failed", ask: func(w *cancelWorld) { w.fn.Spec.Rebuild = "2026-12-03T12.00.00Z" }, again: true},
		{name: "longer timeout after a timeout", reason: string(tektonv1.PipelineRunReasonTimedOut),
			ask: func(w *cancelWorld) { w.fn.Spec.BuildTimeoutSeconds = ptr.To[int32](1800) }, again: true},
		{name: "longer timeout after another failure", reason: "Failed",
			ask: func(w *cancelWorld) { w.fn.Spec.BuildTimeoutSeconds = ptr.To[int32](1800) }},
		{name: "shorter timeout after a timeout", reason: string(tektonv1.PipelineRunReasonTimedOut),
			ask: func(w *cancelWorld) { w.fn.Spec.BuildTimeoutSeconds = ptr.To[int32](600) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newCancelWorld(t)
			ctx := context.Background()
			first := w.build("src")
			if err := w.sim.Fail(ctx, w.ns, first.Name, tc.reason, "registry unreachable"); err != nil {
				t.Fatal(err)
			}
			w.waitRun(first.Name, "failed", func(pr *tektonv1.PipelineRun) bool { return pr.IsDone() })
			tc.ask(w)
			st, err := w.b.EnsureBuild(ctx, w.fn, adapter.BuildInput{Digest: digestOf("src"), Location: "s3://b/src"})
			if err != nil {
				t.Fatal(err)
			}
			if !tc.again {
				if st.Name != first.Name || !st.Done || st.Succeeded || st.Created {
					t.Fatalf("got %+v, want the failed run %s again", st, first.Name)
				}
				return
			}
			if want := names.PipelineRun(w.fn, digestOf("src"), 1); st.Name != want || !st.Created || st.Done {
				t.Fatalf("got %+v, want a new run %s", st, want)
			}
			if got := w.run(st.Name).Annotations[resources.AnnotationRebuild]; got != w.fn.Spec.Rebuild {
				t.Errorf("new run's %s = %q, want %q", resources.AnnotationRebuild, got, w.fn.Spec.Rebuild)
			}
			// Asked once, built once: the new run is what later reconciles find.
			again, err := w.b.EnsureBuild(ctx, w.fn, adapter.BuildInput{Digest: digestOf("src"), Location: "s3://b/src"})
			if err != nil || again.Name != st.Name || again.Created {
				t.Fatalf("second EnsureBuild = %+v, %v; want run %s found", again, err, st.Name)
			}
			// A failure of the retried run stays until the next request.
			if err := w.sim.Fail(ctx, w.ns, st.Name, tc.reason, "registry unreachable"); err != nil {
				t.Fatal(err)
			}
			w.waitRun(st.Name, "failed", func(pr *tektonv1.PipelineRun) bool { return pr.IsDone() })
			last, err := w.b.EnsureBuild(ctx, w.fn, adapter.BuildInput{Digest: digestOf("src"), Location: "s3://b/src"})
			if err != nil || last.Name != st.Name || !last.Done || last.Succeeded {
				t.Fatalf("after the retry failed: %+v, %v; want run %s, failed", last, err, st.Name)
			}
		})
	}
}

// A run that succeeded is kept whatever spec.rebuild says: the image it
// made is the build of that code.
func TestSucceededBuildIsKeptOnRebuild(t *testing.T) {
	w := newCancelWorld(t)
	ctx := context.Background()
	first := w.build("src")
	if err := w.sim.Succeed(ctx, w.ns, first.Name); err != nil {
		t.Fatal(err)
	}
	w.waitRun(first.Name, "succeeded", func(pr *tektonv1.PipelineRun) bool { return pr.IsDone() })
	w.fn.Spec.Rebuild = "1"
	st, err := w.b.EnsureBuild(ctx, w.fn, adapter.BuildInput{Digest: digestOf("src"), Location: "s3://b/src"})
	if err != nil || st.Name != first.Name || !st.Succeeded || st.Created {
		t.Fatalf("got %+v, %v; want the succeeded run %s", st, err, first.Name)
	}
}
