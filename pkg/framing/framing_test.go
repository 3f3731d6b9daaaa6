package framing_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/framing"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/problems"
)

// server serves, through framing.Serve, a handler that reads each body and
// notes each request it serves.
type server struct {
	addr string
	mu   sync.Mutex
	seen []string // "METHOD /path body"
}

func serve(t *testing.T) *server {
	t.Helper()
	s := &server{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.seen = append(s.seen, r.Method+" "+r.URL.Path+" "+string(b))
		s.mu.Unlock()
		fmt.Fprintf(w, "served %s upgrade=%q connection=%q settings=%q", r.Proto,
			r.Header.Get("Upgrade"), r.Header.Get("Connection"), r.Header.Get("Http2-Settings"))
	}), ReadHeaderTimeout: 10 * time.Second}
	// As sless's front door serves: HTTP/1.1 and h2c by prior knowledge.
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	go framing.Serve(srv, ln)
	t.Cleanup(func() { srv.Close() })
	return s
}

func (s *server) served() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.seen)
}

// exchange sends raw on a new connection and reads every answer until the
// server closes it; open reports a connection still open after 500 ms.
func (s *server) exchange(t *testing.T, raw string) (answers []*http.Response, bodies []string, open bool) {
	t.Helper()
	conn, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	for {
		conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		if _, err := br.Peek(1); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				return answers, bodies, true
			}
			return answers, bodies, false // closed
		}
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("after %d answers: %v", len(answers), err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		answers, bodies = append(answers, resp), append(bodies, string(b))
	}
}

// smuggled is a request hidden in a body that a server framing by
// Content-Length takes for part of the first request.
const smuggled = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"

// ambiguous is a POST whose body is chunked by one header and of
// Content-Length by another, with extra the fields in between.
func ambiguous(path, fields string) string {
	body := "0\r\n\r\n" + smuggled
	return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\n%s\r\n\r\n%s", path,
		strings.ReplaceAll(fields, "{n}", fmt.Sprint(len(body))), body)
}

// A request with both Content-Length and Transfer-Encoding (or with
// Transfer-Encoding in HTTP/1.0) is refused with 400 and its connection
// closed: neither it nor the request hidden behind it is served.
func TestServeRefusesAmbiguousFraming(t *testing.T) {
	s := serve(t)
	long := "/long/" + strings.Repeat("x", 600)
	cases := []struct {
		name   string
		raw    string
		before []string // answered and served before the refusal
		http10 bool
	}{
		{name: "Content-Length, then Transfer-Encoding",
			raw: ambiguous("/a", "Content-Length: {n}\r\nTransfer-Encoding: chunked")},
		{name: "Transfer-Encoding, then Content-Length",
			raw: ambiguous("/a", "Transfer-Encoding: chunked\r\nContent-Length: {n}")},
		{name: "other spellings",
			raw: ambiguous("/a", "transfer-encoding: Chunked\r\ncontent-LENGTH:  {n} ")},
		{name: "Content-Length 0",
			raw: ambiguous("/a", "Content-Length: 0\r\nTransfer-Encoding: chunked")},
		{name: "after a request framed by length",
			raw:    "POST /first HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello" + ambiguous("/a", "Content-Length: {n}\r\nTransfer-Encoding: chunked"),
			before: []string{"POST /first hello"}},
		{name: "after a chunked request with an extension and a trailer",
			raw: "POST /first HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;x=1\r\nhello\r\n0\r\nX-Sum: 1\r\n\r\n" +
				ambiguous("/a", "Content-Length: {n}\r\nTransfer-Encoding: chunked"),
			before: []string{"POST /first hello"}},
		{name: "after a request line longer than the scanner keeps",
			raw:    "POST " + long + " HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi" + ambiguous("/a", "Content-Length: {n}\r\nTransfer-Encoding: chunked"),
			before: []string{"POST " + long + " hi"}},
		{name: "Transfer-Encoding in HTTP/1.0", http10: true,
			raw: "POST /a HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n" +
				"GET /smuggled HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			from := len(s.served())
			answers, bodies, open := s.exchange(t, tc.raw+"GET /after HTTP/1.1\r\nHost: x\r\n\r\n")
			if len(answers) != len(tc.before)+1 {
				t.Fatalf("%d answers %q, want %d", len(answers), bodies, len(tc.before)+1)
			}
			for i, resp := range answers[:len(tc.before)] {
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("answer %d: %d %s", i, resp.StatusCode, bodies[i])
				}
			}
			resp, body := answers[len(tc.before)], bodies[len(tc.before)]
			if resp.StatusCode != http.StatusBadRequest || resp.Header.Get(invoke.ErrorHeader) != framing.Reason ||
				resp.Header.Get("Content-Type") != problems.ContentType {
				t.Fatalf("%d %s %q: %s, want 400 %s", resp.StatusCode, invoke.ErrorHeader, resp.Header.Get(invoke.ErrorHeader), body, framing.Reason)
			}
			var p problems.Details
			if err := json.Unmarshal([]byte(body), &p); err != nil || p.Status != 400 || p.Reason != framing.Reason ||
				p.Instance != "/a" || p.RequestID == "" || p.RequestID != resp.Header.Get(invoke.RequestIDHeader) ||
				len(p.Errors) != 1 || p.Errors[0].Field != "Transfer-Encoding" || tc.http10 != strings.Contains(p.Detail, "HTTP/1.0") {
				t.Fatalf("problem %s (%v)", body, err)
			}
			if open {
				t.Fatal("the connection stays open after the refusal")
			}
			if got := s.served()[from:]; !slices.Equal(got, tc.before) {
				t.Fatalf("served %q, want %q", got, tc.before)
			}
		})
	}
}

// Requests framed one way each pass, however they are spelt, and their
// connection stays open: the scanner follows net/http through them.
func TestServeKeepsWellFramedRequests(t *testing.T) {
	s := serve(t)
	long := "/long/" + strings.Repeat("y", 5000)
	raw := "POST /length HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello" +
		"POST /twice HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc" +
		"POST /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3;a=b\r\nabc\r\nA \r\n0123456789\r\n0\r\nX-Sum: 1\r\n\r\n" +
		"\r\nGET " + long + " HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n b\r\n\r\n" +
		"PUT /bare-lf HTTP/1.1\nHost: x\nContent-Length: 2\n\nok" +
		"POST /old HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nv1" +
		"GET /last HTTP/1.1\r\nHost: x\r\n\r\n"
	answers, bodies, open := s.exchange(t, raw)
	want := []string{"POST /length hello", "POST /twice abc", "POST /chunked abc0123456789", "GET " + long + " ",
		"PUT /bare-lf ok", "POST /old v1", "GET /last "}
	if got := s.served(); !slices.Equal(got, want) {
		t.Fatalf("served %.300q, want %.300q", got, want)
	}
	for i, resp := range answers {
		if resp.StatusCode != http.StatusOK || resp.Close {
			t.Fatalf("answer %d: %d, close %v: %s", i, resp.StatusCode, resp.Close, bodies[i])
		}
	}
	if !open {
		t.Fatal("the connection was closed")
	}
}

// A request the scanner cannot follow (a chunk extension longer than it
// keeps) is served, and its connection then closed: what comes after it
// cannot be told apart any more.
func TestServeClosesWhereItLosesTheThread(t *testing.T) {
	s := serve(t)
	raw := "POST /first HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2;" + strings.Repeat("e", 1000) + "\r\nhi\r\n0\r\n\r\n" +
		"GET /second HTTP/1.1\r\nHost: x\r\n\r\n" +
		"GET /third HTTP/1.1\r\nHost: x\r\n\r\n"
	answers, _, open := s.exchange(t, raw)
	if got, want := s.served(), []string{"POST /first hi", "GET /second "}; !slices.Equal(got, want) {
		t.Fatalf("served %q, want %q", got, want)
	}
	if len(answers) != 2 || !answers[1].Close || open {
		t.Fatalf("%d answers, the last closing: %v, open %v; want the connection closed after the second", len(answers), answers[len(answers)-1].Close, open)
	}
}
