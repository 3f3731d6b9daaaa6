// Package api is sless's REST API: CRUD of Functions, Triggers and
// FunctionJobs as the CRDs' own JSON, source uploads into S3, and tenancy
// (a bearer token maps to one namespace). Handlers talk to an ObjectStore and
// an s3.Store, so the same API runs on a cluster (controller-runtime client,
// S3) and in local mode (objects on disk, blobs in a directory).
//
// Routes are those of DESIGN §6; /openapi.json describes them and a test
// holds the two together. Errors are RFC 9457 problem+json.
package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/adapter"
	"github.com/sless-dev/sless/pkg/adapter/s3"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/auth"
	"github.com/sless-dev/sless/pkg/logs"
	"github.com/sless-dev/sless/pkg/source"
)

const (
	defaultListLimit = 100
	maxListLimit     = 500
	// DefaultMaxObjectBytes bounds a JSON body: a Function with 256 KiB of
	// inline code and its environment fits; etcd would refuse much more.
	DefaultMaxObjectBytes = 2 << 20
	// DefaultDeleteWait is how long a create waits for an object of the same
	// name to finish being deleted.
	DefaultDeleteWait  = 5 * time.Second
	deletePoll         = 100 * time.Millisecond
	retryAfterDeleting = 2
	// DefaultMaxUploads bounds the source uploads in progress at once. Each
	// holds its zip and its unpacked files in memory until it is answered
	// (up to Limits.MaxCompressed and MaxUncompressed), so without a bound a
	// burst of uploads could take the process's memory.
	DefaultMaxUploads = 8
	// DefaultUploadQueueWait is how long an upload waits for a free slot
	// before it is refused; long enough to ride out a short burst, short
	// enough that a client is not left hanging behind large uploads.
	DefaultUploadQueueWait = 2 * time.Second
	retryAfterBusy         = 2
)

// Options configure a Server. Objects, Auth, Blobs and Bucket are required.
type Options struct {
	// Objects stores the resources. Get and List for GET requests go here.
	Objects ObjectStore
	// Live reads bypassing any cache; conflict decisions, preconditions and
	// read-modify-write use it. Nil means Objects is not cached.
	Live client.Reader
	// Tenants creates a tenant's namespace on first use; nil does nothing.
	Tenants TenantProvisioner
	// TenantNamespaces, when set, refuses a non-admin caller (403) whose
	// namespace is not a tenant's. Nil takes every namespace for one, as
	// local mode does, where the one caller is the dev token, an admin.
	TenantNamespaces TenantNamespaces
	// Auth authenticates every /v1 request.
	Auth Authenticator
	// Blobs holds source archives and build contexts; Bucket is the bucket
	// it writes to, recorded in spec.source.archive.bucket.
	Blobs  s3.Store
	Bucket string
	// Limits bound an uploaded archive (zero fields: source.DefaultLimits).
	Limits source.Limits
	// MaxObjectBytes bounds a JSON body; 0 means DefaultMaxObjectBytes.
	MaxObjectBytes int64
	// DeleteWait bounds how long a create waits for an old object of the
	// same name to be deleted; 0 means DefaultDeleteWait.
	DeleteWait time.Duration
	// MaxUploads bounds the source uploads in progress at once; 0 means
	// DefaultMaxUploads. An upload past it waits up to UploadQueueWait
	// (0 means DefaultUploadQueueWait) for another to finish, then is
	// answered 503 with Retry-After before its archive is read or stored.
	MaxUploads      int
	UploadQueueWait time.Duration
	// MaxUploadsPerTenant bounds the slots the uploads of one namespace
	// hold at once, so that one tenant cannot keep the others' uploads out;
	// past it an upload waits as above, then is answered 429. 0 means half
	// of MaxUploads, rounded up; MaxUploads or more keeps no share.
	MaxUploadsPerTenant int
	// UploadMinRate is the slowest, in bytes per second averaged over every
	// UploadRateWindow, an upload body may arrive once it holds a slot,
	// judged from one window after it took the slot; a slower one is
	// answered 408 and gives its slot back. 0 means DefaultUploadMinRate
	// and DefaultUploadRateWindow; a negative rate judges none.
	UploadMinRate    int64
	UploadRateWindow time.Duration
	// BodyIdleTimeout is how long a request body may send nothing before
	// the request is answered 408 (and an upload gives back its slot); 0
	// means DefaultBodyIdleTimeout.
	BodyIdleTimeout time.Duration
	// Maximums, when set, refuses a Function or SlessService whose
	// resources are over its namespace's maximums, as the admission policy
	// does on a cluster and with its words; nil refuses none.
	Maximums Maximums
	// Unsupported, when set, refuses a Function or SlessService that asks
	// for what this back end cannot run (local mode: a
	// PersistentVolumeClaim), naming the field and why.
	Unsupported func(slessv1alpha1.Workload) *field.Error
	// Ready reports whether the server can serve (for /readyz); nil is always ready.
	Ready func(ctx context.Context) error

	// Invoke, when set, serves the public invoke paths /fn/{ns}/{name}[/*path]
	// and /svc/{ns}/{name}[/*path]
	// for every method. It is not behind the API's authentication: the
	// invoke proxy decides per function (see auth.Verifier.Authenticate).
	Invoke http.Handler
	// Secrets, when set, keeps the secrets of /v1/namespaces/{ns}/secrets
	// as Kubernetes Secrets (corev1.Secret, apiserver semantics as for
	// Objects): an uncached client on a cluster, a store that seals the
	// values (pkg/secrets/sealed) in local mode. Reads go to it directly,
	// never through a cache. Nil answers the routes 501.
	Secrets ObjectStore
	// Invocations, when set, serves GET /v1/namespaces/{ns}/functions/{name}/invocations
	// behind authentication and the tenancy check; IdentityOf(c) is the caller.
	Invocations gin.HandlerFunc
	// ServiceInvocations is Invocations for …/services/{name}/invocations.
	ServiceInvocations gin.HandlerFunc
	// InvocationStats, when set, serves GET …/functions/{name}/invocations/stats,
	// the aggregate charts are drawn from, as Invocations is served;
	// ServiceInvocationStats the same of …/services/{name}. Nil answers 501.
	InvocationStats        gin.HandlerFunc
	ServiceInvocationStats gin.HandlerFunc
	// Invocation, when set, serves GET …/functions/{name}/invocations/{id},
	// the record of an asynchronous call, as Invocations is served; nil
	// answers 501.
	Invocation gin.HandlerFunc
	// CallbackKey, when set, serves GET /v1/namespaces/{ns}/callbacks/signing-key,
	// the key the namespace's callbacks are signed with; nil answers 501.
	CallbackKey gin.HandlerFunc
	// Logs, when set, serves GET …/functions/{name}/logs and
	// …/functions/{name}/builds/{build}/logs, and the same of
	// …/services/{name}; nil answers them 501.
	Logs logs.Source

	// Revisions, when set, lists the revisions of …/functions/{name}/revisions
	// and …/services/{name}/revisions; nil answers them 501.
	Revisions adapter.RevisionLister

	// Console, when set, serves the web console under /console/ (see
	// pkg/console). It authenticates its own callers, from a cookie.
	Console http.Handler

	// Registerer receives the API's metrics; nil makes a fresh registry.
	// /metrics serves Gatherer (the registry made here when nil).
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
	Logger     *slog.Logger
}

// Server is the REST API.
type Server struct {
	opts    Options
	objects ObjectStore
	live    client.Reader
	engine  *gin.Engine
	metrics *metrics
	log     *slog.Logger

	tenantsMu sync.Mutex
	tenants   map[string]bool // namespaces known to exist

	// uploads holds one unit per source upload in progress (MaxUploads),
	// tenantUploads the same per namespace (MaxUploadsPerTenant; nil when
	// a tenant may hold them all).
	uploads       *semaphore.Weighted
	tenantUploads *shares
}

// New checks opts and builds the router.
func New(opts Options) (*Server, error) {
	switch {
	case opts.Objects == nil:
		return nil, errors.New("api: Objects is required")
	case opts.Auth == nil:
		return nil, errors.New("api: Auth is required")
	case opts.Blobs == nil || opts.Bucket == "":
		return nil, errors.New("api: Blobs and Bucket are required")
	}
	if opts.Live == nil {
		opts.Live = opts.Objects
	}
	if opts.MaxObjectBytes <= 0 {
		opts.MaxObjectBytes = DefaultMaxObjectBytes
	}
	if opts.DeleteWait <= 0 {
		opts.DeleteWait = DefaultDeleteWait
	}
	if opts.MaxUploads < 0 || opts.UploadQueueWait < 0 || opts.BodyIdleTimeout < 0 || opts.MaxUploadsPerTenant < 0 || opts.UploadRateWindow < 0 {
		return nil, errors.New("api: MaxUploads, MaxUploadsPerTenant, UploadQueueWait, UploadRateWindow and BodyIdleTimeout must not be negative")
	}
	if opts.BodyIdleTimeout == 0 {
		opts.BodyIdleTimeout = DefaultBodyIdleTimeout
	}
	if opts.MaxUploads == 0 {
		opts.MaxUploads = DefaultMaxUploads
	}
	if opts.UploadQueueWait == 0 {
		opts.UploadQueueWait = DefaultUploadQueueWait
	}
	if opts.MaxUploadsPerTenant == 0 {
		opts.MaxUploadsPerTenant = (opts.MaxUploads + 1) / 2
	}
	opts.MaxUploadsPerTenant = min(opts.MaxUploadsPerTenant, opts.MaxUploads)
	if opts.UploadMinRate == 0 {
		opts.UploadMinRate = DefaultUploadMinRate
	}
	if opts.UploadRateWindow == 0 {
		opts.UploadRateWindow = DefaultUploadRateWindow
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Registerer == nil {
		reg := prometheus.NewRegistry()
		opts.Registerer, opts.Gatherer = reg, reg
	}
	if opts.Gatherer == nil {
		return nil, errors.New("api: Gatherer is required with Registerer")
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	m.upSlots.Set(float64(opts.MaxUploads))
	m.upTenantSlots.Set(float64(opts.MaxUploadsPerTenant))
	s := &Server{
		opts: opts, objects: opts.Objects, live: opts.Live, metrics: m, log: opts.Logger,
		tenants: map[string]bool{}, uploads: semaphore.NewWeighted(int64(opts.MaxUploads)),
	}
	if opts.MaxUploadsPerTenant < opts.MaxUploads {
		s.tenantUploads = &shares{each: int64(opts.MaxUploadsPerTenant)}
	}
	s.engine = s.routes()
	return s, nil
}

// Handler is the API as an http.Handler.
func (s *Server) Handler() http.Handler { return s.engine }

// Engine is the gin engine, for tests that list its routes.
func (s *Server) Engine() *gin.Engine { return s.engine }

func init() { gin.SetMode(gin.ReleaseMode) }

func (s *Server) routes() *gin.Engine {
	r := gin.New()
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.HandleMethodNotAllowed = true
	r.ContextWithFallback = true
	r.Use(s.recover, s.observe)
	r.NoRoute(func(c *gin.Context) {
		writeProblem(c, notFound("no route for %s %s", c.Request.Method, c.Request.URL.Path))
	})
	r.NoMethod(func(c *gin.Context) {
		writeProblem(c, problem(http.StatusMethodNotAllowed, "method-not-allowed", "Method not allowed", "%s is not allowed on %s", c.Request.Method, c.Request.URL.Path))
	})

	// Every GET answers HEAD too (RFC 9110 9.1): the same status and
	// headers, no body, which net/http drops for HEAD.
	get := func(g gin.IRoutes, path string, h ...gin.HandlerFunc) {
		g.GET(path, h...)
		g.HEAD(path, h...)
	}
	get(r, "/healthz", func(c *gin.Context) { c.String(http.StatusOK, "ok") })
	get(r, "/readyz", s.readyz)
	get(r, "/metrics", gin.WrapH(s.metrics.handler(s.opts.Gatherer)))
	get(r, "/openapi.json", s.openapi)

	v1 := r.Group("/v1", s.authenticate)
	none := s.query()
	get(v1, "/whoami", none, s.whoami)
	nsr := v1.Group("/namespaces/:ns", s.authorize)
	for _, k := range allKinds {
		col := "/" + k.plural
		item := col + "/:name"
		named := s.named(k)
		get(nsr, col, s.query("limit", "cursor", "labelSelector"), s.list(k))
		nsr.POST(col, none, s.create(k))
		get(nsr, item, named, none, s.get(k))
		nsr.PUT(item, named, none, s.replace(k))
		nsr.PATCH(item, named, none, s.patch(k))
		nsr.DELETE(item, named, none, s.remove(k))
	}
	for _, k := range allKinds {
		if k.built != nil {
			named := s.named(k)
			nsr.PUT("/"+k.plural+"/:name/source", named, s.query("runtime", "entrypoint"), s.putSource(k))
			get(nsr, "/"+k.plural+"/:name/source", named, none, s.getSource(k))
		}
	}
	fnNamed := s.named(functions)
	// The routes exist whatever the server keeps, so a client told by the
	// OpenAPI document that they do learns why they have no answer.
	noHistory := func(c *gin.Context) {
		writeProblem(c, problem(http.StatusNotImplemented, "no-history", "No invocation history",
			"this server keeps no invocation records: it was started without a database (sless api --database-url)"))
	}
	invocations, svcInvocations := s.opts.Invocations, s.opts.ServiceInvocations
	if invocations == nil {
		invocations = noHistory
	}
	if svcInvocations == nil {
		svcInvocations = noHistory
	}
	get(nsr, "/functions/:name/invocations", fnNamed, invocations)
	fnStats, svcStats := s.opts.InvocationStats, s.opts.ServiceInvocationStats
	if fnStats == nil {
		fnStats = noHistory
	}
	if svcStats == nil {
		svcStats = noHistory
	}
	// A static segment beside :id: an asynchronous call whose request id
	// is "stats" is read through the listing, not here.
	get(nsr, "/functions/:name/invocations/stats", fnNamed, fnStats)
	get(nsr, "/services/:name/invocations/stats", s.named(services), svcStats)
	invocation := s.opts.Invocation
	if invocation == nil {
		invocation = func(c *gin.Context) {
			writeProblem(c, problem(http.StatusNotImplemented, "no-async", "No asynchronous calls",
				"this server keeps no asynchronous calls: it answers Prefer: respond-async calls at once"))
		}
	}
	get(nsr, "/functions/:name/invocations/:id", fnNamed, invocation)
	callbackKey := s.opts.CallbackKey
	if callbackKey == nil {
		callbackKey = func(c *gin.Context) {
			writeProblem(c, problem(http.StatusNotImplemented, "no-callbacks", "No callbacks",
				"this server posts no callbacks: it keeps no asynchronous calls"))
		}
	}
	get(nsr, "/callbacks/signing-key", callbackKey)
	get(nsr, "/services/:name/invocations", s.named(services), svcInvocations)
	get(nsr, "/functions/:name/logs", fnNamed, s.query(logParams...), s.instanceLogs(newFunction))
	get(nsr, "/functions/:name/builds/:build/logs", fnNamed, s.query(logParams...), s.buildLogs(newFunction))
	svcNamed := s.named(services)
	get(nsr, "/functions/:name/revisions", fnNamed, none, s.revisions(newFunction))
	get(nsr, "/services/:name/revisions", svcNamed, none, s.revisions(newService))
	get(nsr, "/services/:name/logs", svcNamed, s.query(logParams...), s.instanceLogs(newService))
	get(nsr, "/services/:name/builds/:build/logs", svcNamed, s.query(logParams...), s.buildLogs(newService))
	if s.opts.Console != nil {
		h := gin.WrapH(s.opts.Console)
		r.Any("/console", h)
		r.Any("/console/*path", h)
	}
	s.secretRoutes(nsr, get)
	nsr.POST("/devices/:name/rotate", s.named(iotDevices), none, s.rotateDevice)
	if s.opts.Invoke != nil {
		h := gin.WrapH(s.opts.Invoke)
		r.Any("/fn/:ns/:name", h)
		r.Any("/fn/:ns/:name/*path", h)
		r.Any("/svc/:ns/:name", h)
		r.Any("/svc/:ns/:name/*path", h)
	}
	return r
}

const identityKey = "sless.identity"

// IdentityOf is the authenticated caller of a /v1 request.
func IdentityOf(c *gin.Context) *auth.Identity {
	id, _ := c.Get(identityKey)
	v, _ := id.(*auth.Identity)
	return v
}

func (s *Server) authenticate(c *gin.Context) {
	id, err := s.opts.Auth.Authenticate(c.Request)
	if err != nil {
		p := authProblem(err)
		if p.Status == http.StatusUnauthorized {
			c.Header("WWW-Authenticate", `Bearer realm="sless"`)
		}
		writeProblem(c, p)
		return
	}
	c.Set(identityKey, id)
}

// authorize lets a caller into a namespace: its own, or any for an admin. A
// tenant naming another namespace gets the same 403 whatever is in it, so it
// learns nothing about the objects there.
func (s *Server) authorize(c *gin.Context) {
	id, ns := IdentityOf(c), c.Param("ns")
	if !id.MayAct(ns) {
		writeProblem(c, problem(http.StatusForbidden, "forbidden", "Forbidden", "%s may not act in namespace %q", id.Subject, ns))
		return
	}
	if p := checkNamespace(ns); p != nil {
		writeProblem(c, p)
		return
	}
	if p := s.checkTenant(c, id); p != nil {
		writeProblem(c, p)
	}
}

// ReasonNotTenantNamespace is the reason of the 403 for a caller whose token
// names a namespace that is no tenant's.
const ReasonNotTenantNamespace = "NotTenantNamespace"

// checkTenant refuses a non-admin caller whose namespace is not a tenant's:
// the namespace claim may name any namespace, default and sless's own too.
func (s *Server) checkTenant(c *gin.Context, id *auth.Identity) *Problem {
	if s.opts.TenantNamespaces == nil || id == nil || id.Admin {
		return nil
	}
	ok, err := s.opts.TenantNamespaces.IsTenant(c.Request.Context(), id.Namespace)
	if err != nil {
		s.log.Error("check tenant namespace", "namespace", id.Namespace, "subject", id.Subject, "error", err)
		return unavailable(5, "cannot tell now whether namespace %q is a tenant's", id.Namespace)
	}
	if !ok {
		p := problem(http.StatusForbidden, "forbidden", "Forbidden",
			"namespace %q is not a tenant's: sless did not make it and its name has no tenant prefix, so only an admin may act there", id.Namespace)
		p.Reason = ReasonNotTenantNamespace
		return p
	}
	return nil
}

func checkNamespace(ns string) *Problem {
	if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
		return badRequestField("namespace", ns, msgs[0])
	}
	return nil
}

// named answers a malformed {name} before the handler runs.
func (s *Server) named(k *kind) gin.HandlerFunc {
	return func(c *gin.Context) {
		if p := checkName(k, c.Param("name")); p != nil {
			writeProblem(c, p)
		}
	}
}

// ensureTenant creates the caller's namespace before its first write.
// Admins write where they choose; their namespaces are not provisioned.
func (s *Server) ensureTenant(c *gin.Context) *Problem {
	id := IdentityOf(c)
	if s.opts.Tenants == nil || id == nil || id.Admin {
		return nil
	}
	s.tenantsMu.Lock()
	done := s.tenants[id.Namespace]
	s.tenantsMu.Unlock()
	if done {
		return nil
	}
	if err := s.opts.Tenants.EnsureTenant(c.Request.Context(), id); err != nil {
		s.log.Error("provision tenant namespace", "namespace", id.Namespace, "subject", id.Subject, "error", err)
		return unavailable(5, "the tenant namespace %q could not be prepared", id.Namespace)
	}
	s.tenantsMu.Lock()
	s.tenants[id.Namespace] = true
	s.tenantsMu.Unlock()
	return nil
}

// forgetTenant drops what ensureTenant remembers of the caller's namespace
// and says whether there was anything to drop: a namespace deleted after it
// was made (a tenant removed and come back) must be made again, not assumed
// until the server restarts.
func (s *Server) forgetTenant(c *gin.Context) bool {
	id := IdentityOf(c)
	if s.opts.Tenants == nil || id == nil || id.Admin {
		return false
	}
	s.tenantsMu.Lock()
	defer s.tenantsMu.Unlock()
	known := s.tenants[id.Namespace]
	delete(s.tenants, id.Namespace)
	return known
}

// whoami tells the caller who the API thinks it is, and prepares its
// namespace so a first `whoami` is all a new tenant needs; a caller whose
// namespace is no tenant's learns that here too.
func (s *Server) whoami(c *gin.Context) {
	if p := s.checkTenant(c, IdentityOf(c)); p != nil {
		writeProblem(c, p)
		return
	}
	if p := s.ensureTenant(c); p != nil {
		writeProblem(c, p)
		return
	}
	c.JSON(http.StatusOK, IdentityOf(c))
}

func (s *Server) readyz(c *gin.Context) {
	if s.opts.Ready != nil {
		ctx, cancel := context.WithTimeout(c.Request.Context(), 5*time.Second)
		defer cancel()
		if err := s.opts.Ready(ctx); err != nil {
			writeProblem(c, unavailable(5, "not ready: %v", err))
			return
		}
	}
	c.String(http.StatusOK, "ok")
}

// recover turns a panic into a 500 problem rather than a dropped connection.
func (s *Server) recover(c *gin.Context) {
	defer func() {
		if r := recover(); r != nil {
			if r == http.ErrAbortHandler {
				panic(r)
			}
			s.log.Error("panic serving request", "method", c.Request.Method, "path", c.Request.URL.Path, "panic", fmt.Sprint(r))
			if !c.Writer.Written() {
				writeProblem(c, internal(fmt.Errorf("internal error")))
			}
		}
	}()
	c.Next()
}
