package async

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/sless-dev/sless/pkg/tracing"
)

// SpanAttempt names the span of one attempt of an asynchronous call; the
// proxy's sless.invoke span of the attempt is its child.
const SpanAttempt = "sless.async.attempt"

// startAttempt opens the span of j's attempt, continuing the trace of the
// call that was accepted (the proxy kept its context in the headers).
func (r *Runner) startAttempt(ctx context.Context, j *Job) (context.Context, trace.Span) {
	if r.tracer == nil {
		return ctx, nil
	}
	parent := tracing.Propagator.Extract(context.Background(), propagation.HeaderCarrier(j.Header))
	return r.tracer.Start(trace.ContextWithRemoteSpanContext(ctx, trace.SpanContextFromContext(parent)), SpanAttempt,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(tracing.Namespace.String(j.Namespace), tracing.Function.String(j.Function),
			tracing.RequestID.String(j.RequestID), tracing.Attempt.Int(j.Attempts), tracing.Trigger.String("async")))
}

// endAttempt closes an attempt's span with the status the function (or
// sless) answered.
func endAttempt(s trace.Span, resp *Response, errText string) {
	if s == nil {
		return
	}
	s.SetAttributes(tracing.Status.Int(resp.Status))
	if resp.Status >= http.StatusInternalServerError || resp.Status >= 400 && errText != "" {
		s.SetStatus(codes.Error, errText)
	}
	s.End()
}
