// Package triggertoken issues and verifies the credentials sless gives its
// triggers' runs (cron calls, queue consumers).
package triggertoken

import (
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"k8s.io/utils/clock"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/auth"
)

// HS256 issues and verifies trigger credentials as JWTs signed with the
// platform's HS256 secret, the one pkg/auth verifies API tokens with. The
// subject is "system:trigger:<namespace>:<name>"; the namespace claim pins the
// tenant; the trigger claims say which trigger, of which type and UID, for
// which function, so a credential is good for one function and one trigger
// type, and a trigger deleted and made again under the same name does not
// inherit the old one's credential.
type HS256 struct {
	Secret []byte
	// Issuer and Audience, when set, become iss and aud (set them as the
	// API's verifier expects).
	Issuer   string
	Audience string
	// Lifetime of a token; DefaultLifetime if zero.
	Lifetime time.Duration
	Clock    clock.PassiveClock
}

// DefaultLifetime of a trigger credential. A cluster's carrier renews it
// when a quarter of its life is left, and the Pods read it from the Secret
// on start.
const DefaultLifetime = 90 * 24 * time.Hour

// Subject of a trigger's credential.
func Subject(namespace, name string) string { return "system:trigger:" + namespace + ":" + name }

func (h *HS256) now() time.Time {
	if h.Clock == nil {
		return time.Now()
	}
	return h.Clock.Now()
}

// IssueTriggerToken implements adapter.TokenIssuer.
func (h *HS256) IssueTriggerToken(t *slessv1alpha1.Trigger) (string, time.Time, error) {
	if len(h.Secret) < 32 {
		return "", time.Time{}, errors.New("the HS256 secret must be at least 32 bytes")
	}
	life := h.Lifetime
	if life <= 0 {
		life = DefaultLifetime
	}
	now := h.now().Truncate(time.Second)
	exp := now.Add(life)
	claims := jwt.MapClaims{
		"sub":                      Subject(t.Namespace, t.Name),
		"iat":                      now.Unix(),
		"nbf":                      now.Add(-time.Minute).Unix(),
		"exp":                      exp.Unix(),
		auth.DefaultNamespaceClaim: t.Namespace,
		auth.ClaimTrigger:          t.Name,
		auth.ClaimTriggerType:      string(t.Spec.Type),
		auth.ClaimTriggerUID:       string(t.UID),
		auth.ClaimFunction:         t.Spec.Function,
	}
	if h.Issuer != "" {
		claims["iss"] = h.Issuer
	}
	if h.Audience != "" {
		claims["aud"] = h.Audience
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(h.Secret)
	return s, exp, err
}

// Claims is what a verified trigger credential says.
type Claims struct {
	Namespace, Trigger, Function, UID string
	Type                              slessv1alpha1.TriggerType
}

// VerifyTriggerToken checks a trigger credential: signature (HS256 only),
// exp and nbf, iss and aud when configured, and the trigger claims.
func (h *HS256) VerifyTriggerToken(token string) (Claims, error) {
	if len(h.Secret) < 32 {
		// Never verify against an empty or short key: anyone could sign.
		return Claims{}, errors.New("trigger credential: no signing secret is configured")
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(h.now),
	}
	if h.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(h.Issuer))
	}
	if h.Audience != "" {
		opts = append(opts, jwt.WithAudience(h.Audience))
	}
	claims := jwt.MapClaims{}
	tok, err := jwt.NewParser(opts...).ParseWithClaims(token, claims, func(*jwt.Token) (any, error) { return h.Secret, nil })
	if err != nil {
		return Claims{}, fmt.Errorf("trigger credential: %w", err)
	}
	if err := auth.CheckCritical(tok.Header); err != nil {
		return Claims{}, fmt.Errorf("trigger credential: %w", err)
	}
	str := func(k string) string { s, _ := claims[k].(string); return s }
	tc := Claims{
		Namespace: str(auth.DefaultNamespaceClaim), Trigger: str(auth.ClaimTrigger), Function: str(auth.ClaimFunction),
		UID: str(auth.ClaimTriggerUID), Type: slessv1alpha1.TriggerType(str(auth.ClaimTriggerType)),
	}
	if tc.Namespace == "" || tc.Trigger == "" || tc.Function == "" || tc.Type == "" || str("sub") != Subject(tc.Namespace, tc.Trigger) {
		return Claims{}, errors.New("trigger credential: not a trigger credential (trigger claims missing or inconsistent)")
	}
	return tc, nil
}
