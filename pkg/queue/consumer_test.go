package queue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/sless-dev/sless/pkg/queue"
	"github.com/sless-dev/sless/pkg/queue/queuetest"
	"github.com/sless-dev/sless/test/testbed"
)

// childEnv, when set, makes the test binary a consumer process (for the
// crash test) configured by the JSON in it.
const childEnv = "SLESS_QUEUE_TEST_CHILD"

type childConfig struct {
	URL, Queue, Function  string
	Prefetch, Concurrency int
}

func TestMain(m *testing.M) {
	if raw := os.Getenv(childEnv); raw != "" {
		var cc childConfig
		if err := json.Unmarshal([]byte(raw), &cc); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		c, err := queue.New(queue.Config{URL: cc.URL, Queue: cc.Queue, Prefetch: cc.Prefetch, Concurrency: cc.Concurrency, MaxRetries: 3,
			Invoker: &queue.Invoker{URL: cc.Function, Token: "t", Timeout: 10 * time.Second}})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if err := c.Run(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	testbed.Main(m)
}

type function = queuetest.Function

var newFunction = queuetest.NewFunction

type broker struct {
	t    *testing.T
	url  string
	conn *amqp.Connection
	ch   *amqp.Channel
}

func newBroker(t *testing.T) *broker {
	u := testbed.AMQPURL(t)
	conn, err := amqp.Dial(u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	return &broker{t: t, url: u, conn: conn, ch: ch}
}

// queueFor names a fresh queue and arranges for it and its retry and
// dead-letter queues to be deleted after the test.
func (b *broker) queueFor(cfg *queue.Config) {
	cfg.Queue = testbed.UniqueName("sless-test")
	names := []string{cfg.Queue, cfg.Queue + ".dlq"}
	for n := 1; n <= cfg.MaxRetries; n++ {
		names = append(names, cfg.RetryQueue(n))
	}
	testbed.DeleteQueues(b.t, b.url, names...)
	if _, err := b.ch.QueueDeclare(cfg.Queue, true, false, false, false, nil); err != nil {
		b.t.Fatal(err)
	}
}

func (b *broker) publish(q, id, body string) {
	b.t.Helper()
	dc, err := b.ch.PublishWithDeferredConfirmWithContext(context.Background(), "", q, false, false, amqp.Publishing{
		MessageId: id, ContentType: "application/json", DeliveryMode: amqp.Persistent, Body: []byte(body),
		Headers: amqp.Table{"x-tenant-header": "kept"},
	})
	if err != nil {
		b.t.Fatal(err)
	}
	if !dc.Wait() {
		b.t.Fatal("broker nacked a test message")
	}
}

func (b *broker) depth(q string) int {
	b.t.Helper()
	ch, err := b.conn.Channel()
	if err != nil {
		b.t.Fatal(err)
	}
	defer ch.Close()
	qi, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
	if err != nil {
		// Not declared yet (the consumer declares its queues on start).
		return -1
	}
	return qi.Messages
}

func eventually(t *testing.T, limit time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	last := ""
	for time.Now().Before(deadline) {
		ok, s := cond()
		if ok {
			return
		}
		last = s
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s; last: %s", what, last)
}

// run starts a consumer that stops when the test ends.
func run(t *testing.T, cfg queue.Config) {
	t.Helper()
	c, err := queue.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("consumer: %v", err)
		}
	})
}

func TestDeliversEachMessageToTheFunction(t *testing.T) {
	b := newBroker(t)
	fn := newFunction(t, nil)
	cfg := queue.Config{URL: b.url, Prefetch: 8, Concurrency: 4, MaxRetries: 1, Backoff: time.Second,
		Invoker: &queue.Invoker{URL: fn.URL + "/fn/ns/worker", Token: "trigger-token", Timeout: 5 * time.Second}}
	b.queueFor(&cfg)
	const n = 60
	for i := 0; i < n; i++ {
		b.publish(cfg.Queue, "m"+strconv.Itoa(i), `{"n": `+strconv.Itoa(i)+`}`)
	}
	run(t, cfg)
	eventually(t, 60*time.Second, "every message delivered", func() (bool, string) {
		ids, calls := fn.Distinct()
		return ids == n, fmt.Sprintf("%d of %d messages, %d calls", ids, n, calls)
	})
	eventually(t, 10*time.Second, "queue empty", func() (bool, string) { d := b.depth(cfg.Queue); return d == 0, strconv.Itoa(d) })
	if ids, calls := fn.Distinct(); calls != ids {
		t.Errorf("%d calls for %d messages: a message that succeeded was delivered again", calls, ids)
	}
	h := fn.Headers["m7"]
	for k, want := range map[string]string{
		"Authorization": "Bearer trigger-token", queue.TriggerHeader: "queue", "Content-Type": "application/json",
		queue.AttemptHeader: "1", queue.RequestIDHeader: "m7",
	} {
		if got := h.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	if d := b.depth(cfg.Queue + ".dlq"); d != 0 {
		t.Errorf("%d messages dead-lettered", d)
	}
}

func TestRetriesWithBackoffThenDeadLetters(t *testing.T) {
	b := newBroker(t)
	fn := newFunction(t, func(id string, attempt int, body string) int {
		switch {
		case id == "always-fails":
			return http.StatusInternalServerError
		case id == "fails-once" && attempt == 1:
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	backoff := 300 * time.Millisecond
	cfg := queue.Config{URL: b.url, Prefetch: 4, Concurrency: 2, MaxRetries: 2, Backoff: backoff,
		Invoker: &queue.Invoker{URL: fn.URL, Timeout: 5 * time.Second}}
	b.queueFor(&cfg)
	b.publish(cfg.Queue, "always-fails", `{"x": 1}`)
	b.publish(cfg.Queue, "fails-once", `{"x": 2}`)
	b.publish(cfg.Queue, "ok", `{"x": 3}`)
	run(t, cfg)

	dlq := cfg.Queue + ".dlq"
	eventually(t, 60*time.Second, "the failing message in the dead-letter queue", func() (bool, string) {
		d := b.depth(dlq)
		return d == 1, fmt.Sprintf("dlq depth %d, attempts %d", d, fn.Count("always-fails"))
	})
	if got := fn.Count("always-fails"); got != 3 {
		t.Errorf("the failing message was tried %d times, want 3 (1 + maxRetries 2)", got)
	}
	fn.Mu.Lock()
	at := append([]time.Time(nil), fn.Calls["always-fails"]...)
	fn.Mu.Unlock()
	for i := 1; i < len(at); i++ {
		want := backoff << (i - 1)
		if gap := at[i].Sub(at[i-1]); gap < want {
			t.Errorf("retry %d came %v after the try before, want at least %v (doubling backoff)", i, gap, want)
		}
	}
	if got := fn.Count("fails-once"); got != 2 {
		t.Errorf("the flaky message was tried %d times, want 2", got)
	}
	if got := fn.Count("ok"); got != 1 {
		t.Errorf("the good message was tried %d times, want 1", got)
	}
	if h := fn.Headers["always-fails"]; h.Get(queue.AttemptHeader) != "3" {
		t.Errorf("last attempt header %q, want 3", h.Get(queue.AttemptHeader))
	}

	// The dead letter keeps the message and says why.
	ch, err := b.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	d, ok, err := ch.Get(dlq, false)
	if err != nil || !ok {
		t.Fatalf("get dead letter: ok %v err %v", ok, err)
	}
	if d.MessageId != "always-fails" || string(d.Body) != `{"x": 1}` || d.ContentType != "application/json" || d.DeliveryMode != amqp.Persistent {
		t.Errorf("dead letter %q %q %q mode %d", d.MessageId, d.Body, d.ContentType, d.DeliveryMode)
	}
	if d.Headers[queue.RetriesHeader] != int32(2) || d.Headers[queue.LastStatusHeader] != int32(500) ||
		!strings.Contains(fmt.Sprint(d.Headers[queue.LastErrorHeader]), "500") || d.Headers["x-tenant-header"] != "kept" || d.Headers[queue.DeadAtHeader] == nil {
		t.Errorf("dead letter headers %v", d.Headers)
	}
	if _, dead := d.Headers["x-death"]; dead {
		t.Errorf("dead letter carries RabbitMQ's x-death history: %v", d.Headers["x-death"])
	}
	_ = d.Nack(false, true)
	for n := 1; n <= cfg.MaxRetries; n++ {
		if depth := b.depth(cfg.RetryQueue(n)); depth != 0 {
			t.Errorf("retry queue %s holds %d messages", cfg.RetryQueue(n), depth)
		}
	}
}

func TestConsumerKilledMidBatchLosesNothing(t *testing.T) {
	b := newBroker(t)
	fn := newFunction(t, nil)
	fn.Delay = 20 * time.Millisecond
	cfg := queue.Config{URL: b.url, Prefetch: 20, Concurrency: 4, MaxRetries: 3, Backoff: time.Second,
		Invoker: &queue.Invoker{URL: fn.URL, Timeout: 10 * time.Second}}
	b.queueFor(&cfg)
	const n = 300
	for i := 0; i < n; i++ {
		b.publish(cfg.Queue, "m"+strconv.Itoa(i), strconv.Itoa(i))
	}

	// A consumer in its own process, killed with SIGKILL while it holds
	// unacknowledged messages: no chance to settle anything.
	raw, _ := json.Marshal(childConfig{URL: b.url, Queue: cfg.Queue, Function: fn.URL, Prefetch: cfg.Prefetch, Concurrency: cfg.Concurrency})
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"="+string(raw))
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the child consumer to be mid-batch", func() (bool, string) {
		ids, _ := fn.Distinct()
		return ids >= 60, strconv.Itoa(ids)
	})
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	before, _ := fn.Distinct()
	t.Logf("killed the consumer after %d of %d messages", before, n)
	if before >= n {
		t.Fatalf("the child finished all %d messages before it was killed; the test proves nothing", n)
	}

	run(t, cfg)
	eventually(t, 120*time.Second, "every message delivered", func() (bool, string) {
		ids, calls := fn.Distinct()
		return ids == n, fmt.Sprintf("%d of %d messages, %d calls", ids, n, calls)
	})
	eventually(t, 10*time.Second, "queue empty", func() (bool, string) { d := b.depth(cfg.Queue); return d == 0, strconv.Itoa(d) })
	ids, calls := fn.Distinct()
	t.Logf("%d messages, %d calls: %d delivered again after the crash (at least once)", ids, calls, calls-ids)
	if d := b.depth(cfg.Queue + ".dlq"); d != 0 {
		t.Errorf("%d messages dead-lettered", d)
	}
}

func TestConfigRefusesBadInput(t *testing.T) {
	inv := &queue.Invoker{URL: "http://proxy/fn/a/b"}
	long := strings.Repeat("q", 250)
	for _, tc := range []struct {
		name string
		cfg  queue.Config
		want string
	}{
		{"no URL", queue.Config{Queue: "q", Invoker: inv}, "broker URL is required"},
		{"no queue", queue.Config{URL: "amqp://x", Invoker: inv}, "queue name is required"},
		{"no invoker", queue.Config{URL: "amqp://x", Queue: "q"}, "invoker is required"},
		{"invoker without URL", queue.Config{URL: "amqp://x", Queue: "q", Invoker: &queue.Invoker{}}, "invoke URL is required"},
		{"negative retries", queue.Config{URL: "amqp://x", Queue: "q", Invoker: inv, MaxRetries: -1}, "must not be negative"},
		{"dead letters to itself", queue.Config{URL: "amqp://x", Queue: "q", DeadLetterQueue: "q", Invoker: inv}, "must differ"},
		{"derived names too long", queue.Config{URL: "amqp://x", Queue: long, Invoker: inv, MaxRetries: 1}, "longer than 255 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := queue.New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestRetryDelays(t *testing.T) {
	cfg := queue.Config{Queue: "orders", Backoff: time.Second, MaxBackoff: 5 * time.Second}
	for _, tc := range []struct {
		n     int
		delay time.Duration
		queue string
	}{
		{1, time.Second, "orders.retry.1000ms"},
		{2, 2 * time.Second, "orders.retry.2000ms"},
		{3, 4 * time.Second, "orders.retry.4000ms"},
		{4, 5 * time.Second, "orders.retry.5000ms"},
		{60, 5 * time.Second, "orders.retry.5000ms"},
	} {
		if got := cfg.RetryDelay(tc.n); got != tc.delay {
			t.Errorf("RetryDelay(%d) = %v, want %v", tc.n, got, tc.delay)
		}
		if got := cfg.RetryQueue(tc.n); got != tc.queue {
			t.Errorf("RetryQueue(%d) = %q, want %q", tc.n, got, tc.queue)
		}
	}
}
