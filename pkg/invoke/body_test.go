package invoke_test

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/invoketest"
	"github.com/sless-dev/sless/test/testbed"
)

// A caller's request that cannot be read whole is the caller's fault: a 4xx
// problem, recorded and counted as the caller's, never 502 "cannot reach
// function". Raw sockets: the Go client would not send these bodies.
func TestProxyBrokenRequestBodies(t *testing.T) {
	var logs testbed.SyncBuffer
	r := newRig(t, invoke.Options{MaxRequestBytes: 1000, TimeoutGrace: 100 * time.Millisecond, BodyIdleTimeout: time.Second,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	// The function reads the whole body before it answers, as most do.
	reader := function(t, func(w http.ResponseWriter, req *http.Request) {
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	cases := []struct {
		name      string
		framing   string // the header that frames the body
		body      string
		halfClose bool // the caller shuts its side after the body
		status    int
		reason    string
		recorded  int    // the record's status
		errPart   string // in the record's error
		timeout   time.Duration
	}{
		{name: "bad chunk size", framing: "Transfer-Encoding: chunked", body: "5\r\nhello\r\nzz\r\n",
			status: 400, reason: invoke.ReasonBodyMalformed, recorded: 400, errPart: "invalid byte in chunk length"},
		{name: "chunk longer than its size", framing: "Transfer-Encoding: chunked", body: "3\r\nhello\r\n0\r\n\r\n",
			status: 400, reason: invoke.ReasonBodyMalformed, recorded: 400, errPart: "malformed chunked encoding"},
		{name: "chunk size ends in a bare LF", framing: "Transfer-Encoding: chunked", body: "5\nhello\r\n0\r\n\r\n",
			status: 400, reason: invoke.ReasonBodyMalformed, recorded: 400, errPart: "bare LF"},
		{name: "body ends before its Content-Length", framing: "Content-Length: 100", body: "hello", halfClose: true,
			status: 400, reason: invoke.ReasonBodyIncomplete, recorded: invoke.StatusClientClosed, errPart: "before its body ended"},
		{name: "chunked body ends before its last chunk", framing: "Transfer-Encoding: chunked", body: "a\r\nhello", halfClose: true,
			status: 400, reason: invoke.ReasonBodyIncomplete, recorded: invoke.StatusClientClosed, errPart: "before its body ended"},
		{name: "body stalls past the deadline", framing: "Content-Length: 100", body: "hello",
			status: 408, reason: invoke.ReasonBodyTimeout, recorded: 408, errPart: "within 300ms"},
		{name: "body stops for the idle timeout", framing: "Content-Length: 100", body: "hello", timeout: time.Minute,
			status: 408, reason: invoke.ReasonBodyTimeout, recorded: 408, errPart: "nothing arrived for 1s after 5 bytes"},
		{name: "chunked body stops for the idle timeout", framing: "Transfer-Encoding: chunked", body: "5\r\nhello\r\n", timeout: time.Minute,
			status: 408, reason: invoke.ReasonBodyTimeout, recorded: 408, errPart: "nothing arrived for 1s after 5 bytes"},
		{name: "chunked body over the cap", framing: "Transfer-Encoding: chunked", body: fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", 1500, strings.Repeat("x", 1500)),
			status: 413, reason: invoke.ReasonBodyTooLarge, recorded: 413, errPart: "too large"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fn := fmt.Sprintf("body-%d", i)
			timeout := tc.timeout
			if timeout == 0 {
				timeout = 300 * time.Millisecond
			}
			r.targets.set("ns", fn, invoke.Target{Address: reader, Ready: true, Public: true, Timeout: timeout})
			class := func(class string) float64 {
				return prometheusCollector{r, "sless_invoke_requests_total", map[string]string{"class": class, "source": invoke.SourcePlatform}}.value(t)
			}
			client4xx, platform5xx := class("4xx"), class("5xx")

			conn, err := net.Dial("tcp", strings.TrimPrefix(r.url, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(10 * time.Second))
			fmt.Fprintf(conn, "POST /fn/ns/%s HTTP/1.1\r\nHost: proxy\r\n%s\r\n\r\n%s", fn, tc.framing, tc.body)
			if tc.halfClose {
				conn.(*net.TCPConn).CloseWrite()
			}
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			invoketest.Refusal(t, resp, tc.status, tc.reason)
			if tc.status != http.StatusRequestEntityTooLarge {
				// What is left of a body that could not be read must never
				// be read as the next request.
				if _, err := br.ReadByte(); err != io.EOF {
					t.Fatalf("after the answer: %v, want the connection closed", err)
				}
			}

			rec := r.records(t, "ns", fn, 1)[0]
			if rec.Status != tc.recorded || !strings.Contains(rec.Error, tc.errPart) {
				t.Fatalf("record status %d error %q, want %d and an error about %q", rec.Status, rec.Error, tc.recorded, tc.errPart)
			}
			if d4, d5 := class("4xx")-client4xx, class("5xx")-platform5xx; d4 != 1 || d5 != 0 {
				t.Fatalf("counted %v more platform 4xx and %v more platform 5xx, want one 4xx", d4, d5)
			}
		})
	}
	if strings.Contains(logs.String(), "cannot reach function") {
		t.Fatalf("the caller's broken bodies were logged as the function's: %s", logs.String())
	}
}

// The idle timeout is of the body's silence, not its length: a body that
// keeps coming is read past it, and once it has arrived the function may
// take longer than the idle timeout to answer.
func TestProxyBodyIdleTimeoutMovesWithTheBody(t *testing.T) {
	r := newRig(t, invoke.Options{BodyIdleTimeout: 300 * time.Millisecond})
	fn := function(t, func(w http.ResponseWriter, req *http.Request) {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return
		}
		time.Sleep(600 * time.Millisecond) // twice the idle timeout
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "%d bytes", len(b))
	})
	r.targets.set("ns", "slow-reader", invoke.Target{Address: fn, Ready: true, Public: true, Timeout: time.Minute})

	conn, err := net.Dial("tcp", strings.TrimPrefix(r.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(conn, "POST /fn/ns/slow-reader HTTP/1.1\r\nHost: proxy\r\nTransfer-Encoding: chunked\r\n\r\n")
	// Five pieces 150 ms apart: 750 ms in all, each gap half the timeout.
	for range 5 {
		fmt.Fprintf(conn, "2\r\nab\r\n")
		time.Sleep(150 * time.Millisecond)
	}
	fmt.Fprintf(conn, "0\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || string(b) != "10 bytes" {
		t.Fatalf("got %d %q, want 201 \"10 bytes\"", resp.StatusCode, b)
	}
	// The connection serves the next request: no deadline of the last one
	// is left on it.
	time.Sleep(400 * time.Millisecond)
	fmt.Fprintf(conn, "POST /fn/ns/slow-reader HTTP/1.1\r\nHost: proxy\r\nContent-Length: 3\r\n\r\nabc")
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || string(b) != "3 bytes" {
		t.Fatalf("second call on the connection: %d %q, want 201 \"3 bytes\"", resp.StatusCode, b)
	}
}
