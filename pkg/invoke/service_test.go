package invoke_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/websocket"

	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/invoketest"
)

// A service gets the whole path after /svc/{ns}/{name}, escaped as the
// caller wrote it, and the query untouched.
func TestServicePathPassThrough(t *testing.T) {
	r := newRig(t, invoke.Options{})
	type seen struct{ uri, prefix, subject, auth string }
	got := make(chan seen, 1)
	web := function(t, func(w http.ResponseWriter, req *http.Request) {
		got <- seen{req.RequestURI, req.Header.Get(invoke.PrefixHeader), req.Header.Get(invoke.SubjectHeader), req.Header.Get("Authorization")}
		http.SetCookie(w, &http.Cookie{Name: "session", Value: "x"})
		io.WriteString(w, "ok")
	})
	r.services.set("team-a", "web", invoke.Target{Address: web, Ready: true, Revision: "web-00001"})
	cases := []struct{ path, want string }{
		{"/svc/team-a/web", "/"},
		{"/svc/team-a/web/", "/"},
		{"/svc/team-a/web/notes/42", "/notes/42"},
		{"/svc/team-a/web/notes/?sort=desc&q=a%26b", "/notes/?sort=desc&q=a%26b"},
		{"/svc/team-a/web/a%2Fb/c%20d", "/a%2Fb/c%20d"},
		{"/svc/team-a/web/%E2%82%AC?x=%2F..%2F", "/%E2%82%AC?x=%2F..%2F"},
		{"/svc/team-a/web//double", "//double"},
		{"/svc/team-a/web/..%2Fother", "/..%2Fother"},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			resp := do(t, "GET", r.url+tc.path, "", "Authorization", "Bearer team-a:alice")
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(body) != "ok" {
				t.Fatalf("answered %d %q", resp.StatusCode, body)
			}
			s := <-got
			if s.uri != tc.want {
				t.Errorf("service saw %q, want %q", s.uri, tc.want)
			}
			if s.prefix != "/svc/team-a/web" || s.subject != "alice" || s.auth != "" {
				t.Errorf("service saw prefix %q, subject %q, Authorization %q", s.prefix, s.subject, s.auth)
			}
			// The shared origin's hardening, as on /fn/.
			if c := resp.Header.Values("Set-Cookie"); len(c) != 0 {
				t.Errorf("Set-Cookie passed: %q", c)
			}
			if csp := resp.Header.Get("Content-Security-Policy"); csp != "sandbox" {
				t.Errorf("Content-Security-Policy %q, want sandbox", csp)
			}
		})
	}
	recs := r.serviceRecords(t, "team-a", "web", len(cases))
	for _, rec := range recs {
		if rec.Trigger != invoke.TriggerService || rec.Status != 200 || rec.Revision != "web-00001" {
			t.Fatalf("record %+v", rec)
		}
	}
}

// Services follow the access policy of private functions, and refuse with
// the same problems; /svc/ never reaches a function nor /fn/ a service.
func TestServiceRefusals(t *testing.T) {
	r := newRig(t, invoke.Options{RetryAfter: 7 * time.Second, NotReadyWait: 300 * time.Millisecond})
	r.services.set("team-a", "web", invoke.Target{Address: echo(t, nil), Ready: true})
	r.services.set("team-a", "building", invoke.Target{})
	r.services.set("team-a", "broken", invoke.Target{Failed: "BuildFailed"})
	r.services.set("team-a", "nowhere", invoke.Target{Address: closedAddress(t), Ready: true})
	r.targets.set("team-a", "fn", invoke.Target{Address: echo(t, nil), Ready: true, Public: true})
	cases := []struct {
		name, path, token string
		status            int
		reason            string
		retryAfter        string
	}{
		{"own tenant", "/svc/team-a/web/x", "team-a:alice", 201, "", ""},
		{"admin", "/svc/team-a/web", "admin:root", 201, "", ""},
		{"no token", "/svc/team-a/web", "", 401, invoke.ReasonUnauthorized, ""},
		{"forged token", "/svc/team-a/web", "garbage", 401, invoke.ReasonUnauthorized, ""},
		{"other tenant", "/svc/team-a/web", "team-b:bob", 403, invoke.ReasonForbidden, ""},
		{"missing, own tenant", "/svc/team-a/nope", "team-a:alice", 404, invoke.ReasonNotFound, ""},
		{"missing, other tenant", "/svc/team-a/nope", "team-b:bob", 403, invoke.ReasonForbidden, ""},
		{"missing, no token", "/svc/team-a/nope", "", 401, invoke.ReasonUnauthorized, ""},
		{"a function is no service", "/svc/team-a/fn", "team-a:alice", 404, invoke.ReasonNotFound, ""},
		{"a service is no function", "/fn/team-a/web", "team-a:alice", 404, invoke.ReasonNotFound, ""},
		{"not ready", "/svc/team-a/building", "team-a:alice", 503, invoke.ReasonNotReady, "7"},
		{"failed", "/svc/team-a/broken", "team-a:alice", 503, invoke.ReasonFailed, ""},
		{"unreachable", "/svc/team-a/nowhere", "team-a:alice", 502, invoke.ReasonUnreachable, ""},
		{"no name", "/svc/team-a", "team-a:alice", 404, invoke.ReasonNotFound, ""},
		{"no name, slash", "/svc/team-a/", "team-a:alice", 404, invoke.ReasonNotFound, ""},
		{"upper case", "/svc/Team-A/web", "admin:root", 404, invoke.ReasonNotFound, ""},
		{"encoded slash in the name", "/svc/team-a/web%2Fx", "team-a:alice", 404, invoke.ReasonNotFound, ""},
		{"dot segment for namespace", "/svc/../team-a/web", "team-b:bob", 404, invoke.ReasonNotFound, ""},
		{"encoded dot segment", "/svc/team-b/%2E%2E/team-a/web", "team-b:bob", 404, invoke.ReasonNotFound, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var h []string
			if tc.token != "" {
				h = []string{"Authorization", "Bearer " + tc.token}
			}
			req, err := http.NewRequest("GET", r.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.URL.Opaque = tc.path // sent as written: no cleaning on the client side
			if req.URL.Path, err = url.PathUnescape(tc.path); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < len(h); i += 2 {
				req.Header.Set(h[i], h[i+1])
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if tc.reason == "" {
				resp.Body.Close()
				if resp.StatusCode != tc.status {
					t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
				}
				return
			}
			p := invoketest.Refusal(t, resp, tc.status, tc.reason)
			if got := resp.Header.Get("Retry-After"); got != tc.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, tc.retryAfter)
			}
			if resp.Header.Get("Content-Security-Policy") != "sandbox" {
				t.Errorf("refusal not isolated: %v", resp.Header)
			}
			if tc.status == 404 && strings.Contains(tc.path, "nope") && !strings.Contains(p.Detail, "service team-a/nope") {
				t.Errorf("detail %q does not name the service", p.Detail)
			}
		})
	}
	// Calls that reached the service or were refused on its behalf are
	// recorded; refused credentials and unknown names are not.
	if got := r.serviceRecords(t, "team-a", "web", 2); got[0].Trigger != invoke.TriggerService {
		t.Fatalf("record %+v", got[0])
	}
	for name, reason := range map[string]string{"building": "service not ready", "broken": "service failed: BuildFailed"} {
		if rec := r.serviceRecords(t, "team-a", name, 1)[0]; rec.Status != 503 || rec.Error != reason {
			t.Fatalf("record of %s: %+v", name, rec)
		}
	}
}

// A server without a services resolver says so, and where they run.
func TestServiceNotServed(t *testing.T) {
	p, err := invoke.NewProxy(invoke.Options{Resolver: &targets{}, Authenticator: tokens})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	resp := do(t, "GET", srv.URL+"/svc/team-a/web/", "", "Authorization", "Bearer team-a:alice")
	prob := invoketest.Refusal(t, resp, http.StatusNotImplemented, invoke.ReasonNoServices)
	if !strings.Contains(prob.Detail, "cluster") {
		t.Fatalf("detail %q does not say where services run", prob.Detail)
	}
}

// A WebSocket (RFC 6455, golang.org/x/net/websocket on both ends) passes
// through /svc/ and echoes frames both ways.
func TestServiceWebSocketEcho(t *testing.T) {
	r := newRig(t, invoke.Options{})
	up := function(t, websocket.Handler(func(ws *websocket.Conn) {
		for {
			var msg string
			if err := websocket.Message.Receive(ws, &msg); err != nil {
				return
			}
			if err := websocket.Message.Send(ws, ws.Request().URL.Path+": "+msg); err != nil {
				return
			}
		}
	}).ServeHTTP)
	r.services.set("team-a", "chat", invoke.Target{Address: up, Ready: true})

	cfg, err := websocket.NewConfig("ws"+strings.TrimPrefix(r.url, "http")+"/svc/team-a/chat/ws?room=1", r.url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Header.Set("Authorization", "Bearer team-a:alice")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, err := cfg.DialContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	_ = ws.SetDeadline(time.Now().Add(10 * time.Second))
	for _, msg := range []string{"hello", "again"} {
		if err := websocket.Message.Send(ws, msg); err != nil {
			t.Fatal(err)
		}
		var got string
		if err := websocket.Message.Receive(ws, &got); err != nil {
			t.Fatal(err)
		}
		if got != "/ws: "+msg {
			t.Fatalf("echo %q", got)
		}
	}
	ws.Close()
	if rec := r.serviceRecords(t, "team-a", "chat", 1)[0]; rec.Status != http.StatusSwitchingProtocols || rec.Trigger != invoke.TriggerService {
		t.Fatalf("record %+v", rec)
	}
}

// Server-sent events reach the caller as the service writes them, not
// when the stream ends.
func TestServiceServerSentEvents(t *testing.T) {
	r := newRig(t, invoke.Options{})
	release := make(chan struct{})
	up := function(t, func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-req.Context().Done():
			return
		}
		io.WriteString(w, "data: two\n\n")
	})
	r.services.set("team-a", "events", invoke.Target{Address: up, Ready: true})
	resp := do(t, "GET", r.url+"/svc/team-a/events/stream", "", "Authorization", "Bearer team-a:alice", "Accept", "text/event-stream")
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("answered %d %v", resp.StatusCode, resp.Header)
	}
	br := bufio.NewReader(resp.Body)
	first := make(chan string, 1)
	go func() {
		var b strings.Builder
		for {
			line, err := br.ReadString('\n')
			b.WriteString(line)
			if err != nil || line == "\n" {
				first <- b.String()
				return
			}
		}
	}()
	select {
	case ev := <-first:
		if ev != "data: one\n\n" {
			t.Fatalf("first event %q", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first event did not arrive while the stream was open")
	}
	close(release)
	rest, _ := io.ReadAll(br)
	if string(rest) != "data: two\n\n" {
		t.Fatalf("rest %q", rest)
	}
	if rec := r.serviceRecords(t, "team-a", "events", 1)[0]; rec.Trigger != invoke.TriggerService || rec.BytesOut != int64(len("data: one\n\ndata: two\n\n")) {
		t.Fatalf("record %+v", rec)
	}
}
