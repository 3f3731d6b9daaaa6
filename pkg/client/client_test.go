package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/retry"
)

// These tests hold the client's own HTTP behaviour (retries, error
// decoding) to a scripted server; the provider's acceptance tests drive it
// against the real API.

type step struct {
	status     int
	retryAfter string
	body       string
}

func scripted(t *testing.T, steps ...step) (*Client, *atomic.Int32, *[]string) {
	t.Helper()
	var n atomic.Int32
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(n.Add(1)) - 1
		auth = append(auth, r.Header.Get("Authorization"))
		s := steps[min(i, len(steps)-1)]
		if s.retryAfter != "" {
			w.Header().Set("Retry-After", s.retryAfter)
		}
		if s.status >= 400 {
			w.Header().Set("Content-Type", "application/problem+json")
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(s.status)
		_, _ = w.Write([]byte(s.body))
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL+"/", "tok", WithRetry(Retry{Budget: 2 * time.Second, Initial: 10 * time.Millisecond, Max: 40 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	return c, &n, &auth
}

const fnBody = `{"metadata":{"name":"hello","namespace":"ns"},"spec":{"runtime":"python3.12","source":{"image":"x"}}}`

func TestRetriesUnavailableThenSucceeds(t *testing.T) {
	c, n, auth := scripted(t, step{status: 503, retryAfter: "0"}, step{status: 503}, step{status: 200, body: fnBody})
	fn, err := c.GetFunction(context.Background(), "ns", "hello")
	if err != nil {
		t.Fatal(err)
	}
	if fn.Name != "hello" || n.Load() != 3 {
		t.Fatalf("name %q after %d attempts", fn.Name, n.Load())
	}
	if (*auth)[0] != "Bearer tok" {
		t.Fatalf("Authorization = %q", (*auth)[0])
	}
}

func TestCreateConflictRetriedOnlyWhenToldToComeBack(t *testing.T) {
	// A create meeting an object still being deleted is told Retry-After.
	c, n, _ := scripted(t, step{status: 409, retryAfter: "0", body: `{"title":"Conflict","detail":"being deleted"}`}, step{status: 201, body: fnBody})
	if _, err := c.CreateFunction(context.Background(), fnObj()); err != nil || n.Load() != 2 {
		t.Fatalf("err %v after %d attempts", err, n.Load())
	}
	// A create meeting a live object is answered at once.
	c, n, _ = scripted(t, step{status: 409, body: `{"title":"Conflict","detail":"already exists"}`})
	_, err := c.CreateFunction(context.Background(), fnObj())
	if !IsConflict(err) || n.Load() != 1 {
		t.Fatalf("err %v after %d attempts", err, n.Load())
	}
}

// TestLargeAnswerNotCutShort: an answer larger than the client holds is an
// error, not its first bytes passed off as the whole (a zip over 64 MiB came
// back cut at 64 MiB); a source download may be larger than a JSON answer.
func TestLargeAnswerNotCutShort(t *testing.T) {
	zip := strings.Repeat("z", 64<<20+100) // past the bound of a JSON answer
	c, _, _ := scripted(t, step{status: 200, body: zip})
	got, err := c.GetSource(context.Background(), "ns", "hello")
	if err != nil || len(got) != len(zip) {
		t.Fatalf("GetSource = %d bytes, %v; want all %d", len(got), err, len(zip))
	}
	c.maxAnswer = 10
	if _, err := c.GetFunction(context.Background(), "ns", "hello"); err == nil || !strings.Contains(err.Error(), "larger than 10 bytes") {
		t.Fatalf("a JSON answer over the bound: %v", err)
	}
}

// TestStaleVersionNotRetried: a patch whose metadata.resourceVersion is no
// longer current is answered 409 without Retry-After, and no wait makes it
// current, so the error comes back at once; before, every call but a
// create retried any 409 for the whole two-minute budget.
func TestStaleVersionNotRetried(t *testing.T) {
	c, n, _ := scripted(t, step{status: 409, body: `{"title":"Conflict","detail":"metadata.resourceVersion 5 is not the current version 7: read the object again"}`})
	start := time.Now()
	_, err := c.PatchFunction(context.Background(), "ns", "hello", map[string]any{"metadata": map[string]any{"resourceVersion": "5"}})
	if !IsConflict(err) || n.Load() != 1 || time.Since(start) > time.Second {
		t.Fatalf("err %v after %d attempts in %s", err, n.Load(), time.Since(start))
	}
	// A 409 that says Retry-After is retried whatever the method.
	c, n, _ = scripted(t, step{status: 409, retryAfter: "0", body: `{"title":"Conflict","detail":"lost the update race"}`}, step{status: 200, body: fnBody})
	if _, err := c.PatchFunction(context.Background(), "ns", "hello", map[string]any{"spec": map[string]any{"memoryMB": 256}}); err != nil || n.Load() != 2 {
		t.Fatalf("err %v after %d attempts", err, n.Load())
	}
}

func TestGivesUpWithinBudget(t *testing.T) {
	c, n, _ := scripted(t, step{status: 503, body: `{"title":"Service Unavailable","detail":"storage down"}`})
	start := time.Now()
	_, err := c.GetFunction(context.Background(), "ns", "hello")
	if err == nil || !strings.Contains(err.Error(), "gave up") || !strings.Contains(err.Error(), "storage down") || StatusOf(err) != 503 {
		t.Fatalf("err = %v", err)
	}
	if time.Since(start) > 6*time.Second || n.Load() < 3 {
		t.Fatalf("%d attempts in %s", n.Load(), time.Since(start))
	}
}

func TestProblemFieldsDecoded(t *testing.T) {
	c, n, _ := scripted(t, step{status: 400, body: `{"type":"about:blank","title":"Invalid","status":400,"detail":"spec is invalid",
		"errors":[{"field":"spec.memoryMB","detail":"must be between 64 and 4096","type":"FieldValueInvalid"}]}`})
	_, err := c.PatchFunction(context.Background(), "ns", "hello", map[string]any{"spec": map[string]any{"memoryMB": -1}})
	var e *Error
	if !asError(err, &e) || n.Load() != 1 {
		t.Fatalf("err = %v after %d attempts", err, n.Load())
	}
	if len(e.Fields) != 1 || e.Fields[0].Field != "spec.memoryMB" || !strings.Contains(err.Error(), "spec.memoryMB: must be between 64 and 4096") {
		t.Fatalf("fields = %+v, message %q", e.Fields, err)
	}
}

func TestNotFoundIsNotRetried(t *testing.T) {
	c, n, _ := scripted(t, step{status: 404, body: `{"title":"Not Found"}`})
	err := c.DeleteFunction(context.Background(), "ns", "hello")
	if !IsNotFound(err) || n.Load() != 1 {
		t.Fatalf("err %v after %d attempts", err, n.Load())
	}
}

func TestNewRejectsBadEndpoints(t *testing.T) {
	for _, e := range []string{"", "ftp://x", "http://", "localhost:8080", "http://x/?a=b", "http://x/#f"} {
		if _, err := New(e, ""); err == nil {
			t.Errorf("endpoint %q accepted", e)
		}
	}
}

func asError(err error, target **Error) bool { return errors.As(err, target) }

func fnObj() *slessv1alpha1.Function {
	fn := &slessv1alpha1.Function{Spec: slessv1alpha1.FunctionSpec{WorkloadSpec: slessv1alpha1.WorkloadSpec{Runtime: "python3.12", Source: slessv1alpha1.FunctionSource{Image: "x"}}}}
	fn.Namespace, fn.Name = "ns", "hello"
	return fn
}

// TestListSendsLabelSelector: the selector goes on every page's query,
// escaped, beside the cursor; an empty selector sends none.
func TestListSendsLabelSelector(t *testing.T) {
	var queries []url.Values
	pages := []string{`{"items":[{"metadata":{"name":"a"}}],"next":"c1"}`, `{"items":[{"metadata":{"name":"b"}}]}`}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		queries = append(queries, r.URL.Query())
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(pages[min(len(queries)-1, len(pages)-1)]))
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, "tok")
	if err != nil {
		t.Fatal(err)
	}
	sel := "app=web,tier!=db,env in (a,b),!canary"
	fns, err := c.AllFunctions(context.Background(), "ns", LabelSelector(sel))
	if err != nil || len(fns) != 2 || fns[1].Name != "b" {
		t.Fatalf("AllFunctions: %d items, %v", len(fns), err)
	}
	if len(queries) != 2 || queries[0].Get("labelSelector") != sel || queries[1].Get("labelSelector") != sel ||
		queries[0].Has("cursor") || queries[1].Get("cursor") != "c1" {
		t.Fatalf("queries %v", queries)
	}

	queries = nil
	if _, err := c.ListFunctions(context.Background(), "ns", "", 5, LabelSelector("")); err != nil {
		t.Fatal(err)
	}
	if len(queries) != 1 || queries[0].Has("labelSelector") || queries[0].Get("limit") != "5" {
		t.Fatalf("queries %v", queries)
	}
}

// freeAddress is a loopback address nothing listens at (yet).
func freeAddress(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// A refused connection is retried, a POST too (nothing was sent), but only
// for Retry.Unreachable: a mistyped endpoint is told in seconds, not after
// the two-minute budget.
func TestRefusedConnections(t *testing.T) {
	quick := Retry{Budget: time.Minute, Initial: 10 * time.Millisecond, Max: 40 * time.Millisecond, Unreachable: 300 * time.Millisecond}
	t.Run("nothing listens", func(t *testing.T) {
		c, err := New("http://"+freeAddress(t), "tok", WithRetry(quick))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = c.GetFunction(context.Background(), "ns", "hello")
		if err == nil || !strings.Contains(err.Error(), "nothing answers at") {
			t.Fatalf("err = %v, want nothing answers", err)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("gave up after %s, want about %s", took, quick.Unreachable)
		}
	})
	t.Run("a create lands once the server listens", func(t *testing.T) {
		addr := freeAddress(t)
		c, err := New("http://"+addr, "tok", WithRetry(Retry{Budget: time.Minute, Initial: 10 * time.Millisecond, Max: 40 * time.Millisecond, Unreachable: 20 * time.Second}))
		if err != nil {
			t.Fatal(err)
		}
		var creates atomic.Int32
		refusedOnce := make(chan struct{})
		go func() {
			// Wait for a refused attempt before the server starts, so the
			// create has been retried rather than sent to a live server.
			<-refusedOnce
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				creates.Add(1)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusCreated)
				_, _ = w.Write([]byte(fnBody))
			})}
			t.Cleanup(func() { srv.Close() })
			_ = srv.Serve(ln)
		}()
		c.sleep = func(ctx context.Context, d time.Duration) error {
			select {
			case <-refusedOnce:
			default:
				close(refusedOnce)
			}
			return retry.Sleep(ctx, d)
		}
		if _, err := c.CreateFunction(context.Background(), fnObj()); err != nil {
			t.Fatalf("create while the server starts: %v", err)
		}
		if creates.Load() != 1 {
			t.Fatalf("%d creates arrived, want 1", creates.Load())
		}
	})
}

// Errors that waiting does not mend end the call at once.
func TestPermanentTransportErrorsNotRetried(t *testing.T) {
	tlsSrv := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(tlsSrv.Close)
	plain := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(plain.Close)
	slow := Retry{Budget: time.Minute, Initial: 5 * time.Second, Max: 5 * time.Second}
	for _, tc := range []struct{ name, endpoint string }{
		{"certificate of an unknown authority", tlsSrv.URL},
		{"https to a server speaking http", strings.Replace(plain.URL, "http://", "https://", 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(tc.endpoint, "tok", WithRetry(slow))
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if _, err := c.GetFunction(context.Background(), "ns", "hello"); err == nil {
				t.Fatal("no error")
			}
			if took := time.Since(start); took > 2*time.Second {
				t.Fatalf("took %s: retried an error no wait mends", took)
			}
		})
	}
}

func TestNewRejectsTokensNoHeaderCarries(t *testing.T) {
	for _, tok := range []string{"abc\n", "a\rb", "a\x00b", "a\x7fb"} {
		if _, err := New("http://127.0.0.1:1", tok); err == nil || !strings.Contains(err.Error(), "control character") {
			t.Errorf("token %q: %v", tok, err)
		}
	}
	if _, err := New("http://127.0.0.1:1", "with\ttab and spaces"); err != nil {
		t.Errorf("a token with a tab and spaces (a header may carry them): %v", err)
	}
}
