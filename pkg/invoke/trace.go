package invoke

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/sless-dev/sless/pkg/tracing"
)

// Span names of the invoke path (docs/observability.md). A call that came
// by HTTP has a SERVER span named as the HTTP conventions have it; an
// asynchronous call's attempt, made inside sless, an INTERNAL span named
// SpanInvoke under the attempt's span.
const (
	SpanInvoke    = "sless.invoke"
	SpanColdStart = "sless.cold_start"
)

// startSpan opens c's span, continuing the trace of r's context when it
// has one (a trigger inside sless) or else the caller's traceparent. No
// tracer: nothing, at the cost of one comparison.
func (c *call) startSpan(r *http.Request, inProcess bool) {
	t := c.p.tracer
	if t == nil {
		return
	}
	ctx := r.Context()
	if !trace.SpanContextFromContext(ctx).IsValid() {
		ctx = tracing.Propagator.Extract(ctx, propagation.HeaderCarrier(r.Header))
	}
	kind, name := trace.SpanKindServer, r.Method
	switch {
	case inProcess:
		kind, name = trace.SpanKindInternal, SpanInvoke
	case c.byHost:
	case c.service():
		name += " " + ServicePrefix + "{namespace}/{name}"
	default:
		name += " " + PathPrefix + "{namespace}/{name}"
	}
	c.traceCtx, c.span = t.Start(ctx, name, trace.WithSpanKind(kind), trace.WithTimestamp(c.start))
	if !c.span.IsRecording() {
		return // sampled out: its context goes on, its attributes nowhere
	}
	attrs := []attribute.KeyValue{
		semconv.HTTPRequestMethodKey.String(r.Method),
		semconv.URLPath(r.URL.Path),
		tracing.Namespace.String(c.ns),
		tracing.Function.String(c.name),
		tracing.Trigger.String(c.trigger),
		tracing.RequestID.String(c.reqID),
	}
	if !inProcess && !c.byHost {
		attrs = append(attrs, semconv.HTTPRoute(name[len(r.Method)+1:]))
	}
	if !inProcess {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		attrs = append(attrs, semconv.URLScheme(scheme), semconv.ServerAddress(r.Host),
			semconv.NetworkProtocolVersion(strconv.Itoa(r.ProtoMajor)+"."+strconv.Itoa(r.ProtoMinor)))
		if ua := r.UserAgent(); ua != "" {
			attrs = append(attrs, semconv.UserAgentOriginal(ua))
		}
		if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
			attrs = append(attrs, semconv.ClientAddress(host))
		}
	}
	c.span.SetAttributes(attrs...)
}

// endSpan closes c's span with how the call ended: status is what the
// caller got (or 499), sent what was written to it.
func (c *call) endSpan(status int, sent int) {
	s := c.span
	if s == nil {
		return
	}
	c.span = nil
	if !s.IsRecording() {
		s.End()
		return
	}
	source := SourceFunction
	if c.platform {
		source = SourcePlatform
	}
	var in int64
	if c.body != nil {
		in = c.body.n.Load()
	}
	attrs := []attribute.KeyValue{
		tracing.Status.Int(status),
		tracing.Source.String(source),
		tracing.ColdStart.Bool(c.cold),
		semconv.HTTPRequestBodySize(int(in)),
		semconv.HTTPResponseBodySize(int(c.outBytes())),
	}
	if sent != 0 {
		attrs = append(attrs, semconv.HTTPResponseStatusCode(sent))
	}
	if c.target.Revision != "" {
		attrs = append(attrs, tracing.Revision.String(c.target.Revision))
	}
	if c.reason != "" {
		attrs = append(attrs, tracing.ErrorReason.String(c.reason))
	}
	// A SERVER span is an error for 5xx only: a 4xx is the caller's.
	if status >= 500 {
		attrs = append(attrs, semconv.ErrorTypeKey.String(errorType(c.reason, status)))
		s.SetStatus(codes.Error, c.errText)
	}
	s.SetAttributes(attrs...)
	s.End()
}

func errorType(reason string, status int) string {
	if reason != "" {
		return reason
	}
	return strconv.Itoa(status)
}

func (c *call) outBytes() int64 {
	if c.out == nil {
		return 0
	}
	return c.out.n
}

// coldStartSpan records the wait for an instance, from began until now,
// only once it is known that there was one (or that starting failed).
func (c *call) coldStartSpan(began time.Time, err error) {
	if c.span == nil {
		return
	}
	_, s := c.p.tracer.Start(c.traceCtx, SpanColdStart, trace.WithTimestamp(began),
		trace.WithAttributes(tracing.Namespace.String(c.ns), tracing.Function.String(c.name)))
	if err != nil {
		s.RecordError(err)
		s.SetStatus(codes.Error, err.Error())
	}
	s.End()
}

// startUpstream opens the CLIENT span of the forwarded call; ctx is the
// forwarded request's context, which then carries it to rewrite.
func (c *call) startUpstream(ctx context.Context, method string) context.Context {
	if c.span == nil {
		return ctx
	}
	if !c.span.IsRecording() {
		// Sampled out: the function gets this call's context, no span more.
		return trace.ContextWithSpan(ctx, c.span)
	}
	attrs := []attribute.KeyValue{
		semconv.HTTPRequestMethodKey.String(method),
		semconv.ServerAddress(c.addr.Hostname()),
	}
	if port, err := strconv.Atoi(c.addr.Port()); err == nil {
		attrs = append(attrs, semconv.ServerPort(port))
	}
	if c.target.Idle {
		// On a cluster the wait for an instance is inside this span:
		// Knative's activator holds the call.
		attrs = append(attrs, tracing.ColdStart.Bool(true))
	}
	ctx, c.upSpan = c.p.tracer.Start(trace.ContextWithSpan(ctx, c.span), method,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return ctx
}

// injectUpstream writes the CLIENT span's context over whatever
// traceparent the caller sent, so the function's span is its child.
func (c *call) injectUpstream(ctx context.Context, h http.Header) {
	if c.span == nil {
		return
	}
	h.Del("Traceparent")
	h.Del("Tracestate")
	tracing.Propagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// upstreamAnswered notes the function's status on the CLIENT span.
func (c *call) upstreamAnswered(status int) {
	if c.upSpan == nil {
		return
	}
	c.upSpan.SetAttributes(semconv.HTTPResponseStatusCode(status))
	if status >= 400 {
		c.upSpan.SetStatus(codes.Error, "")
		c.upSpan.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(status)))
	}
}

// endUpstream closes the CLIENT span once the answer's body ended (or the
// call failed); err is why it failed, if it did.
func (c *call) endUpstream(errText string) {
	s := c.upSpan
	if s == nil {
		return
	}
	c.upSpan = nil
	if errText != "" {
		s.SetStatus(codes.Error, errText)
	}
	s.End()
}

// spanContext is the sampled span context of c, for exemplars.
func (c *call) spanContext() trace.SpanContext {
	if c.span == nil {
		return trace.SpanContext{}
	}
	return c.span.SpanContext()
}
