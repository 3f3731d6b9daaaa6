package invoke

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"
)

// ErrNotFound is what a Resolver returns (possibly wrapped) for a function
// that does not exist or is being deleted. The proxy answers it with 404.
var ErrNotFound = errors.New("function not found")

// ErrBusy is what Target.Activate returns (possibly wrapped) when no
// instance could take one more call before its context ended: each has as
// many calls as it takes at once (containerConcurrency). The proxy answers
// it with 503 and Retry-After.
var ErrBusy = errors.New("every instance is busy")

// Resolver finds where a function is served. Resolve runs on every request,
// so implementations answer from memory (an informer cache, a process table)
// and never make a network call per request.
//
// Resolve returns ErrNotFound for a function that does not exist. Any other
// error means the resolver cannot tell right now (a cache not yet synced);
// the proxy answers it with 503 and Retry-After.
type Resolver interface {
	Resolve(ctx context.Context, namespace, name string) (Target, error)
}

// TagResolver is a Resolver that also finds a function's traffic target
// by its tag (spec.traffic[].tag), for calls at /fn/{ns}/{name}@{tag} and
// {tag}-{name}.{ns}.<domain>. It returns ErrNotFound for a function with
// no such tag. A Resolver that is no TagResolver has no tags.
type TagResolver interface {
	Resolver
	ResolveTag(ctx context.Context, namespace, name, tag string) (Target, error)
}

// ResolverFunc lets an ordinary function serve as a Resolver.
type ResolverFunc func(ctx context.Context, namespace, name string) (Target, error)

// Resolve calls f.
func (f ResolverFunc) Resolve(ctx context.Context, namespace, name string) (Target, error) {
	return f(ctx, namespace, name)
}

// Target is what the proxy needs to know of one function to forward a call.
// It is a value: a Resolver builds a fresh one (or copies a cached one) for
// each call and the proxy never modifies what it points to.
type Target struct {
	// Address is where calls go: scheme, host, port and an optional base
	// path; the part of the request path after /fn/{ns}/{name} is appended
	// to it. On clusters it is the Knative Service's cluster-local URL
	// (Function status.address), whose Host header Knative routes on. Nil
	// when Activate supplies the address.
	Address *url.URL

	// Ready is true when Address serves the function: its Ready condition is
	// True for its current generation, or an earlier revision still serves
	// while a newer one is built and rolled out (Knative keeps routing to the
	// last ready revision, so refusing calls then would be an outage sless
	// made up). A target that is not Ready and has no Activate is answered
	// 503 with Retry-After (without, when Failed says why).
	Ready bool

	// Failed, for a target that is not Ready, is the reason (the Ready
	// condition's, such as BuildFailed) its current generation failed with.
	// Such a function serves again only once its spec is fixed, so the
	// proxy answers 503 FunctionFailed without Retry-After: waiting and
	// calling again would not help. Empty while it is merely on its way.
	Failed string

	// Revision names what serves the call (Knative's latestReadyRevision, or
	// a build digest in local mode). It is recorded with each invocation.
	Revision string

	// Timeout is the function's own limit for one call (spec.timeoutSeconds).
	// The proxy allows the call this long plus a grace period for the hops
	// in between; zero means the API default of 30 s.
	Timeout time.Duration

	// Public is true when an enabled http Trigger exposes the function:
	// anyone may call it. Otherwise the caller needs a token of the
	// function's namespace (or an admin token).
	Public bool

	// Idle is true when the resolver knows that no instance is running, so
	// the call waits for a scale from zero (on clusters: the serving
	// revision reports zero actual replicas). The proxy counts such a call
	// as a cold start and allows it Options.ColdStartAllowance on top of the
	// function's timeout.
	Idle bool

	// Tagged are the function's tagged traffic targets by tag, for a
	// resolver that keeps Targets in a cache and answers ResolveTag from
	// it; nil when it has none.
	Tagged map[string]Target

	// Activate, when not nil, is called before each forward, after the
	// access check. It makes sure an instance is running (local mode starts
	// a stopped process here and waits until it listens) and returns where
	// it listens. It must be safe for concurrent calls and cheap when the
	// instance already runs. The proxy bounds ctx by
	// Options.ActivateTimeout; an error answers the call with 503 (504 when
	// ctx expired, 503 for ErrBusy). Activate is nil on clusters, where
	// Knative's activator wakes a revision scaled to zero and its
	// queue-proxy holds calls past containerConcurrency.
	Activate func(ctx context.Context) (Activation, error)
}

// Activation is the result of Target.Activate.
type Activation struct {
	// Address replaces Target.Address for this call when not nil.
	Address *url.URL
	// Revision, when not empty, is the revision Activate chose for the call
	// (from a traffic split); it replaces Target.Revision in the record.
	Revision string
	// Cold is true when the call had to wait for an instance to start. The
	// proxy counts it as a cold start and records the time Activate took.
	Cold bool
	// Done, when not nil, is called once the call is over (the answer
	// copied to the caller, or the forward failed): the instance may take
	// another call, and counts as idle again when none is left.
	Done func()
	// Lost, when not nil, tells why the instance went away when the
	// forward failed ("" if it did not, or no one knows): an instance
	// OOM-killed under the call, say. The record and answer say it.
	Lost func() string
}

// Identity is who sent a request, as an Authenticator tells it. Its fields
// are those of pkg/auth's Identity, so one converts to the other.
type Identity struct {
	// Subject is the token's subject.
	Subject string
	// Namespace is the tenant namespace the subject acts in.
	Namespace string
	// Admin may act in every namespace.
	Admin bool
}

// CanAccess reports whether the identity may call functions of namespace.
func (id Identity) CanAccess(namespace string) bool {
	return id.Admin || (id.Namespace != "" && id.Namespace == namespace)
}

// Authenticator tells who sent a request, from its bearer token. An error
// means the request carries no valid credentials; the proxy answers 401 with
// the error's text. pkg/auth's verifier fits through AuthenticatorFunc:
//
//	invoke.AuthenticatorFunc(func(r *http.Request) (invoke.Identity, error) {
//		id, err := verifier.Authenticate(r)
//		if err != nil {
//			return invoke.Identity{}, err
//		}
//		return invoke.Identity(*id), nil
//	})
type Authenticator interface {
	Authenticate(r *http.Request) (Identity, error)
}

// AuthenticatorFunc lets an ordinary function serve as an Authenticator.
type AuthenticatorFunc func(r *http.Request) (Identity, error)

// Authenticate calls f.
func (f AuthenticatorFunc) Authenticate(r *http.Request) (Identity, error) { return f(r) }
