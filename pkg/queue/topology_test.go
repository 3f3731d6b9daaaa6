package queue_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/sless-dev/sless/pkg/queue"
)

// deleteQueue deletes q on a channel of its own, as an operator would.
func (b *broker) deleteQueue(q string) {
	b.t.Helper()
	ch, err := b.conn.Channel()
	if err != nil {
		b.t.Fatal(err)
	}
	defer ch.Close()
	if _, err := ch.QueueDelete(q, false, false, false); err != nil {
		b.t.Fatalf("delete %s: %v", q, err)
	}
}

func (b *broker) publishWith(q string, msg amqp.Publishing) {
	b.t.Helper()
	dc, err := b.ch.PublishWithDeferredConfirmWithContext(context.Background(), "", q, false, false, msg)
	if err != nil {
		b.t.Fatal(err)
	}
	if !dc.Wait() {
		b.t.Fatal("broker nacked a test message")
	}
}

// The broker cancels a consumer whose queue is deleted. The consumer must
// come back and consume the queue once it is there again, not sit idle with
// its connection open while messages pile up.
func TestConsumesAgainAfterItsQueueIsDeleted(t *testing.T) {
	b := newBroker(t)
	fn := newFunction(t, nil)
	cfg := queue.Config{URL: b.url, MaxRetries: 1, Backoff: time.Second, ReconnectDelay: 50 * time.Millisecond,
		Invoker: &queue.Invoker{URL: fn.URL, Timeout: 5 * time.Second}}
	b.queueFor(&cfg)
	run(t, cfg)
	b.publish(cfg.Queue, "before", "1")
	eventually(t, 30*time.Second, "the first message delivered", func() (bool, string) {
		return fn.Count("before") == 1, strconv.Itoa(fn.Count("before"))
	})

	b.deleteQueue(cfg.Queue)
	// The consumer declares the queue again when it comes back; a producer
	// may too. Either way a message published now must be delivered.
	if _, err := b.ch.QueueDeclare(cfg.Queue, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	b.publish(cfg.Queue, "after", "2")
	eventually(t, 30*time.Second, "the message published after the queue came back delivered", func() (bool, string) {
		return fn.Count("after") == 1, fmt.Sprintf("calls %d, queue depth %d", fn.Count("after"), b.depth(cfg.Queue))
	})
}

// A retry or dead-letter queue deleted while the consumer runs (an operator
// tidying up, a policy) must not make the broker drop the copies the
// consumer moves there: the original was acknowledged on the strength of
// the broker's confirm, which an unroutable message also gets.
func TestMovesNoMessageIntoAQueueThatIsGone(t *testing.T) {
	for _, tc := range []struct {
		name       string
		maxRetries int
		gone       func(cfg *queue.Config) string
	}{
		{"dead-letter queue deleted", 0, func(cfg *queue.Config) string { return cfg.Queue + ".dlq" }},
		{"retry queue deleted", 1, func(cfg *queue.Config) string { return cfg.RetryQueue(1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBroker(t)
			fn := newFunction(t, func(id string, attempt int, body string) int { return http.StatusInternalServerError })
			cfg := queue.Config{URL: b.url, MaxRetries: tc.maxRetries, Backoff: 200 * time.Millisecond,
				Invoker: &queue.Invoker{URL: fn.URL, Timeout: 5 * time.Second}}
			b.queueFor(&cfg)
			gone := tc.gone(&cfg)
			run(t, cfg)
			eventually(t, 30*time.Second, "the consumer to declare "+gone, func() (bool, string) {
				return b.depth(gone) == 0, strconv.Itoa(b.depth(gone))
			})
			b.deleteQueue(gone)

			b.publish(cfg.Queue, "fails", "x")
			dlq := cfg.Queue + ".dlq"
			eventually(t, 30*time.Second, "the failing message in the dead-letter queue", func() (bool, string) {
				return b.depth(dlq) == 1, fmt.Sprintf("dlq %d, queue %d, calls %d", b.depth(dlq), b.depth(cfg.Queue), fn.Count("fails"))
			})
			if got, want := fn.Count("fails"), 1+tc.maxRetries; got != want {
				t.Errorf("%d calls, want %d", got, want)
			}
		})
	}
}

// The dead-letter queue is named by the user and often made by them before
// the trigger (a quorum queue, a length limit); the consumer must use it as
// it is, as it does the main queue, not refuse to start.
func TestUsesADeadLetterQueueDeclaredWithOtherArguments(t *testing.T) {
	b := newBroker(t)
	fn := newFunction(t, func(id string, attempt int, body string) int { return http.StatusBadRequest })
	cfg := queue.Config{URL: b.url, MaxRetries: 0, Invoker: &queue.Invoker{URL: fn.URL, Timeout: 5 * time.Second}}
	b.queueFor(&cfg)
	dlq := cfg.Queue + ".dlq"
	if _, err := b.ch.QueueDeclare(dlq, true, false, false, false, amqp.Table{"x-max-length": int32(1000)}); err != nil {
		t.Fatal(err)
	}
	b.publish(cfg.Queue, "bad", "x")
	run(t, cfg)
	eventually(t, 30*time.Second, "the message in the user's dead-letter queue", func() (bool, string) {
		return b.depth(dlq) == 1, fmt.Sprintf("dlq %d, queue %d, calls %d", b.depth(dlq), b.depth(cfg.Queue), fn.Count("bad"))
	})
}

// AMQP message ids are any bytes; an HTTP header value may not hold
// control characters. Such a message must still reach the function, not
// fail every attempt in the consumer's own HTTP client and be
// dead-lettered without the function ever seeing it.
func TestDeliversAMessageWhoseIdIsNoHeaderValue(t *testing.T) {
	b := newBroker(t)
	fn := newFunction(t, nil)
	cfg := queue.Config{URL: b.url, MaxRetries: 1, Backoff: 100 * time.Millisecond,
		Invoker: &queue.Invoker{URL: fn.URL, Timeout: 5 * time.Second}}
	b.queueFor(&cfg)
	id := "order\n42\x00"
	b.publishWith(cfg.Queue, amqp.Publishing{MessageId: id, DeliveryMode: amqp.Persistent, Body: []byte("x")})
	run(t, cfg)
	eventually(t, 30*time.Second, "the message delivered and acknowledged", func() (bool, string) {
		ids, calls := fn.Distinct()
		return calls == 1 && b.depth(cfg.Queue) == 0, fmt.Sprintf("calls %d (%d ids), queue %d, dlq %d", calls, ids, b.depth(cfg.Queue), b.depth(cfg.Queue+".dlq"))
	})
	fn.Mu.Lock()
	var h http.Header
	for _, hh := range fn.Headers {
		h = hh
	}
	fn.Mu.Unlock()
	if got, want := h.Get(queue.MessageIDHeader), strconv.Quote(id); got != want {
		t.Errorf("%s = %s, want the id quoted: %s", queue.MessageIDHeader, got, want)
	}
	if d := b.depth(cfg.Queue + ".dlq"); d != 0 {
		t.Errorf("%d messages dead-lettered", d)
	}
}

// A retry count the consumer did not write (a producer's header, a negative
// number) must not buy a message more attempts than maxRetries allows: a
// poison message with x-sless-retries -1000 was tried a thousand times.
func TestRetryCountFromOutsideCannotExtendRetries(t *testing.T) {
	for _, tc := range []struct {
		name    string
		retries any
		calls   int
	}{
		{"negative", int32(-1000), 2},
		{"negative int64", int64(-5), 2},
		{"not a number", "many", 2},
		{"past maxRetries", int32(7), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBroker(t)
			fn := newFunction(t, func(id string, attempt int, body string) int { return http.StatusInternalServerError })
			cfg := queue.Config{URL: b.url, MaxRetries: 1, Backoff: 50 * time.Millisecond,
				Invoker: &queue.Invoker{URL: fn.URL, Timeout: 5 * time.Second}}
			b.queueFor(&cfg)
			b.publishWith(cfg.Queue, amqp.Publishing{MessageId: "poison", DeliveryMode: amqp.Persistent, Body: []byte("x"),
				Headers: amqp.Table{queue.RetriesHeader: tc.retries}})
			run(t, cfg)
			dlq := cfg.Queue + ".dlq"
			eventually(t, 30*time.Second, "the message dead-lettered", func() (bool, string) {
				return b.depth(dlq) == 1, fmt.Sprintf("dlq %d, calls %d", b.depth(dlq), fn.Count("poison"))
			})
			if got := fn.Count("poison"); got != tc.calls {
				t.Errorf("%d calls, want %d", got, tc.calls)
			}
		})
	}
}

// A message's content encoding (gzip, say) says how its body is to be read,
// as Content-Encoding does for an HTTP body; without it a function gets
// compressed bytes labelled application/json.
func TestPassesTheContentEncoding(t *testing.T) {
	b := newBroker(t)
	fn := newFunction(t, nil)
	cfg := queue.Config{URL: b.url, Invoker: &queue.Invoker{URL: fn.URL, Timeout: 5 * time.Second}}
	b.queueFor(&cfg)
	b.publishWith(cfg.Queue, amqp.Publishing{MessageId: "gz", ContentType: "application/json", ContentEncoding: "gzip",
		DeliveryMode: amqp.Persistent, Body: []byte("\x1f\x8b")})
	b.publishWith(cfg.Queue, amqp.Publishing{MessageId: "plain", ContentType: "application/json", DeliveryMode: amqp.Persistent, Body: []byte("{}")})
	run(t, cfg)
	eventually(t, 30*time.Second, "both messages delivered", func() (bool, string) {
		ids, calls := fn.Distinct()
		return ids == 2, fmt.Sprintf("%d ids, %d calls", ids, calls)
	})
	fn.Mu.Lock()
	defer fn.Mu.Unlock()
	if got := fn.Headers["gz"].Get("Content-Encoding"); got != "gzip" {
		t.Errorf("Content-Encoding %q, want gzip", got)
	}
	if got := fn.Headers["plain"].Get("Content-Encoding"); got != "" {
		t.Errorf("Content-Encoding %q on a message without one", got)
	}
}

// Content type and encoding are AMQP short strings, any bytes; one that is
// no HTTP header value must not make every call fail in the consumer's own
// client. The message goes as what it then is: bytes of no known type.
func TestDeliversAMessageWhoseContentTypeIsNoHeaderValue(t *testing.T) {
	b := newBroker(t)
	fn := newFunction(t, nil)
	cfg := queue.Config{URL: b.url, MaxRetries: 1, Backoff: 100 * time.Millisecond,
		Invoker: &queue.Invoker{URL: fn.URL, Timeout: 5 * time.Second}}
	b.queueFor(&cfg)
	b.publishWith(cfg.Queue, amqp.Publishing{MessageId: "ct", ContentType: "text/plain\r\nX-Injected: 1", ContentEncoding: "gzip\n",
		DeliveryMode: amqp.Persistent, Body: []byte("x")})
	run(t, cfg)
	eventually(t, 30*time.Second, "the message delivered and acknowledged", func() (bool, string) {
		return fn.Count("ct") == 1 && b.depth(cfg.Queue) == 0, fmt.Sprintf("calls %d, queue %d, dlq %d", fn.Count("ct"), b.depth(cfg.Queue), b.depth(cfg.Queue+".dlq"))
	})
	fn.Mu.Lock()
	h := fn.Headers["ct"]
	fn.Mu.Unlock()
	if got := h.Get("Content-Type"); got != "application/octet-stream" {
		t.Errorf("Content-Type %q, want application/octet-stream", got)
	}
	if got := h.Get("Content-Encoding"); got != "" {
		t.Errorf("Content-Encoding %q, want none", got)
	}
	if d := b.depth(cfg.Queue + ".dlq"); d != 0 {
		t.Errorf("%d messages dead-lettered", d)
	}
}
