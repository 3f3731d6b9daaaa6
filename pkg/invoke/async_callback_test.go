package invoke_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/async"
	"github.com/sless-dev/sless/pkg/invoke/callback"
	"github.com/sless-dev/sless/pkg/local/asynccalls"
)

// delivery is one POST a hook received.
type delivery struct {
	header http.Header
	body   []byte
	result async.Result
}

// hook is a callback receiver on 127.0.0.1 answering the statuses given in
// turn (the last one after that).
func hook(t *testing.T, statuses ...int) (string, chan delivery) {
	t.Helper()
	got := make(chan delivery, 20)
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		d := delivery{header: r.Header.Clone(), body: b}
		_ = json.Unmarshal(b, &d.result)
		got <- d
		i := min(int(n.Add(1))-1, len(statuses)-1)
		w.WriteHeader(statuses[i])
	}))
	t.Cleanup(srv.Close)
	return srv.URL, got
}

func (a *asyncRig) job(t *testing.T, ns, name, id string) *async.Job {
	t.Helper()
	j, err := a.store.Get(context.Background(), ns, name, id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// awaitCallback waits until the posting of id's result is no longer pending.
func (a *asyncRig) awaitCallback(t *testing.T, ns, name, id string) *async.Callback {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		changed := a.runner.Changed()
		j := a.job(t, ns, name, id)
		if j.Callback != nil && j.Callback.State != async.CallbackPending {
			return j.Callback
		}
		if time.Now().After(deadline) {
			t.Fatalf("callback of %s: %+v", id, j.Callback)
		}
		select {
		case <-changed:
		case <-time.After(time.Second):
		}
	}
}

// The result of a call naming X-Callback-Url is posted there once the call
// succeeds, signed with the namespace's key; the function never sees the
// header, and the record says the result was delivered.
func TestAsyncCallbackDelivered(t *testing.T) {
	var sawHeader atomic.Value
	fn := function(t, func(w http.ResponseWriter, r *http.Request) {
		sawHeader.Store(r.Header.Get("X-Callback-Url"))
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	})
	a := newAsyncRig(t, invoke.Options{})
	a.targets.set("team-a", "fn", invoke.Target{Address: fn, Ready: true, Public: true})
	url, got := hook(t, http.StatusOK)
	id := submit(t, a.url+"/fn/team-a/fn", `{"n":1}`, "X-Callback-Url", url+"/done?x=1")
	if v := a.await(t, "team-a", "fn", id); v.State != "succeeded" {
		t.Fatalf("record %+v", v)
	}
	d := <-got
	key, err := a.store.SigningKey(context.Background(), "team-a")
	if err != nil {
		t.Fatal(err)
	}
	if err := callback.Verify(key, d.header.Get("Sless-Signature"), d.body, time.Now(), 5*time.Minute); err != nil {
		t.Fatalf("signature %q: %v", d.header.Get("Sless-Signature"), err)
	}
	other, _ := a.store.SigningKey(context.Background(), "team-b")
	if other == key || callback.Verify(other, d.header.Get("Sless-Signature"), d.body, time.Now(), 5*time.Minute) == nil {
		t.Fatal("another namespace's key verifies the delivery")
	}
	r := d.result
	if r.RequestID != id || r.Namespace != "team-a" || r.Function != "fn" || r.State != async.StateSucceeded || r.Attempts != 1 ||
		r.Response == nil || r.Response.Status != 200 || r.Response.Body == nil || *r.Response.Body != `{"ok":true}` ||
		r.Response.Headers["Content-Type"] != "application/json" {
		t.Fatalf("delivered %s", d.body)
	}
	if d.header.Get("X-Request-Id") != id {
		t.Errorf("X-Request-Id %q", d.header.Get("X-Request-Id"))
	}
	cb := a.awaitCallback(t, "team-a", "fn", id)
	if cb.State != async.CallbackDelivered || cb.Attempts != 1 || cb.Status != 200 || cb.URL != url+"/done?x=1" || cb.FinishedAt.IsZero() {
		t.Fatalf("callback %+v", cb)
	}
	if h := sawHeader.Load(); h != "" {
		t.Fatalf("the function saw X-Callback-Url %q", h)
	}
	// The record shows it.
	resp := do(t, "GET", a.calls+"/team-a/fn/"+id, "")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"callback":{"url":"`+url+`/done?x=1","state":"delivered","attempts":1,"status":200`) {
		t.Fatalf("record %s", b)
	}
	if n := a.metric(t, `sless_async_callbacks_total{outcome="delivered"}`); n != 1 {
		t.Fatalf("delivered %v", n)
	}
}

// A function's onFailure receives its dead letters, onSuccess nothing of
// them; a receiver's 5xx is retried, a refusal by the policy at delivery
// is not, and each outcome is in the record and the metrics.
func TestAsyncCallbackPolicyURLs(t *testing.T) {
	fn := function(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			w.WriteHeader(500)
			return
		}
		w.WriteHeader(200)
	})
	a := newAsyncRig(t, invoke.Options{})
	a.targets.set("team-a", "fn", invoke.Target{Address: fn, Ready: true, Public: true})
	okURL, oks := hook(t, http.StatusOK)
	failURL, fails := hook(t, http.StatusServiceUnavailable, http.StatusServiceUnavailable, http.StatusNoContent)
	a.policy.Store(&async.Policy{Concurrency: 10, MaxRetries: 1, MaxEventAge: time.Hour, OnSuccess: okURL, OnFailure: failURL})

	bad := submit(t, a.url+"/fn/team-a/fn/fail", "")
	if v := a.await(t, "team-a", "fn", bad); v.State != "dead-lettered" {
		t.Fatalf("record %+v", v)
	}
	cb := a.awaitCallback(t, "team-a", "fn", bad)
	if cb.State != async.CallbackDelivered || cb.Attempts != 3 || cb.Status != 204 || cb.URL != failURL {
		t.Fatalf("callback after two 503s: %+v", cb)
	}
	for range 3 {
		if d := <-fails; d.result.State != async.StateDeadLettered || d.result.RequestID != bad || d.result.Attempts != 2 {
			t.Fatalf("onFailure got %s", d.body)
		}
	}
	good := submit(t, a.url+"/fn/team-a/fn", "")
	a.await(t, "team-a", "fn", good)
	if cb := a.awaitCallback(t, "team-a", "fn", good); cb.State != async.CallbackDelivered || cb.URL != okURL {
		t.Fatalf("onSuccess callback %+v", cb)
	}
	if d := <-oks; d.result.RequestID != good || d.result.State != async.StateSucceeded {
		t.Fatalf("onSuccess got %s", d.body)
	}
	if len(oks) != 0 || len(fails) != 0 {
		t.Fatalf("extra deliveries: %d to onSuccess, %d to onFailure", len(oks), len(fails))
	}

	// A receiver that keeps failing: CallbackAttempts (3), then failed.
	downURL, downs := hook(t, http.StatusBadGateway)
	a.policy.Store(&async.Policy{Concurrency: 10, MaxRetries: 0, MaxEventAge: time.Hour, OnSuccess: downURL})
	id := submit(t, a.url+"/fn/team-a/fn", "")
	cb = a.awaitCallback(t, "team-a", "fn", id)
	if cb.State != async.CallbackFailed || cb.Attempts != 3 || cb.Status != 502 || !strings.Contains(cb.LastError, "502") || len(downs) != 3 {
		t.Fatalf("callback to a failing receiver: %+v after %d deliveries", cb, len(downs))
	}
	// A 4xx is the receiver's answer: not retried.
	goneURL, gones := hook(t, http.StatusGone)
	a.policy.Store(&async.Policy{Concurrency: 10, MaxRetries: 0, MaxEventAge: time.Hour, OnSuccess: goneURL})
	id = submit(t, a.url+"/fn/team-a/fn", "")
	if cb = a.awaitCallback(t, "team-a", "fn", id); cb.State != async.CallbackFailed || cb.Attempts != 1 || len(gones) != 1 {
		t.Fatalf("callback to a 410: %+v", cb)
	}
	// A spec URL the policy refuses is refused when the result is posted.
	a.policy.Store(&async.Policy{Concurrency: 10, MaxRetries: 0, MaxEventAge: time.Hour, OnSuccess: "http://10.1.2.3/hook"})
	id = submit(t, a.url+"/fn/team-a/fn", "")
	if cb = a.awaitCallback(t, "team-a", "fn", id); cb.State != async.CallbackFailed || cb.Attempts != 1 ||
		!strings.Contains(cb.LastError, "10.1.2.3") || !strings.Contains(cb.LastError, "private") {
		t.Fatalf("callback to a private address: %+v", cb)
	}
	for series, want := range map[string]float64{
		`sless_async_callbacks_total{outcome="delivered"}`: 2, `sless_async_callbacks_total{outcome="failed"}`: 2,
		`sless_async_callbacks_total{outcome="refused"}`: 1, "sless_async_callback_attempts_total": 3 + 1 + 3 + 1 + 1,
	} {
		if got := a.metric(t, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
}

// A result not yet posted when the runner stopped is posted after a restart.
func TestAsyncCallbackResumesAfterRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "async.db")
	st, err := asynccalls.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	url, got := hook(t, http.StatusOK)
	done := &async.Job{Submission: invoke.Submission{Namespace: "team-a", Function: "fn", RequestID: "finished",
		Method: "POST", Path: "/", AcceptedAt: time.Now()}, State: async.StateQueued}
	if _, _, err := st.Create(context.Background(), done, async.IdempotencyWindow); err != nil {
		t.Fatal(err)
	}
	done.State, done.Attempts, done.FinishedAt = async.StateFailed, 1, time.Now()
	done.Response = &async.Response{Status: 422, Body: []byte{0xff, 0x00}, Bytes: 2}
	done.Callback = &async.Callback{URL: url, State: async.CallbackPending, Attempts: 1, LastError: "the receiver answered 503"}
	if err := st.Update(context.Background(), done); err != nil {
		t.Fatal(err)
	}
	allow, _ := callback.ParseAllowList([]string{"127.0.0.1"})
	runner := &async.Runner{Store: st, Keys: st, Callbacks: callback.NewSender(allow, time.Second, nil),
		Run: func(context.Context, http.ResponseWriter, *invoke.Submission) { t.Error("a finished call ran again") }}
	if err := runner.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { runner.Close(); _ = st.Close() })
	d := <-got
	if d.result.RequestID != "finished" || d.result.State != async.StateFailed || d.result.Response == nil ||
		d.result.Response.Body != nil || string(d.result.Response.BodyBase64) != "\xff\x00" || d.header.Get("Sless-Callback-Attempt") != "2" {
		t.Fatalf("delivered %s %v", d.body, d.header)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		changed := runner.Changed()
		j, err := st.Get(context.Background(), "team-a", "fn", "finished")
		if err != nil {
			t.Fatal(err)
		}
		if j.Callback.State == async.CallbackDelivered {
			if j.Callback.Attempts != 2 || j.Callback.LastError != "" {
				t.Fatalf("callback %+v", j.Callback)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("callback still %+v", j.Callback)
		}
		select {
		case <-changed:
		case <-time.After(time.Second):
		}
	}
	if left, _ := st.Unfinished(context.Background()); len(left) != 0 {
		t.Fatalf("still unfinished: %+v", left)
	}
}

// A runner given no signing keys posts nothing, so it refuses to promise a
// callback (501) and keeps nothing.
func TestAsyncCallbackWithoutKeys(t *testing.T) {
	fn := function(t, func(w http.ResponseWriter, r *http.Request) {})
	st, err := asynccalls.Open(filepath.Join(t.TempDir(), "async.db"))
	if err != nil {
		t.Fatal(err)
	}
	runner := &async.Runner{Store: st}
	r := newRig(t, invoke.Options{Async: runner})
	runner.Run = r.proxy.RunAsync
	if err := runner.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { runner.Close(); _ = st.Close() })
	r.targets.set("team-a", "fn", invoke.Target{Address: fn, Ready: true, Public: true})
	resp := do(t, "POST", r.url+"/fn/team-a/fn", "", "Prefer", "respond-async", "X-Callback-Url", "https://hooks.example.com/done")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var p invoke.Problem
	if resp.StatusCode != 501 || json.Unmarshal(b, &p) != nil || p.Reason != invoke.ReasonNoCallbacks {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if page, _ := st.List(context.Background(), async.ListQuery{Namespace: "team-a", Function: "fn", Limit: 10}); len(page.Items) != 0 {
		t.Fatalf("kept %d calls", len(page.Items))
	}
}
