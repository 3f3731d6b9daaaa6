package invoke

import (
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"knative.dev/networking/pkg/http/header"

	"github.com/sless-dev/sless/pkg/invoke/routing"
)

// DefaultIngressTimeout bounds a call through an Ingress that serves no
// sless workload (a Knative Service of the user's), in a Proxy that sets
// none: Knative's default max-revision-timeout-seconds.
const DefaultIngressTimeout = 10 * time.Minute

// DefaultClusterDomain is the cluster DNS domain of a Proxy that sets none.
const DefaultClusterDomain = "cluster.local"

// triggerIngress marks a call through an Ingress that serves no sless
// workload: routed as any networking layer would, not recorded.
const triggerIngress = "ingress"

// Ingresses returns a handler that serves the hosts of the Knative
// Ingresses in Options.Routes and hands every other request to next.
// Without Routes it is next. It is the cluster-local door, the private
// load balancer Ingresses report: it serves rules of both visibilities.
//
// A host of a Function or a SlessService is held to the policy of its
// /fn/ or /svc/ path (a token of its namespace, or a public trigger) and
// recorded the same way; only the backend comes from the Ingress. A host
// of an Ingress sless did not make is routed without a policy of sless's,
// as Kourier would, and not recorded. Knative's prober (K-Network-Probe)
// is answered with the hash of the Ingress generation loaded here.
func (p *Proxy) Ingresses(next http.Handler) http.Handler { return p.ingresses(next, true) }

// PublicIngresses is Ingresses for the public door, the public load
// balancer: it serves ExternalIP rules only, and answers 404 for a host
// that only ClusterLocal rules hold, as Knative's ingresses do to callers
// from outside the cluster.
func (p *Proxy) PublicIngresses(next http.Handler) http.Handler { return p.ingresses(next, false) }

func (p *Proxy) ingresses(next http.Handler, clusterLocal bool) http.Handler {
	if p.opts.Routes == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ing, ok := p.opts.Routes.Owner(r.Host, clusterLocal)
		if ok {
			p.serveIngress(w, r, ing, clusterLocal)
			return
		}
		if _, local := p.opts.Routes.Owner(r.Host, true); local && !clusterLocal {
			c := &call{p: p, rest: r.URL.EscapedPath(), start: time.Now(), reqID: RequestID(r), byHost: true}
			c.refuse(w, r, Problem{Status: http.StatusNotFound, Reason: ReasonNotFound,
				Detail: r.Host + " is served inside the cluster only"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (p *Proxy) serveIngress(w http.ResponseWriter, r *http.Request, ing *routing.Ingress, clusterLocal bool) {
	start := time.Now()
	if r.Header.Get(header.ProbeKey) == header.ProbeValue {
		// Knative's prober asks which generation this replica serves; the
		// answer never reaches a workload, as with Knative's own layers.
		// Only a hash of "override" is replaced by the Ingress's: any
		// other comes back as a backend's probe handler echoes it
		// (Knative's data-plane contract, ingress.InsertProbe).
		hash := r.Header.Get(header.HashKey)
		if hash == "" || hash == header.HashValueOverride {
			hash = ing.Hash
		}
		w.Header().Set(header.HashKey, hash)
		w.WriteHeader(http.StatusOK)
		return
	}
	if refuseMethod(r.Method) {
		p.refuseMethod(w, r, start, false)
		return
	}
	rest := r.URL.EscapedPath()
	c := &call{p: p, rest: rest, start: start, reqID: RequestID(r), byHost: true}
	if !strings.HasPrefix(rest, "/") {
		c.refuse(w, r, Problem{Status: http.StatusBadRequest, Reason: ReasonInvalid,
			Detail: "the request target " + r.RequestURI + " is not a path"})
		return
	}
	m, ok := p.opts.Routes.Route(r.Host, rest, r.Header, clusterLocal)
	if !ok {
		c.refuse(w, r, Problem{Status: http.StatusNotFound, Reason: ReasonNotFound,
			Detail: "no path of the Ingress serving " + r.Host + " matches this request's path and headers"})
		return
	}
	c.route, c.routeHost = &m, r.Host
	switch m.Workload.Kind {
	case routing.KindFunction:
		c.ns, c.name, c.trigger = m.Workload.Namespace, m.Workload.Name, TriggerHTTP
		p.serve(w, r, c)
	case routing.KindService:
		c.ns, c.name, c.trigger = m.Workload.Namespace, m.Workload.Name, TriggerService
		if p.opts.Services == nil {
			c.refuse(w, r, Problem{Status: http.StatusNotImplemented, Reason: ReasonNoServices,
				Detail: "this server runs no services"})
			return
		}
		p.serve(w, r, c)
	default:
		c.ns, c.name, c.trigger = m.Ingress.Namespace, m.Ingress.Name, triggerIngress
		c.target = Target{Ready: true, Timeout: p.opts.IngressTimeout}
		c.forward(w, r)
	}
}

// routeAddress points the call at the revision Service its Ingress splits
// to. A call resolved to a Function's address (its Knative Service's
// cluster-local host) is routed by the Ingress holding that host, when one
// of sless's class does: that host's DNS name leads back to sless-api.
func (c *call) routeAddress(r *http.Request) {
	routes := c.p.opts.Routes
	if routes == nil {
		return
	}
	if c.route == nil && c.addr != nil {
		m, ok := routes.Route(c.addr.Host, c.rest, r.Header, true)
		if !ok {
			return
		}
		c.route, c.routeHost = &m, c.addr.Host
	}
	if c.route == nil {
		return
	}
	b := c.route.Backend
	host, h2c := routes.Address(b, c.p.opts.ClusterDomain)
	c.addr, c.routeH2C = &url.URL{Scheme: "http", Host: host}, h2c
	if rev := b.Headers[RevisionHeader]; rev != "" {
		c.target.Revision = rev
	}
}

// RevisionHeader and NamespaceHeader are the appendHeaders of Knative's
// Routes that name the revision a split serves; the activator routes on them.
const (
	RevisionHeader  = "Knative-Serving-Revision"
	NamespaceHeader = "Knative-Serving-Namespace"
)

// rewriteRoute sets what an Ingress asks of a routed call: the Host the
// backend sees (the caller's, or the path's rewriteHost) and the
// appendHeaders, over any of the same name the caller sent.
func (c *call) rewriteRoute(out *http.Request) {
	if c.route == nil {
		return
	}
	out.Host = c.routeHost
	if c.route.RewriteHost != "" {
		out.Host = c.route.RewriteHost
	}
	for k, v := range c.route.Backend.Headers {
		out.Header.Set(k, v)
	}
}

// routeTransport sends calls to h2c revisions over h2c and every other
// call through the proxy's transport.
type routeTransport struct {
	http1, h2c http.RoundTripper
}

func (t routeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c, ok := req.Context().Value(callKey{}).(*call)
	if !ok || c.route == nil {
		return t.http1.RoundTrip(req)
	}
	rt := t.http1
	if c.routeH2C {
		rt = t.h2c
	}
	var tried []string
	for attempt := 1; ; attempt++ {
		resp, err := rt.RoundTrip(req)
		if err == nil || attempt > connectRetries || !connRefused(err) || !replayable(req) {
			return resp, err
		}
		// A pod is ready in its EndpointSlice once its containers start,
		// which may be before its server listens (no readiness probe): the
		// connection was refused, nothing was sent, so the call goes again,
		// to another endpoint while there is one, as Istio retries connect
		// failures.
		select {
		case <-req.Context().Done():
			return nil, err
		case <-time.After(time.Duration(attempt) * connectRetryDelay):
		}
		tried = append(tried, req.URL.Host)
		req.URL.Host, _ = c.p.opts.Routes.AddressAvoiding(c.route.Backend, c.p.opts.ClusterDomain, tried)
	}
}

// connectRetries is how many times a routed call is sent again after its
// connection was refused; connectRetryDelay the first wait, growing by
// itself with each attempt.
const (
	connectRetries    = 2
	connectRetryDelay = 50 * time.Millisecond
)

// connRefused reports whether err is a refused connection: the only failure
// after which no byte of the call can have reached a backend.
func connRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// replayable reports whether req can go again: a transport closes the body
// it was given even when it failed, so only a call without one can.
func replayable(req *http.Request) bool { return req.Body == nil || req.Body == http.NoBody }

// newH2CTransport speaks HTTP/2 without TLS, as queue-proxy's h2c port does.
func newH2CTransport() *http.Transport {
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{DialContext: dialer.DialContext, Protocols: &protocols, DisableCompression: true,
		MaxIdleConnsPerHost: 512, IdleConnTimeout: 90 * time.Second}
}
