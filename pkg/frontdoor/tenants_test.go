package frontdoor_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sless-dev/sless/pkg/adapter/kube"
	"github.com/sless-dev/sless/pkg/auth"
	"github.com/sless-dev/sless/pkg/frontdoor"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/test/testbed"
)

// TestMain stops the test apiserver the tests of this package start.
func TestMain(m *testing.M) { testbed.Main(m) }

// TestInvokeTenantNamespaces: on the invoke path, as on the REST API, a
// token's namespace claim makes its caller a tenant only of a namespace
// sless made or one with a tenant prefix; a private function anywhere else
// is a 403 unless the caller is an admin. Before, a token naming default
// (or sless-system) called the private functions there.
func TestInvokeTenantNamespaces(t *testing.T) {
	k := testbed.SharedKube(t)
	ctx := context.Background()
	suffix := k.Namespace(t)[len("t-"):]
	made, plain := "made-"+suffix, "plain-"+suffix
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: made, Labels: map[string]string{kube.TenantLabel: "true"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: plain}},
	} {
		if err := k.Client.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k.Client.Delete(context.Background(), ns) })
	}
	secret := []byte("sless-wiring-test-secret-0123456789abcdef")
	verifier, err := auth.New(ctx, auth.Config{HS256Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	fn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "called") }))
	defer fn.Close()
	addr, _ := url.Parse(fn.URL)
	tenants := &kube.Tenants{Client: k.Client, Prefixes: []string{"tenant-"}}
	proxy, err := invoke.NewProxy(invoke.Options{
		Authenticator: frontdoor.ProxyAuthenticator(verifier, tenants, slog.New(slog.DiscardHandler)),
		// Every function exists and is private.
		Resolver: invoke.ResolverFunc(func(ctx context.Context, ns, name string) (invoke.Target, error) {
			return invoke.Target{Address: addr, Ready: true}, nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(proxy)
	defer srv.Close()
	token := func(ns string, admin bool) string {
		c := jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(time.Hour).Unix(), auth.DefaultNamespaceClaim: ns}
		if admin {
			c[auth.DefaultAdminClaim] = true
		}
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, tc := range []struct {
		name  string
		claim string
		admin bool
		call  string // the function's namespace
		code  int
	}{
		{"default", "default", false, "default", http.StatusForbidden},
		{"sless-system", "sless-system", false, "sless-system", http.StatusForbidden},
		{"a namespace sless did not make", plain, false, plain, http.StatusForbidden},
		{"a namespace sless made", made, false, made, http.StatusOK},
		{"a prefixed namespace", "tenant-x-" + suffix, false, "tenant-x-" + suffix, http.StatusOK},
		{"another tenant's namespace", made, false, "tenant-x-" + suffix, http.StatusForbidden},
		{"an admin in default", "default", true, "default", http.StatusOK},
		{"an admin in a namespace sless did not make", "default", true, plain, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", srv.URL+"/fn/"+tc.call+"/f", nil)
			req.Header.Set("Authorization", "Bearer "+token(tc.claim, tc.admin))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.code {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.code, b)
			}
			if tc.code == http.StatusForbidden && resp.Header.Get(invoke.ErrorHeader) == "" {
				t.Fatalf("a 403 that is not the platform's: %s", b)
			}
		})
	}
}
