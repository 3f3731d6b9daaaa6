package frontdoor_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/sless-dev/sless/pkg/api"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/auth"
	"github.com/sless-dev/sless/pkg/frontdoor"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/local"
	"github.com/sless-dev/sless/pkg/local/apiserver"
	"github.com/sless-dev/sless/pkg/local/asynccalls"
	"github.com/sless-dev/sless/pkg/local/blobs"
)

// TestDoorAsyncCalls: through the front door an asynchronous call is
// accepted with an absolute Location, and its record and the list of calls
// are read under the API's authentication and tenancy.
func TestDoorAsyncCalls(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	scheme := runtime.NewScheme()
	if err := slessv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	store, err := apiserver.Open(filepath.Join(t.TempDir(), "sless.db"), scheme)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	bl, err := blobs.New(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	calls, err := asynccalls.Open(filepath.Join(t.TempDir(), "async.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer calls.Close()
	secret := []byte("sless-async-door-secret-0123456789abcdef")
	verifier, err := auth.New(ctx, auth.Config{HS256Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	token := func(ns string) string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "alice",
			"exp": time.Now().Add(time.Hour).Unix(), auth.DefaultNamespaceClaim: ns}).SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	fn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ran") }))
	defer fn.Close()
	addr, _ := url.Parse(fn.URL)
	every := invoke.ResolverFunc(func(context.Context, string, string) (invoke.Target, error) {
		return invoke.Target{Address: addr, Ready: true}, nil
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	door, err := frontdoor.New(ctx, frontdoor.Options{
		API:             api.Options{Objects: store, Auth: verifier, Blobs: bl, Bucket: local.Bucket},
		Auth:            verifier,
		Proxy:           invoke.Options{Resolver: every, Services: every},
		Async:           &frontdoor.Async{Store: calls, Keys: calls},
		APIBaseURL:      base,
		IdleConnTimeout: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer door.Close()
	go func() { _ = door.Serve(ctx, ln) }()
	do := func(method, path, tok string, header ...string) (int, http.Header, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	a, b := token("team-a"), token("team-b")
	code, h, body := do("POST", "/fn/team-a/f", a, "Prefer", "respond-async")
	id := h.Get("X-Request-Id")
	if code != http.StatusAccepted || h.Get("Location") != base+"/v1/namespaces/team-a/functions/f/invocations/"+id {
		t.Fatalf("submit: %d %v %s", code, h, body)
	}
	record := "/v1/namespaces/team-a/functions/f/invocations/" + id
	if code, _, body := do("GET", record+"?wait=10s", a); code != 200 || !strings.Contains(body, `"state":"succeeded"`) || !strings.Contains(body, `"body":"ran"`) {
		t.Fatalf("record: %d %s", code, body)
	}
	list := "/v1/namespaces/team-a/functions/f/invocations?mode=async"
	if code, _, body := do("GET", list, a); code != 200 || !strings.Contains(body, id) {
		t.Fatalf("list: %d %s", code, body)
	}
	for _, c := range []struct {
		name, path, tok string
		code            int
	}{
		{"record without a token", record, "", 401},
		{"record of another tenant", record, b, 403},
		{"list of another tenant", list, b, 403},
		{"record of a bad name", "/v1/namespaces/team-a/functions/Not_A_Name/invocations/x", a, 400},
		{"unknown call", "/v1/namespaces/team-a/functions/f/invocations/nope", a, 404},
		{"listing without records", "/v1/namespaces/team-a/functions/f/invocations", a, 501},
		{"signing key without a token", "/v1/namespaces/team-a/callbacks/signing-key", "", 401},
		{"signing key of another tenant", "/v1/namespaces/team-a/callbacks/signing-key", b, 403},
		{"signing key with a query", "/v1/namespaces/team-a/callbacks/signing-key?x=1", a, 400},
	} {
		if code, _, body := do("GET", c.path, c.tok); code != c.code {
			t.Errorf("%s: %d %s, want %d", c.name, code, body, c.code)
		}
	}
	// Each tenant reads its own signing key, the same at every read.
	keyOf := func(tok, ns string) string {
		t.Helper()
		code, h, body := do("GET", "/v1/namespaces/"+ns+"/callbacks/signing-key", tok)
		var v struct{ Namespace, Key, Header string }
		if code != 200 || json.Unmarshal([]byte(body), &v) != nil || v.Namespace != ns || !strings.HasPrefix(v.Key, "slcb_") ||
			v.Header != "Sless-Signature" || h.Get("Cache-Control") != "no-store" {
			t.Fatalf("signing key of %s: %d %s", ns, code, body)
		}
		return v.Key
	}
	if ka, kb := keyOf(a, "team-a"), keyOf(b, "team-b"); ka == kb || keyOf(a, "team-a") != ka {
		t.Errorf("keys: team-a %s, team-b %s", ka, kb)
	}
	// A callback to loopback is refused before anything is kept.
	if code, _, body := do("POST", "/fn/team-a/f", a, "Prefer", "respond-async", "X-Callback-Url", "http://127.0.0.1:9/done"); code != 400 ||
		!strings.Contains(body, "CallbackUrlRefused") || !strings.Contains(body, "loopback") {
		t.Errorf("callback to loopback: %d %s", code, body)
	}
	if code, _, body := do("GET", "/metrics", a); code != 200 || !strings.Contains(body, "sless_async_calls_accepted_total 1") {
		t.Errorf("/metrics: %d, accepted not counted", code)
	}
}
