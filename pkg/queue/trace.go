package queue

import (
	"context"
	"net/http"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/sless-dev/sless/pkg/tracing"
)

// Tracer makes the CONSUMER span of each delivery of one consumer, named
// "process {destination}" as the messaging conventions have it. The zero
// Tracer makes none.
type Tracer struct {
	t      trace.Tracer
	system string
}

// NewTracer is the Tracer of a consumer of system (rabbitmq, nats, kafka,
// mqtt); tp nil makes none.
func NewTracer(tp trace.TracerProvider, system string) Tracer {
	return Tracer{t: tracing.Tracer(tp), system: system}
}

// Start opens a delivery's span, continuing the producer's trace from the
// message's headers (carrier; nil for a protocol without headers).
func (t Tracer) Start(ctx context.Context, destination string, carrier propagation.TextMapCarrier, messageID string, attempt int, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if t.t == nil {
		return ctx, nil
	}
	if carrier != nil {
		ctx = tracing.Propagator.Extract(ctx, carrier)
	}
	attrs = append(attrs,
		semconv.MessagingSystemKey.String(t.system),
		semconv.MessagingOperationTypeProcess,
		semconv.MessagingOperationName("process"),
		semconv.MessagingDestinationName(destination),
		semconv.MessagingMessageID(messageID),
		tracing.Attempt.Int(attempt))
	return t.t.Start(ctx, "process "+destination, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...))
}

// End closes a delivery's span with the call's outcome.
func End(s trace.Span, out Outcome) {
	if s == nil {
		return
	}
	if out.Status != 0 {
		s.SetAttributes(tracing.Status.Int(out.Status))
	}
	if !out.OK() {
		s.SetStatus(codes.Error, out.String())
	}
	s.End()
}

// injectTrace writes ctx's span into a call's headers, so the invoke
// proxy's span (and the function's) joins the delivery's trace.
func injectTrace(ctx context.Context, h http.Header) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	tracing.Propagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// AMQPCarrier reads and writes trace context in an AMQP message's headers.
type AMQPCarrier amqp.Table

func (c AMQPCarrier) Get(key string) string {
	switch v := c[key].(type) {
	case string:
		return v
	case []byte:
		return string(v)
	}
	return ""
}

func (c AMQPCarrier) Set(key, value string) { c[key] = value }

func (c AMQPCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// MapCarrier reads and writes trace context in headers kept as a map of
// case-sensitive names (NATS): producers write traceparent in any case.
type MapCarrier map[string][]string

func (c MapCarrier) Get(key string) string {
	if v := c[key]; len(v) > 0 {
		return v[0]
	}
	for k, v := range c {
		if len(v) > 0 && strings.EqualFold(k, key) {
			return v[0]
		}
	}
	return ""
}

func (c MapCarrier) Set(key, value string) { c[key] = []string{value} }

func (c MapCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
