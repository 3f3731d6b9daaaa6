package invoke_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/invoketest"
	"github.com/sless-dev/sless/test/testbed"
)

// seen is what a function server saw of a forwarded call.
type seen struct {
	Method, Path, RawPath, Query, Host string
	Header                             http.Header
	Body                               string
}

func echo(t testing.TB, calls chan<- seen) *url.URL {
	return function(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if calls != nil {
			calls <- seen{r.Method, r.URL.Path, r.URL.RawPath, r.URL.RawQuery, r.Host, r.Header.Clone(), string(b)}
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set(invoke.ErrorHeader, "spoofed") // a function cannot pose as the platform
		w.WriteHeader(201)
		fmt.Fprintf(w, "hello %s", b)
	})
}

func TestProxyForwardsAndRecords(t *testing.T) {
	r := newRig(t, invoke.Options{})
	calls := make(chan seen, 1)
	addr := echo(t, calls)
	r.targets.set("team-a", "hello", invoke.Target{Address: addr, Ready: true, Revision: "hello-00003", Timeout: 10 * time.Second, Public: true})

	resp := do(t, "POST", r.url+"/fn/team-a/hello/orders/7%2F8?x=1&x=2", "world",
		"X-Request-Id", "req-123", "X-Sless-Subject", "forged", "X-Forwarded-For", "6.6.6.6", "Authorization", "Bearer own-scheme",
		"Forwarded", "for=6.6.6.6;proto=https;host=evil.example", "X-Real-Ip", "6.6.6.6")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 || string(body) != "hello world" {
		t.Fatalf("got %d %q, want 201 \"hello world\"", resp.StatusCode, body)
	}
	if got := resp.Header.Get(invoke.ErrorHeader); got != "" {
		t.Fatalf("the function's %s header reached the caller: %q", invoke.ErrorHeader, got)
	}
	if got := resp.Header.Get("X-Request-Id"); got != "req-123" {
		t.Fatalf("response X-Request-Id %q, want req-123", got)
	}
	c := <-calls
	if c.Method != "POST" || c.Path != "/orders/7/8" || c.RawPath != "/orders/7%2F8" || c.Query != "x=1&x=2" {
		t.Fatalf("function saw %s %s (raw %s) ?%s", c.Method, c.Path, c.RawPath, c.Query)
	}
	if c.Host != addr.Host {
		t.Fatalf("function saw Host %q, want its own address %q (Knative routes on it)", c.Host, addr.Host)
	}
	want := map[string]string{
		"X-Request-Id":       "req-123",
		"X-Forwarded-For":    "127.0.0.1", // the caller's forged value is not trusted by default
		"X-Forwarded-Proto":  "http",
		"X-Forwarded-Prefix": "/fn/team-a/hello",
		"Forwarded":          "",                  // nor its standard spelling
		"X-Real-Ip":          "",                  // nor nginx's
		"X-Sless-Subject":    "",                  // callers cannot set X-Sless-*
		"Authorization":      "Bearer own-scheme", // public functions get the caller's own credentials
	}
	for k, v := range want {
		if got := c.Header.Get(k); got != v {
			t.Errorf("function saw %s = %q, want %q", k, got, v)
		}
	}
	if c.Header.Get("X-Forwarded-Host") == "" {
		t.Error("no X-Forwarded-Host")
	}

	got := r.records(t, "team-a", "hello", 1)[0]
	if got.Revision != "hello-00003" || got.Trigger != invoke.TriggerHTTP || got.RequestID != "req-123" ||
		got.Status != 201 || got.BytesIn != 5 || got.BytesOut != 11 || got.Error != "" || got.ColdStart {
		t.Fatalf("record %+v", got)
	}
	if got.Duration <= 0 || time.Since(got.StartedAt) > time.Minute {
		t.Fatalf("record times %v %v", got.StartedAt, got.Duration)
	}
	if n := (prometheusCollector{r, "sless_invoke_requests_total", map[string]string{"class": "2xx", "source": invoke.SourceFunction}}).value(t); n != 1 {
		t.Fatalf("requests{2xx,function} = %v, want 1", n)
	}
}

// prometheusCollector reads one series from the rig's registry.
type prometheusCollector struct {
	r      *rig
	name   string
	labels map[string]string
}

func (p prometheusCollector) value(t testing.TB) float64 {
	t.Helper()
	mfs, err := p.r.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != p.name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := p.labels[l.GetName()]; ok && v != l.GetValue() {
					continue metrics
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return 0
}

func TestProxyPrivateFunctionGetsSubjectNotToken(t *testing.T) {
	r := newRig(t, invoke.Options{})
	calls := make(chan seen, 1)
	r.targets.set("team-a", "private", invoke.Target{Address: echo(t, calls), Ready: true})
	resp := do(t, "GET", r.url+"/fn/team-a/private", "", "Authorization", "Bearer team-a:alice", "X-Sless-Subject", "mallory")
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	c := <-calls
	if got := c.Header.Get("Authorization"); got != "" {
		t.Fatalf("the sless token reached the function: %q", got)
	}
	if got := c.Header.Get(invoke.SubjectHeader); got != "alice" {
		t.Fatalf("%s = %q, want alice", invoke.SubjectHeader, got)
	}
}

// A public function never sees a sless token its caller sent (the CLI
// sends its login with every call), nor who the caller is; a credential of
// the function's own scheme passes.
func TestProxyPublicFunctionDoesNotGetSlessToken(t *testing.T) {
	r := newRig(t, invoke.Options{})
	calls := make(chan seen, 1)
	r.targets.set("team-a", "open", invoke.Target{Address: echo(t, calls), Ready: true, Public: true})
	for _, tc := range []struct{ header, want string }{
		{"Bearer team-a:alice", ""},
		{"Bearer team-b:bob", ""}, // another tenant's token is still sless's
		{"Bearer own-scheme", "Bearer own-scheme"},
		{"Basic YWRhOnB3", "Basic YWRhOnB3"},
	} {
		resp := do(t, "GET", r.url+"/fn/team-a/open", "", "Authorization", tc.header)
		resp.Body.Close()
		if resp.StatusCode != 201 {
			t.Fatalf("%s: status %d", tc.header, resp.StatusCode)
		}
		c := <-calls
		if got := c.Header.Get("Authorization"); got != tc.want {
			t.Errorf("Authorization %q reached the function as %q, want %q", tc.header, got, tc.want)
		}
		if got := c.Header.Get(invoke.SubjectHeader); got != "" {
			t.Errorf("%s: the public function was told the caller %q", tc.header, got)
		}
	}
}

func TestProxyTrustsForwardedHeadersWhenTold(t *testing.T) {
	r := newRig(t, invoke.Options{TrustForwarded: true})
	calls := make(chan seen, 1)
	r.targets.set("ns", "fn", invoke.Target{Address: echo(t, calls), Ready: true, Public: true})
	resp := do(t, "GET", r.url+"/fn/ns/fn", "", "X-Forwarded-For", "203.0.113.9", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "fn.example.com",
		"Forwarded", "for=203.0.113.9;proto=https", "X-Real-Ip", "203.0.113.9")
	resp.Body.Close()
	c := <-calls
	if got := c.Header.Get("Forwarded"); got != "" {
		t.Errorf("Forwarded %q; only the X-Forwarded-* headers are trusted", got)
	}
	if got := c.Header.Get("X-Real-Ip"); got != "203.0.113.9" {
		t.Errorf("X-Real-Ip %q", got)
	}
	if got := c.Header.Get("X-Forwarded-For"); got != "203.0.113.9, 127.0.0.1" {
		t.Errorf("X-Forwarded-For %q", got)
	}
	if got := c.Header.Get("X-Forwarded-Proto"); got != "https" {
		t.Errorf("X-Forwarded-Proto %q", got)
	}
	if got := c.Header.Get("X-Forwarded-Host"); got != "fn.example.com" {
		t.Errorf("X-Forwarded-Host %q", got)
	}
}

func TestProxyRequestID(t *testing.T) {
	r := newRig(t, invoke.Options{})
	calls := make(chan seen, 2)
	r.targets.set("ns", "fn", invoke.Target{Address: echo(t, calls), Ready: true, Public: true})
	for _, given := range []string{"", "has space", strings.Repeat("x", 200)} {
		resp := do(t, "GET", r.url+"/fn/ns/fn", "", "X-Request-Id", given)
		resp.Body.Close()
		id := resp.Header.Get("X-Request-Id")
		c := <-calls
		if id == "" || id == given || c.Header.Get("X-Request-Id") != id {
			t.Fatalf("given %q: response id %q, function saw %q; want a fresh id in both", given, id, c.Header.Get("X-Request-Id"))
		}
	}
}

// The first bytes of a slow chunked response reach the caller while the
// function is still working: the function does not finish until the test
// has read them.
func TestProxyStreamsResponses(t *testing.T) {
	r := newRig(t, invoke.Options{})
	release := make(chan struct{})
	r.targets.set("ns", "stream", invoke.Target{Public: true, Ready: true, Address: function(t, func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "first\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-time.After(20 * time.Second):
			return
		}
		fmt.Fprint(w, "second\n")
	})})
	resp := do(t, "GET", r.url+"/fn/ns/stream", "")
	defer resp.Body.Close()
	if resp.ContentLength != -1 {
		t.Fatalf("Content-Length %d: the response was buffered", resp.ContentLength)
	}
	br := bufio.NewReader(resp.Body)
	got := make(chan string, 1)
	go func() { line, _ := br.ReadString('\n'); got <- line }()
	select {
	case line := <-got:
		if line != "first\n" {
			t.Fatalf("first line %q", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first chunk did not arrive while the function was still running")
	}
	close(release)
	rest, _ := io.ReadAll(br)
	if string(rest) != "second\n" {
		t.Fatalf("rest %q", rest)
	}
	rec := r.records(t, "ns", "stream", 1)[0]
	if rec.BytesOut != int64(len("first\nsecond\n")) || rec.Status != 200 {
		t.Fatalf("record %+v", rec)
	}
}

// Request bodies stream too: the function reads the first part while the
// caller still holds the rest.
func TestProxyStreamsRequestBodies(t *testing.T) {
	r := newRig(t, invoke.Options{})
	gotFirst := make(chan string, 1)
	r.targets.set("ns", "upload", invoke.Target{Public: true, Ready: true, Address: function(t, func(w http.ResponseWriter, req *http.Request) {
		b := make([]byte, 5)
		if _, err := io.ReadFull(req.Body, b); err != nil {
			t.Error(err)
		}
		gotFirst <- string(b)
		rest, _ := io.ReadAll(req.Body)
		fmt.Fprintf(w, "%d", 5+len(rest))
	})})
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("PUT", r.url+"/fn/ns/upload", pr)
	done := make(chan *http.Response, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			close(done)
			return
		}
		done <- resp
	}()
	pw.Write([]byte("hello"))
	select {
	case s := <-gotFirst:
		if s != "hello" {
			t.Fatalf("function read %q", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the function did not see the start of the body before its end")
	}
	pw.Write([]byte(" world"))
	pw.Close()
	resp := <-done
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "11" {
		t.Fatalf("function counted %q bytes", b)
	}
}

func TestProxyPlatformErrors(t *testing.T) {
	r := newRig(t, invoke.Options{MaxRequestBytes: 1000, TimeoutGrace: 100 * time.Millisecond, RetryAfter: 7 * time.Second,
		NotReadyWait: 300 * time.Millisecond})
	ok := echo(t, nil)
	dead := closedAddress(t)
	slow := function(t, func(w http.ResponseWriter, req *http.Request) {
		select {
		case <-req.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	own := function(t, func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set(invoke.ErrorHeader, "FunctionTimeout")
		http.Error(w, "my own gateway timeout", http.StatusGatewayTimeout)
	})
	weird := function(t, func(w http.ResponseWriter, req *http.Request) {
		w.WriteHeader(999) // net/http writes any three digits
	})
	r.targets.set("ns", "ok", invoke.Target{Address: ok, Ready: true, Public: true})
	r.targets.set("ns", "weird", invoke.Target{Address: weird, Ready: true, Public: true})
	r.targets.set("ns", "building", invoke.Target{Public: true})
	r.targets.set("ns", "broken", invoke.Target{Public: true, Failed: "BuildFailed"})
	r.targets.set("ns", "dead", invoke.Target{Address: dead, Ready: true, Public: true})
	r.targets.set("ns", "slow", invoke.Target{Address: slow, Ready: true, Public: true, Timeout: 300 * time.Millisecond})
	r.targets.set("ns", "own", invoke.Target{Address: own, Ready: true, Public: true})

	cases := []struct {
		name, path, body string
		method           string // POST when empty
		token            string
		chunked          bool
		status           int
		reason           string
		recorded         bool
		retryAfter       string
	}{
		{name: "unknown function", path: "/fn/ns/nope", token: "ns:alice", status: 404, reason: invoke.ReasonNotFound},
		{name: "no name", path: "/fn/ns", status: 404, reason: invoke.ReasonNotFound},
		{name: "not under /fn", path: "/other/ns/ok", status: 404, reason: invoke.ReasonNotFound},
		{name: "not ready", path: "/fn/ns/building", status: 503, reason: invoke.ReasonNotReady, recorded: true, retryAfter: "7"},
		// Waiting does not help a failed function: no Retry-After.
		{name: "failed", path: "/fn/ns/broken", status: 503, reason: invoke.ReasonFailed, recorded: true},
		{name: "unreachable", path: "/fn/ns/dead", status: 502, reason: invoke.ReasonUnreachable, recorded: true},
		{name: "too slow", path: "/fn/ns/slow", status: 504, reason: invoke.ReasonTimeout, recorded: true},
		{name: "body over the cap by length", path: "/fn/ns/ok", body: strings.Repeat("x", 1001), status: 413, reason: invoke.ReasonBodyTooLarge, recorded: true},
		{name: "chunked body over the cap", path: "/fn/ns/ok", body: strings.Repeat("x", 5000), chunked: true, status: 413, reason: invoke.ReasonBodyTooLarge, recorded: true},
		{name: "body at the cap", path: "/fn/ns/ok", body: strings.Repeat("x", 1000), chunked: true, status: 201, recorded: true},
		{name: "function's own 504", path: "/fn/ns/own", status: 504, recorded: true},
		{name: "status past 599", path: "/fn/ns/weird", status: 502, reason: invoke.ReasonUnreachable, recorded: true},
		// CONNECT would tunnel to the function's address; TRACE echoes
		// credentials back to scripts. Refused before any lookup.
		{name: "CONNECT", method: "CONNECT", path: "/fn/ns/ok", status: 405, reason: invoke.ReasonMethodNotAllowed},
		{name: "TRACE", method: "TRACE", path: "/fn/ns/ok", status: 405, reason: invoke.ReasonMethodNotAllowed},
		{name: "TRACE of an unknown function", method: "TRACE", path: "/fn/ns/nope", status: 405, reason: invoke.ReasonMethodNotAllowed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
				if tc.chunked {
					body = io.MultiReader(body) // hides the length: sent chunked
				}
			}
			method := tc.method
			if method == "" {
				method = "POST"
			}
			req, _ := http.NewRequest(method, r.url+tc.path, body)
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.Header.Get("Retry-After"); got != tc.retryAfter {
				t.Fatalf("Retry-After = %q, want %q", got, tc.retryAfter)
			}
			if tc.reason != "" {
				p := invoketest.Refusal(t, resp, tc.status, tc.reason)
				if tc.reason == invoke.ReasonFailed && !strings.Contains(p.Detail, "BuildFailed") {
					t.Fatalf("the problem of a failed function does not say why: %q", p.Detail)
				}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
			if got := resp.Header.Get(invoke.ErrorHeader); got != "" {
				t.Fatalf("the function's answer carries %s %q", invoke.ErrorHeader, got)
			}
		})
	}
	// Every call of an existing function left a record, with the platform's
	// reason when sless answered.
	for _, fn := range []struct {
		name    string
		n       int
		status  int
		errPart string
	}{{"building", 1, 503, "not ready"}, {"broken", 1, 503, "failed: BuildFailed"}, {"dead", 1, 502, "unreachable"}, {"slow", 1, 504, "timeout"}, {"own", 1, 504, ""}, {"weird", 1, 502, "status 999"}} {
		recs := r.records(t, "ns", fn.name, fn.n)
		if recs[0].Status != fn.status || !strings.Contains(recs[0].Error, fn.errPart) || (fn.errPart == "") != (recs[0].Error == "") {
			t.Errorf("%s: record %+v, want status %d and error about %q", fn.name, recs[0], fn.status, fn.errPart)
		}
	}
	recs := r.records(t, "ns", "ok", 3) // the refused methods left none
	statuses := map[int]int{}
	for _, rec := range recs {
		statuses[rec.Status]++
	}
	if statuses[413] != 2 || statuses[201] != 1 {
		t.Errorf("records of ns/ok have statuses %v, want two 413 and one 201", statuses)
	}
}

// TestProxyHoldsCallUntilReady: a call to a function that is not ready
// and has not failed is held while the target comes up (the replica's
// watch lagging the apiserver, a revision on its way) and answered once
// it is; one that fails meanwhile is answered so at once.
func TestProxyHoldsCallUntilReady(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "up") }))
	defer up.Close()
	addr, err := url.Parse(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, invoke.Options{NotReadyWait: time.Minute})
	for _, tc := range []struct {
		name   string
		later  invoke.Target
		status int
		body   string
	}{
		{"ready", invoke.Target{Address: addr, Ready: true, Public: true}, 200, "up"},
		{"failed", invoke.Target{Public: true, Failed: "BuildFailed"}, 503, "failed"},
		// Its access changed under the held call: answered under the old.
		{"private", invoke.Target{Address: addr, Ready: true}, 503, "not ready yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r.targets.set("ns", tc.name, invoke.Target{Public: true})
			timer := time.AfterFunc(300*time.Millisecond, func() { r.targets.set("ns", tc.name, tc.later) })
			defer timer.Stop()
			start := time.Now()
			resp := do(t, "GET", r.url+"/fn/ns/"+tc.name, "")
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.body) {
				t.Fatalf("got %d %s, want %d with %q", resp.StatusCode, b, tc.status, tc.body)
			}
			if waited := time.Since(start); waited < 300*time.Millisecond || waited > 30*time.Second {
				t.Errorf("answered after %v: not held until the target changed", waited)
			}
		})
	}
}

func TestProxyResolverTrouble(t *testing.T) {
	r := newRig(t, invoke.Options{})
	r.targets.err = errors.New("cache not synced")
	resp := do(t, "GET", r.url+"/fn/ns/fn", "")
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || resp.Header.Get(invoke.ErrorHeader) != invoke.ReasonUnavailable {
		t.Fatalf("got %d Retry-After %q %s %q", resp.StatusCode, resp.Header.Get("Retry-After"), invoke.ErrorHeader, resp.Header.Get(invoke.ErrorHeader))
	}
}

// Access policy: a function is private unless its target is public; a
// private one takes a token of its own namespace or an admin token.
func TestProxyAccessPolicy(t *testing.T) {
	r := newRig(t, invoke.Options{})
	r.targets.set("team-a", "private", invoke.Target{Address: echo(t, nil), Ready: true})
	r.targets.set("team-a", "public", invoke.Target{Address: echo(t, nil), Ready: true, Public: true})
	cases := []struct {
		name, path, token string
		status            int
	}{
		{"private, no token", "/fn/team-a/private", "", 401},
		{"private, bad token", "/fn/team-a/private", "garbage", 401},
		{"private, other tenant", "/fn/team-a/private", "team-b:bob", 403},
		{"private, own tenant", "/fn/team-a/private", "team-a:alice", 201},
		{"private, admin", "/fn/team-a/private", "admin:root", 201},
		{"public, no token", "/fn/team-a/public", "", 201},
		{"public, other tenant's token", "/fn/team-a/public", "team-b:bob", 201},
		// Whether a function exists is told only to those who may call
		// in its namespace: to others, an unknown one looks private.
		{"unknown, no token", "/fn/team-a/nope", "", 401},
		{"unknown, bad token", "/fn/team-a/nope", "garbage", 401},
		{"unknown, other tenant", "/fn/team-a/nope", "team-b:bob", 403},
		{"unknown namespace, other tenant", "/fn/team-z/nope", "team-b:bob", 403},
		{"unknown, own tenant", "/fn/team-a/nope", "team-a:alice", 404},
		{"unknown, admin", "/fn/team-a/nope", "admin:root", 404},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var h []string
			if tc.token != "" {
				h = []string{"Authorization", "Bearer " + tc.token}
			}
			resp := do(t, "GET", r.url+tc.path, "", h...)
			if reason, refused := map[int]string{401: invoke.ReasonUnauthorized, 403: invoke.ReasonForbidden, 404: invoke.ReasonNotFound}[tc.status]; refused {
				invoketest.Refusal(t, resp, tc.status, reason)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
		})
	}
	// Refused calls leave no record (anyone can make them up); the four that
	// went through do.
	r.records(t, "team-a", "private", 2)
	r.records(t, "team-a", "public", 2)
}

// No spelling of a path reaches a function of another namespace, nor
// borrows one namespace's access for another's function.
func TestProxyPathTricks(t *testing.T) {
	r := newRig(t, invoke.Options{})
	pubCalls := make(chan seen, 10)
	secretCalls := make(chan seen, 10)
	r.targets.set("team-a", "pub", invoke.Target{Address: echo(t, pubCalls), Ready: true, Public: true})
	r.targets.set("team-b", "secret", invoke.Target{Address: echo(t, secretCalls), Ready: true})
	alice := "team-a:alice"
	cases := []struct {
		name, path, token string
		status            int
		reaches           string // "pub", "secret" or ""
		pubPath           string // the path pub's server saw
	}{
		{"dot-dot as the name", "/fn/team-a/../team-b/secret", alice, 404, "", ""},
		{"encoded slash in the namespace", "/fn/team-a%2F..%2Fteam-b/secret", alice, 404, "", ""},
		{"encoded slash in the name", "/fn/team-a/pub%2F..%2F..%2Fteam-b%2Fsecret", alice, 404, "", ""},
		{"dot-dot after the name stays in the function", "/fn/team-a/pub/../../team-b/secret", "", 201, "pub", "/../../team-b/secret"},
		{"encoded dot-dot after the name", "/fn/team-a/pub/%2E%2E/%2E%2E/team-b/secret", "", 201, "pub", "/../../team-b/secret"},
		{"empty namespace", "/fn//team-b/secret", alice, 404, "", ""},
		{"upper case", "/fn/TEAM-B/secret", alice, 404, "", ""},
		{"escaped letters name the real namespace", "/fn/%74eam-b/secret", alice, 403, "", ""},
		{"escaped letters, right tenant", "/fn/%74eam-b/secret", "team-b:bob", 201, "secret", ""},
		{"other tenant directly", "/fn/team-b/secret", alice, 403, "", ""},
		{"double slash before the name", "/fn/team-b//secret", alice, 404, "", ""},
		{"backslash", "/fn/team-a/pub\\..\\..\\team-b\\secret", alice, 404, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Send the path exactly as written: no client-side cleaning.
			conn, err := net.Dial("tcp", strings.TrimPrefix(r.url, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			auth := ""
			if tc.token != "" {
				auth = "Authorization: Bearer " + tc.token + "\r\n"
			}
			fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: proxy\r\n%sConnection: close\r\n\r\n", tc.path, auth)
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			select {
			case c := <-pubCalls:
				if tc.reaches != "pub" {
					t.Fatalf("reached team-a/pub with %s", c.Path)
				}
				if c.Path != tc.pubPath {
					t.Fatalf("pub saw path %q, want %q", c.Path, tc.pubPath)
				}
			case c := <-secretCalls:
				if tc.reaches != "secret" {
					t.Fatalf("reached team-b/secret with %s", c.Path)
				}
			default:
				if tc.reaches != "" {
					t.Fatalf("reached nothing, want %s", tc.reaches)
				}
			}
		})
	}
}

func TestProxyActivate(t *testing.T) {
	r := newRig(t, invoke.Options{ActivateTimeout: 300 * time.Millisecond})
	addr := echo(t, nil)
	var started atomic.Bool
	r.targets.set("local", "sleepy", invoke.Target{Ready: false, Public: true, Revision: "sha256:abc",
		Activate: func(ctx context.Context) (invoke.Activation, error) {
			if started.Swap(true) {
				return invoke.Activation{Address: addr}, nil
			}
			time.Sleep(50 * time.Millisecond) // a process starting
			return invoke.Activation{Address: addr, Cold: true}, nil
		}})
	r.targets.set("local", "broken", invoke.Target{Public: true, Activate: func(context.Context) (invoke.Activation, error) {
		return invoke.Activation{}, errors.New("exit status 1")
	}})
	r.targets.set("local", "stuck", invoke.Target{Public: true, Activate: func(ctx context.Context) (invoke.Activation, error) {
		<-ctx.Done()
		return invoke.Activation{}, ctx.Err()
	}})
	for range 2 {
		resp := do(t, "GET", r.url+"/fn/local/sleepy", "")
		resp.Body.Close()
		if resp.StatusCode != 201 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	recs := r.records(t, "local", "sleepy", 2)
	if recs[0].ColdStart || !recs[1].ColdStart {
		t.Fatalf("cold starts %v %v, want only the first call cold", recs[1].ColdStart, recs[0].ColdStart)
	}
	if recs[1].Duration < 50*time.Millisecond {
		t.Fatalf("the cold call took %v, less than its activation", recs[1].Duration)
	}
	if n := (prometheusCollector{r, "sless_invoke_cold_starts_total", nil}).value(t); n != 1 {
		t.Fatalf("cold starts counted %v, want 1", n)
	}
	r.targets.set("local", "busy", invoke.Target{Public: true, Activate: func(ctx context.Context) (invoke.Activation, error) {
		<-ctx.Done()
		return invoke.Activation{}, fmt.Errorf("%w: takes 1 call at once: %w", invoke.ErrBusy, ctx.Err())
	}})
	for _, tc := range []struct {
		name   string
		status int
		detail string
	}{{"broken", 503, "could not be started"}, {"stuck", 504, "could not be started"}, {"busy", 503, "is busy"}} {
		resp := do(t, "GET", r.url+"/fn/local/"+tc.name, "")
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || resp.Header.Get(invoke.ErrorHeader) != invoke.ReasonActivateFailed {
			t.Fatalf("%s: %d %q, want %d %s", tc.name, resp.StatusCode, resp.Header.Get(invoke.ErrorHeader), tc.status, invoke.ReasonActivateFailed)
		}
		if resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), tc.detail) {
			t.Fatalf("%s: Retry-After %q, body %s; want Retry-After and %q", tc.name, resp.Header.Get("Retry-After"), body, tc.detail)
		}
		if rec := r.records(t, "local", tc.name, 1)[0]; !strings.HasPrefix(rec.Error, "activate: ") {
			t.Fatalf("%s: record error %q", tc.name, rec.Error)
		}
	}
}

// A chunked body past the cap ends the call at once with 413, however long
// the function's timeout, and the function's read of it fails: it never
// takes the part it got for the whole body.
func TestProxyChunkedBodyOverCapEndsTheCall(t *testing.T) {
	r := newRig(t, invoke.Options{MaxRequestBytes: 1000})
	got := make(chan error, 1)
	stop := make(chan struct{})
	fn := function(t, func(w http.ResponseWriter, req *http.Request) {
		read := make(chan error, 1)
		go func() {
			_, err := io.Copy(io.Discard, req.Body)
			read <- err
		}()
		select {
		case err := <-read:
			got <- err
		case <-stop: // failed: let the servers close
		}
		w.WriteHeader(http.StatusCreated)
	})
	t.Cleanup(func() { close(stop) })
	r.targets.set("ns", "reader", invoke.Target{Address: fn, Ready: true, Public: true, Timeout: time.Hour})
	// The caller gives up long before the function's hour: an answer that
	// waited for the deadline fails here.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", r.url+"/fn/ns/reader", io.MultiReader(strings.NewReader(strings.Repeat("x", 5000))))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("no answer before the caller gave up: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || resp.Header.Get(invoke.ErrorHeader) != invoke.ReasonBodyTooLarge {
		t.Fatalf("status %d %q, want 413 %s", resp.StatusCode, resp.Header.Get(invoke.ErrorHeader), invoke.ReasonBodyTooLarge)
	}
	select {
	case err := <-got:
		if err == nil {
			t.Fatal("the function read the cut body as a whole one")
		}
	case <-ctx.Done():
		t.Fatal("the function is still reading the body")
	}
}

// An activation's Done runs once per call, after the whole answer is
// copied (so a local instance is not counted idle, nor given another call
// past its containerConcurrency, while it still streams), and also when
// the forward fails.
func TestProxyActivationDone(t *testing.T) {
	r := newRig(t, invoke.Options{ActivateTimeout: time.Second})
	release := make(chan struct{})
	streaming := function(t, func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.WriteString(w, "first ")
		w.(http.Flusher).Flush()
		<-release
		_, _ = io.WriteString(w, "last")
	})
	var done atomic.Int32
	activate := func(addr *url.URL) func(context.Context) (invoke.Activation, error) {
		return func(context.Context) (invoke.Activation, error) {
			return invoke.Activation{Address: addr, Done: func() { done.Add(1) }}, nil
		}
	}
	r.targets.set("local", "stream", invoke.Target{Public: true, Activate: activate(streaming)})
	r.targets.set("local", "gone", invoke.Target{Public: true, Activate: activate(closedAddress(t))})

	resp := do(t, "GET", r.url+"/fn/local/stream", "")
	first := make([]byte, len("first "))
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		t.Fatal(err)
	}
	if n := done.Load(); n != 0 {
		t.Fatalf("Done ran %d times while the answer was still streaming", n)
	}
	close(release)
	rest, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(first)+string(rest) != "first last" {
		t.Fatalf("body %q", string(first)+string(rest))
	}
	r.records(t, "local", "stream", 1) // the record is written after the call ends
	if n := done.Load(); n != 1 {
		t.Fatalf("Done ran %d times after one call, want 1", n)
	}

	resp = do(t, "GET", r.url+"/fn/local/gone", "")
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d, want 502", resp.StatusCode)
	}
	r.records(t, "local", "gone", 1)
	if n := done.Load(); n != 2 {
		t.Fatalf("Done ran %d times after a failed forward, want 2 in all", n)
	}
}

// A caller that hangs up is recorded as 499, and the function's call is
// cancelled with it.
func TestProxyClientGoneIsRecorded(t *testing.T) {
	r := newRig(t, invoke.Options{})
	cancelled := make(chan struct{})
	arrived := make(chan struct{})
	r.targets.set("ns", "fn", invoke.Target{Public: true, Ready: true, Address: function(t, func(w http.ResponseWriter, req *http.Request) {
		close(arrived)
		select {
		case <-req.Context().Done():
			close(cancelled)
		case <-time.After(20 * time.Second):
		}
	})})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", r.url+"/fn/ns/fn", nil)
	go func() { <-arrived; cancel() }()
	if _, err := http.DefaultClient.Do(req); err == nil {
		t.Fatal("the call succeeded")
	}
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the function's call was not cancelled")
	}
	rec := r.records(t, "ns", "fn", 1)[0]
	if rec.Status != invoke.StatusClientClosed || rec.Error == "" {
		t.Fatalf("record %+v", rec)
	}
}

// A function's timeout sets the proxy's deadline: no fixed 30 s or 60 s
// limit hides anywhere, including the HTTP server's own write timeout.
func TestProxyHonoursLongFunctionTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("takes 65 s; run without -short")
	}
	t.Parallel()
	r := newRig(t, invoke.Options{})
	r.targets.set("ns", "long", invoke.Target{Public: true, Ready: true, Timeout: 70 * time.Second, Address: function(t, func(w http.ResponseWriter, req *http.Request) {
		select {
		case <-time.After(65 * time.Second):
			fmt.Fprint(w, "done after 65s")
		case <-req.Context().Done():
		}
	})})
	start := time.Now()
	resp := do(t, "GET", r.url+"/fn/ns/long", "")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "done after 65s" {
		t.Fatalf("after %v: %d %q", time.Since(start), resp.StatusCode, b)
	}
	if rec := r.records(t, "ns", "long", 1)[0]; rec.Status != 200 || rec.Duration < 65*time.Second {
		t.Fatalf("record %+v", rec)
	}
}

// The HTTP server in front may have short timeouts of its own; the proxy
// extends the connection's deadlines to the function's budget, and leaves
// none behind for the next request on the same connection.
func TestProxyOutlivesServerWriteTimeout(t *testing.T) {
	r := newRig(t, invoke.Options{})
	r.targets.set("ns", "two-seconds", invoke.Target{Public: true, Ready: true, Timeout: 10 * time.Second, Address: function(t, func(w http.ResponseWriter, req *http.Request) {
		time.Sleep(2 * time.Second)
		fmt.Fprint(w, "ok")
	})})
	srv := &http.Server{Handler: r.proxy, WriteTimeout: 500 * time.Millisecond, ReadTimeout: 500 * time.Millisecond}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	for range 2 {
		resp, err := client.Get("http://" + l.Addr().String() + "/fn/ns/two-seconds")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "ok" {
			t.Fatalf("%d %q", resp.StatusCode, b)
		}
	}
}

func TestProxyInvokeForTrustedCallers(t *testing.T) {
	r := newRig(t, invoke.Options{})
	calls := make(chan seen, 1)
	r.targets.set("ns", "private", invoke.Target{Address: echo(t, calls), Ready: true})
	req, _ := http.NewRequest("POST", "/", strings.NewReader(`{"scheduled":true}`))
	w := &recorderWriter{header: http.Header{}}
	r.proxy.Invoke(w, req, "ns", "private", invoke.TriggerCron)
	if w.status != 201 {
		t.Fatalf("status %d", w.status)
	}
	if c := <-calls; c.Path != "/" || c.Body != `{"scheduled":true}` || c.Header.Get("X-Forwarded-Prefix") != "" {
		t.Fatalf("function saw %+v", c)
	}
	if rec := r.records(t, "ns", "private", 1)[0]; rec.Trigger != invoke.TriggerCron {
		t.Fatalf("record %+v", rec)
	}
}

type recorderWriter struct {
	header http.Header
	status int
	body   strings.Builder
}

func (w *recorderWriter) Header() http.Header { return w.header }
func (w *recorderWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}
func (w *recorderWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = 200
	}
	return w.body.Write(b)
}

// A function's trailers pass, but not as the platform's headers: a trailer
// named X-Sless-Error or X-Request-Id, announced or not, does not reach the
// caller.
func TestProxyTrailers(t *testing.T) {
	r := newRig(t, invoke.Options{})
	fn := function(t, func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Trailer", "X-Checksum, X-Sless-Error")
		w.WriteHeader(200)
		io.WriteString(w, "streamed")
		w.Header().Set("X-Checksum", "abc")
		w.Header().Set("X-Sless-Error", "FunctionTimeout")
		w.Header().Set(http.TrailerPrefix+"X-Request-Id", "forged")
		w.Header().Set(http.TrailerPrefix+"X-Late", "1")
	})
	r.targets.set("ns", "fn", invoke.Target{Address: fn, Ready: true, Public: true})
	resp := do(t, "GET", r.url+"/fn/ns/fn", "")
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(b) != "streamed" {
		t.Fatalf("body %q (%v)", b, err)
	}
	want := http.Header{"X-Checksum": {"abc"}, "X-Late": {"1"}}
	got := resp.Trailer.Clone()
	for k, v := range got {
		if len(v) == 0 {
			delete(got, k) // announced, never sent
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("trailers %v, want %v", got, want)
	}
	if rid := resp.Header.Get("X-Request-Id"); rid == "" || rid == "forged" {
		t.Fatalf("X-Request-Id %q", rid)
	}
}

// A protocol upgrade (WebSocket) passes through: the caller and the
// function talk over the switched connection, the 101 carries the call's
// request id and not the function's X-Sless-Error, and the call is recorded
// as 101 once the connection ends.
func TestProxyUpgrade(t *testing.T) {
	r := newRig(t, invoke.Options{})
	fn := function(t, func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Upgrade") != "echo" {
			http.Error(w, "upgrade required", http.StatusUpgradeRequired)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\nX-Sless-Error: spoofed\r\n\r\n")
		brw.Flush()
		line, _ := brw.ReadString('\n')
		brw.WriteString("echo: " + line)
		brw.Flush()
	})
	r.targets.set("ns", "ws", invoke.Target{Address: fn, Ready: true, Public: true})
	c, err := net.Dial("tcp", strings.TrimPrefix(r.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "GET /fn/ns/ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\nX-Request-Id: ws-1\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get(invoke.ErrorHeader) != "" || resp.Header.Get("X-Request-Id") != "ws-1" {
		t.Fatalf("upgrade answered %d %v", resp.StatusCode, resp.Header)
	}
	fmt.Fprintf(c, "hello\n")
	if line, err := br.ReadString('\n'); err != nil || line != "echo: hello\n" {
		t.Fatalf("after the upgrade: %q %v", line, err)
	}
	c.Close()
	if got := r.records(t, "ns", "ws", 1)[0]; got.Status != http.StatusSwitchingProtocols || got.RequestID != "ws-1" || got.Error != "" {
		t.Fatalf("record %+v", got)
	}
}

// A function that answers with a long line that is not HTTP gets a 502;
// the error, which quotes the line, is cut short in the log and in the
// record, so a function cannot make the proxy log or store its garbage.
func TestProxyMalformedAnswerIsCutInLogAndRecord(t *testing.T) {
	var logs testbed.SyncBuffer
	r := newRig(t, invoke.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				io.WriteString(c, strings.Repeat("garbage", 64<<10)+"\r\n\r\n")
			}()
		}
	}()
	r.targets.set("ns", "junk", invoke.Target{Address: &url.URL{Scheme: "http", Host: l.Addr().String()}, Ready: true, Public: true})
	resp := do(t, "GET", r.url+"/fn/ns/junk", "")
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d, want 502", resp.StatusCode)
	}
	got := r.records(t, "ns", "junk", 1)[0]
	if !strings.HasPrefix(got.Error, "unreachable: malformed HTTP response") || len(got.Error) > invoke.MaxErrorLength {
		t.Fatalf("record error of %d bytes: %.80q", len(got.Error), got.Error)
	}
	if n := len(logs.String()); !strings.Contains(logs.String(), "cannot reach function") || n > 2*invoke.MaxErrorLength {
		t.Fatalf("log of %d bytes: %.200q", n, logs.String())
	}
}

// A function that ends its connection mid-response: the caller's response
// is cut, the record says so, and what net/http's ReverseProxy logs about
// it goes to the proxy's Logger (at debug level), not to the process's
// unstructured standard log.
func TestProxyResponseCutShort(t *testing.T) {
	var logs testbed.SyncBuffer
	r := newRig(t, invoke.Options{Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	fn := function(t, func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.Write([]byte("0123456789"))
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the connection ends here
	})
	r.targets.set("ns", "cut", invoke.Target{Address: fn, Ready: true, Public: true})
	resp, err := http.Get(r.url + "/fn/ns/cut")
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err == nil {
		t.Fatal("the caller read a whole response")
	}
	got := r.records(t, "ns", "cut", 1)[0]
	if got.Status != 200 || got.BytesOut != 10 || !strings.HasPrefix(got.Error, "response cut short") {
		t.Fatalf("record %+v", got)
	}
	if !strings.Contains(logs.String(), `"level":"DEBUG","msg":"httputil: ReverseProxy read error during body copy`) {
		t.Fatalf("the proxy's log: %s", logs.String())
	}
}
