package queue_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/queue"
	"github.com/sless-dev/sless/pkg/retry"
)

// A cron run whose proxy is not accepting connections (sless-api rolled
// out or rescheduled at the scheduled time) waits for it, since nothing was
// sent and the function cannot have been called; any answer, and any error
// after the request went out, ends the run as it is. Before, a refused
// connection failed the run at once, and with backoffLimit 0 the scheduled
// time was lost.
func TestInvokeWaitsForAnUnreachableProxy(t *testing.T) {
	for _, tc := range []struct {
		name string
		// up is when the proxy starts accepting: after that many waits,
		// or never (-1).
		up       int
		handler  http.HandlerFunc
		wait     time.Duration
		status   int
		errSays  string
		requests int32
	}{
		{name: "refused, then up", up: 2, wait: time.Minute, status: 200, requests: 1,
			handler: func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{}`)) }},
		{name: "up, answers 500: not tried again", up: 0, wait: time.Minute, status: 500, requests: 1,
			handler: func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) }},
		{name: "connection dropped after the request: not tried again", up: 0, wait: time.Minute, errSays: "EOF", requests: 1,
			handler: func(w http.ResponseWriter, _ *http.Request) {
				c, _, _ := w.(http.Hijacker).Hijack()
				_ = c.Close()
			}},
		{name: "never up", up: -1, wait: 300 * time.Millisecond, errSays: "nothing answers at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// An address nothing listens on until the proxy starts.
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := l.Addr().String()
			_ = l.Close()
			var requests atomic.Int32
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				tc.handler(w, r)
			})}
			t.Cleanup(func() { _ = srv.Close() })
			start := func() {
				l, err := net.Listen("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				go func() { _ = srv.Serve(l) }()
			}
			if tc.up == 0 {
				start()
			}
			waits := 0
			sleep := func(ctx context.Context, d time.Duration) error {
				if d <= 0 || d > 4*time.Second {
					t.Errorf("waits %v", d)
				}
				waits++
				if waits == tc.up {
					start()
				}
				return nil
			}
			iv := &queue.Invoker{URL: "http://" + addr + "/fn/ns/report", Token: "t", Timeout: 5 * time.Second}
			out := iv.InvokeReachable(context.Background(), queue.Call{Trigger: "cron"}, tc.wait, sleep, io.Discard)
			if out.Status != tc.status || requests.Load() != tc.requests {
				t.Errorf("status %d after %d requests (err %v), want %d after %d", out.Status, requests.Load(), out.Err, tc.status, tc.requests)
			}
			if tc.errSays == "" && out.Err != nil || tc.errSays != "" && (out.Err == nil || !strings.Contains(out.Err.Error(), tc.errSays)) {
				t.Errorf("error %v, want one saying %q", out.Err, tc.errSays)
			}
			if tc.up > 0 && waits != tc.up {
				t.Errorf("%d waits, want %d", waits, tc.up)
			}
			if tc.up == 0 && waits != 0 {
				t.Errorf("waited %d times for a proxy that answered", waits)
			}
		})
	}
}

// A run stopped while it waits (the Job deleted by Replace, its pod sent
// SIGTERM) ends at once.
func TestInvokeWaitEndsWithTheRun(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	iv := &queue.Invoker{URL: "http://" + addr + "/fn/ns/report", Timeout: 5 * time.Second}
	done := make(chan queue.Outcome)
	go func() { done <- iv.InvokeReachable(ctx, queue.Call{}, time.Hour, retry.Sleep, io.Discard) }()
	select {
	case out := <-done:
		if out.Err == nil || out.OK() {
			t.Errorf("outcome %+v", out)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled run keeps waiting for the proxy")
	}
}
