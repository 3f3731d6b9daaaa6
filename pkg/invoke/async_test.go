package invoke_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/async"
	"github.com/sless-dev/sless/pkg/invoke/callback"
	"github.com/sless-dev/sless/pkg/local/asynccalls"
)

// asyncRig is a proxy whose asynchronous calls a Runner keeps in a real
// bbolt store, with the calls' records served beside it.
type asyncRig struct {
	*rig
	runner *async.Runner
	store  *asynccalls.Store
	reg    *prometheus.Registry
	policy atomic.Pointer[async.Policy]
	calls  string // base URL of the records: {calls}/{ns}/{name}/{id}
}

func newAsyncRig(t testing.TB, opts invoke.Options) *asyncRig {
	t.Helper()
	st, err := asynccalls.Open(filepath.Join(t.TempDir(), "async.db"))
	if err != nil {
		t.Fatal(err)
	}
	a := &asyncRig{store: st, reg: prometheus.NewRegistry()}
	a.policy.Store(&async.Policy{Concurrency: 10, MaxRetries: 2, MaxEventAge: time.Hour})
	// Callbacks may reach 127.0.0.1, where the tests' receivers listen.
	allow, err := callback.ParseAllowList([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	a.runner = &async.Runner{Store: st, Backoff: func(int) time.Duration { return 10 * time.Millisecond },
		Policy: func(context.Context, string, string) (async.Policy, error) { return *a.policy.Load(), nil }, Registerer: a.reg,
		Keys: st, Callbacks: callback.NewSender(allow, time.Second, nil), CallbackAttempts: 3}
	opts.Async = a.runner
	a.rig = newRig(t, opts)
	a.runner.Run = a.proxy.RunAsync
	if err := a.runner.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Stopped before the rig's recorder closes (cleanups run last first).
	t.Cleanup(func() { a.runner.Close(); _ = st.Close() })
	h := async.Handler{Runner: a.runner}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")
		if len(parts) == 2 {
			h.List(w, r, parts[0], parts[1])
			return
		}
		h.Get(w, r, parts[0], parts[1], parts[2])
	}))
	t.Cleanup(srv.Close)
	a.calls = srv.URL
	return a
}

type callView struct {
	RequestID string `json:"requestId"`
	Mode      string `json:"mode"`
	State     string `json:"state"`
	Attempts  int    `json:"attempts"`
	LastError string `json:"lastError"`
	Response  *struct {
		Status  int               `json:"status"`
		Headers map[string]string `json:"headers"`
		Body    *string           `json:"body"`
		Bytes   int64             `json:"bytes"`
	} `json:"response"`
}

// await long-polls the record of id until it is final.
func (a *asyncRig) await(t *testing.T, ns, name, id string) callView {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp := do(t, "GET", a.calls+"/"+ns+"/"+name+"/"+id+"?wait=10s", "")
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var v callView
		if resp.StatusCode != 200 || json.Unmarshal(b, &v) != nil {
			t.Fatalf("record of %s: %d %s", id, resp.StatusCode, b)
		}
		if v.State == "succeeded" || v.State == "failed" || v.State == "dead-lettered" {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("record of %s still %s", id, v.State)
		}
	}
}

// submit makes an asynchronous call and checks its 202.
func submit(t *testing.T, u, body string, header ...string) string {
	t.Helper()
	resp := do(t, "POST", u, body, append([]string{"Prefer", "respond-async"}, header...)...)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %d %s", resp.StatusCode, b)
	}
	var acc struct{ RequestID, Location string }
	if err := json.Unmarshal(b, &acc); err != nil || acc.RequestID == "" {
		t.Fatalf("202 body %s: %v", b, err)
	}
	if got := resp.Header.Get("X-Request-Id"); got != acc.RequestID {
		t.Fatalf("X-Request-Id %q, body says %q", got, acc.RequestID)
	}
	if got := resp.Header.Get("Preference-Applied"); got != "respond-async" {
		t.Fatalf("Preference-Applied %q", got)
	}
	if loc := resp.Header.Get("Location"); !strings.HasSuffix(loc, "/invocations/"+acc.RequestID) || !strings.HasPrefix(loc, "/v1/namespaces/") {
		t.Fatalf("Location %q", loc)
	}
	return acc.RequestID
}

// A call with Prefer: respond-async is answered 202 before the function
// runs; it runs once, with the caller's identity and body, and its record
// says what the function answered.
func TestAsyncCallAccepted(t *testing.T) {
	release := make(chan struct{})
	var seen sync.Map
	fn := function(t, func(w http.ResponseWriter, r *http.Request) {
		<-release
		b, _ := io.ReadAll(r.Body)
		for _, h := range []string{"Authorization", "Prefer", "X-Sless-Subject", "X-Forwarded-Prefix", "X-Request-Id"} {
			seen.Store(h, r.Header.Get(h))
		}
		seen.Store("path", r.URL.RequestURI())
		w.Header().Set("X-Answer", "yes")
		w.WriteHeader(201)
		fmt.Fprintf(w, "got %s", b)
	})
	a := newAsyncRig(t, invoke.Options{})
	a.targets.set("team-a", "slow", invoke.Target{Address: fn, Ready: true, Timeout: 5 * time.Second})
	began := time.Now()
	id := submit(t, a.url+"/fn/team-a/slow/sub/path?q=1", "hello", "Authorization", "Bearer team-a:alice")
	if d := time.Since(began); d > 2*time.Second {
		t.Fatalf("the 202 took %s", d)
	}
	v, err := a.store.Get(context.Background(), "team-a", "slow", id)
	if err != nil || v.State != async.StateQueued && v.State != async.StateRunning {
		t.Fatalf("kept call before the function answered: %+v %v", v, err)
	}
	close(release)
	got := a.await(t, "team-a", "slow", id)
	if got.State != "succeeded" || got.Attempts != 1 || got.Mode != "async" || got.Response == nil ||
		got.Response.Status != 201 || got.Response.Body == nil || *got.Response.Body != "got hello" || got.Response.Headers["X-Answer"] != "yes" {
		t.Fatalf("record: %+v %+v", got, got.Response)
	}
	want := map[string]string{"Authorization": "", "Prefer": "", "X-Sless-Subject": "alice",
		"X-Forwarded-Prefix": "/fn/team-a/slow", "X-Request-Id": id, "path": "/sub/path?q=1"}
	for k, w := range want {
		if g, _ := seen.Load(k); g != w {
			t.Errorf("function saw %s %q, want %q", k, g, w)
		}
	}
	recs := a.records(t, "team-a", "slow", 1)
	if recs[0].Trigger != invoke.TriggerAsync || recs[0].RequestID != id || recs[0].Status != 201 {
		t.Fatalf("history: %+v", recs[0])
	}
}

// Every refusal of a synchronous call refuses an asynchronous one before
// anything is kept, with the same problem.
func TestAsyncRefusals(t *testing.T) {
	var calls atomic.Int32
	fn := function(t, func(w http.ResponseWriter, r *http.Request) { calls.Add(1) })
	a := newAsyncRig(t, invoke.Options{MaxRequestBytes: 16})
	a.targets.set("team-a", "private", invoke.Target{Address: fn, Ready: true})
	a.targets.set("team-a", "public", invoke.Target{Address: fn, Ready: true, Public: true})
	a.targets.set("team-a", "broken", invoke.Target{Failed: "BuildFailed"})
	// A call of its own id, taken below by the "id taken" row.
	submit(t, a.url+"/fn/team-a/public", "", "X-Request-Id", "taken-id")
	a.await(t, "team-a", "public", "taken-id")
	before := calls.Load()
	long := strings.Repeat("k", invoke.MaxIdempotencyKeyLength+1)
	for _, c := range []struct {
		name, path, body string
		header           []string
		status           int
		reason           string
	}{
		{"no token", "/fn/team-a/private", "", nil, 401, invoke.ReasonUnauthorized},
		{"other namespace", "/fn/team-a/private", "", []string{"Authorization", "Bearer team-b:bob"}, 403, invoke.ReasonForbidden},
		{"unknown function", "/fn/team-a/nothing", "", []string{"Authorization", "Bearer admin:root"}, 404, invoke.ReasonNotFound},
		{"unknown function, no token", "/fn/team-a/nothing", "", nil, 401, invoke.ReasonUnauthorized},
		{"failed function", "/fn/team-a/broken", "", []string{"Authorization", "Bearer team-a:alice"}, 503, invoke.ReasonFailed},
		{"body too large", "/fn/team-a/public", strings.Repeat("x", 17), nil, 413, invoke.ReasonBodyTooLarge},
		{"empty idempotency key", "/fn/team-a/public", "", []string{"Idempotency-Key", ""}, 400, invoke.ReasonIdempotencyKey},
		{"idempotency key with a space", "/fn/team-a/public", "", []string{"Idempotency-Key", "a b"}, 400, invoke.ReasonIdempotencyKey},
		{"idempotency key too long", "/fn/team-a/public", "", []string{"Idempotency-Key", long}, 400, invoke.ReasonIdempotencyKey},
		{"request id taken", "/fn/team-a/public", "", []string{"X-Request-Id", "taken-id"}, 409, invoke.ReasonRequestIDTaken},
		{"callback url relative", "/fn/team-a/public", "", []string{"X-Callback-Url", "/done"}, 400, invoke.ReasonCallbackURL},
		{"callback url empty", "/fn/team-a/public", "", []string{"X-Callback-Url", ""}, 400, invoke.ReasonCallbackURL},
		{"callback url ftp", "/fn/team-a/public", "", []string{"X-Callback-Url", "ftp://hooks.example.com/"}, 400, invoke.ReasonCallbackURL},
		{"callback url with user info", "/fn/team-a/public", "", []string{"X-Callback-Url", "https://u:p@hooks.example.com/"}, 400, invoke.ReasonCallbackURL},
		{"callback url too long", "/fn/team-a/public", "", []string{"X-Callback-Url", "https://hooks.example.com/" + strings.Repeat("a", 2048)}, 400, invoke.ReasonCallbackURL},
		{"callback url bad port", "/fn/team-a/public", "", []string{"X-Callback-Url", "https://hooks.example.com:x/"}, 400, invoke.ReasonCallbackURL},
		{"callback to loopback not allowed", "/fn/team-a/public", "", []string{"X-Callback-Url", "http://127.0.0.2:9/done"}, 400, invoke.ReasonCallbackRefused},
		{"callback to IPv6 loopback", "/fn/team-a/public", "", []string{"X-Callback-Url", "http://[::1]/done"}, 400, invoke.ReasonCallbackRefused},
		{"callback to metadata", "/fn/team-a/public", "", []string{"X-Callback-Url", "http://169.254.169.254/latest"}, 400, invoke.ReasonCallbackRefused},
		{"callback to a private address", "/fn/team-a/public", "", []string{"X-Callback-Url", "http://192.168.0.10/done"}, 400, invoke.ReasonCallbackRefused},
		{"callback to a cluster service", "/fn/team-a/public", "", []string{"X-Callback-Url", "http://hooks.team-a.svc/done"}, 400, invoke.ReasonCallbackRefused},
		{"callback to localhost", "/fn/team-a/public", "", []string{"X-Callback-Url", "http://localhost:8080/done"}, 400, invoke.ReasonCallbackRefused},
		{"callback to a bare name", "/fn/team-a/public", "", []string{"X-Callback-Url", "http://hooks/done"}, 400, invoke.ReasonCallbackRefused},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp := do(t, "POST", a.url+c.path, c.body, append([]string{"Prefer", "respond-async"}, c.header...)...)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var p invoke.Problem
			if resp.StatusCode != c.status || resp.Header.Get("Content-Type") != "application/problem+json" ||
				json.Unmarshal(b, &p) != nil || p.Reason != c.reason {
				t.Fatalf("%d %s %s, want %d %s", resp.StatusCode, resp.Header.Get("Content-Type"), b, c.status, c.reason)
			}
			if resp.Header.Get("Preference-Applied") != "" {
				t.Fatal("a refusal says Preference-Applied")
			}
		})
	}
	// Two Idempotency-Key headers are refused too.
	req, _ := http.NewRequest("POST", a.url+"/fn/team-a/public", nil)
	req.Header.Set("Prefer", "respond-async")
	req.Header.Add("Idempotency-Key", "one")
	req.Header.Add("Idempotency-Key", "two")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("two keys: %d", resp.StatusCode)
	}
	req, _ = http.NewRequest("POST", a.url+"/fn/team-a/public", nil)
	req.Header.Set("Prefer", "respond-async")
	req.Header.Add("X-Callback-Url", "https://hooks.example.com/a")
	req.Header.Add("X-Callback-Url", "https://hooks.example.com/b")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("two callback URLs: %d", resp.StatusCode)
	}
	page, err := a.store.List(context.Background(), async.ListQuery{Namespace: "team-a", Function: "public", Limit: 100})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("kept %d calls of public, want only the first: %v", len(page.Items), err)
	}
	if calls.Load() != before {
		t.Fatalf("a refused call reached the function")
	}
}

// A proxy without an Async ignores the preference (RFC 7240 allows it): the
// call runs at once and nothing says the preference applied.
func TestAsyncPreferenceIgnoredWithoutRunner(t *testing.T) {
	fn := function(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "now") })
	r := newRig(t, invoke.Options{})
	r.targets.set("team-a", "fn", invoke.Target{Address: fn, Ready: true, Public: true})
	resp := do(t, "POST", r.url+"/fn/team-a/fn", "", "Prefer", "respond-async")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "now" || resp.Header.Get("Preference-Applied") != "" {
		t.Fatalf("%d %q Preference-Applied %q", resp.StatusCode, b, resp.Header.Get("Preference-Applied"))
	}
}

// A call failing with 5xx is tried maxRetries more times, then
// dead-lettered with the last error and listed as such.
func TestAsyncRetriesThenDeadLetters(t *testing.T) {
	var calls atomic.Int32
	fn := function(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(500)
		io.WriteString(w, "boom")
	})
	a := newAsyncRig(t, invoke.Options{})
	a.targets.set("team-a", "bad", invoke.Target{Address: fn, Ready: true, Public: true})
	id := submit(t, a.url+"/fn/team-a/bad", "")
	v := a.await(t, "team-a", "bad", id)
	if v.State != "dead-lettered" || v.Attempts != 3 || !strings.Contains(v.LastError, "500 boom") || calls.Load() != 3 {
		t.Fatalf("record %+v after %d calls", v, calls.Load())
	}
	resp := do(t, "GET", a.calls+"/team-a/bad?mode=async&state=dead-lettered", "")
	var list struct{ Items []callView }
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Items) != 1 || list.Items[0].RequestID != id {
		t.Fatalf("dead letters: %+v %v", list, err)
	}
	resp.Body.Close()
	a.records(t, "team-a", "bad", 3)
	for series, want := range map[string]float64{
		"sless_async_calls_accepted_total": 1, "sless_async_attempts_total": 3,
		`sless_async_calls_finished_total{state="dead-lettered"}`: 1, `sless_async_calls_finished_total{state="succeeded"}`: 0,
		"sless_async_calls_pending": 0, "sless_async_oldest_pending_age_seconds": 0,
	} {
		if got := a.metric(t, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
}

// metric reads one series of the runner's registry, as name or
// name{label="value"}.
func (a *asyncRig) metric(t *testing.T, series string) float64 {
	t.Helper()
	name, label, _ := strings.Cut(strings.TrimSuffix(series, "}"), "{")
	mfs, err := a.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label != "" {
				l := m.GetLabel()
				if len(l) != 1 || l[0].GetName()+`="`+l[0].GetValue()+`"` != label {
					continue
				}
			}
			if m.Counter != nil {
				return m.Counter.GetValue()
			}
			return m.Gauge.GetValue()
		}
	}
	t.Fatalf("no series %s", series)
	return 0
}

// The pending series count calls not yet final and the oldest one's age.
func TestAsyncPendingMetrics(t *testing.T) {
	release := make(chan struct{})
	fn := function(t, func(w http.ResponseWriter, r *http.Request) { <-release })
	a := newAsyncRig(t, invoke.Options{})
	a.targets.set("team-a", "held", invoke.Target{Address: fn, Ready: true, Public: true})
	ids := []string{submit(t, a.url+"/fn/team-a/held", ""), submit(t, a.url+"/fn/team-a/held", "")}
	if n := a.metric(t, "sless_async_calls_pending"); n != 2 {
		t.Fatalf("pending %v, want 2", n)
	}
	if age := a.metric(t, "sless_async_oldest_pending_age_seconds"); age <= 0 {
		t.Fatalf("oldest age %v", age)
	}
	close(release)
	for _, id := range ids {
		a.await(t, "team-a", "held", id)
	}
	if n := a.metric(t, `sless_async_calls_finished_total{state="succeeded"}`); n != 2 {
		t.Fatalf("succeeded %v, want 2", n)
	}
}

// A 4xx is the function's answer, not a failure to retry.
func TestAsyncClientErrorNotRetried(t *testing.T) {
	var calls atomic.Int32
	fn := function(t, func(w http.ResponseWriter, r *http.Request) { calls.Add(1); w.WriteHeader(422) })
	a := newAsyncRig(t, invoke.Options{})
	a.targets.set("team-a", "picky", invoke.Target{Address: fn, Ready: true, Public: true})
	v := a.await(t, "team-a", "picky", submit(t, a.url+"/fn/team-a/picky", ""))
	if v.State != "failed" || v.Attempts != 1 || calls.Load() != 1 {
		t.Fatalf("record %+v after %d calls", v, calls.Load())
	}
}

// A call past the function's timeout is cut there and tried again.
func TestAsyncTimeoutRetried(t *testing.T) {
	var calls atomic.Int32
	fn := function(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
			return
		}
		io.WriteString(w, "second time")
	})
	a := newAsyncRig(t, invoke.Options{TimeoutGrace: 10 * time.Millisecond})
	a.targets.set("team-a", "slow", invoke.Target{Address: fn, Ready: true, Public: true, Timeout: 300 * time.Millisecond})
	v := a.await(t, "team-a", "slow", submit(t, a.url+"/fn/team-a/slow", ""))
	if v.State != "succeeded" || v.Attempts != 2 || *v.Response.Body != "second time" {
		t.Fatalf("record %+v", v)
	}
}

// A repeated Idempotency-Key answers the first call's 202 and runs nothing.
func TestAsyncIdempotencyKey(t *testing.T) {
	var calls atomic.Int32
	fn := function(t, func(w http.ResponseWriter, r *http.Request) { calls.Add(1) })
	a := newAsyncRig(t, invoke.Options{})
	a.targets.set("team-a", "once", invoke.Target{Address: fn, Ready: true, Public: true})
	a.targets.set("team-a", "other", invoke.Target{Address: fn, Ready: true, Public: true})
	first := submit(t, a.url+"/fn/team-a/once", "", "Idempotency-Key", "order-42")
	again := submit(t, a.url+"/fn/team-a/once", "", "Idempotency-Key", "order-42")
	if again != first {
		t.Fatalf("the repeat got %s, the first %s", again, first)
	}
	// Keys are per function.
	if other := submit(t, a.url+"/fn/team-a/other", "", "Idempotency-Key", "order-42"); other == first {
		t.Fatal("another function's key named the first call")
	}
	a.await(t, "team-a", "once", first)
	a.records(t, "team-a", "once", 1)
	if page, _ := a.store.List(context.Background(), async.ListQuery{Namespace: "team-a", Function: "once", Limit: 10}); len(page.Items) != 1 {
		t.Fatalf("%d calls kept", len(page.Items))
	}
}

// No more than spec.async.concurrency calls of a function run at once.
func TestAsyncConcurrency(t *testing.T) {
	var now, peak atomic.Int32
	fn := function(t, func(w http.ResponseWriter, r *http.Request) {
		n := now.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
		now.Add(-1)
	})
	a := newAsyncRig(t, invoke.Options{})
	a.policy.Store(&async.Policy{Concurrency: 2, MaxRetries: 2, MaxEventAge: time.Hour})
	a.targets.set("team-a", "narrow", invoke.Target{Address: fn, Ready: true, Public: true})
	var ids []string
	for range 6 {
		ids = append(ids, submit(t, a.url+"/fn/team-a/narrow", ""))
	}
	for _, id := range ids {
		if v := a.await(t, "team-a", "narrow", id); v.State != "succeeded" {
			t.Fatalf("%s: %+v", id, v)
		}
	}
	if p := peak.Load(); p != 2 {
		t.Fatalf("%d calls ran at once, want 2", p)
	}
}

// Long polling answers as soon as the call ends; bad waits are refused.
func TestAsyncRecordWait(t *testing.T) {
	release := make(chan struct{})
	fn := function(t, func(w http.ResponseWriter, r *http.Request) { <-release })
	a := newAsyncRig(t, invoke.Options{})
	a.targets.set("team-a", "held", invoke.Target{Address: fn, Ready: true, Public: true})
	id := submit(t, a.url+"/fn/team-a/held", "")
	resp := do(t, "GET", a.calls+"/team-a/held/"+id+"?wait=0", "")
	var v callView
	_ = json.NewDecoder(resp.Body).Decode(&v)
	resp.Body.Close()
	if v.State != "queued" && v.State != "running" {
		t.Fatalf("before the answer: %+v", v)
	}
	time.AfterFunc(200*time.Millisecond, func() { close(release) })
	began := time.Now()
	resp = do(t, "GET", a.calls+"/team-a/held/"+id+"?wait=30s", "")
	_ = json.NewDecoder(resp.Body).Decode(&v)
	resp.Body.Close()
	if v.State != "succeeded" || time.Since(began) > 10*time.Second {
		t.Fatalf("long poll: %+v after %s", v, time.Since(began))
	}
	for _, q := range []string{"wait=61s", "wait=-1s", "wait=soon", "wait=1s&wait=2s", "other=1", "wait=%zz"} {
		resp := do(t, "GET", a.calls+"/team-a/held/"+id+"?"+q, "")
		resp.Body.Close()
		if resp.StatusCode != 400 || resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("?%s: %d", q, resp.StatusCode)
		}
	}
	for _, q := range []string{"mode=sync", "mode=async&state=lost", "mode=async&limit=0", "mode=async&limit=1001", "mode=async&cursor=x"} {
		resp := do(t, "GET", a.calls+"/team-a/held?"+q, "")
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("list ?%s: %d", q, resp.StatusCode)
		}
	}
	resp = do(t, "GET", a.calls+"/team-a/held/no-such-id", "")
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("unknown id: %d", resp.StatusCode)
	}
}

// A call kept as running when its server stopped runs again when a runner
// starts on the same store: at least once, never lost.
func TestAsyncResumesAfterRestart(t *testing.T) {
	var calls atomic.Int32
	fn := function(t, func(w http.ResponseWriter, r *http.Request) { calls.Add(1); io.WriteString(w, "done") })
	path := filepath.Join(t.TempDir(), "async.db")
	st, err := asynccalls.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	cut := &async.Job{Submission: invoke.Submission{Namespace: "team-a", Function: "fn", RequestID: "was-running",
		Method: "POST", Path: "/", AcceptedAt: time.Now()}, State: async.StateQueued}
	if _, _, err := st.Create(context.Background(), cut, async.IdempotencyWindow); err != nil {
		t.Fatal(err)
	}
	cut.State, cut.Attempts = async.StateRunning, 1
	if err := st.Update(context.Background(), cut); err != nil {
		t.Fatal(err)
	}
	_ = st.Close()

	r := newRig(t, invoke.Options{})
	r.targets.set("team-a", "fn", invoke.Target{Address: fn, Ready: true, Public: true})
	st, err = asynccalls.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	runner := &async.Runner{Store: st, Run: r.proxy.RunAsync}
	if err := runner.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { runner.Close(); _ = st.Close() })
	r.records(t, "team-a", "fn", 1)
	deadline := time.Now().Add(10 * time.Second)
	for {
		changed := runner.Changed()
		j, err := st.Get(context.Background(), "team-a", "fn", "was-running")
		if err != nil {
			t.Fatal(err)
		}
		if j.State == async.StateSucceeded {
			if j.Attempts != 2 || calls.Load() != 1 {
				t.Fatalf("attempts %d, calls %d", j.Attempts, calls.Load())
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %s", j.State)
		}
		select {
		case <-changed:
		case <-time.After(time.Second):
		}
	}
}
