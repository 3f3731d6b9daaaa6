package queue_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/queue"
	"github.com/sless-dev/sless/test/testbed"
)

// The broker unreachable mid-run, with calls in flight and failed calls
// waiting to be moved: every message is delivered once it is back, none is
// lost, dead-lettered or left in a queue.
func TestBrokerUnreachableMidRunLosesNothing(t *testing.T) {
	b := newBroker(t)
	fn := newFunction(t, func(id string, attempt int, body string) int {
		// Every tenth message fails its first try, so retries are in
		// flight when the broker goes.
		if n, _ := strconv.Atoi(id[1:]); n%10 == 0 && attempt == 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	fn.Delay = 10 * time.Millisecond
	relay, relayURL := testbed.NewRelay(t, b.url)
	cfg := queue.Config{URL: relayURL, Prefetch: 20, Concurrency: 4, MaxRetries: 3, Backoff: 100 * time.Millisecond,
		ReconnectDelay: 100 * time.Millisecond, Invoker: &queue.Invoker{URL: fn.URL, Timeout: 5 * time.Second}}
	b.queueFor(&cfg)
	const n = 300
	for i := 0; i < n; i++ {
		b.publish(cfg.Queue, "m"+strconv.Itoa(i), strconv.Itoa(i))
	}
	run(t, cfg)
	// Each outage is a new one: a consumer that came back and consumed
	// waits the first reconnect delay again when it next loses the broker,
	// not a delay doubled by every outage before (30 s after a few flaps).
	for round := 0; round < 4; round++ {
		eventually(t, 60*time.Second, "progress before the outage", func() (bool, string) {
			ids, _ := fn.Distinct()
			return ids >= (round+1)*50, strconv.Itoa(ids)
		})
		before := relay.Refusals()
		relay.Cut(true)
		// Down until the consumer has tried to come back and been refused twice.
		eventually(t, 30*time.Second, "the consumer to try to reconnect", func() (bool, string) {
			return relay.Refusals() >= before+2, strconv.Itoa(relay.Refusals() - before)
		})
		accepted := relay.Accepts()
		back := time.Now()
		relay.Up()
		eventually(t, 60*time.Second, "the consumer to reconnect", func() (bool, string) {
			return relay.Accepts() > accepted, ""
		})
		if took := time.Since(back); took > 3*time.Second {
			t.Errorf("outage %d: the consumer came back %v after the broker did; its first outages' waits were kept", round+1, took.Round(time.Millisecond))
		}
	}
	eventually(t, 120*time.Second, "every message delivered", func() (bool, string) {
		ids, calls := fn.Distinct()
		return ids == n, fmt.Sprintf("%d of %d messages, %d calls", ids, n, calls)
	})
	eventually(t, 30*time.Second, "main and retry queues empty", func() (bool, string) {
		depths := []int{b.depth(cfg.Queue)}
		for r := 1; r <= cfg.MaxRetries; r++ {
			depths = append(depths, b.depth(cfg.RetryQueue(r)))
		}
		for _, d := range depths {
			if d != 0 {
				return false, fmt.Sprint(depths)
			}
		}
		return true, ""
	})
	for i := 0; i < n; i += 10 {
		id := "m" + strconv.Itoa(i)
		if fn.Count(id) < 2 {
			t.Errorf("%s was called %d times; it fails its first try, so it must have been retried", id, fn.Count(id))
		}
	}
	if d := b.depth(cfg.Queue + ".dlq"); d != 0 {
		t.Errorf("%d messages dead-lettered", d)
	}
}

// A shutdown (SIGTERM at a rollout) lets the calls in flight finish and
// starts no more: the messages prefetched but not yet called go back to the
// queue for the next consumer. Calling them all first would hold the pod
// for prefetch × the function's time, past its termination grace.
func TestShutdownStartsNoPrefetchedCall(t *testing.T) {
	b := newBroker(t)
	fn := newFunction(t, nil)
	fn.Delay = 300 * time.Millisecond
	cfg := queue.Config{URL: b.url, Prefetch: 10, Concurrency: 2, Invoker: &queue.Invoker{URL: fn.URL, Timeout: 5 * time.Second}}
	b.queueFor(&cfg)
	const n = 10
	for i := 0; i < n; i++ {
		b.publish(cfg.Queue, "m"+strconv.Itoa(i), "x")
	}
	c, err := queue.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	eventually(t, 30*time.Second, "two calls in flight", func() (bool, string) {
		_, calls := fn.Distinct()
		return calls == 2, strconv.Itoa(calls)
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, calls := fn.Distinct(); calls != 2 {
		t.Errorf("%d calls after the shutdown began with 2 in flight, want 2", calls)
	}
	eventually(t, 10*time.Second, "the rest back in the queue", func() (bool, string) {
		d := b.depth(cfg.Queue)
		return d == n-2, strconv.Itoa(d)
	})
}
