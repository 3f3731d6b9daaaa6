package triggertoken_test

import (
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/auth"
	"github.com/sless-dev/sless/pkg/auth/triggertoken"
)

var secret = []byte("0123456789abcdef0123456789abcdef-trigger-tokens")

func TestTriggerTokens(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(now)
	toks := &triggertoken.HS256{Secret: secret, Issuer: "sless", Audience: "sless-api", Clock: clk}
	tr := &slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "tenant-a", UID: "u1"},
		Spec: slessv1alpha1.TriggerSpec{Function: "report", Type: slessv1alpha1.TriggerTypeCron}}
	good, exp, err := toks.IssueTriggerToken(tr)
	if err != nil {
		t.Fatal(err)
	}
	if !exp.Equal(now.Add(triggertoken.DefaultLifetime)) {
		t.Errorf("expires %v", exp)
	}
	c, err := toks.VerifyTriggerToken(good)
	if err != nil || c != (triggertoken.Claims{Namespace: "tenant-a", Trigger: "nightly", Function: "report", UID: "u1", Type: "cron"}) {
		t.Fatalf("claims %+v, %v", c, err)
	}
	sign := func(method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
		s, err := jwt.NewWithClaims(method, claims).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	base := func(mut func(jwt.MapClaims)) jwt.MapClaims {
		m := jwt.MapClaims{"sub": "system:trigger:tenant-a:nightly", "iss": "sless", "aud": "sless-api", "exp": now.Add(time.Hour).Unix(),
			auth.DefaultNamespaceClaim: "tenant-a", auth.ClaimTrigger: "nightly", auth.ClaimTriggerType: "cron", auth.ClaimTriggerUID: "u1", auth.ClaimFunction: "report"}
		if mut != nil {
			mut(m)
		}
		return m
	}
	for _, tc := range []struct {
		name, token, want string
	}{
		{"alg none", sign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, base(nil)), "signing method none is invalid"},
		{"other secret", sign(jwt.SigningMethodHS256, []byte(strings.Repeat("x", 40)), base(nil)), "signature is invalid"},
		{"expired", sign(jwt.SigningMethodHS256, secret, base(func(m jwt.MapClaims) { m["exp"] = now.Add(-time.Minute).Unix() })), "expired"},
		{"no exp", sign(jwt.SigningMethodHS256, secret, base(func(m jwt.MapClaims) { delete(m, "exp") })), "exp claim is required"},
		{"wrong issuer", sign(jwt.SigningMethodHS256, secret, base(func(m jwt.MapClaims) { m["iss"] = "evil" })), "issuer"},
		{"wrong audience", sign(jwt.SigningMethodHS256, secret, base(func(m jwt.MapClaims) { m["aud"] = "other" })), "audience"},
		{"a user's API token", sign(jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "alice", "iss": "sless", "aud": "sless-api", "exp": now.Add(time.Hour).Unix()}), "not a trigger credential"},
		{"subject of another trigger", sign(jwt.SigningMethodHS256, secret, base(func(m jwt.MapClaims) { m["sub"] = "system:trigger:tenant-a:other" })), "not a trigger credential"},
		{"garbage", "not.a.jwt", "trigger credential"},
		{"critical extension", signCrit(t, secret, base(nil)), "crit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := toks.VerifyTriggerToken(tc.token)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := (&triggertoken.HS256{}).VerifyTriggerToken(sign(jwt.SigningMethodHS256, []byte{}, base(nil))); err == nil {
		t.Error("a verifier without a secret accepted a token")
	}
	if _, _, err := (&triggertoken.HS256{Secret: []byte("short")}).IssueTriggerToken(tr); err == nil {
		t.Error("issued a token with a short secret")
	}
}

// signCrit signs claims with a header that marks an extension critical.
func signCrit(t *testing.T, key []byte, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
	tok.Header["crit"] = []string{"https://example.com/ext"}
	tok.Header["https://example.com/ext"] = true
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
