package invoke_test

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/invoke"
)

// cannedFunction is an HTTP/1.1 server that answers every request without a
// body with the same small response, parsing no more than it must and
// allocating nothing per request, so that what a benchmark of the proxy
// counts is the proxy's.
func cannedFunction(b *testing.B) *url.URL {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ln.Close() })
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 37\r\n\r\n" +
		`{"message":"hello from the function"}`)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					// The head ends at an empty line.
					for {
						line, err := br.ReadSlice('\n')
						if err != nil {
							return
						}
						if len(bytes.TrimRight(line, "\r\n")) == 0 {
							break
						}
					}
					if _, err := c.Write(resp); err != nil {
						return
					}
				}
			}()
		}
	}()
	return &url.URL{Scheme: "http", Host: ln.Addr().String()}
}

// discardSink stores nothing and counts what it is given.
type discardSink struct{ n atomic.Int64 }

func (s *discardSink) Write(_ context.Context, b invoke.Batch) error {
	s.n.Add(int64(len(b.Records)))
	return nil
}

// processCPU is the CPU time this process has used, user and system: the
// proxy's and the canned function's alike.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchWriter is a ResponseWriter that keeps nothing but the status, reused
// across calls as net/http reuses its own.
type benchWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *benchWriter) Header() http.Header         { return w.h }
func (w *benchWriter) WriteHeader(code int)        { w.status = code }
func (w *benchWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }

// The connection's deadlines, which the proxy sets per call, as net/http's
// own writer takes them.
func (w *benchWriter) SetReadDeadline(time.Time) error  { return nil }
func (w *benchWriter) SetWriteDeadline(time.Time) error { return nil }

// BenchmarkServeHTTP measures one call through Proxy.ServeHTTP to a function
// on loopback, with metrics and a recorder (whose sink keeps nothing): the
// proxy's own CPU and allocations per call, apart from net/http's server in
// front of it (cpu-ns/op includes the canned function's share). Compare
// runs before and after a change of the hot path: allocs/op, cpu-ns/op.
func BenchmarkServeHTTP(b *testing.B) {
	fn := cannedFunction(b)
	metrics, err := invoke.NewMetrics(nil)
	if err != nil {
		b.Fatal(err)
	}
	sink := &discardSink{}
	rec := invoke.NewRecorder(sink, invoke.RecorderOptions{Metrics: metrics})
	defer rec.Close(context.Background())
	proxy, err := invoke.NewProxy(invoke.Options{Recorder: rec, Metrics: metrics, Resolver: &targets{m: map[string]invoke.Target{
		"bench/fn": {Address: fn, Ready: true, Public: true, Revision: "fn-00001", Timeout: 30 * time.Second},
	}}})
	if err != nil {
		b.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, "http://sless.test/fn/bench/fn/hello?x=1", nil)
	if err != nil {
		b.Fatal(err)
	}
	req.RemoteAddr = "127.0.0.1:40000"
	req.Header.Set("User-Agent", "bench")
	req.Header.Set("Accept", "*/*")
	w := &benchWriter{h: http.Header{}}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU(b)
	for i := 0; i < b.N; i++ {
		clear(w.h)
		w.status, w.n = 0, 0
		proxy.ServeHTTP(w, req)
		if w.status != http.StatusOK || w.n != 37 {
			b.Fatalf("status %d, %d bytes", w.status, w.n)
		}
	}
	b.StopTimer()
	// CPU time moves less than wall time with the machine's other load.
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rec.Close(ctx); err != nil {
		b.Fatal(err)
	}
	if sink.n.Load() != int64(b.N) {
		b.Fatalf("%d records of %d calls", sink.n.Load(), b.N)
	}
}
