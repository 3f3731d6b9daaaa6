package asyncq_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/invoke/async"
	"github.com/sless-dev/sless/pkg/queue/asyncq"
	"github.com/sless-dev/sless/test/testbed"
)

func TestMain(m *testing.M) { testbed.Main(m) }

// newQueue is a Queue on a fresh main queue of the broker at url, whose
// queues are deleted after the test.
func newQueue(t *testing.T, url string) *asyncq.Queue {
	name := testbed.UniqueName("sless-async-test")
	q, err := asyncq.New(asyncq.Config{URL: url, Queue: name, RetryWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{name}
	for _, d := range asyncq.Delays {
		names = append(names, q.DelayQueue(d))
	}
	testbed.DeleteQueues(t, url, names...)
	t.Cleanup(q.Close)
	return q
}

// received records the refs a consumer was handed.
type received struct {
	mu   sync.Mutex
	at   map[string][]time.Time
	fail map[string]int // failures still to answer, by request id
}

func (r *received) handle(_ context.Context, ref async.Ref) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.at[ref.RequestID] = append(r.at[ref.RequestID], time.Now())
	if r.fail[ref.RequestID] > 0 {
		r.fail[ref.RequestID]--
		return fmt.Errorf("step of %s failed", ref.RequestID)
	}
	return nil
}

func (r *received) count(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.at[id])
}

func consume(t *testing.T, q *asyncq.Queue, r *received) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- q.Consume(ctx, r.handle) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

func ref(id string) async.Ref { return async.Ref{Namespace: "ns", Function: "fn", RequestID: id} }

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A ref due now is handed out at once, one due later not before its delay
// queue's wait, and a ref whose step failed again.
func TestEnqueueConsume(t *testing.T) {
	q := newQueue(t, testbed.AMQPURL(t))
	ctx := context.Background()
	r := &received{at: map[string][]time.Time{}, fail: map[string]int{"flaky": 2}}
	consume(t, q, r)
	sent := time.Now()
	for _, c := range []struct {
		id  string
		due time.Duration
	}{{"now", 0}, {"later", 1500 * time.Millisecond}, {"flaky", 0}} {
		if err := q.Enqueue(ctx, ref(c.id), sent.Add(c.due)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "every ref", func() bool {
		return r.count("now") == 1 && r.count("later") == 1 && r.count("flaky") == 3
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	if got := r.at["later"][0].Sub(sent); got < time.Second {
		t.Errorf("a ref due in 1.5 s was handed out after %v, before its delay queue's 1 s", got)
	}
}

// Refs confirmed before the broker stops are handed out after it starts
// again, and publishing dials the restarted broker.
func TestRefsOutliveABrokerRestart(t *testing.T) {
	b, err := testbed.StartRabbitMQ()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	q := newQueue(t, b.URL)
	ctx := context.Background()
	const n = 20
	for i := range n {
		if err := q.Enqueue(ctx, ref(fmt.Sprint("r", i)), time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Enqueue(ctx, ref("delayed"), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := b.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := q.Enqueue(ctx, ref("after"), time.Time{}); err != nil {
		t.Fatalf("publish after the restart: %v", err)
	}
	r := &received{at: map[string][]time.Time{}}
	consume(t, q, r)
	eventually(t, 60*time.Second, "every ref after the restart", func() bool {
		for i := range n {
			if r.count(fmt.Sprint("r", i)) == 0 {
				return false
			}
		}
		return r.count("delayed") == 1 && r.count("after") == 1
	})
}

func TestNewRefusesBadConfig(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  asyncq.Config
		want string
	}{
		{"no URL", asyncq.Config{}, "broker URL is required"},
		{"not AMQP", asyncq.Config{URL: "http://broker"}, "broker URL is not valid"},
		{"long queue name", asyncq.Config{URL: "amqp://broker", Queue: strings.Repeat("q", 201)}, "longer than 200 bytes"},
	} {
		_, err := asyncq.New(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
