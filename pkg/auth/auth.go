// Package auth verifies the bearer tokens of sless's REST API and invoke
// proxy and maps each caller to the one tenant namespace it may act in.
//
// Tokens are JWTs verified with github.com/golang-jwt/jwt/v5: HS256 with a
// shared secret, RS256 and ES256 with public keys from a JWKS document (a file
// re-read when it changes, or a URL fetched and refreshed by
// github.com/MicahParks/keyfunc/v3). exp is required; nbf, iat (not in the
// future), iss and aud are checked; alg "none", algorithms not configured, key ids not in the key
// set and any crit header (no extension is understood) are refused.
package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Identity is who a request acts as.
type Identity struct {
	// Subject is the token's sub claim ("dev" for the dev token).
	Subject string `json:"subject"`
	// Namespace is the tenant namespace the subject owns: from the namespace
	// claim when configured and present, else derived from Subject.
	Namespace string `json:"namespace"`
	// Admin may act in every namespace.
	Admin bool `json:"admin"`
}

// MayAct tells whether the identity may read and write objects in ns.
func (id *Identity) MayAct(ns string) bool {
	return id != nil && (id.Admin || id.Namespace == ns)
}

// Reasons of an *Error, stable machine codes the API puts in problem bodies.
const (
	ReasonMissingToken   = "MissingToken"
	ReasonMalformed      = "MalformedToken"
	ReasonBadAlgorithm   = "BadAlgorithm"
	ReasonUnknownKey     = "UnknownKey"
	ReasonBadSignature   = "BadSignature"
	ReasonExpired        = "Expired"
	ReasonNotYetValid    = "NotYetValid"
	ReasonIssuedInFuture = "IssuedInFuture"
	ReasonWrongIssuer    = "WrongIssuer"
	ReasonWrongAudience  = "WrongAudience"
	ReasonMissingClaim   = "MissingClaim"
	ReasonInvalidClaim   = "InvalidClaim"
	ReasonCritical       = "UnsupportedCritical"
)

// Error is why a request could not be authenticated: always an HTTP 401.
type Error struct {
	Reason  string
	Message string
}

func (e *Error) Error() string { return e.Reason + ": " + e.Message }

func fail(reason, format string, args ...any) *Error {
	return &Error{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Config says which tokens are accepted. At least one of HS256Secret,
// JWKSFile, JWKSURL or DevToken must be set.
type Config struct {
	// HS256Secret enables HS256 tokens signed with this secret (at least 32 bytes).
	HS256Secret []byte
	// JWKSFile is a JWK Set document on disk with RS256/ES256 public keys. It
	// is re-read when its modification time or size changes.
	JWKSFile string
	// JWKSURL is a JWK Set served over HTTP(S), fetched at start, refreshed
	// every JWKSRefresh and, at most once every 5 minutes, when a token names an
	// unknown key id.
	JWKSURL     string
	JWKSRefresh time.Duration
	// Issuer, when set, must equal the iss claim.
	Issuer string
	// Audiences, when set, must include one of the aud claim's values.
	Audiences []string
	// Leeway tolerated on exp, nbf and iat for clock skew.
	Leeway time.Duration
	// NamespaceClaim names a claim that, when present, states the tenant
	// namespace directly (a DNS-1123 label); otherwise the namespace is
	// derived from the subject with NamespaceFor.
	NamespaceClaim string
	// AdminClaim names a boolean claim that makes the caller an admin.
	AdminClaim string
	// NamespacePrefix starts every derived namespace; "tenant-" if empty.
	NamespacePrefix string
	// DevToken, when set, is a static bearer token that authenticates as
	// DevIdentity. For local use only: off unless configured.
	DevToken    string
	DevIdentity Identity
	// DevTokenHint says where a user finds the dev token (a file's path,
	// a flag); refusals of a missing or malformed token end with it.
	DevTokenHint string
}

// Claims of a trigger's credential beyond the registered ones and the
// namespace claim (DefaultNamespaceClaim, which pins its tenant).
// pkg/auth/triggertoken mints and checks such credentials (on trigger calls,
// in pkg/frontdoor); Verify refuses a token carrying any of them as a caller's.
const (
	ClaimTrigger     = "sless.dev/trigger"
	ClaimTriggerType = "sless.dev/trigger-type"
	ClaimTriggerUID  = "sless.dev/trigger-uid"
	ClaimFunction    = "sless.dev/function"
)

var triggerClaims = []string{ClaimTrigger, ClaimTriggerType, ClaimTriggerUID, ClaimFunction}

// Defaults of Config.
const (
	DefaultNamespaceClaim  = "sless.dev/namespace"
	DefaultAdminClaim      = "sless.dev/admin"
	DefaultNamespacePrefix = "tenant-"
	DefaultJWKSRefresh     = 15 * time.Minute
	minHS256Secret         = 32
	jwksFetchTimeout       = 10 * time.Second
)

// Verifier authenticates requests. It is safe for concurrent use.
type Verifier struct {
	cfg     Config
	methods []string
	remote  keyfunc.Keyfunc
	file    *fileKeys
	now     func() time.Time
}

// New makes a Verifier. With a JWKSURL it fetches the key set once and keeps
// refreshing it until ctx ends.
func New(ctx context.Context, cfg Config) (*Verifier, error) {
	if cfg.NamespaceClaim == "" {
		cfg.NamespaceClaim = DefaultNamespaceClaim
	}
	if cfg.AdminClaim == "" {
		cfg.AdminClaim = DefaultAdminClaim
	}
	if cfg.NamespacePrefix == "" {
		cfg.NamespacePrefix = DefaultNamespacePrefix
	}
	if msgs := validation.IsDNS1123Label(strings.TrimSuffix(cfg.NamespacePrefix, "-")); len(msgs) > 0 || len(cfg.NamespacePrefix) > 20 {
		return nil, fmt.Errorf("namespace prefix %q must be a DNS-1123 label of at most 20 characters, optionally ending in '-'", cfg.NamespacePrefix)
	}
	if cfg.JWKSRefresh <= 0 {
		cfg.JWKSRefresh = DefaultJWKSRefresh
	}
	v := &Verifier{cfg: cfg, now: time.Now}
	if len(cfg.HS256Secret) > 0 {
		if len(cfg.HS256Secret) < minHS256Secret {
			return nil, fmt.Errorf("the HS256 secret must be at least %d bytes", minHS256Secret)
		}
		v.methods = append(v.methods, jwt.SigningMethodHS256.Alg())
	}
	if cfg.JWKSFile != "" && cfg.JWKSURL != "" {
		return nil, errors.New("give a JWKS file or a JWKS URL, not both")
	}
	if cfg.JWKSFile != "" {
		fk := &fileKeys{path: cfg.JWKSFile}
		if err := fk.load(); err != nil {
			return nil, err
		}
		v.file = fk
	}
	if cfg.JWKSURL != "" {
		noErr := false
		kf, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{cfg.JWKSURL}, keyfunc.Override{
			RefreshInterval:           cfg.JWKSRefresh,
			NoErrorReturnFirstHTTPReq: &noErr,
			HTTPTimeout:               jwksFetchTimeout,
			// This bound is also the deadline of the refetch an unknown key
			// id makes (jwkset derives the fetch's context from it), so it
			// must leave a slow identity provider the whole fetch timeout.
			// Waiting for the limiter itself fails at once unless its next
			// refetch is due within it.
			RateLimitWaitMax: jwksFetchTimeout,
		})
		if err != nil {
			return nil, fmt.Errorf("JWKS URL %s: %w", cfg.JWKSURL, err)
		}
		v.remote = kf
	}
	if v.file != nil || v.remote != nil {
		v.methods = append(v.methods, jwt.SigningMethodRS256.Alg(), jwt.SigningMethodES256.Alg())
	}
	if len(v.methods) == 0 && cfg.DevToken == "" {
		return nil, errors.New("no way to authenticate: set an HS256 secret, a JWKS file or URL, or a dev token")
	}
	if cfg.DevToken != "" {
		if len(cfg.DevToken) < 16 {
			return nil, errors.New("the dev token must be at least 16 characters")
		}
		if v.cfg.DevIdentity.Subject == "" {
			v.cfg.DevIdentity.Subject = "dev"
		}
		if v.cfg.DevIdentity.Namespace == "" {
			v.cfg.DevIdentity.Namespace = v.NamespaceFor(v.cfg.DevIdentity.Subject)
		}
	}
	return v, nil
}

// Authenticate reads the bearer token of r and verifies it. Every failure is
// an *Error (an HTTP 401).
func (v *Verifier) Authenticate(r *http.Request) (*Identity, error) {
	// Two Authorization headers are refused rather than the first taken:
	// a proxy in front may have checked or added the other one.
	if n := len(r.Header.Values("Authorization")); n > 1 {
		return nil, fail(ReasonMalformed, "the request has %d Authorization headers; send one", n)
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		return nil, v.hint(fail(ReasonMissingToken, "an Authorization: Bearer token is required"))
	}
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return nil, v.hint(fail(ReasonMalformed, "the Authorization header must be \"Bearer <token>\""))
	}
	return v.Verify(r.Context(), strings.TrimSpace(token))
}

// hint ends a refusal a newcomer meets first with where the dev token is.
func (v *Verifier) hint(e *Error) *Error {
	if v.cfg.DevToken != "" && v.cfg.DevTokenHint != "" {
		e.Message += "; the dev token is " + v.cfg.DevTokenHint
	}
	return e
}

// Verify checks one token and returns whom it identifies.
func (v *Verifier) Verify(ctx context.Context, token string) (*Identity, error) {
	if v.cfg.DevToken != "" && subtle.ConstantTimeCompare([]byte(token), []byte(v.cfg.DevToken)) == 1 {
		id := v.cfg.DevIdentity
		return &id, nil
	}
	if len(v.methods) == 0 {
		return nil, v.hint(fail(ReasonMalformed, "the token is not the dev token, and no JWT keys are configured"))
	}
	// The algorithm is checked before anything else so that "none" and
	// algorithms that are not configured get an answer saying so.
	unverified, _, err := jwt.NewParser().ParseUnverified(token, jwt.MapClaims{})
	if err != nil {
		return nil, v.hint(fail(ReasonMalformed, "the token is not a well-formed JWT"))
	}
	if alg, _ := unverified.Header["alg"].(string); !slices.Contains(v.methods, alg) {
		return nil, fail(ReasonBadAlgorithm, "algorithm %q is not accepted (accepted: %s)", alg, strings.Join(v.methods, ", "))
	}
	// Refused before any key is looked up, so such a token cannot make a
	// JWKS URL be fetched again either.
	if err := CheckCritical(unverified.Header); err != nil {
		return nil, err
	}
	// golang-jwt checks only the signature here: its claim errors do not
	// say which claim failed, so checkClaims does that part.
	claims := jwt.MapClaims{}
	_, err = jwt.NewParser(jwt.WithValidMethods(v.methods), jwt.WithoutClaimsValidation()).
		ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) { return v.key(ctx, t) })
	if err != nil {
		return nil, classify(err)
	}
	if err := v.checkClaims(claims); err != nil {
		return nil, err
	}
	sub, err := claims.GetSubject()
	switch {
	case err != nil:
		return nil, fail(ReasonInvalidClaim, "the token's sub claim must be a string")
	case sub == "":
		return nil, fail(ReasonMissingClaim, "the token has no sub claim")
	}
	// A trigger's credential is signed with the same secret and names its
	// namespace, but it is good for one function and one trigger, checked
	// (trigger still there, enabled, same UID) where trigger calls come in.
	// As a caller's token it would reach the whole namespace, through the
	// API as well, until it expires, whatever became of its trigger.
	for _, c := range triggerClaims {
		if _, ok := claims[c]; ok {
			return nil, fail(ReasonInvalidClaim, "a trigger's credential (claim %q) is good only for its trigger's calls, with the X-Sless-Trigger header", c)
		}
	}
	id := &Identity{Subject: sub}
	if raw, ok := claims[v.cfg.AdminClaim]; ok {
		b, isBool := raw.(bool)
		if !isBool {
			return nil, fail(ReasonInvalidClaim, "claim %q must be a boolean", v.cfg.AdminClaim)
		}
		id.Admin = b
	}
	if raw, ok := claims[v.cfg.NamespaceClaim]; ok {
		ns, isString := raw.(string)
		if !isString || len(validation.IsDNS1123Label(ns)) > 0 {
			return nil, fail(ReasonInvalidClaim, "claim %q must be a namespace name (a DNS-1123 label)", v.cfg.NamespaceClaim)
		}
		// Kubernetes reserves kube-* for the system: no tenant lives
		// there, whatever an identity provider was made to put in a claim.
		if strings.HasPrefix(ns, "kube-") {
			return nil, fail(ReasonInvalidClaim, "claim %q names %s, a namespace of the Kubernetes system, not a tenant's", v.cfg.NamespaceClaim, ns)
		}
		id.Namespace = ns
	} else {
		id.Namespace = v.NamespaceFor(sub)
	}
	return id, nil
}

// checkClaims checks the registered claims, exp, nbf, iat, iss and aud in that
// order, and names the first one at fault.
func (v *Verifier) checkClaims(c jwt.MapClaims) *Error {
	now, leeway := v.now(), v.cfg.Leeway
	exp, err := c.GetExpirationTime()
	switch {
	case err != nil:
		return fail(ReasonInvalidClaim, "the token's exp claim must be a NumericDate (seconds since 1970-01-01 UTC)")
	case exp == nil:
		return fail(ReasonMissingClaim, "the token has no exp claim; sless requires one")
	case !now.Before(exp.Add(leeway)):
		return fail(ReasonExpired, "the token expired at %s (exp)", exp.UTC().Format(time.RFC3339))
	}
	nbf, err := c.GetNotBefore()
	switch {
	case err != nil:
		return fail(ReasonInvalidClaim, "the token's nbf claim must be a NumericDate (seconds since 1970-01-01 UTC)")
	case nbf != nil && now.Before(nbf.Add(-leeway)):
		return fail(ReasonNotYetValid, "the token is not valid before %s (nbf)", nbf.UTC().Format(time.RFC3339))
	}
	// A token issued in the future was made by a clock that is wrong, or
	// made to outlive the issuer's own limit on exp - iat.
	iat, err := c.GetIssuedAt()
	switch {
	case err != nil:
		return fail(ReasonInvalidClaim, "the token's iat claim must be a NumericDate (seconds since 1970-01-01 UTC)")
	case iat != nil && now.Before(iat.Add(-leeway)):
		return fail(ReasonIssuedInFuture, "the token was issued at %s (iat), later than this server's clock allows (leeway %s)", iat.UTC().Format(time.RFC3339), leeway)
	}
	if v.cfg.Issuer != "" {
		iss, err := c.GetIssuer()
		switch {
		case err != nil:
			return fail(ReasonInvalidClaim, "the token's iss claim must be a string")
		case iss == "":
			return fail(ReasonMissingClaim, "the token has no iss claim; this server requires issuer %q", v.cfg.Issuer)
		case iss != v.cfg.Issuer:
			return fail(ReasonWrongIssuer, "the token's iss claim names an issuer this server does not trust (it requires %q)", v.cfg.Issuer)
		}
	}
	if len(v.cfg.Audiences) > 0 {
		aud, err := c.GetAudience()
		switch c["aud"].(type) {
		case nil, string, []any:
		default:
			// GetAudience reads any other type as no audience at all.
			err = jwt.ErrInvalidType
		}
		switch {
		case err != nil:
			return fail(ReasonInvalidClaim, "the token's aud claim must be a string or a list of strings")
		case len(aud) == 0 || len(aud) == 1 && aud[0] == "":
			return fail(ReasonMissingClaim, "the token has no aud claim; this server requires one of its audiences")
		case !slices.ContainsFunc(aud, func(a string) bool { return slices.Contains(v.cfg.Audiences, a) }):
			return fail(ReasonWrongAudience, "the token's aud claim names no audience of this server")
		}
	}
	return nil
}

// CheckCritical refuses a JOSE header with a crit parameter. RFC 7515
// §4.1.11 makes a token invalid when it marks critical an extension the
// recipient does not understand; sless understands none, and golang-jwt does
// not look at crit at all.
func CheckCritical(header map[string]any) *Error {
	raw, ok := header["crit"]
	if !ok {
		return nil
	}
	list, _ := raw.([]any)
	var names []string
	for _, n := range list {
		if s, ok := n.(string); ok && s != "" {
			names = append(names, strconv.Quote(truncate(s, 40)))
		}
	}
	if len(names) == 0 || len(names) != len(list) {
		return fail(ReasonCritical, "the token's crit header must be a non-empty list of header names (RFC 7515 §4.1.11), and sless understands no critical extension")
	}
	if len(names) > 3 {
		names = append(names[:3], "…")
	}
	return fail(ReasonCritical, "the token's header marks %s critical (crit), an extension sless does not understand, so the token is invalid (RFC 7515 §4.1.11)", strings.Join(names, ", "))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// keyError marks a failure to find the verification key, so classify can
// tell an unknown key from a bad signature.
type keyError struct {
	reason string
	err    error
}

func (e *keyError) Error() string { return e.err.Error() }
func (e *keyError) Unwrap() error { return e.err }

// key picks the verification key by the token's algorithm, so a public key
// is never used as an HMAC secret (the classic algorithm confusion).
func (v *Verifier) key(ctx context.Context, t *jwt.Token) (any, error) {
	switch t.Method.Alg() {
	case jwt.SigningMethodHS256.Alg():
		if len(v.cfg.HS256Secret) == 0 {
			return nil, &keyError{ReasonBadAlgorithm, errors.New("HS256 is not accepted")}
		}
		return v.cfg.HS256Secret, nil
	case jwt.SigningMethodRS256.Alg(), jwt.SigningMethodES256.Alg():
		var kf keyfunc.Keyfunc
		if v.file != nil {
			kf = v.file.keyfunc()
		} else if v.remote != nil {
			kf = v.remote
		} else {
			return nil, &keyError{ReasonBadAlgorithm, fmt.Errorf("%s is not accepted", t.Method.Alg())}
		}
		k, err := kf.KeyfuncCtx(ctx)(t)
		if err != nil {
			return nil, &keyError{ReasonUnknownKey, err}
		}
		return k, nil
	}
	return nil, &keyError{ReasonBadAlgorithm, fmt.Errorf("algorithm %s is not accepted", t.Method.Alg())}
}

func classify(err error) *Error {
	var ke *keyError
	switch {
	case errors.As(err, &ke):
		switch ke.reason {
		case ReasonUnknownKey:
			return fail(ke.reason, "the token's key is not among the trusted keys")
		}
		return fail(ke.reason, "%v", ke.err)
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return fail(ReasonBadSignature, "the token's signature does not verify")
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		return fail(ReasonBadAlgorithm, "the token's algorithm is not accepted")
	}
	return fail(ReasonMalformed, "the token is not a well-formed JWT")
}

// NamespaceFor maps a subject onto its tenant namespace: the prefix, a
// readable slug of the subject and 10 hex digits of its SHA-256, at most 63
// characters. The hash keeps distinct subjects apart even when their slugs
// agree ("a.b" and "a-b"), and the result depends on nothing but the subject
// and the prefix.
func (v *Verifier) NamespaceFor(subject string) string {
	return NamespaceFor(v.cfg.NamespacePrefix, subject)
}

// NamespaceFor is Verifier.NamespaceFor with an explicit prefix.
func NamespaceFor(prefix, subject string) string {
	sum := sha256.Sum256([]byte(subject))
	hash := hex.EncodeToString(sum[:])[:10]
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(subject) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	slug := strings.Trim(b.String(), "-")
	room := validation.DNS1123LabelMaxLength - len(prefix) - len(hash) - 1
	if len(slug) > room {
		slug = strings.Trim(slug[:room], "-")
	}
	if !strings.HasSuffix(prefix, "-") {
		prefix += "-"
	}
	if slug == "" {
		return prefix + hash
	}
	return prefix + slug + "-" + hash
}

// fileKeys is a JWKS document on disk, re-read when it changes (at most once
// a second), so keys can be rotated by replacing the file (a mounted Secret).
type fileKeys struct {
	path string

	mu      sync.Mutex
	kf      keyfunc.Keyfunc
	mod     time.Time
	size    int64
	checked time.Time
}

func (f *fileKeys) load() error {
	st, err := os.Stat(f.path)
	if err != nil {
		return fmt.Errorf("JWKS file: %w", err)
	}
	raw, err := os.ReadFile(f.path)
	if err != nil {
		return fmt.Errorf("JWKS file: %w", err)
	}
	kf, err := keyfunc.NewJWKSetJSON(raw)
	if err != nil {
		return fmt.Errorf("JWKS file %s: %w", f.path, err)
	}
	f.kf, f.mod, f.size, f.checked = kf, st.ModTime(), st.Size(), time.Now()
	return nil
}

func (f *fileKeys) keyfunc() keyfunc.Keyfunc {
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Since(f.checked) < time.Second {
		return f.kf
	}
	f.checked = time.Now()
	st, err := os.Stat(f.path)
	if err != nil || (st.ModTime().Equal(f.mod) && st.Size() == f.size) {
		// A file that went missing keeps its last keys: a Secret being
		// re-mounted must not lock everyone out.
		return f.kf
	}
	// A half-written file also keeps the last keys; the next check retries.
	_ = f.load()
	return f.kf
}
