package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Keys is a set of signing keys for tests and the JWKS that publishes their
// public halves.
type testKeys struct {
	rsa    *rsa.PrivateKey
	ec     *ecdsa.PrivateKey
	other  *rsa.PrivateKey // not published
	secret []byte
}

func newTestKeys(t testing.TB) *testKeys {
	t.Helper()
	r, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	o, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	e, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &testKeys{rsa: r, ec: e, other: o, secret: []byte("0123456789abcdef0123456789abcdef")}
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func (k *testKeys) jwks() []byte {
	pad := func(b []byte, n int) []byte { return append(make([]byte, n-len(b)), b...) }
	doc := map[string]any{"keys": []map[string]any{
		{"kty": "RSA", "kid": "rsa-1", "alg": "RS256", "use": "sig",
			"n": b64(k.rsa.N.Bytes()), "e": b64(big.NewInt(int64(k.rsa.E)).Bytes())},
		{"kty": "EC", "kid": "ec-1", "alg": "ES256", "use": "sig", "crv": "P-256",
			"x": b64(pad(k.ec.X.Bytes(), 32)), "y": b64(pad(k.ec.Y.Bytes(), 32))},
	}}
	b, _ := json.Marshal(doc)
	return b
}

func sign(t testing.TB, method jwt.SigningMethod, kid string, key any, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func claims(sub string, extra ...any) jwt.MapClaims {
	c := jwt.MapClaims{"sub": sub, "iss": "https://issuer.test", "aud": "sless", "exp": time.Now().Add(time.Hour).Unix()}
	for i := 0; i+1 < len(extra); i += 2 {
		c[extra[i].(string)] = extra[i+1]
	}
	return c
}

func TestVerify(t *testing.T) {
	k := newTestKeys(t)
	file := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(file, k.jwks(), 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := New(context.Background(), Config{
		HS256Secret: k.secret, JWKSFile: file, Issuer: "https://issuer.test", Audiences: []string{"sless"},
	})
	if err != nil {
		t.Fatal(err)
	}
	alice := v.NamespaceFor("alice@example.com")
	none := b64([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + b64([]byte(`{"sub":"alice@example.com","exp":9999999999,"iss":"https://issuer.test","aud":"sless"}`)) + "."
	// An HS256 token whose secret is the RSA public key: the algorithm
	// confusion attack, which must fail because HS256 takes only the secret.
	pubPEMish := k.rsa.PublicKey.N.Bytes()
	past := time.Now().Add(-time.Hour).Unix()
	future := time.Now().Add(time.Hour).Unix()

	tests := []struct {
		name   string
		token  string
		want   *Identity
		reason string
	}{
		{"hs256", sign(t, jwt.SigningMethodHS256, "", k.secret, claims("alice@example.com")),
			&Identity{Subject: "alice@example.com", Namespace: alice}, ""},
		{"rs256 with kid", sign(t, jwt.SigningMethodRS256, "rsa-1", k.rsa, claims("alice@example.com")),
			&Identity{Subject: "alice@example.com", Namespace: alice}, ""},
		{"rs256 without kid tries every key", sign(t, jwt.SigningMethodRS256, "", k.rsa, claims("alice@example.com")),
			&Identity{Subject: "alice@example.com", Namespace: alice}, ""},
		{"es256", sign(t, jwt.SigningMethodES256, "ec-1", k.ec, claims("bob")),
			&Identity{Subject: "bob", Namespace: v.NamespaceFor("bob")}, ""},
		{"admin claim", sign(t, jwt.SigningMethodHS256, "", k.secret, claims("root", "sless.dev/admin", true)),
			&Identity{Subject: "root", Namespace: v.NamespaceFor("root"), Admin: true}, ""},
		{"namespace claim", sign(t, jwt.SigningMethodHS256, "", k.secret, claims("carol", "sless.dev/namespace", "team-a")),
			&Identity{Subject: "carol", Namespace: "team-a"}, ""},
		{"audience list", sign(t, jwt.SigningMethodHS256, "", k.secret, claims("alice@example.com", "aud", []string{"other", "sless"})),
			&Identity{Subject: "alice@example.com", Namespace: alice}, ""},

		{"alg none", none, nil, ReasonBadAlgorithm},
		{"hs512 not accepted", sign(t, jwt.SigningMethodHS512, "", append(k.secret, k.secret...), claims("a")), nil, ReasonBadAlgorithm},
		{"hs256 keyed with the public key", sign(t, jwt.SigningMethodHS256, "rsa-1", pubPEMish, claims("a")), nil, ReasonBadSignature},
		{"unknown kid", sign(t, jwt.SigningMethodRS256, "rsa-9", k.other, claims("a")), nil, ReasonUnknownKey},
		{"unpublished key without kid", sign(t, jwt.SigningMethodRS256, "", k.other, claims("a")), nil, ReasonBadSignature},
		{"right kid wrong key", sign(t, jwt.SigningMethodRS256, "rsa-1", k.other, claims("a")), nil, ReasonBadSignature},
		{"rs256 under the ec key id", sign(t, jwt.SigningMethodRS256, "ec-1", k.rsa, claims("a")), nil, ReasonUnknownKey},
		{"forged hs256", sign(t, jwt.SigningMethodHS256, "", []byte("not-the-secret-not-the-secret-xx"), claims("a")), nil, ReasonBadSignature},
		{"expired", sign(t, jwt.SigningMethodHS256, "", k.secret, claims("a", "exp", past)), nil, ReasonExpired},
		{"no exp", sign(t, jwt.SigningMethodHS256, "", k.secret, jwt.MapClaims{"sub": "a", "iss": "https://issuer.test", "aud": "sless"}), nil, ReasonMissingClaim},
		{"not yet valid", sign(t, jwt.SigningMethodHS256, "", k.secret, claims("a", "nbf", future)), nil, ReasonNotYetValid},
		{"wrong issuer", sign(t, jwt.SigningMethodHS256, "", k.secret, claims("a", "iss", "https://evil.test")), nil, ReasonWrongIssuer},
		{"wrong audience", sign(t, jwt.SigningMethodHS256, "", k.secret, claims("a", "aud", "other")), nil, ReasonWrongAudience},
		{"no subject", sign(t, jwt.SigningMethodHS256, "", k.secret, claims("")), nil, ReasonMissingClaim},
		{"admin claim not a bool", sign(t, jwt.SigningMethodHS256, "", k.secret, claims("a", "sless.dev/admin", "true")), nil, ReasonInvalidClaim},
		{"namespace claim not a label", sign(t, jwt.SigningMethodHS256, "", k.secret, claims("a", "sless.dev/namespace", "Team_A")), nil, ReasonInvalidClaim},
		// A trigger's credential (pkg/reconciler/trigger) is signed with the
		// same secret; it is not a caller's token.
		{"trigger credential", sign(t, jwt.SigningMethodHS256, "", k.secret, claims("system:trigger:team-a:nightly",
			"sless.dev/namespace", "team-a", "sless.dev/trigger", "nightly", "sless.dev/trigger-type", "cron",
			"sless.dev/trigger-uid", "0b7c", "sless.dev/function", "report")), nil, ReasonInvalidClaim},
		{"namespace claim of the system", sign(t, jwt.SigningMethodHS256, "", k.secret, claims("a", "sless.dev/namespace", "kube-system")), nil, ReasonInvalidClaim},
		{"namespace claim under kube-", sign(t, jwt.SigningMethodHS256, "", k.secret, claims("a", "sless.dev/namespace", "kube-public")), nil, ReasonInvalidClaim},
		{"garbage", "not.a.jwt", nil, ReasonMalformed},
		{"tampered payload", tamper(sign(t, jwt.SigningMethodHS256, "", k.secret, claims("a"))), nil, ReasonBadSignature},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Header.Set("Authorization", "Bearer "+tc.token)
			id, err := v.Authenticate(r)
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("Authenticate: %v", err)
				}
				if *id != *tc.want {
					t.Fatalf("identity = %+v, want %+v", *id, *tc.want)
				}
				return
			}
			var ae *Error
			if err == nil || !asError(err, &ae) {
				t.Fatalf("Authenticate = %+v, %v; want an *Error %s", id, err, tc.reason)
			}
			if ae.Reason != tc.reason {
				t.Fatalf("reason = %s (%s), want %s", ae.Reason, ae.Message, tc.reason)
			}
		})
	}
}

func tamper(tok string) string {
	parts := strings.Split(tok, ".")
	parts[1] = b64([]byte(`{"sub":"admin","iss":"https://issuer.test","aud":"sless","exp":9999999999,"sless.dev/admin":true}`))
	return strings.Join(parts, ".")
}

func asError(err error, target **Error) bool {
	e, ok := err.(*Error)
	if ok {
		*target = e
	}
	return ok
}

func TestAuthorizationHeader(t *testing.T) {
	v, err := New(context.Background(), Config{HS256Secret: []byte("0123456789abcdef0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"", "Basic Zm9vOmJhcg==", "Bearer", "Bearer   ", "token"} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if h != "" {
			r.Header.Set("Authorization", h)
		}
		if _, err := v.Authenticate(r); err == nil {
			t.Errorf("header %q authenticated", h)
		}
	}
	// A good token beside another Authorization header, in either order.
	good, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "a", "exp": time.Now().Add(time.Hour).Unix()}).
		SignedString([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	for _, pair := range [][2]string{{"Bearer " + good, "Bearer forged"}, {"Basic Zm9vOmJhcg==", "Bearer " + good}, {"Bearer " + good, "Bearer " + good}} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Add("Authorization", pair[0])
		r.Header.Add("Authorization", pair[1])
		var ae *Error
		if _, err := v.Authenticate(r); !asError(err, &ae) || ae.Reason != ReasonMalformed {
			t.Errorf("two Authorization headers %q: %v, want %s", pair, err, ReasonMalformed)
		}
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Authorization", "Bearer "+good)
	if _, err := v.Authenticate(r); err != nil {
		t.Fatalf("one good header: %v", err)
	}
}

func TestDevToken(t *testing.T) {
	v, err := New(context.Background(), Config{DevToken: "dev-token-0123456789", DevIdentity: Identity{Namespace: "default", Admin: true}})
	if err != nil {
		t.Fatal(err)
	}
	id, err := v.Verify(context.Background(), "dev-token-0123456789")
	if err != nil || *id != (Identity{Subject: "dev", Namespace: "default", Admin: true}) {
		t.Fatalf("dev token = %+v, %v", id, err)
	}
	if _, err := v.Verify(context.Background(), "dev-token-0123456780"); err == nil {
		t.Fatal("a near miss of the dev token authenticated")
	}
	// Off by default: without DevToken no static string is accepted.
	if _, err := New(context.Background(), Config{}); err == nil {
		t.Fatal("a verifier with no keys and no dev token was made")
	}
}

// A newcomer's first 401 says where the dev token is, when one is set;
// a refused JWT says nothing of it.
func TestDevTokenHint(t *testing.T) {
	ctx := context.Background()
	hint := "in /home/ada/.data/dev-token"
	secret := make([]byte, 32)
	withJWT, err := New(ctx, Config{HS256Secret: secret, DevToken: "dev-token-0123456789", DevTokenHint: hint})
	if err != nil {
		t.Fatal(err)
	}
	devOnly, err := New(ctx, Config{DevToken: "dev-token-0123456789", DevTokenHint: hint})
	if err != nil {
		t.Fatal(err)
	}
	noDev, err := New(ctx, Config{HS256Secret: secret, DevTokenHint: hint})
	if err != nil {
		t.Fatal(err)
	}
	expired := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "ada", "exp": time.Now().Add(-time.Hour).Unix()})
	signed, err := expired.SignedString(secret)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		v      *Verifier
		header string
		reason string
		hinted bool
	}{
		{"no header", devOnly, "", ReasonMissingToken, true},
		{"not bearer", devOnly, "Basic YWRhOnB3", ReasonMalformed, true},
		{"wrong string, dev token only", devOnly, "Bearer not-the-token", ReasonMalformed, true},
		{"not a JWT", withJWT, "Bearer not-a-jwt", ReasonMalformed, true},
		{"an expired JWT is not about the dev token", withJWT, "Bearer " + signed, ReasonExpired, false},
		{"no dev token configured", noDev, "Bearer not-a-jwt", ReasonMalformed, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			if tc.header != "" {
				r.Header.Set("Authorization", tc.header)
			}
			_, err := tc.v.Authenticate(r)
			var ae *Error
			if !errors.As(err, &ae) || ae.Reason != tc.reason {
				t.Fatalf("got %v, want reason %s", err, tc.reason)
			}
			if got := strings.Contains(ae.Message, hint); got != tc.hinted {
				t.Fatalf("message %q: hint shown %v, want %v", ae.Message, got, tc.hinted)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	for name, cfg := range map[string]Config{
		"short secret":    {HS256Secret: []byte("short")},
		"short dev token": {DevToken: "abc"},
		"missing file":    {JWKSFile: "/nonexistent/jwks.json"},
		"file and url":    {JWKSFile: "x", JWKSURL: "http://127.0.0.1:1/"},
		"bad prefix":      {HS256Secret: make([]byte, 32), NamespacePrefix: "Bad_"},
	} {
		if _, err := New(context.Background(), cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestNamespaceFor(t *testing.T) {
	seen := map[string]string{}
	for _, sub := range []string{
		"alice", "Alice", "a.b", "a-b", "", "---", "auth0|5f1c2d", "user@example.com",
		strings.Repeat("verylongsubject", 10), "ünïcødé", "1234567890",
	} {
		ns := NamespaceFor(DefaultNamespacePrefix, sub)
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			t.Errorf("NamespaceFor(%q) = %q: %v", sub, ns, msgs)
		}
		if again := NamespaceFor(DefaultNamespacePrefix, sub); again != ns {
			t.Errorf("NamespaceFor(%q) is not stable: %q then %q", sub, ns, again)
		}
		if other, dup := seen[ns]; dup {
			t.Errorf("%q and %q both map to %q", other, sub, ns)
		}
		seen[ns] = sub
	}
	// Pinned: a change here moves every tenant's namespace.
	if got := NamespaceFor("tenant-", "alice@example.com"); got != "tenant-alice-example-com-ff8d9819fc" {
		t.Errorf("NamespaceFor(alice@example.com) = %q", got)
	}
}

// TestJWKSURL serves the key set over HTTP, then rotates it: a token signed
// with the new key verifies once the verifier has refetched on the unknown kid.
func TestJWKSURL(t *testing.T) {
	k := newTestKeys(t)
	var mu sync.Mutex
	doc := k.jwks()
	fetches := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		fetches++
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(doc)
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	v, err := New(ctx, Config{JWKSURL: srv.URL, Audiences: []string{"sless"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(ctx, sign(t, jwt.SigningMethodES256, "ec-1", k.ec, claims("alice"))); err != nil {
		t.Fatalf("verify with fetched key: %v", err)
	}
	if _, err := v.Verify(ctx, sign(t, jwt.SigningMethodHS256, "", k.secret, claims("alice"))); err == nil {
		t.Fatal("HS256 accepted without a secret configured")
	}
	// Rotate: publish "rsa-2" (the other key).
	mu.Lock()
	var set map[string][]map[string]any
	_ = json.Unmarshal(doc, &set)
	set["keys"] = append(set["keys"], map[string]any{"kty": "RSA", "kid": "rsa-2", "alg": "RS256", "use": "sig",
		"n": b64(k.other.N.Bytes()), "e": b64(big.NewInt(int64(k.other.E)).Bytes())})
	doc, _ = json.Marshal(set)
	mu.Unlock()
	if _, err := v.Verify(ctx, sign(t, jwt.SigningMethodRS256, "rsa-2", k.other, claims("alice"))); err != nil {
		t.Fatalf("verify with rotated key: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if fetches < 2 {
		t.Fatalf("the key set was fetched %d times, want a refetch on the unknown kid", fetches)
	}
}

// An identity provider that takes more than a second to serve its key set
// still gets a rotated key in: the refetch on an unknown key id has the
// whole fetch timeout, not the rate limiter's wait.
func TestJWKSURLSlowRefetch(t *testing.T) {
	k := newTestKeys(t)
	var mu sync.Mutex
	doc := k.jwks()
	fetches := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		fetches++
		slow := fetches > 1
		body := doc
		mu.Unlock()
		if slow {
			time.Sleep(1500 * time.Millisecond) // the identity provider's own pace
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	v, err := New(ctx, Config{JWKSURL: srv.URL, Audiences: []string{"sless"}})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	var set map[string][]map[string]any
	_ = json.Unmarshal(doc, &set)
	set["keys"] = append(set["keys"], map[string]any{"kty": "RSA", "kid": "rsa-2", "alg": "RS256", "use": "sig",
		"n": b64(k.other.N.Bytes()), "e": b64(big.NewInt(int64(k.other.E)).Bytes())})
	doc, _ = json.Marshal(set)
	mu.Unlock()
	if _, err := v.Verify(ctx, sign(t, jwt.SigningMethodRS256, "rsa-2", k.other, claims("alice"))); err != nil {
		t.Fatalf("verify with a key fetched in 1.5 s: %v", err)
	}
}

// TestJWKSFileReload replaces the key file and expects the new key to verify.
func TestJWKSFileReload(t *testing.T) {
	k := newTestKeys(t)
	file := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(file, []byte(`{"keys":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := New(context.Background(), Config{JWKSFile: file})
	if err != nil {
		t.Fatal(err)
	}
	tok := sign(t, jwt.SigningMethodRS256, "rsa-1", k.rsa, claims("alice"))
	if _, err := v.Verify(context.Background(), tok); err == nil {
		t.Fatal("verified before the key was published")
	}
	if err := os.WriteFile(file, k.jwks(), 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err = v.Verify(context.Background(), tok); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new key file was not picked up: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// signHeader is sign with extra JOSE header parameters.
func signHeader(t testing.TB, method jwt.SigningMethod, kid string, key any, header map[string]any, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	for k, v := range header {
		tok.Header[k] = v
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCriticalHeader: a token that marks a header parameter critical (crit)
// is refused whatever its algorithm and however good its signature: sless
// understands no JWS extension, and RFC 7515 §4.1.11 makes such a token
// invalid. golang-jwt ignores crit, so before this every row verified.
func TestCriticalHeader(t *testing.T) {
	k := newTestKeys(t)
	file := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(file, k.jwks(), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(k.jwks())
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fromFile, err := New(ctx, Config{HS256Secret: k.secret, JWKSFile: file, Issuer: "https://issuer.test", Audiences: []string{"sless"}})
	if err != nil {
		t.Fatal(err)
	}
	fromURL, err := New(ctx, Config{JWKSURL: srv.URL, Issuer: "https://issuer.test", Audiences: []string{"sless"}})
	if err != nil {
		t.Fatal(err)
	}
	ext := map[string]any{"crit": []string{"https://example.com/must-check"}, "https://example.com/must-check": true}
	tests := []struct {
		name   string
		v      *Verifier
		token  string
		reason string // "" accepts
	}{
		{"hs256 with an unknown critical extension", fromFile, signHeader(t, jwt.SigningMethodHS256, "", k.secret, ext, claims("a")), ReasonCritical},
		{"rs256 from a JWKS file", fromFile, signHeader(t, jwt.SigningMethodRS256, "rsa-1", k.rsa, ext, claims("a")), ReasonCritical},
		{"es256 from a JWKS file", fromFile, signHeader(t, jwt.SigningMethodES256, "ec-1", k.ec, ext, claims("a")), ReasonCritical},
		{"rs256 from a JWKS URL", fromURL, signHeader(t, jwt.SigningMethodRS256, "rsa-1", k.rsa, ext, claims("a")), ReasonCritical},
		{"es256 from a JWKS URL", fromURL, signHeader(t, jwt.SigningMethodES256, "ec-1", k.ec, ext, claims("a")), ReasonCritical},
		{"b64 of RFC 7797", fromFile, signHeader(t, jwt.SigningMethodHS256, "", k.secret, map[string]any{"crit": []string{"b64"}, "b64": false}, claims("a")), ReasonCritical},
		{"crit naming a parameter the header lacks", fromFile, signHeader(t, jwt.SigningMethodHS256, "", k.secret, map[string]any{"crit": []string{"exp"}}, claims("a")), ReasonCritical},
		{"crit an empty list", fromFile, signHeader(t, jwt.SigningMethodHS256, "", k.secret, map[string]any{"crit": []string{}}, claims("a")), ReasonCritical},
		{"crit a string", fromFile, signHeader(t, jwt.SigningMethodHS256, "", k.secret, map[string]any{"crit": "x", "x": 1}, claims("a")), ReasonCritical},
		{"crit a list of numbers", fromFile, signHeader(t, jwt.SigningMethodHS256, "", k.secret, map[string]any{"crit": []int{1}}, claims("a")), ReasonCritical},
		{"crit null", fromFile, signHeader(t, jwt.SigningMethodHS256, "", k.secret, map[string]any{"crit": nil}, claims("a")), ReasonCritical},
		{"unknown critical extension with an unknown key", fromURL, signHeader(t, jwt.SigningMethodRS256, "rsa-9", k.other, ext, claims("a")), ReasonCritical},
		// An unknown parameter that is not marked critical is ignored (§4).
		{"unknown parameter not marked critical", fromFile, signHeader(t, jwt.SigningMethodHS256, "", k.secret, map[string]any{"https://example.com/hint": 1}, claims("a")), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id, err := tc.v.Verify(ctx, tc.token)
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				return
			}
			var ae *Error
			if !asError(err, &ae) || ae.Reason != tc.reason {
				t.Fatalf("Verify = %+v, %v; want a 401 %s", id, err, tc.reason)
			}
			if !strings.Contains(ae.Message, "crit") {
				t.Fatalf("message %q does not say the crit header is why", ae.Message)
			}
		})
	}
}

// TestClaimErrors: a token refused for a registered claim is told which
// one, and no other. Before, a token without iss or aud was refused as
// lacking "a required claim (exp)", and a claim of the wrong type only as
// "claims are invalid".
func TestClaimErrors(t *testing.T) {
	k := newTestKeys(t)
	strict, err := New(context.Background(), Config{HS256Secret: k.secret, Issuer: "https://issuer.test", Audiences: []string{"sless"}, Leeway: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	lax, err := New(context.Background(), Config{HS256Secret: k.secret})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	hour, past, soon := now.Add(time.Hour).Unix(), now.Add(-time.Hour).Unix(), now.Add(-10*time.Second).Unix()
	without := func(names ...string) jwt.MapClaims {
		c := claims("alice")
		for _, n := range names {
			delete(c, n)
		}
		return c
	}
	with := func(kv ...any) jwt.MapClaims { return claims("alice", kv...) }
	tests := []struct {
		name   string
		v      *Verifier
		claims jwt.MapClaims
		reason string // "" accepts
		claim  string // the registered claim the message names
	}{
		{"missing iss", strict, without("iss"), ReasonMissingClaim, "iss"},
		{"empty iss", strict, with("iss", ""), ReasonMissingClaim, "iss"},
		{"wrong iss", strict, with("iss", "https://evil.test"), ReasonWrongIssuer, "iss"},
		{"iss a number", strict, with("iss", 7), ReasonInvalidClaim, "iss"},
		{"missing exp", strict, without("exp"), ReasonMissingClaim, "exp"},
		{"exp a string", strict, with("exp", "tomorrow"), ReasonInvalidClaim, "exp"},
		{"expired", strict, with("exp", past), ReasonExpired, "exp"},
		{"expired within the leeway", strict, with("exp", soon), "", ""},
		{"nbf in the future", strict, with("nbf", hour), ReasonNotYetValid, "nbf"},
		{"nbf a string", strict, with("nbf", "now"), ReasonInvalidClaim, "nbf"},
		{"iat in the future", strict, with("iat", hour), ReasonIssuedInFuture, "iat"},
		{"iat in the future within the leeway", strict, with("iat", now.Add(10*time.Second).Unix()), "", ""},
		{"iat past the leeway, none allowed", lax, with("iat", now.Add(10*time.Second).Unix()), ReasonIssuedInFuture, "iat"},
		{"iat in the past", strict, with("iat", past), "", ""},
		{"iat a string", strict, with("iat", "now"), ReasonInvalidClaim, "iat"},
		{"missing aud", strict, without("aud"), ReasonMissingClaim, "aud"},
		{"empty aud list", strict, with("aud", []string{}), ReasonMissingClaim, "aud"},
		{"wrong aud", strict, with("aud", "other"), ReasonWrongAudience, "aud"},
		{"wrong aud list", strict, with("aud", []string{"a", "b"}), ReasonWrongAudience, "aud"},
		{"aud a number", strict, with("aud", 1), ReasonInvalidClaim, "aud"},
		{"missing sub", strict, without("sub"), ReasonMissingClaim, "sub"},
		{"sub a number", strict, with("sub", 42), ReasonInvalidClaim, "sub"},
		// Several faults: the first in the order exp, nbf, iat, iss, aud.
		{"iat in the future, missing iss", strict, jwt.MapClaims{"sub": "alice", "exp": hour, "iat": hour}, ReasonIssuedInFuture, "iat"},
		{"missing iss and aud, expired", strict, jwt.MapClaims{"sub": "alice", "exp": past}, ReasonExpired, "exp"},
		{"missing iss and aud", strict, jwt.MapClaims{"sub": "alice", "exp": hour}, ReasonMissingClaim, "iss"},
		{"missing iss and aud, none required", lax, jwt.MapClaims{"sub": "alice", "exp": hour}, "", ""},
		{"missing exp, none required but exp", lax, jwt.MapClaims{"sub": "alice"}, ReasonMissingClaim, "exp"},
	}
	registered := []string{"exp", "nbf", "iat", "iss", "aud", "sub"}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id, err := tc.v.Verify(context.Background(), sign(t, jwt.SigningMethodHS256, "", k.secret, tc.claims))
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				return
			}
			var ae *Error
			if !asError(err, &ae) || ae.Reason != tc.reason {
				t.Fatalf("Verify = %+v, %v; want a 401 %s", id, err, tc.reason)
			}
			for _, c := range registered {
				named := regexp.MustCompile(`\b` + c + `\b`).MatchString(ae.Message)
				if named != (c == tc.claim) {
					t.Fatalf("message %q: names %s %v, want only %s named", ae.Message, c, named, tc.claim)
				}
			}
		})
	}
}
