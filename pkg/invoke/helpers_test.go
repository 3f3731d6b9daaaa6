package invoke_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sless-dev/sless/pkg/adapter/postgres"
	"github.com/sless-dev/sless/pkg/adapter/postgres/postgrestest"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/test/testbed"
)

func TestMain(m *testing.M) { testbed.Main(m) }

// targets is a Resolver over a map the test fills: the proxy's contract
// with any resolver, without a cluster.
type targets struct {
	mu sync.Mutex
	m  map[string]invoke.Target
	// tags are the tagged targets, by ns/name@tag.
	tags map[string]invoke.Target
	// err, when set, is returned for every lookup.
	err error
}

// tag sets the target tagged tag of ns/name.
func (ts *targets) tag(ns, name, tag string, t invoke.Target) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.tags == nil {
		ts.tags = map[string]invoke.Target{}
	}
	ts.tags[ns+"/"+name+"@"+tag] = t
}

func (ts *targets) ResolveTag(_ context.Context, ns, name, tag string) (invoke.Target, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t, ok := ts.tags[ns+"/"+name+"@"+tag]
	if !ok {
		return invoke.Target{}, invoke.ErrNotFound
	}
	return t, nil
}

func (ts *targets) set(ns, name string, t invoke.Target) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.m == nil {
		ts.m = map[string]invoke.Target{}
	}
	ts.m[ns+"/"+name] = t
}

func (ts *targets) Resolve(_ context.Context, ns, name string) (invoke.Target, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.err != nil {
		return invoke.Target{}, ts.err
	}
	t, ok := ts.m[ns+"/"+name]
	if !ok {
		return invoke.Target{}, invoke.ErrNotFound
	}
	return t, nil
}

// tokens authenticates "Bearer <namespace>:<subject>" and "Bearer admin:<subject>".
var tokens = invoke.AuthenticatorFunc(func(r *http.Request) (invoke.Identity, error) {
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		return invoke.Identity{}, errors.New("no bearer token")
	}
	ns, sub, ok := strings.Cut(tok, ":")
	if !ok || sub == "" {
		return invoke.Identity{}, errors.New("token is not valid")
	}
	if ns == "admin" {
		return invoke.Identity{Subject: sub, Admin: true}, nil
	}
	return invoke.Identity{Subject: sub, Namespace: ns}, nil
})

// function starts a local HTTP server playing a function.
func function(t testing.TB, h http.HandlerFunc) *url.URL {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// closedAddress is the address of a local port nothing listens on.
func closedAddress(t testing.TB) *url.URL {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return &url.URL{Scheme: "http", Host: l.Addr().String()}
}

// rig is a proxy in front of functions, recording into PostgreSQL.
type rig struct {
	targets  *targets
	services *targets // SlessServices, for /svc/
	store    *postgres.Store
	recorder *invoke.Recorder
	metrics  *invoke.Metrics
	registry *prometheus.Registry
	proxy    *invoke.Proxy
	url      string // the proxy server's base URL
}

func newRig(t testing.TB, opts invoke.Options) *rig {
	t.Helper()
	r := &rig{targets: &targets{}, services: &targets{}, store: postgrestest.New(t), registry: prometheus.NewRegistry()}
	var err error
	if r.metrics, err = invoke.NewMetrics(r.registry); err != nil {
		t.Fatal(err)
	}
	r.recorder = invoke.NewRecorder(r.store, invoke.RecorderOptions{Metrics: r.metrics, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.recorder.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	opts.Resolver, opts.Services, opts.Recorder, opts.Metrics = r.targets, r.services, r.recorder, r.metrics
	if opts.Authenticator == nil {
		opts.Authenticator = tokens
	}
	if r.proxy, err = invoke.NewProxy(opts); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r.proxy)
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

// records waits until PostgreSQL holds n records of the function ns/fn and
// returns them, newest first.
func (r *rig) records(t testing.TB, ns, fn string, n int) []invoke.Record {
	t.Helper()
	return r.awaitRecords(t, invoke.Query{Namespace: ns, Function: fn}, n)
}

// serviceRecords is records of the SlessService ns/svc.
func (r *rig) serviceRecords(t testing.TB, ns, svc string, n int) []invoke.Record {
	t.Helper()
	return r.awaitRecords(t, invoke.Query{Namespace: ns, Function: svc, Service: true}, n)
}

func (r *rig) awaitRecords(t testing.TB, q invoke.Query, n int) []invoke.Record {
	t.Helper()
	ns, fn := q.Namespace, q.Function
	q.Limit = invoke.MaxListLimit
	deadline := time.Now().Add(15 * time.Second)
	for {
		page, err := r.store.List(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Items) >= n {
			if len(page.Items) > n {
				t.Fatalf("%d records of %s/%s, want %d", len(page.Items), ns, fn, n)
			}
			return page.Items
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d records of %s/%s after 15s, want %d", len(page.Items), ns, fn, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func do(t testing.TB, method, u string, body string, header ...string) *http.Response {
	t.Helper()
	var req *http.Request
	var err error
	if body == "" {
		req, err = http.NewRequest(method, u, nil)
	} else {
		req, err = http.NewRequest(method, u, strings.NewReader(body))
	}
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}
