// Package routing is what sless-api serves of the Knative Ingresses of
// sless's networking class: per host, the paths, header matches and
// weighted splits to revision Services, and the hash Knative's prober
// expects back. Building it is pure; Table holds the compiled Ingresses
// for concurrent lookups.
package routing

import (
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"knative.dev/networking/pkg/apis/networking/v1alpha1"
	"knative.dev/networking/pkg/ingress"
)

// Labels sless puts on its Knative Services, which Knative copies to their
// Routes and Ingresses: they name the Function or SlessService served.
const (
	LabelFunction = "sless.dev/function"
	LabelService  = "sless.dev/service"
)

// Workload kinds an Ingress can serve.
const (
	KindFunction = "Function"
	KindService  = "SlessService"
)

// Workload is the Function or SlessService an Ingress serves; Name is
// empty for an Ingress sless did not make (a Knative Service of the user's).
type Workload struct {
	Kind, Namespace, Name string
}

// Backend is one split: a Service port that takes Percent of the calls,
// with the headers to add on the way.
type Backend struct {
	Namespace, Service string
	Port               int
	Percent            int
	// Headers are the path's appendHeaders with the split's over them.
	Headers map[string]string
}

// Host is the backend Service's cluster DNS name and port, as a URL host.
func (b Backend) Host(clusterDomain string) string {
	return net.JoinHostPort(b.Service+"."+b.Namespace+".svc."+clusterDomain, strconv.Itoa(b.Port))
}

// path is one HTTP path of a rule, compiled.
type path struct {
	prefix      string
	headers     map[string]string // canonical name to the exact value wanted
	rewriteHost string
	splits      []Backend
}

// rule is one rule of an Ingress with its hosts expanded.
type rule struct {
	hosts        sets.Set[string]
	clusterLocal bool
	paths        []path
}

// Ingress is one Knative Ingress compiled for lookups.
type Ingress struct {
	Key      types.NamespacedName
	Hash     string
	Workload Workload
	created  time.Time
	rules    []rule
}

// Compile checks ing and compiles it. The hash is Knative's
// (ingress.ComputeHash), which its prober expects the data plane to
// answer once it serves this generation.
func Compile(ing *v1alpha1.Ingress) (*Ingress, error) {
	sum, err := ingress.ComputeHash(ing)
	if err != nil {
		return nil, err
	}
	out := &Ingress{
		Key:      types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name},
		Hash:     hex.EncodeToString(sum[:]),
		Workload: workloadOf(ing),
		created:  ing.CreationTimestamp.Time,
	}
	if len(ing.Spec.Rules) == 0 {
		return nil, errors.New("the Ingress has no rules")
	}
	for i, r := range ing.Spec.Rules {
		cr, err := compileRule(r)
		if err != nil {
			return nil, fmt.Errorf("rule %d: %w", i, err)
		}
		out.rules = append(out.rules, cr)
	}
	return out, nil
}

func workloadOf(ing *v1alpha1.Ingress) Workload {
	if n := ing.Labels[LabelFunction]; n != "" {
		return Workload{Kind: KindFunction, Namespace: ing.Namespace, Name: n}
	}
	if n := ing.Labels[LabelService]; n != "" {
		return Workload{Kind: KindService, Namespace: ing.Namespace, Name: n}
	}
	return Workload{}
}

func compileRule(r v1alpha1.IngressRule) (rule, error) {
	var out rule
	switch r.Visibility {
	case v1alpha1.IngressVisibilityClusterLocal:
		out.clusterLocal = true
	case "", v1alpha1.IngressVisibilityExternalIP:
	default:
		return rule{}, fmt.Errorf("unknown visibility %q (want %s or %s)", r.Visibility,
			v1alpha1.IngressVisibilityExternalIP, v1alpha1.IngressVisibilityClusterLocal)
	}
	if len(r.Hosts) == 0 {
		return rule{}, errors.New("no hosts: sless routes by host")
	}
	for _, h := range r.Hosts {
		if msgs := validation.IsDNS1123Subdomain(h); len(msgs) > 0 {
			return rule{}, fmt.Errorf("host %q: %s", h, msgs[0])
		}
	}
	out.hosts = ingress.ExpandedHosts(sets.New(r.Hosts...))
	if r.HTTP == nil || len(r.HTTP.Paths) == 0 {
		return rule{}, errors.New("no HTTP paths")
	}
	for i, p := range r.HTTP.Paths {
		cp, err := compilePath(p)
		if err != nil {
			return rule{}, fmt.Errorf("path %d: %w", i, err)
		}
		out.paths = append(out.paths, cp)
	}
	return out, nil
}

func compilePath(p v1alpha1.HTTPIngressPath) (path, error) {
	if p.Path != "" && !strings.HasPrefix(p.Path, "/") {
		return path{}, fmt.Errorf("path %q does not start with /", p.Path)
	}
	out := path{prefix: p.Path, rewriteHost: p.RewriteHost}
	if len(p.Headers) > 0 {
		out.headers = make(map[string]string, len(p.Headers))
		for k, m := range p.Headers {
			out.headers[http.CanonicalHeaderKey(k)] = m.Exact
		}
	}
	if len(p.Splits) == 0 {
		return path{}, errors.New("no splits")
	}
	total := 0
	for i, s := range p.Splits {
		if s.ServicePort.Type != intstr.Int {
			return path{}, fmt.Errorf("split %d: port %q is named; sless routes to port numbers, as Knative's Routes give them", i, s.ServicePort.StrVal)
		}
		if s.ServiceName == "" || s.ServiceNamespace == "" {
			return path{}, fmt.Errorf("split %d: no Service name or namespace", i)
		}
		if port := s.ServicePort.IntValue(); port < 1 || port > 65535 {
			return path{}, fmt.Errorf("split %d: port %d is out of range", i, port)
		}
		if s.Percent < 0 || s.Percent > 100 {
			return path{}, fmt.Errorf("split %d: percent %d is not between 0 and 100", i, s.Percent)
		}
		pct := s.Percent
		if len(p.Splits) == 1 && pct == 0 {
			pct = 100 // Knative's default for a lone split
		}
		total += pct
		headers := maps.Clone(p.AppendHeaders)
		if headers == nil {
			headers = map[string]string{}
		}
		maps.Copy(headers, s.AppendHeaders)
		out.splits = append(out.splits, Backend{Namespace: s.ServiceNamespace, Service: s.ServiceName,
			Port: s.ServicePort.IntValue(), Percent: pct, Headers: headers})
	}
	if total != 100 {
		return path{}, fmt.Errorf("the splits' percents add up to %d, not 100", total)
	}
	return out, nil
}

// Match is where a request goes.
type Match struct {
	Ingress  types.NamespacedName
	Hash     string
	Workload Workload
	Backend  Backend
	// RewriteHost, when set, is the Host the backend gets.
	RewriteHost string
}

// Table holds the compiled Ingresses by host. The zero value is empty and
// ready; it is safe for concurrent use.
type Table struct {
	// Pick returns a number in [0, 100) to draw a split; rand.IntN when nil.
	Pick func(n int) int

	mu        sync.RWMutex
	ingresses map[types.NamespacedName]*Ingress
	hosts     map[string][]*Ingress // by host, oldest Ingress first
	// services are the backends' Services as watched; endpoints their
	// EndpointSlices by Service, then by the slice's name.
	services  map[types.NamespacedName]Service
	endpoints map[types.NamespacedName]map[string]Endpoints
	// sliceOf is the Service each EndpointSlice was recorded under.
	sliceOf map[types.NamespacedName]types.NamespacedName
}

// Service is what the proxy needs of a backend's Service to reach it.
type Service struct {
	// ClusterIP is its virtual IP; "" (or "None") when it has none, as a
	// headless or ExternalName Service.
	ClusterIP string
	// ExternalName is the DNS name an ExternalName Service aliases.
	ExternalName string
	Ports        []ServicePort
}

// ServicePort is one port of a backend's Service.
type ServicePort struct {
	Port int
	// Name is the port's name, which its EndpointSlices' ports carry.
	Name string
	// H2C says it speaks HTTP/2 without TLS: named "http2" or with
	// appProtocol kubernetes.io/h2c, by Knative's convention.
	H2C bool
}

func (s Service) port(n int) (ServicePort, bool) {
	for _, p := range s.Ports {
		if p.Port == n {
			return p, true
		}
	}
	return ServicePort{}, false
}

// Endpoints is what the proxy needs of one EndpointSlice.
type Endpoints struct {
	// Service is the name of the Service the slice belongs to, in its
	// namespace (label kubernetes.io/service-name).
	Service string
	// Ports are the slice's port numbers by name ("" for a Service's one
	// unnamed port).
	Ports map[string]int
	// Ready are the addresses of its ready endpoints; Serving those of
	// terminating endpoints that still serve, which kube-proxy falls back
	// to when a Service has no ready one.
	Ready, Serving []string
}

// SetService records Service key.
func (t *Table) SetService(key types.NamespacedName, svc Service) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.services == nil {
		t.services = map[types.NamespacedName]Service{}
	}
	t.services[key] = svc
}

// DeleteService forgets Service key.
func (t *Table) DeleteService(key types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.services, key)
}

// SetEndpoints records EndpointSlice key.
func (t *Table) SetEndpoints(key types.NamespacedName, e Endpoints) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.deleteEndpoints(key)
	if t.endpoints == nil {
		t.endpoints = map[types.NamespacedName]map[string]Endpoints{}
		t.sliceOf = map[types.NamespacedName]types.NamespacedName{}
	}
	svc := types.NamespacedName{Namespace: key.Namespace, Name: e.Service}
	if t.endpoints[svc] == nil {
		t.endpoints[svc] = map[string]Endpoints{}
	}
	t.endpoints[svc][key.Name] = e
	t.sliceOf[key] = svc
}

// DeleteEndpoints forgets EndpointSlice key.
func (t *Table) DeleteEndpoints(key types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.deleteEndpoints(key)
}

// deleteEndpoints forgets EndpointSlice key; t.mu is held.
func (t *Table) deleteEndpoints(key types.NamespacedName) {
	svc, ok := t.sliceOf[key]
	if !ok {
		return
	}
	delete(t.sliceOf, key)
	delete(t.endpoints[svc], key.Name)
	if len(t.endpoints[svc]) == 0 {
		delete(t.endpoints, svc)
	}
}

// Address is where to dial b, and whether it speaks h2c. Once the table
// has its Service and an EndpointSlice with a ready endpoint on the port,
// it is one of those endpoints, drawn at random: Envoy-based ingresses
// dial endpoints too, so a new Service serves before kube-proxy has
// programmed it. Before, its virtual IP; an ExternalName Service's alias,
// through the endpoints of the Service it names when it is one of this
// cluster's; and for a Service not seen yet, its cluster DNS name (the
// watch has it at once, the cluster's DNS may answer seconds later). A
// Service not seen yet speaks h2c on Knative's h2c port, 81.
func (t *Table) Address(b Backend, clusterDomain string) (host string, h2c bool) {
	return t.AddressAvoiding(b, clusterDomain, nil)
}

// AddressAvoiding is Address drawing no endpoint in avoid (host:port),
// while the Service has others: a call whose connection an endpoint
// refused tries the rest before that one again.
func (t *Table) AddressAvoiding(b Backend, clusterDomain string, avoid []string) (host string, h2c bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.address(types.NamespacedName{Namespace: b.Namespace, Name: b.Service}, b.Port, clusterDomain, 0, avoid)
}

// maxAliases bounds the ExternalName Services followed to another of the
// cluster's Services, against aliases that name each other.
const maxAliases = 4

// address is Address of port of Service key; t.mu is held.
func (t *Table) address(key types.NamespacedName, port int, clusterDomain string, aliases int, avoid []string) (host string, h2c bool) {
	svc, ok := t.services[key]
	if !ok {
		return dnsName(key, port, clusterDomain), port == h2cPort
	}
	sp, named := svc.port(port)
	switch {
	case svc.ExternalName != "":
		// Its own DNS name is a CNAME the cluster's DNS may not serve yet.
		// The Service it names, when the table has it, is dialled as any
		// backend: its ready endpoints, not its virtual IP.
		if target, ok := ServiceOf(svc.ExternalName, clusterDomain); ok && aliases < maxAliases {
			if _, known := t.services[target]; known {
				host, targetH2C := t.address(target, port, clusterDomain, aliases+1, avoid)
				return host, sp.H2C || targetH2C
			}
		}
		return net.JoinHostPort(strings.TrimSuffix(svc.ExternalName, "."), strconv.Itoa(port)), sp.H2C
	case named:
		if ep, ok := t.endpoint(key, sp.Name, avoid); ok {
			return ep, sp.H2C
		}
	}
	if svc.ClusterIP != "" && svc.ClusterIP != corev1.ClusterIPNone {
		return net.JoinHostPort(svc.ClusterIP, strconv.Itoa(port)), sp.H2C
	}
	return dnsName(key, port, clusterDomain), sp.H2C
}

// endpoint draws a ready endpoint of Service key on the port named port
// from its EndpointSlices, or a serving terminating one when none is
// ready, and none in avoid while there are others; t.mu is held.
func (t *Table) endpoint(key types.NamespacedName, port string, avoid []string) (string, bool) {
	type candidate struct {
		addr string
		port int
	}
	var buf [16]candidate
	ready, serving := buf[:0], []candidate(nil)
	for _, e := range t.endpoints[key] {
		num, ok := e.Ports[port]
		if !ok {
			continue
		}
		for _, a := range e.Ready {
			ready = append(ready, candidate{a, num})
		}
		for _, a := range e.Serving {
			serving = append(serving, candidate{a, num})
		}
	}
	if len(ready) == 0 {
		ready = serving
	}
	if len(ready) == 0 {
		return "", false
	}
	if len(avoid) > 0 {
		fresh := ready[:0:0]
		for _, c := range ready {
			if !slices.Contains(avoid, net.JoinHostPort(c.addr, strconv.Itoa(c.port))) {
				fresh = append(fresh, c)
			}
		}
		if len(fresh) > 0 {
			ready = fresh
		}
	}
	c := ready[rand.IntN(len(ready))]
	return net.JoinHostPort(c.addr, strconv.Itoa(c.port)), true
}

// ServiceOf is the Service a DNS name of the cluster names:
// {name}.{namespace}.svc or {name}.{namespace}.svc.{clusterDomain}.
func ServiceOf(dns, clusterDomain string) (types.NamespacedName, bool) {
	dns = strings.ToLower(strings.TrimSuffix(dns, "."))
	rest, ok := strings.CutSuffix(dns, ".svc."+strings.ToLower(clusterDomain))
	if !ok {
		if rest, ok = strings.CutSuffix(dns, ".svc"); !ok {
			return types.NamespacedName{}, false
		}
	}
	name, ns, ok := strings.Cut(rest, ".")
	if !ok || name == "" || ns == "" || strings.Contains(ns, ".") {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: ns, Name: name}, true
}

func dnsName(key types.NamespacedName, port int, clusterDomain string) string {
	return Backend{Namespace: key.Namespace, Service: key.Name, Port: port}.Host(clusterDomain)
}

// h2cPort is the revision Service port Knative's Routes name for h2c
// revisions (networking.ServiceHTTP2Port); 80 is HTTP/1.
const h2cPort = 81

// Set loads ing in place of its earlier generation.
func (t *Table) Set(ing *Ingress) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ingresses == nil {
		t.ingresses = map[types.NamespacedName]*Ingress{}
	}
	t.ingresses[ing.Key] = ing
	t.reindex()
}

// Delete unloads the Ingress key.
func (t *Table) Delete(key types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.ingresses[key]; !ok {
		return
	}
	delete(t.ingresses, key)
	t.reindex()
}

// Hash is the hash of the generation of key that is loaded.
func (t *Table) Hash(key types.NamespacedName) (string, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	ing, ok := t.ingresses[key]
	if !ok {
		return "", false
	}
	return ing.Hash, true
}

// reindex rebuilds the host index; t.mu is held. Two Ingresses claiming
// one host (Knative's domain claims prevent it for Routes) go oldest first.
func (t *Table) reindex() {
	hosts := map[string][]*Ingress{}
	for _, ing := range t.ingresses {
		for _, r := range ing.rules {
			for h := range r.hosts {
				if !slices.Contains(hosts[h], ing) {
					hosts[h] = append(hosts[h], ing)
				}
			}
		}
	}
	for _, list := range hosts {
		slices.SortFunc(list, func(a, b *Ingress) int {
			if c := a.created.Compare(b.created); c != 0 {
				return c
			}
			return strings.Compare(a.Key.String(), b.Key.String())
		})
	}
	t.hosts = hosts
}

// Owner finds the Ingress serving host: its hash (for probes) and workload.
// clusterLocal says the request came through the cluster-local door, which
// serves rules of both visibilities; the public door serves ExternalIP
// rules only.
func (t *Table) Owner(host string, clusterLocal bool) (*Ingress, bool) {
	host = HostName(host)
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, ing := range t.hosts[host] {
		if _, ok := ing.rule(host, clusterLocal); ok {
			return ing, true
		}
	}
	return nil, false
}

// Route picks the backend for a request to host with the escaped path p
// and headers h: the first rule of the first Ingress holding the host, its
// first path whose prefix and header matches fit, and a split drawn by
// weight.
func (t *Table) Route(host, p string, h http.Header, clusterLocal bool) (Match, bool) {
	ing, ok := t.Owner(host, clusterLocal)
	if !ok {
		return Match{}, false
	}
	r, _ := ing.rule(HostName(host), clusterLocal)
	for _, cp := range r.paths {
		if !cp.matches(p, h) {
			continue
		}
		return Match{Ingress: ing.Key, Hash: ing.Hash, Workload: ing.Workload,
			Backend: cp.pick(t.pick), RewriteHost: cp.rewriteHost}, true
	}
	return Match{}, false
}

func (t *Table) pick(n int) int {
	if t.Pick != nil {
		return t.Pick(n)
	}
	return rand.IntN(n)
}

func (ing *Ingress) rule(host string, clusterLocal bool) (rule, bool) {
	for _, r := range ing.rules {
		if r.hosts.Has(host) && (clusterLocal || !r.clusterLocal) {
			return r, true
		}
	}
	return rule{}, false
}

func (cp path) matches(p string, h http.Header) bool {
	if cp.prefix != "" && !strings.HasPrefix(p, cp.prefix) {
		return false
	}
	for k, v := range cp.headers {
		if h.Get(k) != v {
			return false
		}
	}
	return true
}

func (cp path) pick(pick func(int) int) Backend {
	n := pick(100)
	for _, s := range cp.splits {
		if n < s.Percent {
			return s
		}
		n -= s.Percent
	}
	return cp.splits[len(cp.splits)-1]
}

// HostName is a Host header's name as the table keys it: lowercase,
// without port or trailing dot.
func HostName(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return strings.ToLower(strings.TrimSuffix(host, "."))
}
