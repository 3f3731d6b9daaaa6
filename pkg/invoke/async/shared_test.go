package async_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/adapter/postgres"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/async"
	"github.com/sless-dev/sless/pkg/queue/asyncq"
	"github.com/sless-dev/sless/test/testbed"
)

func TestMain(m *testing.M) { testbed.Main(m) }

// function stands in for the proxy's attempt: "ok…" functions answer 200
// with the request id, "fail" answers 500, "slow" holds each call until
// release is closed. It counts calls and the most running at once.
type function struct {
	mu       sync.Mutex
	calls    map[string]int
	running  map[string]int
	peak     map[string]int
	release  chan struct{}
	duration time.Duration
}

func newFunction() *function {
	return &function{calls: map[string]int{}, running: map[string]int{}, peak: map[string]int{}, release: make(chan struct{})}
}

func (f *function) run(ctx context.Context, w http.ResponseWriter, s *invoke.Submission) {
	f.mu.Lock()
	f.calls[s.RequestID]++
	f.running[s.Function]++
	f.peak[s.Function] = max(f.peak[s.Function], f.running[s.Function])
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.running[s.Function]--
		f.mu.Unlock()
	}()
	switch {
	case s.Function == "fail":
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "boom")
	case s.Function == "slow":
		select {
		case <-f.release:
		case <-ctx.Done():
			return
		}
		fallthrough
	default:
		if f.duration > 0 {
			time.Sleep(f.duration)
		}
		_, _ = io.WriteString(w, "done "+s.RequestID)
	}
}

func (f *function) count(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[id]
}

// replica is one sless api replica's runner: its own database pool and
// broker connection on the shared database and queue.
func replica(t *testing.T, dbURL, amqpURL, queueName string, fn *function, concurrency int) (*async.Runner, *postgres.AsyncCalls) {
	pg, err := postgres.Open(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pg.Close)
	if err := pg.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	q, err := asyncq.New(asyncq.Config{URL: amqpURL, Queue: queueName, RetryWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	st := pg.AsyncCalls(nil)
	r := &async.Runner{Store: st, Queue: q, Run: fn.run, SweepEvery: time.Second,
		Backoff: func(int) time.Duration { return 100 * time.Millisecond },
		Policy: func(context.Context, string, string) (async.Policy, error) {
			return async.Policy{Concurrency: concurrency, MaxRetries: 2, MaxEventAge: time.Hour, Timeout: 10 * time.Second}, nil
		}}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r, st
}

func queueName(t *testing.T, amqpURL string) string {
	name := testbed.UniqueName("sless-async-runner")
	names := []string{name}
	q, _ := asyncq.New(asyncq.Config{URL: amqpURL, Queue: name})
	for _, d := range asyncq.Delays {
		names = append(names, q.DelayQueue(d))
	}
	testbed.DeleteQueues(t, amqpURL, names...)
	return name
}

func submit(t *testing.T, r *async.Runner, fn, id, key string) async.Ref {
	t.Helper()
	acc, err := r.Accept(context.Background(), invoke.Submission{Namespace: "team-a", Function: fn, RequestID: id, Method: "POST",
		Path: "/", Header: http.Header{}, Body: []byte("in"), IdempotencyKey: key, AcceptedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return async.Ref{Namespace: "team-a", Function: fn, RequestID: acc.RequestID}
}

func await(t *testing.T, st async.Store, ref async.Ref, want async.State) *async.Job {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		j, err := st.Get(context.Background(), ref.Namespace, ref.Function, ref.RequestID)
		if err == nil && j.State == want && !j.CallbackPending() {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %+v %v, want %s", ref, j, err, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Two replicas share a database and a broker: calls accepted on one run
// once and are read on the other; a failing function is dead-lettered with
// its error after its retries; an Idempotency-Key repeated on the other
// replica names the first call; a function's concurrency holds across both.
func TestReplicasShareCalls(t *testing.T) {
	dbURL, amqpURL := testbed.DatabaseURL(t), testbed.AMQPURL(t)
	name := queueName(t, amqpURL)
	fn := newFunction()
	fn.duration = 100 * time.Millisecond
	a, _ := replica(t, dbURL, amqpURL, name, fn, 2)
	b, readB := replica(t, dbURL, amqpURL, name, fn, 2)

	var refs []async.Ref
	for i := range 12 {
		refs = append(refs, submit(t, a, "ok", fmt.Sprint("ok-", i), ""))
	}
	failed := submit(t, a, "fail", "fail-1", "")
	first := submit(t, a, "ok-once", "once-1", "key-1")
	again := submit(t, b, "ok-once", "once-2", "key-1")
	if again != first {
		t.Errorf("the repeated Idempotency-Key on the other replica named %v, want %v", again, first)
	}
	for _, ref := range append(refs, first) {
		j := await(t, readB, ref, async.StateSucceeded)
		if j.Response == nil || string(j.Response.Body) != "done "+ref.RequestID || j.Attempts != 1 {
			t.Errorf("%s: %+v", ref, j.Response)
		}
		if n := fn.count(ref.RequestID); n != 1 {
			t.Errorf("%s ran %d times", ref, n)
		}
	}
	j := await(t, readB, failed, async.StateDeadLettered)
	if j.Attempts != 3 || !strings.Contains(j.LastError, "boom") || fn.count("fail-1") != 3 {
		t.Errorf("dead-lettered after %d attempts (%d calls): %q", j.Attempts, fn.count("fail-1"), j.LastError)
	}
	fn.mu.Lock()
	peak := fn.peak["ok"]
	fn.mu.Unlock()
	if peak > 2 || peak < 1 {
		t.Errorf("%d calls of a function with concurrency 2 ran at once across the replicas", peak)
	}
}

// The broker restarts between the 202s and the runs, one of them in
// flight: every accepted call still runs and succeeds.
func TestCallsOutliveABrokerRestart(t *testing.T) {
	broker, err := testbed.StartRabbitMQ()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(broker.Stop)
	dbURL := testbed.DatabaseURL(t)
	name := queueName(t, broker.URL)
	fn := newFunction()
	r, st := replica(t, dbURL, broker.URL, name, fn, 1)
	var refs []async.Ref
	for i := range 5 {
		refs = append(refs, submit(t, r, "slow", fmt.Sprint("slow-", i), ""))
	}
	if err := broker.Restart(); err != nil {
		t.Fatal(err)
	}
	close(fn.release)
	for _, ref := range refs {
		await(t, st, ref, async.StateSucceeded)
		if n := fn.count(ref.RequestID); n < 1 {
			t.Errorf("%s ran %d times", ref, n)
		}
	}
	// Accepted after the restart too.
	await(t, st, submit(t, r, "ok", "after", ""), async.StateSucceeded)
}
