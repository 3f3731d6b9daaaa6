// Package queuetest has what the tests of every broker's consumer share: a
// function that records its calls, behind a real HTTP server.
package queuetest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/queue"
	"github.com/sless-dev/sless/test/testbed"
)

// Function is a local HTTP server standing in for the invoke proxy and the
// function behind it: it records every call by message id and answers as
// Behave says (200 when nil).
type Function struct {
	*httptest.Server
	Mu      sync.Mutex
	Calls   map[string][]time.Time
	Headers map[string]http.Header
	Bodies  map[string]string
	Behave  func(id string, attempt int, body string) int
	// Delay is how long each call takes.
	Delay time.Duration
	// running and Peak count calls at once.
	running, Peak int
}

// NewFunction starts one until the test ends.
func NewFunction(t testing.TB, behave func(id string, attempt int, body string) int) *Function {
	f := &Function{Calls: map[string][]time.Time{}, Headers: map[string]http.Header{}, Bodies: map[string]string{}, Behave: behave}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id := r.Header.Get(queue.MessageIDHeader)
		f.Mu.Lock()
		f.Calls[id] = append(f.Calls[id], time.Now())
		f.Headers[id] = r.Header.Clone()
		f.Bodies[id] = string(body)
		attempt := len(f.Calls[id])
		delay := f.Delay
		f.running++
		f.Peak = max(f.Peak, f.running)
		f.Mu.Unlock()
		time.Sleep(delay)
		status := http.StatusOK
		if f.Behave != nil {
			status = f.Behave(id, attempt, string(body))
		}
		f.Mu.Lock()
		f.running--
		f.Mu.Unlock()
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"status": %d}`, status)
	}))
	t.Cleanup(f.Close)
	return f
}

// Invoker calls f as a trigger's consumer calls the proxy.
func (f *Function) Invoker() *queue.Invoker {
	return &queue.Invoker{URL: f.URL, Token: "t", Timeout: 10 * time.Second}
}

// Count is how often the message id was called.
func (f *Function) Count(id string) int {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return len(f.Calls[id])
}

// Header is the headers of the last call of id.
func (f *Function) Header(id string) http.Header {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return f.Headers[id]
}

// SetDelay makes each later call take d.
func (f *Function) SetDelay(d time.Duration) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.Delay = d
}

// Distinct is how many message ids were called, and how many calls there were.
func (f *Function) Distinct() (ids, calls int) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	for _, c := range f.Calls {
		ids++
		calls += len(c)
	}
	return ids, calls
}

// AwaitState waits, on the consumer's change channel rather than a poll,
// until its state satisfies ok, and returns that state.
func AwaitState(t testing.TB, c queue.Source, limit time.Duration, what string, ok func(queue.State) bool) queue.State {
	t.Helper()
	timeout := time.After(limit)
	for {
		s, changed := c.State()
		if ok(s) {
			return s
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("timed out waiting for %s; state %+v", what, s)
		}
	}
}

// Start runs c until the test ends; stop ends it and returns what Run
// returned.
func Start(t testing.TB, c queue.Source) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var res error
	stopped := false
	stop = func() error {
		if !stopped {
			cancel()
			res, stopped = <-done, true
		}
		return res
	}
	t.Cleanup(func() { stop() })
	return stop
}

// Eventually polls cond: what it waits for (calls a function server
// answered, messages a broker stored) has no channel to wait on.
var Eventually = testbed.Eventually

// DrainTime waits until delivered reaches n and returns the time from the
// first delivery to the last, so a consumer's one-time start (dialling,
// declaring, joining) is not counted against a per-message cost.
func DrainTime(tb testing.TB, delivered *atomic.Int64, n int64, start time.Time) time.Duration {
	tb.Helper()
	var first time.Time
	for delivered.Load() < n {
		if first.IsZero() && delivered.Load() > 0 {
			first = time.Now()
		}
		if time.Since(start) > 5*time.Minute {
			tb.Fatalf("only %d of %d delivered", delivered.Load(), n)
		}
		time.Sleep(100 * time.Microsecond)
	}
	if first.IsZero() {
		first = start
	}
	return time.Since(first)
}

// TimeSource runs c until delivered reaches n, stops it and returns the
// drain time (DrainTime).
func TimeSource(tb testing.TB, c queue.Source, delivered *atomic.Int64, n int64) time.Duration {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- c.Run(ctx) }()
	took := DrainTime(tb, delivered, n, start)
	cancel()
	if err := <-done; err != nil {
		tb.Fatal(err)
	}
	return took
}

// Alternate runs a and b n times each, in turns of a-then-b and
// b-then-a, so that neither side always meets a warmer broker.
func Alternate(n int, a, b func()) {
	for i := range n {
		if i%2 == 0 {
			a()
			b()
		} else {
			b()
			a()
		}
	}
}

// FreePort is a loopback port free a moment ago, for a broker a test
// stops and starts again on the same port.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Sink is a function for benchmarks: it answers 200 at once and counts
// the calls in delivered. It stops when the test ends.
func Sink(tb testing.TB, delivered *atomic.Int64) *httptest.Server {
	fn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		delivered.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	tb.Cleanup(fn.Close)
	return fn
}
