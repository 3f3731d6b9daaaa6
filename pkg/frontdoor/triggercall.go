package frontdoor

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/auth/triggertoken"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/queue"
)

// TriggerInvoker is the part of the invoke proxy (*invoke.Proxy) that
// TriggerCallHandler needs: its public handler, Invoke for a call sless has authenticated itself,
// recorded with the given trigger, and Refuse, so that a refused trigger
// call is answered as the proxy answers every other refusal.
type TriggerInvoker interface {
	http.Handler
	Invoke(w http.ResponseWriter, r *http.Request, namespace, name, trigger string)
	Refuse(w http.ResponseWriter, r *http.Request, prob invoke.Problem)
}

// TriggerCallHandler serves /fn/{namespace}/{name}[/*path] in front of the
// invoke proxy. A request with the X-Sless-Trigger header is a trigger's call
// (`sless cron-call` from a cron run, `sless consume` for a queue message): its
// bearer token must be a credential issued to a trigger of that type, for
// that namespace and function, and the trigger must still exist with the
// same UID and be enabled. Such a call reaches the function whatever its
// access policy and is recorded with the trigger's type. Every other request
// goes to the proxy as it came.
type TriggerCallHandler struct {
	Proxy  TriggerInvoker
	Tokens *triggertoken.HS256
	// Triggers reads Triggers to check that a credential's trigger still
	// exists and is enabled; answers are kept for CacheTTL.
	Triggers client.Reader
	// CacheTTL of trigger lookups; 5 s if zero. A disabled or deleted
	// trigger's credential stops working at most this long after.
	CacheTTL time.Duration

	mu    sync.Mutex
	cache map[types.NamespacedName]lookup
}

type lookup struct {
	t   *slessv1alpha1.Trigger
	at  time.Time
	err error
}

func (h *TriggerCallHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	kind := r.Header.Get(queue.TriggerHeader)
	if kind == "" {
		h.Proxy.ServeHTTP(w, r)
		return
	}
	ns, name, rest, ok := splitFunctionPath(r.URL.EscapedPath())
	if !ok {
		// The proxy answers malformed paths; the marker means nothing there.
		h.Proxy.ServeHTTP(w, r)
		return
	}
	unauthorized := func(detail string) {
		h.Proxy.Refuse(w, r, invoke.Problem{Status: http.StatusUnauthorized, Reason: invoke.ReasonUnauthorized, Detail: detail})
	}
	forbidden := func(detail string) {
		h.Proxy.Refuse(w, r, invoke.Problem{Status: http.StatusForbidden, Reason: invoke.ReasonForbidden, Detail: detail})
	}
	if n := len(r.Header.Values("Authorization")); n > 1 {
		// As pkg/auth does for callers: taking the first of several would
		// let whatever sits in front decide which credential counts.
		unauthorized(fmt.Sprintf("the request has %d Authorization headers; send one", n))
		return
	}
	token, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !found || h.Tokens == nil {
		unauthorized("a trigger's call needs the trigger's credential as a bearer token")
		return
	}
	claims, err := h.Tokens.VerifyTriggerToken(strings.TrimSpace(token))
	if err != nil {
		unauthorized(err.Error())
		return
	}
	if string(claims.Type) != kind || claims.Namespace != ns || claims.Function != name || claims.Type == slessv1alpha1.TriggerTypeHTTP {
		forbidden("the credential belongs to " + string(claims.Type) + " trigger " + claims.Namespace + "/" + claims.Trigger +
			" of function " + claims.Function + ", not to a " + kind + " call of " + ns + "/" + name)
		return
	}
	if h.Triggers != nil {
		t, err := h.trigger(r.Context(), types.NamespacedName{Namespace: ns, Name: claims.Trigger})
		switch {
		case apierrors.IsNotFound(err):
			forbidden("trigger " + ns + "/" + claims.Trigger + " no longer exists")
			return
		case err != nil:
			h.Proxy.Refuse(w, r, invoke.Problem{Status: http.StatusServiceUnavailable, Reason: invoke.ReasonUnavailable,
				Detail: "cannot check trigger " + ns + "/" + claims.Trigger + " right now"})
			return
		case string(t.UID) != claims.UID || t.Spec.Function != name || string(t.Spec.Type) != kind:
			forbidden("the credential was issued to an earlier trigger " + ns + "/" + claims.Trigger)
			return
		case !t.IsEnabled():
			forbidden("trigger " + ns + "/" + claims.Trigger + " is disabled")
			return
		}
	}
	r2 := r.Clone(r.Context())
	u := *r.URL
	u.RawPath = rest
	if p, err := url.PathUnescape(rest); err == nil {
		u.Path = p
	} else {
		u.Path, u.RawPath = rest, ""
	}
	r2.URL = &u
	r2.Header.Del("Authorization")
	h.Proxy.Invoke(w, r2, ns, name, kind)
}

func (h *TriggerCallHandler) trigger(ctx context.Context, key types.NamespacedName) (*slessv1alpha1.Trigger, error) {
	ttl := h.CacheTTL
	if ttl <= 0 {
		ttl = 5 * time.Second
	}
	h.mu.Lock()
	if l, ok := h.cache[key]; ok && time.Since(l.at) < ttl {
		h.mu.Unlock()
		return l.t, l.err
	}
	h.mu.Unlock()
	t := &slessv1alpha1.Trigger{}
	err := h.Triggers.Get(ctx, key, t)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err // not cached: the next call tries again
	}
	if err != nil {
		t = nil
	}
	h.mu.Lock()
	if h.cache == nil {
		h.cache = map[types.NamespacedName]lookup{}
	}
	if len(h.cache) > 10000 {
		clear(h.cache)
	}
	h.cache[key] = lookup{t: t, at: time.Now(), err: err}
	h.mu.Unlock()
	return t, err
}

// splitFunctionPath splits /fn/{ns}/{name}[/rest] without unescaping the
// rest, as the proxy does.
func splitFunctionPath(escaped string) (ns, name, rest string, ok bool) {
	s, found := strings.CutPrefix(escaped, "/fn/")
	if !found {
		return "", "", "", false
	}
	parts := strings.SplitN(s, "/", 3)
	if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
		return "", "", "", false
	}
	rest = "/"
	if len(parts) == 3 {
		rest += parts[2]
	}
	return parts[0], parts[1], rest, true
}
