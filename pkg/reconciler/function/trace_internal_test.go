package function

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sless-dev/sless/pkg/adapter"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/tracing"
)

// stepBuilder reports steps as Tekton's TaskRuns would.
type stepBuilder struct {
	adapter.Builder
	steps []adapter.BuildStep
	err   error
}

func (b stepBuilder) BuildSteps(context.Context, string, string) ([]adapter.BuildStep, error) {
	return b.steps, b.err
}

func TestTraceBuild(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	fn := &slessv1alpha1.Function{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "hello", Generation: 4}}
	fn.Status.SourceDigest = "sha256:abc"
	steps := []adapter.BuildStep{{Name: "step-build-and-push", Start: at(1), End: at(8)}, {Name: "step-write-url", Start: at(8), End: at(9), Failed: true}}
	for _, tc := range []struct {
		name      string
		builder   adapter.Builder
		bs        adapter.BuildState
		wantSteps int
		failed    bool
	}{
		{"tekton's steps read on demand", stepBuilder{steps: steps}, adapter.BuildState{Name: "hello-abc-1", Done: true, Succeeded: true}, 2, false},
		{"steps given with the state (local mode)", stepBuilder{err: errors.New("not asked")}, adapter.BuildState{Name: "hello-abc-1", Done: true, Steps: steps[:1], Reason: "BuildFailed", Message: "pip failed"}, 1, true},
		{"steps unreadable: the build's span alone", stepBuilder{err: errors.New("gone")}, adapter.BuildState{Name: "hello-abc-1", Done: true, Succeeded: true}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			r := &Reconciler{Builder: tc.builder, TracerProvider: tracing.NewProvider(sdktrace.WithSyncer(exp))}
			bs := tc.bs
			start, end := at(0), at(10)
			bs.StartTime, bs.CompletionTime = &start, &end
			r.traceBuild(context.Background(), fn, bs)
			spans := exp.GetSpans()
			if len(spans) != 1+tc.wantSteps {
				t.Fatalf("%d spans, want the build's and %d steps'", len(spans), tc.wantSteps)
			}
			build := spans[len(spans)-1] // ended last
			if build.Name != SpanBuild || build.Parent.IsValid() || !build.StartTime.Equal(start) || !build.EndTime.Equal(end) {
				t.Fatalf("build span %q parent %v %s–%s, want a root from the build's times", build.Name, build.Parent, build.StartTime, build.EndTime)
			}
			if (build.Status.Code == codes.Error) != tc.failed {
				t.Fatalf("build status %v, failed %v", build.Status, tc.failed)
			}
			got := map[string]string{}
			for _, kv := range build.Attributes {
				got[string(kv.Key)] = kv.Value.Emit()
			}
			for k, v := range map[string]string{"sless.namespace": "team", "sless.function": "hello", "sless.generation": "4",
				"sless.build_ref": "hello-abc-1", "sless.source_digest": "sha256:abc", "sless.kind": "Function"} {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
			for i, s := range spans[:tc.wantSteps] {
				if s.Name != SpanBuildStep || s.Parent.SpanID() != build.SpanContext.SpanID() ||
					!s.StartTime.Equal(steps[i].Start) || !s.EndTime.Equal(steps[i].End) {
					t.Fatalf("step span %d: %q under %s, %s–%s", i, s.Name, s.Parent.SpanID(), s.StartTime, s.EndTime)
				}
				if (s.Status.Code == codes.Error) != steps[i].Failed {
					t.Fatalf("step %d status %v", i, s.Status)
				}
			}
		})
	}
	// Off: no read of the steps.
	r := &Reconciler{Builder: refusingBuilder{t}}
	start := at(0)
	r.traceBuild(context.Background(), fn, adapter.BuildState{StartTime: &start, CompletionTime: &start})
}

type refusingBuilder struct{ t *testing.T }

func (refusingBuilder) EnsureBuild(context.Context, slessv1alpha1.Workload, adapter.BuildInput) (adapter.BuildState, error) {
	return adapter.BuildState{}, nil
}

func (b refusingBuilder) BuildSteps(context.Context, string, string) ([]adapter.BuildStep, error) {
	b.t.Error("tracing off, yet the build's steps were read")
	return nil, nil
}
