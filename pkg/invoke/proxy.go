package invoke

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sless-dev/sless/pkg/invoke/routing"
	"github.com/sless-dev/sless/pkg/invoke/upstream"
	"github.com/sless-dev/sless/pkg/tracing"
)

// PathPrefix is where the proxy serves functions: /fn/{namespace}/{name}[/*path].
const PathPrefix = "/fn/"

// ServicePrefix is where the proxy serves SlessServices:
// /svc/{namespace}/{name}[/*path].
const ServicePrefix = "/svc/"

// DefaultBodyIdleTimeout is how long a request body may send nothing before
// the call is answered 408, in a Proxy that sets none.
const DefaultBodyIdleTimeout = 30 * time.Second

// DefaultMaxRequestBytes is the request body cap of a Proxy that sets none:
// what a function can be sent, by a caller or by a queue message.
const DefaultMaxRequestBytes = 32 << 20

// connectionSlack is how far the connection's deadlines lie past a call's
// deadline: time to write the proxy's own answer after the call timed out.
const connectionSlack = 5 * time.Second

// Headers the proxy sets on the call it forwards.
const (
	// RequestIDHeader carries the call's id to the function and back.
	RequestIDHeader = "X-Request-Id"
	// SubjectHeader tells the function who called, for calls that
	// authenticated (private functions). Callers cannot set it: the proxy
	// removes every X-Sless-* header a caller sends.
	SubjectHeader = "X-Sless-Subject"
	// PrefixHeader is the path prefix the proxy removed (/fn/{ns}/{name}
	// or /svc/{ns}/{name}),
	// for functions that build links to themselves.
	PrefixHeader = "X-Forwarded-Prefix"
)

// Options configure a Proxy; zero values take the defaults.
type Options struct {
	// Resolver finds functions. Required.
	Resolver Resolver
	// Services finds SlessServices for /svc/. Nil answers every call there
	// 501: the back end runs no services.
	Services Resolver
	// Authenticator checks callers of private functions. Nil refuses every
	// call of a private function with 401.
	Authenticator Authenticator
	// Recorder receives a Record of every call that reached a function (or
	// was refused because it was not ready, too large or failed on the way).
	// Calls of unknown functions and refused credentials are not recorded:
	// anyone can make those up. Nil records nothing.
	Recorder *Recorder
	// Metrics, when set, count calls, latencies and cold starts.
	Metrics *Metrics
	// Transport forwards calls. Default NewTransport().
	Transport http.RoundTripper
	// MaxRequestBytes caps a request body; a larger one is answered 413.
	// Default DefaultMaxRequestBytes.
	MaxRequestBytes int64
	// TimeoutGrace is added to a function's own timeout to give the proxy's
	// deadline for one call, so that the function's own timeout answer (the
	// runtime wrappers send 504 at the deadline) reaches the caller rather
	// than the proxy's. Default 5 s.
	TimeoutGrace time.Duration
	// ColdStartAllowance is added to the deadline of a call that must wait
	// for an instance (Target.Idle): Knative's activator holds the call while
	// a pod starts. Default 60 s.
	ColdStartAllowance time.Duration
	// ActivateTimeout bounds Target.Activate. Default 60 s.
	ActivateTimeout time.Duration
	// RetryAfter is the Retry-After of a 503 for a function that is not
	// ready. Default 5 s.
	RetryAfter time.Duration
	// NotReadyWait holds a call to a function that is not ready and has
	// not failed, looking again until it is, before the 503: a caller who
	// saw Ready on the apiserver may reach a replica whose watch has not
	// yet. Default RetryAfter; negative answers at once.
	NotReadyWait time.Duration
	// TrustForwarded keeps the X-Forwarded-For, -Host and -Proto a caller
	// sends (set it when a trusted ingress is in front); otherwise the proxy
	// sets them from the connection alone.
	TrustForwarded bool
	// Domain, when set, serves every function at its own host,
	// {name}.{namespace}.{Domain}, through the handler Hosts makes; see
	// CheckDomain. /fn/ then serves API clients: its answers carry no
	// cookies and are sandboxed (see isolate).
	Domain string
	// BodyIdleTimeout is how long a request body may send nothing before
	// the call is answered 408 as the caller's fault. Default
	// DefaultBodyIdleTimeout.
	BodyIdleTimeout time.Duration
	// Routes, when set, holds the Knative Ingresses of sless's networking
	// class: Ingresses serves their hosts, and a call whose target address
	// is such a host goes to the revision Service the Ingress splits to.
	Routes *routing.Table
	// ClusterDomain is the DNS domain of revision Services' names. Default
	// DefaultClusterDomain.
	ClusterDomain string
	// IngressTimeout bounds a call through an Ingress that serves no sless
	// workload. Default DefaultIngressTimeout.
	IngressTimeout time.Duration
	// H2CTransport forwards calls to h2c revisions (port 81 of a revision
	// Service). Default an http.Transport speaking unencrypted HTTP/2.
	H2CTransport http.RoundTripper
	// Async, when set, keeps function calls made with Prefer:
	// respond-async, answered 202; unset, the preference is ignored and
	// such calls run at once.
	Async Async
	// APIBaseURL prefixes the Location of a 202 (the invocation record
	// lives on the API, which a function's own host does not serve); ""
	// gives a path.
	APIBaseURL string
	// TracerProvider, when set, makes a span of every call (see trace.go);
	// nil makes none and costs nothing.
	TracerProvider trace.TracerProvider
	// Logger receives platform failures (unreachable functions, failed
	// activations) and, at debug level, callers' request bodies that could
	// not be read and what net/http's ReverseProxy logs (responses cut
	// short). Default slog.Default().
	Logger *slog.Logger
}

// Proxy is the invoke proxy, an http.Handler for /fn/{namespace}/{name}[/*path].
// It resolves the function, applies the access policy, forwards the call
// with the function's timeout, streams both bodies, and records the call.
//
// Access policy: a function is private unless an enabled http Trigger makes
// it public (Target.Public). A private function needs credentials for its
// own namespace or admin credentials; the check uses the namespace the path
// resolved to, and the path segments are matched before any unescaping or
// cleaning, so no spelling of a path reaches another namespace.
//
// Responses sless makes itself (404 unknown function, 401/403, 400/408/413
// for a request body that cannot be read, 503 not ready, 502 unreachable,
// 504 timeout) are problem+json and carry X-Sless-Error; responses of the
// function never do.
type Proxy struct {
	opts      Options
	transport http.RoundTripper
	buffers   bufferPool
	// rp forwards every call; it finds the call in the request's context,
	// so that no ReverseProxy and callbacks are made per call.
	rp *httputil.ReverseProxy
	// domainSuffix is "." + Options.Domain.
	domainSuffix string
	// errorLog takes what ReverseProxy logs itself (a function's response
	// cut short): at debug level, since the call's record says it.
	errorLog *log.Logger
	// tracer is nil when tracing is off.
	tracer trace.Tracer
}

// NewProxy makes a Proxy.
func NewProxy(opts Options) (*Proxy, error) {
	if opts.Resolver == nil {
		return nil, errors.New("invoke: Options.Resolver is required")
	}
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if opts.TimeoutGrace <= 0 {
		opts.TimeoutGrace = 5 * time.Second
	}
	if opts.ColdStartAllowance <= 0 {
		opts.ColdStartAllowance = 60 * time.Second
	}
	if opts.ActivateTimeout <= 0 {
		opts.ActivateTimeout = 60 * time.Second
	}
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = 5 * time.Second
	}
	if opts.NotReadyWait == 0 {
		opts.NotReadyWait = opts.RetryAfter
	}
	if opts.BodyIdleTimeout <= 0 {
		opts.BodyIdleTimeout = DefaultBodyIdleTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ClusterDomain == "" {
		opts.ClusterDomain = DefaultClusterDomain
	}
	if opts.IngressTimeout <= 0 {
		opts.IngressTimeout = DefaultIngressTimeout
	}
	if opts.Domain != "" {
		if err := CheckDomain(opts.Domain); err != nil {
			return nil, fmt.Errorf("invoke: %w", err)
		}
	}
	p := &Proxy{opts: opts, transport: opts.Transport, domainSuffix: "." + opts.Domain,
		errorLog: slog.NewLogLogger(opts.Logger.Handler(), slog.LevelDebug), tracer: tracing.Tracer(opts.TracerProvider)}
	if p.transport == nil {
		p.transport = NewTransport()
	}
	p.buffers.New = func() any { return new([copyBufferSize]byte) }
	rt := p.transport
	if opts.Routes != nil {
		h2c := opts.H2CTransport
		if h2c == nil {
			h2c = newH2CTransport()
		}
		rt = routeTransport{http1: p.transport, h2c: h2c}
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite:        func(pr *httputil.ProxyRequest) { callOf(pr.In.Context()).rewrite(pr) },
		Transport:      rt,
		BufferPool:     &p.buffers,
		ModifyResponse: func(resp *http.Response) error { return callOf(resp.Request.Context()).modifyResponse(resp) },
		ErrorHandler:   func(w http.ResponseWriter, r *http.Request, err error) { callOf(r.Context()).errorHandler(w, r, err) },
		ErrorLog:       p.errorLog,
	}
	return p, nil
}

// NewTransport is the default transport to functions: keep-alive pools
// large enough for many functions, each call written and read on the
// handler's goroutine (see package upstream for why), no compression of its
// own (bodies pass through as the function encoded them), no proxy from the
// environment, and no response timeout of its own (each call carries its
// deadline). https and protocol upgrades go through a standard
// http.Transport with the same settings.
func NewTransport() *upstream.Transport {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	return &upstream.Transport{
		DialContext:    dialer.DialContext,
		MaxIdlePerHost: 512,
		IdleTimeout:    90 * time.Second,
		BufferSize:     32 << 10,
		Fallback: &http.Transport{
			DialContext:            dialer.DialContext,
			MaxIdleConns:           4096,
			MaxIdleConnsPerHost:    512,
			IdleConnTimeout:        90 * time.Second,
			DisableCompression:     true,
			ExpectContinueTimeout:  time.Second,
			ReadBufferSize:         32 << 10,
			WriteBufferSize:        32 << 10,
			MaxResponseHeaderBytes: upstream.DefaultMaxHeaderBytes,
		},
	}
}

// ServeHTTP serves /fn/{namespace}/{name}[/*path]. The handler needs the
// path unchanged: mount it at PathPrefix without stripping.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if refuseMethod(r.Method) {
		p.refuseMethod(w, r, start, true)
		return
	}
	escaped := r.URL.EscapedPath()
	if strings.HasPrefix(escaped, ServicePrefix) {
		p.serveService(w, r, start, escaped)
		return
	}
	ns, name, tag, rest, ok := splitPath(escaped, PathPrefix)
	if !ok {
		p.refuse(w, r, start, Problem{Status: http.StatusNotFound, Reason: ReasonNotFound,
			Detail: "no function at this path; functions are called at /fn/{namespace}/{name}[@{tag}][/path]"})
		return
	}
	p.serve(w, r, &call{p: p, ns: ns, name: name, tag: tag, rest: rest, trigger: TriggerHTTP, start: start, reqID: RequestID(r)})
}

// serveService serves /svc/{namespace}/{name}[/*path]: a SlessService,
// under the access policy of a private function (no Trigger makes a
// service public) and the shared origin's isolation.
func (p *Proxy) serveService(w http.ResponseWriter, r *http.Request, start time.Time, escaped string) {
	ns, name, tag, rest, ok := splitPath(escaped, ServicePrefix)
	if !ok {
		p.refuse(w, r, start, Problem{Status: http.StatusNotFound, Reason: ReasonNotFound,
			Detail: "no service at this path; services are served at /svc/{namespace}/{name}[@{tag}][/path]"})
		return
	}
	if p.opts.Services == nil {
		p.refuse(w, r, start, Problem{Status: http.StatusNotImplemented, Reason: ReasonNoServices,
			Detail: "this server runs no services: sless api on a cluster and sless dev serve SlessServices"})
		return
	}
	p.serve(w, r, &call{p: p, ns: ns, name: name, tag: tag, rest: rest, trigger: TriggerService, start: start, reqID: RequestID(r)})
}

// serve applies the access policy to a call of the public invoke path, by
// path or by host, and forwards it.
func (p *Proxy) serve(w http.ResponseWriter, r *http.Request, c *call) {
	c.startSpan(r, false)
	resolver := p.opts.Resolver
	if c.service() {
		resolver = p.opts.Services
	}
	target, err := p.resolveCall(r.Context(), resolver, c)
	if err != nil {
		// An unknown function is refused as a private one is to a caller
		// who may not call in its namespace: a 404 there would tell anyone
		// which function names exist in every tenant.
		if errors.Is(err, ErrNotFound) && !c.authorize(w, r) {
			return
		}
		c.refuseResolve(w, r, err)
		return
	}
	c.target = target
	if target.Public {
		c.spotSlessToken(r)
	} else if !c.authorize(w, r) {
		return
	}
	if c.wantsAsync(r) {
		c.accept(w, r)
		return
	}
	c.forward(w, r)
}

// spotSlessToken marks a public call whose Authorization header is a sless
// token, so that it is not handed to the function: a caller who sends its
// login everywhere (as the CLI does) must not give it away. A header sless
// does not accept is the function's own scheme and passes.
func (c *call) spotSlessToken(r *http.Request) {
	if c.p.opts.Authenticator == nil || r.Header.Get("Authorization") == "" {
		return
	}
	if _, err := c.p.authenticate(r); err == nil {
		c.slessToken = true
	}
}

// authorize checks that the caller may call functions of c.ns, and answers
// 401 or 403 when not. The answers name nothing about the function, which
// may not exist.
func (c *call) authorize(w http.ResponseWriter, r *http.Request) bool {
	id, err := c.p.authenticate(r)
	if err != nil {
		c.refuse(w, r, Problem{Status: http.StatusUnauthorized, Reason: ReasonUnauthorized,
			Detail: c.named() + " needs a token of namespace " + c.ns + c.unlessPublic() + ": " + err.Error()})
		return false
	}
	if !id.CanAccess(c.ns) {
		c.refuse(w, r, Problem{Status: http.StatusForbidden, Reason: ReasonForbidden,
			Detail: "the caller may not call " + c.kind() + "s of namespace " + c.ns})
		return false
	}
	c.subject, c.private = id.Subject, true
	return true
}

// Invoke calls namespace/name for a trusted caller inside sless (the cron
// runner, the queue consumer): no access policy applies and the record
// carries trigger. The request's path (r.URL) is the path the function
// sees. It answers w exactly as ServeHTTP would.
func (p *Proxy) Invoke(w http.ResponseWriter, r *http.Request, namespace, name, trigger string) {
	start := time.Now()
	rest := r.URL.EscapedPath()
	if !strings.HasPrefix(rest, "/") {
		rest = "/" + rest
	}
	c := &call{p: p, ns: namespace, name: name, rest: rest, trigger: trigger, start: start, reqID: RequestID(r)}
	// A trigger's call came by HTTP (sless cron-call, sless consume).
	c.startSpan(r, false)
	if !validNamespace(namespace) || !validFunctionName(name) {
		c.refuseResolve(w, r, ErrNotFound)
		return
	}
	target, err := p.resolve(r.Context(), p.opts.Resolver, namespace, name)
	if err != nil {
		c.refuseResolve(w, r, err)
		return
	}
	c.target = target
	c.forward(w, r)
}

// resolveCall resolves what c calls: a function, or the traffic target
// tagged c.tag. A call on a host below the domain whose first label names
// no function may be {tag}-{name}: each split of the label at a '-' is
// tried, the function's own name first.
func (p *Proxy) resolveCall(ctx context.Context, resolver Resolver, c *call) (Target, error) {
	if c.tag != "" {
		return p.resolveTag(ctx, resolver, c.ns, c.name, c.tag)
	}
	t, err := p.resolve(ctx, resolver, c.ns, c.name)
	if !errors.Is(err, ErrNotFound) || !c.byHost || c.route != nil {
		return t, err
	}
	for i := 1; i < len(c.name)-1; i++ {
		if c.name[i] != '-' || !validFunctionName(c.name[i+1:]) {
			continue
		}
		if tt, terr := p.resolveTag(ctx, resolver, c.ns, c.name[i+1:], c.name[:i]); terr == nil {
			c.name, c.tag = c.name[i+1:], c.name[:i]
			return tt, nil
		}
	}
	return t, err
}

func (p *Proxy) resolveTag(ctx context.Context, resolver Resolver, ns, name, tag string) (Target, error) {
	tr, ok := resolver.(TagResolver)
	if !ok {
		return Target{}, fmt.Errorf("%w: %s/%s has no traffic target tagged %s", ErrNotFound, ns, name, tag)
	}
	t, err := tr.ResolveTag(ctx, ns, name, tag)
	if err != nil {
		return Target{}, err
	}
	if t.Timeout <= 0 {
		t.Timeout = 30 * time.Second
	}
	return t, nil
}

func (p *Proxy) resolve(ctx context.Context, resolver Resolver, ns, name string) (Target, error) {
	t, err := resolver.Resolve(ctx, ns, name)
	if err != nil {
		return Target{}, err
	}
	if t.Timeout <= 0 {
		t.Timeout = 30 * time.Second
	}
	return t, nil
}

func (p *Proxy) authenticate(r *http.Request) (Identity, error) {
	if p.opts.Authenticator == nil {
		return Identity{}, errors.New("this server accepts no credentials")
	}
	return p.opts.Authenticator.Authenticate(r)
}

// Refuse answers a call that a handler in front of the proxy refuses (the
// trigger credential check) as the proxy answers its own refusals, so that
// every refusal on /fn has one shape. Nothing is recorded.
func (p *Proxy) Refuse(w http.ResponseWriter, r *http.Request, prob Problem) {
	p.refuse(w, r, time.Now(), prob)
}

// refuse answers a request that names no function; nothing is recorded.
func (p *Proxy) refuse(w http.ResponseWriter, r *http.Request, start time.Time, prob Problem) {
	c := &call{p: p, start: start, reqID: RequestID(r)}
	c.refuse(w, r, prob)
}

// splitPath takes {prefix}{ns}/{name}[/rest] apart. It splits the escaped path,
// so an encoded slash cannot move a boundary, and then requires the
// unescaped namespace and name to be valid names: "..", "." or an empty
// segment never are. rest is escaped and starts with "/".
func splitPath(escaped, prefix string) (ns, name, tag, rest string, ok bool) {
	s, found := strings.CutPrefix(escaped, prefix)
	if !found {
		return "", "", "", "", false
	}
	i := strings.IndexByte(s, '/')
	if i < 0 {
		return "", "", "", "", false
	}
	nsEsc, s := s[:i], s[i+1:]
	nameEsc, rest := s, "/"
	if j := strings.IndexByte(s, '/'); j >= 0 {
		nameEsc, rest = s[:j], s[j:]
	}
	ns, err := url.PathUnescape(nsEsc)
	if err != nil || !validNamespace(ns) {
		return "", "", "", "", false
	}
	name, err = url.PathUnescape(nameEsc)
	if err != nil {
		return "", "", "", "", false
	}
	name, tag, tagged := strings.Cut(name, "@")
	if !validFunctionName(name) || (tagged && !dnsLabel(tag, 63, true)) {
		return "", "", "", "", false
	}
	return ns, name, tag, rest, true
}

// RequestID is the id of a call: the caller's X-Request-Id when it is a sane
// token, or a new one. pkg/framing, in front of the proxy, answers with it too.
func RequestID(r *http.Request) string {
	if id := r.Header.Get(RequestIDHeader); id != "" && len(id) <= MaxRequestIDLength && safeToken(id) {
		return id
	}
	return rand.Text()
}

func safeToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || c == '"' || c == '\\' || c == ',' || c == ';' {
			return false
		}
	}
	return true
}

// call is one invocation on its way through the proxy.
type call struct {
	p               *Proxy
	ns, name, rest  string
	tag             string // the traffic target called, by @tag or its host
	trigger, reqID  string
	subject         string
	private         bool
	slessToken      bool // a public call that carried a sless token
	start           time.Time
	target          Target
	addr            *url.URL
	lost            func() string // Activation.Lost
	forwardStart    time.Time
	cold            bool
	coldCounted     bool
	deadline        context.Context
	body            *limitedBody
	out             *responseWriter
	platform        bool   // sless answered, not the function
	reason, errText string // why, when it did
	upstreamErr     error  // a failure reading the function's response body
	clientGone      bool
	upgraded        bool            // the function switched protocols (101)
	span, upSpan    trace.Span      // the call's and the upstream call's; nil untraced
	traceCtx        context.Context // carries span
	byHost          bool            // on the function's own host, not the shared /fn/
	parent          context.Context // the caller's request context
	instance        string          // the caller's path, for problems
	route           *routing.Match  // the Ingress's backend, when one routes the call
	routeHost       string          // the host the Ingress was matched on
	routeH2C        bool            // the route's backend speaks h2c

	// conn sets the caller's connection's deadlines.
	conn http.ResponseController
	rw   responseWriter // out points here: one allocation with the call
}

type callKey struct{}

// service reports whether the call is for a SlessService at /svc/.
func (c *call) service() bool { return c.trigger == TriggerService }

// awaitReady looks c's target up again until it is ready, can be
// activated or failed, for at most Options.NotReadyWait. It stops early
// when the target's access changed: the call was let in under the old.
func (c *call) awaitReady(ctx context.Context) {
	if c.p.opts.NotReadyWait <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, c.p.opts.NotReadyWait)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	resolver := c.p.opts.Resolver
	if c.service() {
		resolver = c.p.opts.Services
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var t Target
		var err error
		if c.tag != "" {
			t, err = c.p.resolveTag(ctx, resolver, c.ns, c.name, c.tag)
		} else {
			t, err = c.p.resolve(ctx, resolver, c.ns, c.name)
		}
		if err != nil || t.Public != c.target.Public {
			return
		}
		c.target = t
		if t.Ready || t.Activate != nil || t.Failed != "" {
			return
		}
	}
}

// kind is what the call is for, in problems: "function" or "service".
func (c *call) kind() string {
	if c.service() {
		return "service"
	}
	if c.trigger == triggerIngress {
		return "Ingress"
	}
	return "function"
}

// atTag is "@tag" for a call of a tagged traffic target, as its path has it.
func (c *call) atTag() string {
	if c.tag == "" {
		return ""
	}
	return "@" + c.tag
}

// named is the kind and name of what the call is for, in problems.
func (c *call) named() string { return c.kind() + " " + c.ns + "/" + c.name }

// unlessPublic completes a 401's detail: an http Trigger can make a
// function public, nothing makes a service public yet.
func (c *call) unlessPublic() string {
	if c.service() {
		return ""
	}
	return " unless it is public"
}

// sharedOrigin reports whether the answer goes out on the origin every
// tenant shares (/fn/ and /svc/), which isolate guards.
func (c *call) sharedOrigin() bool {
	return !c.byHost && (c.trigger == TriggerHTTP || c.service())
}

// callOf is the call a forwarded request belongs to.
func callOf(ctx context.Context) *call { return ctx.Value(callKey{}).(*call) }

// refuse answers with a problem before anything was forwarded; nothing is
// recorded. A 401 says how to authenticate (RFC 9110 11.6.1) and a 503 when
// to come back, whichever check refused.
func (c *call) refuse(w http.ResponseWriter, r *http.Request, prob Problem) {
	prob.RequestID = c.reqID
	if prob.Instance == "" {
		prob.Instance = r.URL.Path
	}
	h := w.Header()
	h.Set(ErrorHeader, prob.Reason)
	h.Set(RequestIDHeader, c.reqID)
	if !c.byHost {
		isolate(h)
	}
	switch {
	case prob.Status == http.StatusUnauthorized:
		h.Set("WWW-Authenticate", `Bearer realm="sless"`)
	case prob.Status == http.StatusServiceUnavailable && h.Get("Retry-After") == "":
		h.Set("Retry-After", strconv.Itoa(int(c.p.opts.RetryAfter/time.Second)))
	}
	writeProblem(w, prob)
	c.p.opts.Metrics.request(prob.Status, true, time.Since(c.start), c.spanContext())
	c.platform, c.reason = true, prob.Reason
	c.endSpan(prob.Status, prob.Status)
}

func (c *call) refuseResolve(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, ErrNotFound) {
		c.refuse(w, r, Problem{Status: http.StatusNotFound, Reason: ReasonNotFound,
			Detail: "no " + c.named()})
		return
	}
	c.refuse(w, r, Problem{Status: http.StatusServiceUnavailable, Reason: ReasonUnavailable,
		Detail: "cannot look up " + c.named() + " right now"})
}

// fail answers with a problem on behalf of a function that exists; the call
// is recorded with the reason.
func (c *call) fail(w http.ResponseWriter, prob Problem, errText string) {
	c.platform, c.reason, c.errText = true, prob.Reason, errText
	prob.RequestID = c.reqID
	if prob.Instance == "" {
		prob.Instance = c.instance
	}
	h := w.Header()
	h.Set(ErrorHeader, prob.Reason)
	h.Set(RequestIDHeader, c.reqID)
	if c.sharedOrigin() {
		isolate(h)
	}
	writeProblem(w, prob)
}

func (c *call) forward(w http.ResponseWriter, r *http.Request) {
	p := c.p
	c.instance = r.URL.Path
	c.rw.ResponseWriter = w
	c.rw.flusher, _ = w.(http.Flusher)
	c.out = &c.rw
	defer func() {
		v := recover()
		c.finish(r, v)
		if v != nil {
			panic(v)
		}
	}()
	if !c.target.Ready && c.target.Activate == nil && c.target.Failed == "" {
		c.awaitReady(r.Context())
	}
	if !c.target.Ready && c.target.Activate == nil {
		if c.target.Failed != "" {
			// Only the reason: a public function's callers are anyone, and
			// the condition's message may quote build logs. Its tenant reads
			// the message in the Function's status.
			c.fail(c.out, failedProblem(c), c.kind()+" failed: "+c.target.Failed)
			return
		}
		w.Header().Set("Retry-After", strconv.Itoa(int(p.opts.RetryAfter/time.Second)))
		c.fail(c.out, Problem{Status: http.StatusServiceUnavailable, Reason: ReasonNotReady,
			Detail: c.named() + " is not ready yet"}, c.kind()+" not ready")
		return
	}
	if r.ContentLength > p.opts.MaxRequestBytes {
		c.fail(c.out, tooLargeProblem(p.opts.MaxRequestBytes), "request body too large")
		return
	}

	c.addr = c.target.Address
	if c.target.Activate != nil {
		actx, cancel := context.WithTimeout(r.Context(), p.opts.ActivateTimeout)
		began := time.Now()
		act, err := c.target.Activate(actx)
		cancel()
		if err != nil && !errors.Is(err, ErrBusy) || err == nil && act.Cold {
			c.coldStartSpan(began, err)
		}
		if err != nil {
			if r.Context().Err() != nil {
				c.clientGone = true
				return
			}
			status, detail := http.StatusServiceUnavailable, c.named()+" could not be started"
			switch {
			case errors.Is(err, ErrBusy):
				// Every instance has as many calls as it takes; the caller
				// may try again, as after Knative's overload answer.
				detail = c.named() + " is busy: its instances are taking as many calls as they can (containerConcurrency)"
			case errors.Is(err, context.DeadlineExceeded):
				status = http.StatusGatewayTimeout
			}
			p.opts.Logger.Warn("cannot activate function", "namespace", c.ns, "function", c.name, "requestId", c.reqID, "error", err)
			w.Header().Set("Retry-After", strconv.Itoa(int(p.opts.RetryAfter/time.Second)))
			c.fail(c.out, Problem{Status: status, Reason: ReasonActivateFailed, Detail: detail}, "activate: "+err.Error())
			return
		}
		if act.Done != nil {
			// Runs before finish (deferred earlier): once the answer is
			// copied or the forward failed.
			defer act.Done()
		}
		if act.Address != nil {
			c.addr = act.Address
		}
		c.lost = act.Lost
		if act.Revision != "" {
			c.target.Revision = act.Revision
		}
		if act.Cold {
			c.cold = true
			c.coldCounted = true
			p.opts.Metrics.coldStart(time.Since(began))
		}
	}
	c.routeAddress(r)
	if c.addr == nil {
		w.Header().Set("Retry-After", strconv.Itoa(int(p.opts.RetryAfter/time.Second)))
		c.fail(c.out, Problem{Status: http.StatusServiceUnavailable, Reason: ReasonNotReady,
			Detail: c.named() + " has no address yet"}, c.kind()+" has no address")
		return
	}

	// Every hop derives its limit from the function's timeout: the proxy's
	// deadline, the connection's read and write deadlines (which would
	// otherwise be the server's, often far shorter).
	budget := c.target.Timeout + p.opts.TimeoutGrace
	if c.target.Idle {
		c.cold = true
		budget += p.opts.ColdStartAllowance
	}
	c.forwardStart = time.Now()
	c.parent = r.Context()
	deadline := c.forwardStart.Add(budget)
	ctx, cancel := context.WithDeadline(r.Context(), deadline)
	defer cancel()
	c.deadline = ctx
	ctx = context.WithValue(ctx, callKey{}, c)
	ctx = c.startUpstream(ctx, r.Method)
	// The connection deadlines lie beyond the call's own: when a read
	// deadline passes while a handler runs, net/http cancels the
	// connection's context for good, and the caller would get nothing
	// rather than the proxy's 504.
	c.conn = *http.NewResponseController(w)
	rc := &c.conn
	armed := rc.SetReadDeadline(deadline.Add(connectionSlack)) == nil
	_ = rc.SetWriteDeadline(deadline.Add(connectionSlack))
	// The connection may carry further requests; leave it without the
	// deadlines of this one (the server sets its own per request, if any).
	defer func() {
		_ = rc.SetReadDeadline(time.Time{})
		_ = rc.SetWriteDeadline(time.Time{})
	}()

	out := r.WithContext(ctx)
	if r.Body != nil && r.Body != http.NoBody {
		c.body = &limitedBody{rc: r.Body, left: p.opts.MaxRequestBytes, duplex: r.ProtoMajor >= 2}
		if armed {
			w := &c.body.idle
			w.conn, w.idle, w.ceiling = rc, p.opts.BodyIdleTimeout, deadline.Add(connectionSlack)
			defer w.stop()
		}
		out.Body = c.body
	}
	p.rp.ServeHTTP(c.out, out)
}

func (c *call) rewrite(pr *httputil.ProxyRequest) {
	in, out := pr.In, pr.Out
	u := out.URL
	u.Scheme, u.Host, u.User = c.addr.Scheme, c.addr.Host, nil
	escaped := strings.TrimSuffix(c.addr.EscapedPath(), "/") + c.rest
	if path, err := url.PathUnescape(escaped); err == nil {
		u.Path, u.RawPath = path, escaped
	} else {
		u.Path, u.RawPath = escaped, ""
	}
	u.RawQuery = in.URL.RawQuery
	u.Fragment, u.RawFragment = "", ""
	out.Host = ""

	h := out.Header
	for k := range h {
		if strings.HasPrefix(k, "X-Sless-") {
			delete(h, k)
		}
	}
	if c.p.opts.TrustForwarded {
		if v := in.Header["X-Forwarded-For"]; len(v) > 0 {
			h["X-Forwarded-For"] = v
		}
	} else {
		// nginx's spelling of X-Forwarded-For (ReverseProxy drops the
		// standard Forwarded itself): a function reading it would
		// believe whatever the caller wrote.
		delete(h, "X-Real-Ip")
	}
	pr.SetXForwarded()
	if c.p.opts.TrustForwarded {
		if v := in.Header.Get("X-Forwarded-Host"); v != "" {
			h.Set("X-Forwarded-Host", v)
		}
		if v := in.Header.Get("X-Forwarded-Proto"); v != "" {
			h.Set("X-Forwarded-Proto", v)
		}
	}
	switch {
	case c.byHost:
		delete(h, PrefixHeader) // nothing was removed from the path
	case c.trigger == TriggerHTTP || c.trigger == TriggerAsync:
		h.Set(PrefixHeader, PathPrefix+c.ns+"/"+c.name+c.atTag())
	case c.service():
		h.Set(PrefixHeader, ServicePrefix+c.ns+"/"+c.name+c.atTag())
	}
	h.Set(RequestIDHeader, c.reqID)
	c.injectUpstream(out.Context(), h)
	c.rewriteRoute(out)
	if c.slessToken {
		h.Del("Authorization")
	}
	if c.private {
		// The credentials were for sless; the function gets who called.
		h.Del("Authorization")
		if c.subject != "" {
			h.Set(SubjectHeader, c.subject)
		}
	}
}

func (c *call) modifyResponse(resp *http.Response) error {
	if resp.StatusCode > 599 {
		// RFC 9110 has no status past 599; callers, the metrics' classes
		// and the history's status filters know none either.
		return fmt.Errorf("the function answered status %d, which HTTP does not have (100-599)", resp.StatusCode)
	}
	c.upstreamAnswered(resp.StatusCode)
	resp.Header.Del(ErrorHeader)
	resp.Header.Set(RequestIDHeader, c.reqID)
	dropPlatformTrailers(resp.Trailer)
	if c.sharedOrigin() {
		dropCookies(resp.Header)
		delete(resp.Trailer, "Set-Cookie")
		isolate(c.out.Header())
	}
	if c.target.Idle && !c.coldCounted {
		c.coldCounted = true
		c.p.opts.Metrics.coldStart(time.Since(c.forwardStart))
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// ReverseProxy needs the body as it is, the connection to the
		// function (an io.ReadWriteCloser), to join it to the caller's; it
		// writes the 101 on the hijacked connection, past responseWriter.
		c.upgraded = true
		return nil
	}
	if resp.Body != nil && resp.Body != http.NoBody {
		resp.Body = &watchedBody{rc: resp.Body, c: c, resp: resp}
	}
	return nil
}

// errorHandler answers a call that got no response. ReverseProxy hands it
// failures of both sides alike; the caller's body tells them apart.
func (c *call) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	if c.body != nil && c.bodyFailed(w) {
		return
	}
	switch {
	case c.parent.Err() != nil:
		// The caller went away; nobody reads an answer.
		c.clientGone = true
		c.platform, c.errText = true, "client closed the request"
	case c.deadline.Err() == context.DeadlineExceeded:
		c.fail(w, Problem{Status: http.StatusGatewayTimeout, Reason: ReasonTimeout,
			Detail: fmt.Sprintf("%s did not answer within %s", c.named(), c.target.Timeout)}, "timeout: "+err.Error())
	default:
		// A malformed answer's error quotes it, up to the whole head the
		// function sent: the log and the record take the error cut short.
		msg, detail := "unreachable: "+err.Error(), c.named()+" could not be reached"
		if c.lost != nil {
			if why := c.lost(); why != "" {
				msg, detail = "unreachable: "+why+" ("+err.Error()+")", detail+": "+why
			}
		}
		msg = cleanText(msg, MaxErrorLength)
		c.p.opts.Logger.Warn("cannot reach function", "namespace", c.ns, "function", c.name, "requestId", c.reqID, "error", msg)
		c.fail(w, Problem{Status: http.StatusBadGateway, Reason: ReasonUnreachable, Detail: detail}, msg)
	}
}

// bodyFailed answers the call, as the caller's fault (4xx), when the request
// body is why it failed, and reports whether it did. Logged at debug level
// only: anyone can send a broken body.
func (c *call) bodyFailed(w http.ResponseWriter) bool {
	b := c.body
	// reading first: a read that ends after it has stored its error.
	reading := b.reading.Load()
	err := b.failed()
	if !b.tooLarge.Load() && err == nil && !reading {
		return false
	}
	h := w.Header()
	switch {
	case b.tooLarge.Load():
		c.fail(w, tooLargeProblem(c.p.opts.MaxRequestBytes), "request body too large")
		return true
	case errors.Is(err, errBodyStalled) || err == nil && reading && b.idle.passed():
		c.bodyStalled(w)
		return true
	case errors.Is(err, io.ErrUnexpectedEOF) || c.parent.Err() != nil:
		// The caller closed its side before the body's end. One that only
		// half-closed still reads this; net/http would send an empty 200.
		h.Set("Connection", "close")
		c.fail(w, bodyIncompleteProblem(), "")
		c.clientGone = true
		c.errText = fmt.Sprintf("client closed the request before its body ended (%d bytes read)", b.n.Load())
	case err != nil:
		h.Set("Connection", "close")
		c.fail(w, bodyMalformedProblem(err), cleanText("malformed request body: "+err.Error(), MaxErrorLength))
	case c.deadline.Err() == context.DeadlineExceeded:
		// The function still waited for the rest of the body: the caller's
		// time ran out, not the function's.
		h.Set("Connection", "close")
		c.fail(w, bodyTimeoutProblem(c.target.Timeout),
			fmt.Sprintf("request body stalled: %d bytes of it arrived within %s", b.n.Load(), c.target.Timeout))
		// Its read still waits on the caller. A deadline now ends it, and
		// closing the body keeps net/http from waiting for the rest.
		_ = c.conn.SetReadDeadline(time.Now())
		_ = b.Close()
	default:
		// Still sending when the function went away: the function's fault.
		return false
	}
	c.p.opts.Logger.Debug("cannot read the request body", "namespace", c.ns, "function", c.name, "requestId", c.reqID, "error", c.errText)
	return true
}

// finish records the call and counts it. v is what the forwarding panicked
// with (ReverseProxy aborts with http.ErrAbortHandler when a body copy
// fails), or nil.
func (c *call) finish(r *http.Request, v any) {
	d := time.Since(c.start)
	status := c.out.status
	switch {
	case c.clientGone:
		status = StatusClientClosed
		if c.errText == "" {
			c.errText = "client closed the request"
		}
	case v != nil || c.out.err != nil:
		if c.out.err != nil {
			status = StatusClientClosed
			c.errText = "client closed the connection during the response"
		} else if c.upstreamErr != nil {
			if errors.Is(c.upstreamErr, context.DeadlineExceeded) {
				c.errText = fmt.Sprintf("response cut at the deadline (%s)", c.target.Timeout)
			} else {
				c.errText = "response cut short: " + c.upstreamErr.Error()
			}
		} else if r.Context().Err() != nil {
			status = StatusClientClosed
			c.errText = "client closed the request"
		}
	case status == 0 && c.upgraded:
		status = http.StatusSwitchingProtocols
	case status == 0:
		status = http.StatusOK // a handler that wrote nothing
	}
	c.p.opts.Metrics.request(status, c.platform, d, c.spanContext())
	if c.span != nil {
		c.endUpstream(c.errText)
		c.endSpan(status, c.out.status)
	}
	if c.p.opts.Recorder == nil || c.trigger == triggerIngress {
		return
	}
	var in int64
	if c.body != nil {
		in = c.body.n.Load()
	}
	revision := c.target.Revision
	c.p.opts.Recorder.Record(Record{
		Namespace: c.ns,
		Function:  c.name,
		Revision:  revision,
		Trigger:   c.trigger,
		RequestID: c.reqID,
		StartedAt: c.start,
		Duration:  d,
		Status:    status,
		BytesIn:   in,
		BytesOut:  c.out.n,
		ColdStart: c.cold,
		Error:     c.errText,
	})
}

// limitedBody counts a request body, fails the read past the cap, and keeps
// what failed reading it from the caller: the transport's error alone does
// not tell the caller's side from the function's. The transport reads it on
// a goroutine of its own, hence the atomics.
type limitedBody struct {
	rc       io.ReadCloser
	left     int64
	n        atomic.Int64
	tooLarge atomic.Bool
	reading  atomic.Bool // a Read waits on the caller
	ended    atomic.Bool // closed after the function's answer ended
	// duplex: the caller's HTTP/2 stream may go on sending after the
	// answer ended, where HTTP/1.1's body ends before its next request.
	duplex bool
	err    atomic.Pointer[error]
	idle   idleWatch
}

var errBodyTooLarge = errors.New("request body too large")

func (b *limitedBody) Read(p []byte) (int, error) {
	b.reading.Store(true)
	b.idle.arm()
	n, err := b.read(p)
	if err != nil {
		err = b.idle.ended(err)
	}
	// A read after the transport closed the body is no fault of the caller.
	if err != nil && err != io.EOF && err != errBodyTooLarge && !errors.Is(err, http.ErrBodyReadAfterClose) && !b.ended.Load() {
		b.err.CompareAndSwap(nil, &err)
	}
	b.reading.Store(false) // after the error: see call.bodyFailed
	return n, err
}

// failed is the first error reading the caller's body, or nil.
func (b *limitedBody) failed() error {
	if e := b.err.Load(); e != nil {
		return *e
	}
	return nil
}

func (b *limitedBody) read(p []byte) (int, error) {
	if b.left <= 0 {
		// Read one byte more to tell "exactly at the cap" from "past it".
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n > 0 {
			b.tooLarge.Store(true)
			return 0, errBodyTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.n.Add(int64(n))
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// end closes the body once the function's answer has ended; what reading
// it fails with then is no fault of the caller's.
func (b *limitedBody) end() {
	b.ended.Store(true)
	_ = b.rc.Close()
}

// dropPlatformTrailers removes trailers that would pose as the platform's
// headers. Announced ones are removed before the response head is sent;
// the body fills in those sent unannounced when it ends.
func dropPlatformTrailers(t http.Header) {
	if t != nil {
		delete(t, ErrorHeader)
		delete(t, RequestIDHeader)
	}
}

// watchedBody notes why reading a function's response failed, and takes
// the platform's headers out of the trailers it ends with.
type watchedBody struct {
	rc   io.ReadCloser
	c    *call
	resp *http.Response
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err == io.EOF {
		dropPlatformTrailers(b.resp.Trailer)
	}
	if err != nil && b.c.body != nil && b.c.body.duplex {
		// A stream's answer may end before its request does (a gRPC
		// server failing a stream the client still sends on). Closing the
		// response waits for the request body's writer, which ReverseProxy
		// keeps from closing it: end the caller's request here.
		b.c.body.end()
	}
	if err != nil && err != io.EOF && b.c.upstreamErr == nil {
		b.c.upstreamErr = err
		if b.c.deadline.Err() == context.DeadlineExceeded {
			b.c.upstreamErr = context.DeadlineExceeded
		}
	}
	return n, err
}

func (b *watchedBody) Close() error { return b.rc.Close() }

// responseWriter counts the bytes and keeps the status sent to the caller.
type responseWriter struct {
	http.ResponseWriter
	flusher http.Flusher
	status  int
	n       int64
	err     error
}

func (w *responseWriter) WriteHeader(code int) {
	if w.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *responseWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.n += int64(n)
	if err != nil && w.err == nil {
		w.err = err
	}
	return n, err
}

// FlushError lets http.ResponseController flush through the wrapper.
func (w *responseWriter) FlushError() error {
	if w.flusher == nil {
		return http.ErrNotSupported
	}
	w.flusher.Flush()
	return nil
}

// Unwrap lets http.ResponseController reach the connection (deadlines,
// hijacking for protocol upgrades).
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// copyBufferSize is the buffer ReverseProxy copies response bodies through.
const copyBufferSize = 32 << 10

// bufferPool holds arrays rather than slices: a slice handed back converts
// to its array's pointer without an allocation, where pooling the slice
// would allocate its header on every Put.
type bufferPool struct{ sync.Pool }

func (p *bufferPool) Get() []byte { return p.Pool.Get().(*[copyBufferSize]byte)[:] }

func (p *bufferPool) Put(b []byte) {
	if cap(b) >= copyBufferSize {
		p.Pool.Put((*[copyBufferSize]byte)(b[:copyBufferSize]))
	}
}
