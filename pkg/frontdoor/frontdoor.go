// Package frontdoor is the HTTP server sless puts in front of its users, on
// a cluster (`sless api`) and on one machine (`sless dev`) alike: the REST
// API, the invoke proxy with its recorder, the web console and /metrics,
// behind one listener that refuses ambiguous framing and stops gracefully.
// Each command only chooses what stands behind it (objects, blobs,
// resolvers, where records go).
package frontdoor

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"

	"github.com/sless-dev/sless/pkg/api"
	"github.com/sless-dev/sless/pkg/auth"
	"github.com/sless-dev/sless/pkg/console"
	"github.com/sless-dev/sless/pkg/devices"
	"github.com/sless-dev/sless/pkg/devices/rabbitmq"
	"github.com/sless-dev/sless/pkg/framing"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/async"
	"github.com/sless-dev/sless/pkg/invoke/callback"
	"github.com/sless-dev/sless/pkg/invoke/stats"
	"github.com/sless-dev/sless/pkg/problems"
)

// writeNoHistory answers the invocations listing of a server that keeps no
// records but does keep asynchronous calls.
func writeNoHistory(c *gin.Context) {
	invoke.WriteProblem(c.Writer, invoke.Problem{Type: problems.TypeBase + "no-history", Status: http.StatusNotImplemented,
		Title: "No invocation history", Instance: c.Request.URL.Path,
		Detail: "this server keeps no invocation records (asynchronous calls are listed with ?mode=async)"})
}

// Options says what stands behind the front door.
type Options struct {
	// API is the REST API's configuration. The front door fills in what it
	// owns: Invoke, Invocations, ServiceInvocations, Console, Registerer,
	// Gatherer and Logger. API.TenantNamespaces, when set, also applies to
	// callers of the invoke proxy and the console.
	API api.Options
	// Auth checks the callers of the API, the invoke proxy and the console.
	Auth *auth.Verifier
	// Proxy configures the invoke proxy: Resolver and Services find where a
	// call to /fn/ and /svc/ goes, Domain serves each function at its own
	// host, and so on. The front door fills in Authenticator, Recorder,
	// Metrics and Logger.
	Proxy invoke.Options
	// Records says where invocation records go.
	Records Records
	// IdleConnTimeout closes a keep-alive connection that sends no next
	// request this long. It must be positive.
	IdleConnTimeout time.Duration
	// Console serves the web console at /console/.
	Console bool
	// Calls, when set, stands in front of the invoke proxy where the API and
	// the console serve it (sless api: trigger credentials).
	Calls func(proxy *invoke.Proxy) http.Handler
	// Async, when set, keeps and runs calls made with Prefer:
	// respond-async; unset, such calls run at once without
	// Preference-Applied.
	Async *Async
	// APIBaseURL is the API's own URL, for the Location of a 202 on a
	// function's host; "" gives paths.
	APIBaseURL string
	// TracerProvider, when set, makes spans of the invoke proxy's calls and
	// of the asynchronous calls' attempts; nil makes none.
	TracerProvider trace.TracerProvider
	Logger         *slog.Logger
}

// Async says where asynchronous calls are kept and how each function
// limits them.
type Async struct {
	Store  async.Store
	Policy func(ctx context.Context, ns, name string) (async.Policy, error)
	// Backoff, when set, replaces the runner's wait before a retry (tests).
	Backoff func(n int) time.Duration
	// Keys keeps each namespace's callback signing key; nil posts no
	// results (X-Callback-Url is refused 501). CallbackPolicy says which
	// hosts results may be posted to (nil: public addresses only).
	Keys           async.Keys
	CallbackPolicy *callback.Policy
	// Queue, when set, shares the Store with other replicas (sless api):
	// see async.Runner.Queue.
	Queue async.Queue
}

// Door is a front door made and not yet closed.
type Door struct {
	opts     Options
	reg      *prometheus.Registry
	records  *records
	runner   *async.Runner
	proxy    *invoke.Proxy
	handler  http.Handler
	public   http.Handler // the public door's: Ingresses' ExternalIP rules only
	shutdown time.Duration
	// closers close, after the runner, what the asynchronous calls use.
	closers Closers
}

// New makes the front door: metrics, the recorder, the invoke proxy, the
// console and the API. Close it (after Serve returns) to flush the recorder.
func New(ctx context.Context, opts Options) (*Door, error) {
	if opts.IdleConnTimeout <= 0 {
		return nil, errors.New("frontdoor: IdleConnTimeout must be positive")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	d := &Door{opts: opts, reg: prometheus.NewRegistry(), shutdown: 30 * time.Second}
	d.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics, err := invoke.NewMetrics(d.reg)
	if err != nil {
		return nil, err
	}
	if d.records, err = openRecords(ctx, opts.Records, metrics, opts.Logger); err != nil {
		return nil, err
	}
	if err := d.build(metrics); err != nil {
		d.Close()
		return nil, err
	}
	if d.runner != nil {
		if err := d.runner.Start(ctx); err != nil {
			d.runner = nil
			d.Close()
			return nil, err
		}
	}
	return d, nil
}

// build makes the proxy, the console and the API over them.
func (d *Door) build(metrics *invoke.Metrics) error {
	o, log := d.opts, d.opts.Logger
	po := o.Proxy
	po.Authenticator = ProxyAuthenticator(o.Auth, o.API.TenantNamespaces, log)
	po.Recorder, po.Metrics, po.Logger, po.TracerProvider = d.records.recorder, metrics, log, o.TracerProvider
	if o.Async != nil {
		d.runner = &async.Runner{Store: o.Async.Store, Policy: o.Async.Policy, Backoff: o.Async.Backoff, Queue: o.Async.Queue,
			Logger: log, Registerer: d.reg, TracerProvider: o.TracerProvider}
		if o.Async.Keys != nil {
			d.runner.Keys, d.runner.Callbacks = o.Async.Keys, callback.NewSender(o.Async.CallbackPolicy, 0, nil)
		}
		po.Async, po.APIBaseURL = d.runner, o.APIBaseURL
	}
	proxy, err := invoke.NewProxy(po)
	if err != nil {
		return err
	}
	d.proxy = proxy
	a := o.API
	a.Invoke = proxy
	if o.Calls != nil {
		a.Invoke = o.Calls(proxy)
	}
	if h := d.records.history; h != nil {
		list := invoke.ListHandler{History: h, Logger: log, Functions: po.Resolver}
		a.Invocations = func(c *gin.Context) { list.List(c.Writer, c.Request, c.Param("ns"), c.Param("name")) }
		svcList := invoke.ListHandler{History: h, Logger: log, Functions: po.Services}
		a.ServiceInvocations = func(c *gin.Context) { svcList.ListService(c.Writer, c.Request, c.Param("ns"), c.Param("name")) }
	}
	if st := d.records.stats; st != nil {
		h := stats.Handler{Source: st, Functions: po.Resolver, Services: po.Services, Logger: log}
		a.InvocationStats = func(c *gin.Context) { h.Function(c.Writer, c.Request, c.Param("ns"), c.Param("name")) }
		a.ServiceInvocationStats = func(c *gin.Context) { h.Service(c.Writer, c.Request, c.Param("ns"), c.Param("name")) }
	}
	if d.runner != nil {
		d.runner.Run = proxy.RunAsync
		calls := async.Handler{Runner: d.runner}
		a.Invocation = func(c *gin.Context) { calls.Get(c.Writer, c.Request, c.Param("ns"), c.Param("name"), c.Param("id")) }
		a.CallbackKey = func(c *gin.Context) { calls.SigningKey(c.Writer, c.Request, c.Param("ns")) }
		records := a.Invocations
		a.Invocations = func(c *gin.Context) {
			if c.Request.URL.Query().Has("mode") {
				calls.List(c.Writer, c.Request, c.Param("ns"), c.Param("name"))
				return
			}
			if records == nil {
				writeNoHistory(c)
				return
			}
			records(c)
		}
	}
	if o.Console {
		// The console reads what the API reads and calls functions through
		// the same handler, with the caller's own token.
		co := console.Options{
			Objects: a.Objects, Auth: o.Auth, TenantNamespaces: a.TenantNamespaces, Blobs: a.Blobs, Limits: a.Limits,
			History: d.records.history, Stats: d.records.stats, Secrets: a.Secrets, Invoke: a.Invoke, Logs: a.Logs, Logger: log,
		}
		if o.Async != nil {
			co.Async = o.Async.Store
		}
		con, err := console.New(co)
		if err != nil {
			return err
		}
		a.Console = con
	}
	a.Registerer, a.Gatherer, a.Logger = d.reg, d.reg, log
	srv, err := api.New(a)
	if err != nil {
		return err
	}
	// Knative Ingresses' hosts (when the proxy has routes) and function
	// hosts are served before the API's router sees them.
	d.handler = proxy.Ingresses(proxy.Hosts(srv.Handler()))
	d.public = proxy.PublicIngresses(proxy.Hosts(srv.Handler()))
	return nil
}

// Registry is where the front door's series are; /metrics serves it, so
// the caller may add its own.
func (d *Door) Registry() *prometheus.Registry { return d.reg }

// Recorder records calls made beside the proxy (local mode's cron and queue
// triggers and jobs); nil when records are kept nowhere.
func (d *Door) Recorder() *invoke.Recorder { return d.records.recorder }

// Serve serves on ln until ctx is done, then stops taking connections and
// waits up to 30 seconds for the calls in progress.
func (d *Door) Serve(ctx context.Context, ln net.Listener) error {
	// Without IdleTimeout (and no ReadTimeout, which would cut long calls
	// and uploads), net/http keeps a keep-alive connection that sends no
	// next request for ever: anyone could hold all the file descriptors.
	hs := &http.Server{Handler: d.handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: d.opts.IdleConnTimeout}
	// HTTP/2 without TLS by prior knowledge too, as gRPC clients and
	// Knative's ingress contract (h2c to an Ingress's hosts) have it.
	hs.Protocols = new(http.Protocols)
	hs.Protocols.SetHTTP1(true)
	hs.Protocols.SetUnencryptedHTTP2(true)
	errc := make(chan error, 1)
	// RFC 9112 §6.1: Content-Length with Transfer-Encoding is refused and the
	// connection closed, or a request could be smuggled behind it.
	go func() { errc <- framing.Serve(hs, ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), d.shutdown)
	defer cancel()
	return hs.Shutdown(sctx)
}

// ServePublic is Serve for the public door, the load balancer of callers
// from outside the cluster: the same front door, but of Knative Ingresses
// it serves the ExternalIP rules only. Serve's listener is the
// cluster-local door, which serves them all.
func (d *Door) ServePublic(ctx context.Context, ln net.Listener) error {
	public := *d
	public.handler = d.public
	return public.Serve(ctx, ln)
}

// ServeDoors serves the cluster-local door on ln and, unless pub is nil,
// the public door on pub. Either failing stops both: a replica with one
// door would answer Knative's prober and still fail the other's callers.
func (d *Door) ServeDoors(ctx context.Context, ln, pub net.Listener) error {
	if pub == nil {
		return d.Serve(ctx, ln)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return d.Serve(gctx, ln) })
	g.Go(func() error { return d.ServePublic(gctx, pub) })
	return g.Wait()
}

// Close stops the asynchronous calls' attempts, then flushes the recorder
// and closes where records go. Calls recorded after it are lost.
func (d *Door) Close() {
	if d.runner != nil {
		d.runner.Close()
	}
	d.closers.Close()
	d.records.close()
}

// DeviceAuth is the broker's HTTP auth backend for IoT devices
// (docs/devices.md): RabbitMQ's four endpoints under /broker/rabbitmq,
// deciding from the devices and Secrets the API keeps, counted on the
// door's registry. Serve it on a listener of its own that only the broker
// reaches.
func (d *Door) DeviceAuth(cfg rabbitmq.AuthConfig) (http.Handler, error) {
	live := d.opts.API.Live
	if live == nil {
		live = d.opts.API.Objects
	}
	if d.opts.API.Secrets == nil {
		return nil, errors.New("device auth: this server keeps no Secrets, where devices' credentials are")
	}
	m, err := devices.NewMetrics(d.reg)
	if err != nil {
		return nil, err
	}
	// Live reads: a device disabled a moment ago must not get back in on a
	// cache that has not seen it yet.
	a := &devices.Authority{Dir: devices.ReaderDirectory{Devices: live, Secrets: d.opts.API.Secrets}}
	m.Watch(a)
	if cfg.Log == nil {
		cfg.Log = d.opts.Logger
	}
	return rabbitmq.AuthHandler(DeviceAuthPrefix, a, cfg), nil
}

// DeviceAuthPrefix is where DeviceAuth serves RabbitMQ's endpoints.
const DeviceAuthPrefix = "/broker/rabbitmq"
