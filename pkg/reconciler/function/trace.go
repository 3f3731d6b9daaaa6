package function

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/sless-dev/sless/pkg/adapter"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/tracing"
)

// Span names of a build (docs/observability.md): one per finished build,
// a child per step, made from the builder's own times once it ended.
const (
	SpanBuild     = "sless.build"
	SpanBuildStep = "sless.build.step"
)

// traceBuild makes the spans of fn's finished build bs: a trace of its
// own, its attributes naming the Function and the generation it built.
func (r *Reconciler) traceBuild(ctx context.Context, fn slessv1alpha1.Workload, bs adapter.BuildState) {
	t := tracing.Tracer(r.TracerProvider)
	if t == nil || bs.StartTime == nil || bs.CompletionTime == nil {
		return
	}
	steps := bs.Steps
	if sr, ok := r.Builder.(adapter.StepReader); ok && len(steps) == 0 {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		// Without its steps the build's own span still tells the most.
		steps, _ = sr.BuildSteps(rctx, fn.GetNamespace(), bs.Name)
		cancel()
	}
	kind := "Function"
	if _, ok := fn.(*slessv1alpha1.SlessService); ok {
		kind = "SlessService"
	}
	attrs := []attribute.KeyValue{
		tracing.Namespace.String(fn.GetNamespace()),
		tracing.Function.String(fn.GetName()),
		tracing.Generation.Int64(fn.GetGeneration()),
		tracing.BuildRef.String(bs.Name),
		tracing.Kind.String(kind),
	}
	if d := fn.WorkloadStatus().SourceDigest; d != "" {
		attrs = append(attrs, tracing.SourceDigest.String(d))
	}
	ctx, span := t.Start(context.WithoutCancel(ctx), SpanBuild, trace.WithNewRoot(), trace.WithTimestamp(*bs.StartTime), trace.WithAttributes(attrs...))
	for _, s := range steps {
		_, ss := t.Start(ctx, SpanBuildStep, trace.WithTimestamp(s.Start), trace.WithAttributes(tracing.Step.String(s.Name)))
		if s.Failed {
			ss.SetStatus(codes.Error, "the step failed")
		}
		ss.End(trace.WithTimestamp(s.End))
	}
	if !bs.Succeeded {
		span.SetStatus(codes.Error, bs.Reason+": "+bs.Message)
	}
	span.End(trace.WithTimestamp(*bs.CompletionTime))
}
