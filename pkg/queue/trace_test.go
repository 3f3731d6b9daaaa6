package queue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sless-dev/sless/pkg/queue"
	"github.com/sless-dev/sless/pkg/tracing"
)

// Each delivery is a CONSUMER span continuing the producer's trace from
// the message's headers, a retried one too, and the function's call
// carries the span on; a message without headers starts a trace.
func TestDeliverySpans(t *testing.T) {
	b := newBroker(t)
	fn := newFunction(t, func(id string, attempt int, _ string) int {
		if id == "flaky" && attempt == 1 {
			return 500
		}
		return 200
	})
	exp := tracetest.NewInMemoryExporter()
	cfg := queue.Config{URL: b.url, MaxRetries: 1, Backoff: 100 * time.Millisecond, Invoker: fn.Invoker(),
		TracerProvider: tracing.NewProvider(sdktrace.WithSyncer(exp))}
	b.queueFor(&cfg)
	const producer = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	producerTrace, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	producerSpan, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	for _, m := range []struct {
		id      string
		headers amqp.Table
	}{{"traced", amqp.Table{"traceparent": producer}}, {"flaky", amqp.Table{"traceparent": []byte(producer)}}, {"bare", nil}} {
		dc, err := b.ch.PublishWithDeferredConfirmWithContext(context.Background(), "", cfg.Queue, false, false,
			amqp.Publishing{MessageId: m.id, Headers: m.headers, Body: []byte("{}")})
		if err != nil || !dc.Wait() {
			t.Fatalf("publish %s: %v", m.id, err)
		}
	}
	run(t, cfg)
	eventually(t, 30*time.Second, "four deliveries traced", func() (bool, string) {
		return len(exp.GetSpans()) == 4, fmt.Sprintf("%d spans", len(exp.GetSpans()))
	})
	byID := map[string][]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		for _, kv := range s.Attributes {
			if kv.Key == "messaging.message.id" {
				byID[kv.Value.AsString()] = append(byID[kv.Value.AsString()], s)
			}
		}
		if s.Name != "process "+cfg.Queue || s.SpanKind != trace.SpanKindConsumer {
			t.Errorf("span %q kind %v, want process %s, consumer", s.Name, s.SpanKind, cfg.Queue)
		}
	}
	for _, id := range []string{"traced", "flaky"} {
		for i, s := range byID[id] {
			if s.SpanContext.TraceID() != producerTrace || s.Parent.SpanID() != producerSpan {
				t.Errorf("%s attempt %d: trace %s parent %s, want the producer's", id, i+1, s.SpanContext.TraceID(), s.Parent.SpanID())
			}
		}
	}
	if f := byID["flaky"]; len(f) != 2 || f[0].Status.Code != codes.Error || f[1].Status.Code == codes.Error {
		t.Fatalf("flaky's spans %v, want a failed attempt then a good one", f)
	}
	if bare := byID["bare"]; len(bare) != 1 || bare[0].Parent.IsValid() || bare[0].SpanContext.TraceID() == producerTrace {
		t.Fatalf("bare message's span %v, want a root of its own trace", bare)
	}
	// The call carries the delivery's span to the invoke proxy.
	s := byID["traced"][0]
	want := "00-" + producerTrace.String() + "-" + s.SpanContext.SpanID().String() + "-01"
	if got := fn.Header("traced").Get("Traceparent"); got != want {
		t.Fatalf("the call's traceparent %q, want the delivery span's %q", got, want)
	}
	attrs := map[string]string{}
	for _, kv := range s.Attributes {
		attrs[string(kv.Key)] = kv.Value.Emit()
	}
	for k, v := range map[string]string{"messaging.system": "rabbitmq", "messaging.operation.type": "process",
		"messaging.destination.name": cfg.Queue, "sless.attempt": "1", "sless.status": "200"} {
		if attrs[k] != v {
			t.Errorf("%s = %q, want %q", k, attrs[k], v)
		}
	}
}
