package frontdoor_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/auth/triggertoken"
	"github.com/sless-dev/sless/pkg/frontdoor"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/invoketest"
	"github.com/sless-dev/sless/pkg/queue"
	"github.com/sless-dev/sless/test/testbed"
)

var secret = []byte("0123456789abcdef0123456789abcdef-trigger-calls")

// unreachable is a Triggers reader whose apiserver does not answer.
type unreachable struct{ client.Reader }

func (unreachable) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return errors.New("connection refused")
}

// TestCallHandlerRefusals: every refusal of a trigger's call is the problem
// the proxy answers its own refusals with (docs/invoke.md), checked by the
// proxy tests' own assertions, and none reaches the function.
func TestCallHandlerRefusals(t *testing.T) {
	ctx := context.Background()
	tb := testbed.SharedKube(t)
	ns := tb.Namespace(t)

	var calls atomic.Int32
	fnSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1) }))
	t.Cleanup(fnSrv.Close)
	fnAddr, _ := url.Parse(fnSrv.URL)
	proxy, err := invoke.NewProxy(invoke.Options{Resolver: invoke.ResolverFunc(func(_ context.Context, namespace, name string) (invoke.Target, error) {
		return invoke.Target{Address: fnAddr, Ready: true}, nil // private: only trigger credentials get in
	})})
	if err != nil {
		t.Fatal(err)
	}
	toks := &triggertoken.HS256{Secret: secret}
	srv := httptest.NewServer(&frontdoor.TriggerCallHandler{Proxy: proxy, Tokens: toks, Triggers: tb.Client})
	t.Cleanup(srv.Close)
	broken := httptest.NewServer(&frontdoor.TriggerCallHandler{Proxy: proxy, Tokens: toks, Triggers: unreachable{}})
	t.Cleanup(broken.Close)

	cron := func(name string, enabled bool) *slessv1alpha1.Trigger {
		tr := &slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: slessv1alpha1.TriggerSpec{Function: "report", Type: slessv1alpha1.TriggerTypeCron, Schedule: "@daily", Enabled: ptr.To(enabled)}}
		if err := tb.Client.Create(ctx, tr); err != nil {
			t.Fatal(err)
		}
		return tr
	}
	issue := func(toks *triggertoken.HS256, tr *slessv1alpha1.Trigger) string {
		s, _, err := toks.IssueTriggerToken(tr)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	nightly := cron("nightly", true)
	good := issue(toks, nightly)
	earlier := nightly.DeepCopy()
	earlier.UID = "uid-of-an-earlier-nightly"
	gone := nightly.DeepCopy()
	gone.Name, gone.UID = "gone", "uid-of-gone"
	web := nightly.DeepCopy()
	web.Spec.Type = slessv1alpha1.TriggerTypeHTTP
	expired := &triggertoken.HS256{Secret: secret, Clock: clocktesting.NewFakeClock(time.Now().Add(-2 * triggertoken.DefaultLifetime))}
	otherKey := &triggertoken.HS256{Secret: []byte(strings.Repeat("k", 40))}

	fn := "/fn/" + ns + "/report"
	for _, tc := range []struct {
		name   string
		url    string // srv.URL + fn unless set
		kind   string // X-Sless-Trigger; cron unless set
		auth   []string
		status int
		reason string
	}{
		{name: "no credential", status: 401, reason: invoke.ReasonUnauthorized},
		{name: "not a bearer token", auth: []string{"Basic " + good}, status: 401, reason: invoke.ReasonUnauthorized},
		{name: "signed with another key", auth: []string{"Bearer " + issue(otherKey, nightly)}, status: 401, reason: invoke.ReasonUnauthorized},
		{name: "expired", auth: []string{"Bearer " + issue(expired, nightly)}, status: 401, reason: invoke.ReasonUnauthorized},
		{name: "not a trigger credential", auth: []string{"Bearer not.a.jwt"}, status: 401, reason: invoke.ReasonUnauthorized},
		{name: "two Authorization headers", auth: []string{"Bearer " + good, "Bearer " + good}, status: 401, reason: invoke.ReasonUnauthorized},
		{name: "another trigger type", kind: "queue", auth: []string{"Bearer " + good}, status: 403, reason: invoke.ReasonForbidden},
		{name: "another function", url: srv.URL + "/fn/" + ns + "/other", auth: []string{"Bearer " + good}, status: 403, reason: invoke.ReasonForbidden},
		{name: "another namespace", url: srv.URL + "/fn/elsewhere/report", auth: []string{"Bearer " + good}, status: 403, reason: invoke.ReasonForbidden},
		{name: "an http trigger's credential", kind: "http", auth: []string{"Bearer " + issue(toks, web)}, status: 403, reason: invoke.ReasonForbidden},
		{name: "trigger disabled", auth: []string{"Bearer " + issue(toks, cron("paused", false))}, status: 403, reason: invoke.ReasonForbidden},
		{name: "trigger deleted", auth: []string{"Bearer " + issue(toks, gone)}, status: 403, reason: invoke.ReasonForbidden},
		{name: "issued to an earlier trigger of the name", auth: []string{"Bearer " + issue(toks, earlier)}, status: 403, reason: invoke.ReasonForbidden},
		{name: "trigger cannot be checked", url: broken.URL + fn, auth: []string{"Bearer " + good}, status: 503, reason: invoke.ReasonUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, kind := tc.url, tc.kind
			if u == "" {
				u = srv.URL + fn
			}
			if kind == "" {
				kind = "cron"
			}
			req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set(queue.TriggerHeader, kind)
			req.Header.Set(invoke.RequestIDHeader, "run-"+strings.ReplaceAll(tc.name, " ", "-"))
			for _, a := range tc.auth {
				req.Header.Add("Authorization", a)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			p := invoketest.Refusal(t, resp, tc.status, tc.reason)
			if p.RequestID != req.Header.Get(invoke.RequestIDHeader) {
				t.Errorf("requestId %q, want the caller's %q", p.RequestID, req.Header.Get(invoke.RequestIDHeader))
			}
		})
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("%d refused calls reached the function", n)
	}

	// The credential itself is good: the same call with it alone goes through.
	req, _ := http.NewRequest(http.MethodPost, srv.URL+fn, strings.NewReader(`{}`))
	req.Header.Set(queue.TriggerHeader, "cron")
	req.Header.Set("Authorization", "Bearer "+good)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || calls.Load() != 1 {
		t.Fatalf("the good credential: HTTP %d, %d calls of the function", resp.StatusCode, calls.Load())
	}
}
