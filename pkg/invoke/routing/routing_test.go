package routing_test

import (
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"knative.dev/networking/pkg/apis/networking/v1alpha1"
	"knative.dev/networking/pkg/ingress"

	"github.com/sless-dev/sless/pkg/adapter/resources"
	"github.com/sless-dev/sless/pkg/invoke/routing"
)

func split(svc string, port, pct int, headers map[string]string) v1alpha1.IngressBackendSplit {
	return v1alpha1.IngressBackendSplit{
		IngressBackend: v1alpha1.IngressBackend{ServiceNamespace: "team-a", ServiceName: svc, ServicePort: intstr.FromInt(port)},
		Percent:        pct, AppendHeaders: headers,
	}
}

// kingress is what Knative's route reconciler makes for a cluster-local
// Service hello in team-a, split between two revisions.
func kingress() *v1alpha1.Ingress {
	return &v1alpha1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "team-a", Labels: map[string]string{routing.LabelFunction: "hello"}},
		Spec: v1alpha1.IngressSpec{Rules: []v1alpha1.IngressRule{{
			Hosts:      []string{"hello.team-a", "hello.team-a.svc", "hello.team-a.svc.cluster.local"},
			Visibility: v1alpha1.IngressVisibilityClusterLocal,
			HTTP: &v1alpha1.HTTPIngressRuleValue{Paths: []v1alpha1.HTTPIngressPath{{
				AppendHeaders: map[string]string{"Knative-Serving-Namespace": "team-a", "X-Path": "p"},
				Splits: []v1alpha1.IngressBackendSplit{
					split("hello-00001", 80, 30, map[string]string{"Knative-Serving-Revision": "hello-00001"}),
					split("hello-00002", 80, 70, map[string]string{"Knative-Serving-Revision": "hello-00002", "X-Path": "split"}),
				},
			}}},
		}}},
	}
}

func mustCompile(t *testing.T, ing *v1alpha1.Ingress) *routing.Ingress {
	t.Helper()
	c, err := routing.Compile(ing)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestLabelsAreTheFunctionReconcilers(t *testing.T) {
	if routing.LabelFunction != resources.LabelFunction || routing.LabelService != resources.LabelService {
		t.Errorf("labels %s, %s; the reconciler's are %s, %s", routing.LabelFunction, routing.LabelService, resources.LabelFunction, resources.LabelService)
	}
}

func TestCompileRefuses(t *testing.T) {
	tests := []struct {
		name   string
		change func(*v1alpha1.Ingress)
		want   string
	}{
		{"no rules", func(i *v1alpha1.Ingress) { i.Spec.Rules = nil }, "no rules"},
		{"no hosts", func(i *v1alpha1.Ingress) { i.Spec.Rules[0].Hosts = nil }, "no hosts"},
		{"bad host", func(i *v1alpha1.Ingress) { i.Spec.Rules[0].Hosts = []string{"Hello_World"} }, `host "Hello_World"`},
		{"unknown visibility", func(i *v1alpha1.Ingress) { i.Spec.Rules[0].Visibility = "Everywhere" }, `unknown visibility "Everywhere"`},
		{"no http", func(i *v1alpha1.Ingress) { i.Spec.Rules[0].HTTP = nil }, "no HTTP paths"},
		{"no paths", func(i *v1alpha1.Ingress) { i.Spec.Rules[0].HTTP.Paths = nil }, "no HTTP paths"},
		{"relative path", func(i *v1alpha1.Ingress) { i.Spec.Rules[0].HTTP.Paths[0].Path = "foo" }, `path "foo" does not start with /`},
		{"no splits", func(i *v1alpha1.Ingress) { i.Spec.Rules[0].HTTP.Paths[0].Splits = nil }, "no splits"},
		{"named port", func(i *v1alpha1.Ingress) {
			i.Spec.Rules[0].HTTP.Paths[0].Splits[0].ServicePort = intstr.FromString("http")
		}, `port "http" is named`},
		{"port out of range", func(i *v1alpha1.Ingress) {
			i.Spec.Rules[0].HTTP.Paths[0].Splits[0].ServicePort = intstr.FromInt(70000)
		}, "port 70000 is out of range"},
		{"no service", func(i *v1alpha1.Ingress) { i.Spec.Rules[0].HTTP.Paths[0].Splits[0].ServiceName = "" }, "no Service name"},
		{"negative percent", func(i *v1alpha1.Ingress) { i.Spec.Rules[0].HTTP.Paths[0].Splits[0].Percent = -1 }, "percent -1"},
		{"percents short of 100", func(i *v1alpha1.Ingress) { i.Spec.Rules[0].HTTP.Paths[0].Splits[0].Percent = 20 }, "add up to 90"},
		{"percents past 100", func(i *v1alpha1.Ingress) { i.Spec.Rules[0].HTTP.Paths[0].Splits[0].Percent = 40 }, "add up to 110"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ing := kingress()
			tc.change(ing)
			_, err := routing.Compile(ing)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Compile: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestCompileHashIsKnatives(t *testing.T) {
	ing := kingress()
	sum, err := ingress.ComputeHash(ing)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustCompile(t, ing).Hash; got != hex.EncodeToString(sum[:]) {
		t.Errorf("hash %s, Knative's %x", got, sum)
	}
	ing.Spec.Rules[0].HTTP.Paths[0].Splits[0].Percent, ing.Spec.Rules[0].HTTP.Paths[0].Splits[1].Percent = 0, 100
	if again := mustCompile(t, ing).Hash; again == hex.EncodeToString(sum[:]) {
		t.Error("a changed spec kept its hash")
	}
}

func TestRouteHostsAndVisibility(t *testing.T) {
	var tb routing.Table
	tb.Set(mustCompile(t, kingress()))
	public := kingress()
	public.Name = "web"
	public.Labels = nil
	public.Spec.Rules[0].Hosts = []string{"web.example.com"}
	public.Spec.Rules[0].Visibility = ""
	tb.Set(mustCompile(t, public))
	tests := []struct {
		host         string
		clusterLocal bool
		want         string // the Ingress's name, "" for none
	}{
		{"hello.team-a.svc.cluster.local", true, "hello"},
		{"hello.team-a.svc", true, "hello"},
		{"hello.team-a", true, "hello"},
		{"HELLO.team-a.svc.cluster.local.", true, "hello"},
		{"hello.team-a.svc.cluster.local:80", true, "hello"},
		{"hello.team-a.svc.cluster.local", false, ""}, // cluster-local rule, public door
		{"web.example.com", false, "web"},
		{"web.example.com", true, "web"},
		{"hello.team-b.svc.cluster.local", true, ""},
		{"example.com", true, ""},
	}
	for _, tc := range tests {
		m, ok := tb.Route(tc.host, "/", http.Header{}, tc.clusterLocal)
		if got := m.Ingress.Name; got != tc.want || ok != (tc.want != "") {
			t.Errorf("Route(%s, local %v) = %q, %v; want %q", tc.host, tc.clusterLocal, got, ok, tc.want)
		}
	}
	m, _ := tb.Route("hello.team-a", "/", nil, true)
	if want := (routing.Workload{Kind: routing.KindFunction, Namespace: "team-a", Name: "hello"}); m.Workload != want {
		t.Errorf("workload %+v, want %+v", m.Workload, want)
	}
	if m, _ := tb.Route("web.example.com", "/", nil, false); m.Workload != (routing.Workload{}) {
		t.Errorf("an Ingress sless did not make serves %+v", m.Workload)
	}
}

// Every draw of 0..99 gives the backends exactly their percents, with the
// path's headers under the split's.
func TestRouteSplits(t *testing.T) {
	n := 0
	tb := routing.Table{Pick: func(int) int { n++; return (n - 1) % 100 }}
	tb.Set(mustCompile(t, kingress()))
	got := map[string]int{}
	for range 100 {
		m, ok := tb.Route("hello.team-a.svc.cluster.local", "/x", nil, true)
		if !ok {
			t.Fatal("no route")
		}
		b := m.Backend
		got[b.Service]++
		if b.Headers["Knative-Serving-Revision"] != b.Service || b.Headers["Knative-Serving-Namespace"] != "team-a" {
			t.Fatalf("backend %s headers %v", b.Service, b.Headers)
		}
		if want := map[string]string{"hello-00001": "p", "hello-00002": "split"}[b.Service]; b.Headers["X-Path"] != want {
			t.Errorf("backend %s X-Path %q, want %q", b.Service, b.Headers["X-Path"], want)
		}
		if h := b.Host("cluster.local"); h != b.Service+".team-a.svc.cluster.local:80" {
			t.Errorf("host %s", h)
		}
	}
	if got["hello-00001"] != 30 || got["hello-00002"] != 70 {
		t.Errorf("100 draws went %v, want 30 and 70", got)
	}
}

func TestRoutePathsAndHeaders(t *testing.T) {
	ing := kingress()
	ing.Spec.Rules[0].HTTP.Paths = []v1alpha1.HTTPIngressPath{
		{Path: "/foo", Splits: []v1alpha1.IngressBackendSplit{split("foo", 80, 0, nil)}},
		{Headers: map[string]v1alpha1.HeaderMatch{"x-tag": {Exact: "blue"}}, RewriteHost: "blue.team-a.svc.cluster.local",
			Splits: []v1alpha1.IngressBackendSplit{split("blue", 81, 100, nil)}},
		{Splits: []v1alpha1.IngressBackendSplit{split("rest", 80, 100, nil)}},
	}
	var tb routing.Table
	tb.Set(mustCompile(t, ing))
	tests := []struct {
		path    string
		tag     string
		want    string
		rewrite string
	}{
		{"/foo", "", "foo", ""},
		{"/foo/bar", "blue", "foo", ""},
		{"/food", "", "foo", ""}, // a literal prefix, as Knative's type says
		{"/", "blue", "blue", "blue.team-a.svc.cluster.local"},
		{"/", "green", "rest", ""},
		{"/asdf", "", "rest", ""},
	}
	for _, tc := range tests {
		h := http.Header{}
		if tc.tag != "" {
			h.Set("X-Tag", tc.tag)
		}
		m, ok := tb.Route("hello.team-a", tc.path, h, true)
		if !ok || m.Backend.Service != tc.want || m.RewriteHost != tc.rewrite {
			t.Errorf("%s tag %q: %s %q %v, want %s %q", tc.path, tc.tag, m.Backend.Service, m.RewriteHost, ok, tc.want, tc.rewrite)
		}
	}
	// A lone split without a percent takes everything, and keeps its port.
	if m, _ := tb.Route("hello.team-a", "/foo", nil, true); m.Backend.Percent != 100 {
		t.Errorf("lone split percent %d", m.Backend.Percent)
	}
	if m, _ := tb.Route("hello.team-a", "/", http.Header{"X-Tag": {"blue"}}, true); m.Backend.Port != 81 {
		t.Errorf("port %d, want 81", m.Backend.Port)
	}
	only := kingress()
	only.Spec.Rules[0].HTTP.Paths[0].Path = "/only"
	tb.Set(mustCompile(t, only))
	if _, ok := tb.Route("hello.team-a", "/other", nil, true); ok {
		t.Error("a path no rule holds was routed")
	}
}

func TestTableGenerationsAndClaims(t *testing.T) {
	var tb routing.Table
	first := kingress()
	first.CreationTimestamp = metav1.NewTime(time.Unix(100, 0))
	tb.Set(mustCompile(t, first))
	later := kingress()
	later.Name = "squatter"
	later.CreationTimestamp = metav1.NewTime(time.Unix(200, 0))
	tb.Set(mustCompile(t, later))
	if ing, _ := tb.Owner("hello.team-a", true); ing.Key.Name != "hello" {
		t.Errorf("host held by %s, want the older hello", ing.Key)
	}

	key := types.NamespacedName{Namespace: "team-a", Name: "hello"}
	h1, _ := tb.Hash(key)
	next := first.DeepCopy()
	next.Spec.Rules[0].HTTP.Paths[0].Splits[0].Percent, next.Spec.Rules[0].HTTP.Paths[0].Splits[1].Percent = 0, 100
	tb.Set(mustCompile(t, next))
	if h2, _ := tb.Hash(key); h2 == h1 || h2 != mustCompile(t, next).Hash {
		t.Errorf("hash after the update %s (before %s)", h2, h1)
	}
	tb.Delete(key)
	if _, ok := tb.Hash(key); ok {
		t.Error("a deleted Ingress keeps its hash")
	}
	if ing, _ := tb.Owner("hello.team-a", true); ing == nil || ing.Key.Name != "squatter" {
		t.Errorf("after the delete the host is held by %v, want squatter", ing)
	}
	tb.Delete(types.NamespacedName{Namespace: "team-a", Name: "squatter"})
	if _, ok := tb.Owner("hello.team-a", true); ok {
		t.Error("an empty table routes")
	}
}

// A backend is dialled at its Service's virtual IP once the table has the
// Service and no EndpointSlice of it, by DNS name before; h2c follows the
// Service's port marks, and Knative's port 81 only while the Service is
// unseen.
func TestAddress(t *testing.T) {
	var tb routing.Table
	b := routing.Backend{Namespace: "ns", Service: "web", Port: 81}
	key := types.NamespacedName{Namespace: "ns", Name: "web"}
	h2c := []routing.ServicePort{{Port: 81, Name: "http2", H2C: true}}
	for _, c := range []struct {
		name     string
		svc      *routing.Service
		wantHost string
		wantH2C  bool
	}{
		{"unseen", nil, "web.ns.svc.cluster.local:81", true},
		{"plain HTTP on 81", &routing.Service{ClusterIP: "10.0.0.7"}, "10.0.0.7:81", false},
		{"marked h2c", &routing.Service{ClusterIP: "10.0.0.7", Ports: h2c}, "10.0.0.7:81", true},
		{"headless", &routing.Service{ClusterIP: "None", Ports: h2c}, "web.ns.svc.cluster.local:81", true},
		{"external name", &routing.Service{ExternalName: "lb.example.com"}, "lb.example.com:81", false},
		{"external name, absolute", &routing.Service{ExternalName: "lb.example.com."}, "lb.example.com:81", false},
		{"alias of an unseen Service", &routing.Service{ExternalName: "gone.ns.svc.cluster.local"}, "gone.ns.svc.cluster.local:81", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.svc == nil {
				tb.DeleteService(key)
			} else {
				tb.SetService(key, *c.svc)
			}
			host, h2c := tb.Address(b, "cluster.local")
			if host != c.wantHost || h2c != c.wantH2C {
				t.Errorf("Address = %s, h2c %v; want %s, h2c %v", host, h2c, c.wantHost, c.wantH2C)
			}
		})
	}
}

// A backend whose Service the table has is dialled at a ready endpoint of
// its EndpointSlices on the port of the backend's port's name, spread over
// them; at a serving terminating one when none is ready (kube-proxy's
// fallback); at the virtual IP when no slice has one.
func TestAddressEndpoints(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "web"}
	svc := routing.Service{ClusterIP: "10.0.0.7", Ports: []routing.ServicePort{
		{Port: 80, Name: "http"}, {Port: 81, Name: "http2", H2C: true}}}
	for _, c := range []struct {
		name   string
		svc    routing.Service
		port   int
		slices map[string]routing.Endpoints
		want   []string // every address drawn, all of them in 200 draws
		h2c    bool
	}{
		{name: "no slice yet", svc: svc, port: 80, want: []string{"10.0.0.7:80"}},
		{name: "ready endpoints by port name", svc: svc, port: 80, slices: map[string]routing.Endpoints{
			"web-a": {Service: "web", Ports: map[string]int{"http": 8012, "http2": 8013}, Ready: []string{"10.88.0.5", "10.88.0.6"}},
			"web-b": {Service: "web", Ports: map[string]int{"http": 8012, "http2": 8013}, Ready: []string{"fd00::7"}},
		}, want: []string{"10.88.0.5:8012", "10.88.0.6:8012", "[fd00::7]:8012"}},
		{name: "the h2c port", svc: svc, port: 81, slices: map[string]routing.Endpoints{
			"web-a": {Service: "web", Ports: map[string]int{"http": 8012, "http2": 8013}, Ready: []string{"10.88.0.5"}},
		}, want: []string{"10.88.0.5:8013"}, h2c: true},
		{name: "ports differ per slice", svc: svc, port: 80, slices: map[string]routing.Endpoints{
			"web-a": {Service: "web", Ports: map[string]int{"http": 8012}, Ready: []string{"10.88.0.5"}},
			"web-b": {Service: "web", Ports: map[string]int{"http": 9000}, Ready: []string{"10.88.0.6"}},
		}, want: []string{"10.88.0.5:8012", "10.88.0.6:9000"}},
		{name: "an unnamed port by number", svc: routing.Service{ClusterIP: "10.0.0.8", Ports: []routing.ServicePort{{Port: 8080}}},
			port: 8080, slices: map[string]routing.Endpoints{
				"web-a": {Service: "web", Ports: map[string]int{"": 80}, Ready: []string{"10.88.0.5"}},
			}, want: []string{"10.88.0.5:80"}},
		{name: "a port the Service does not have", svc: svc, port: 82, slices: map[string]routing.Endpoints{
			"web-a": {Service: "web", Ports: map[string]int{"http": 8012, "": 8014}, Ready: []string{"10.88.0.5"}},
		}, want: []string{"10.0.0.7:82"}},
		{name: "a slice without the port", svc: svc, port: 81, slices: map[string]routing.Endpoints{
			"web-a": {Service: "web", Ports: map[string]int{"http": 8012}, Ready: []string{"10.88.0.5"}},
		}, want: []string{"10.0.0.7:81"}, h2c: true},
		{name: "ready before terminating", svc: svc, port: 80, slices: map[string]routing.Endpoints{
			"web-a": {Service: "web", Ports: map[string]int{"http": 8012}, Serving: []string{"10.88.0.5"}},
			"web-b": {Service: "web", Ports: map[string]int{"http": 8012}, Ready: []string{"10.88.0.6"}},
		}, want: []string{"10.88.0.6:8012"}},
		{name: "terminating when none is ready", svc: svc, port: 80, slices: map[string]routing.Endpoints{
			"web-a": {Service: "web", Ports: map[string]int{"http": 8012}, Serving: []string{"10.88.0.5"}},
		}, want: []string{"10.88.0.5:8012"}},
		{name: "none ready nor serving", svc: svc, port: 80, slices: map[string]routing.Endpoints{
			"web-a": {Service: "web", Ports: map[string]int{"http": 8012}},
		}, want: []string{"10.0.0.7:80"}},
		{name: "another Service's slice", svc: svc, port: 80, slices: map[string]routing.Endpoints{
			"api-a": {Service: "api", Ports: map[string]int{"http": 8012}, Ready: []string{"10.88.0.5"}},
		}, want: []string{"10.0.0.7:80"}},
		{name: "headless", svc: routing.Service{ClusterIP: "None", Ports: svc.Ports}, port: 80, slices: map[string]routing.Endpoints{
			"web-a": {Service: "web", Ports: map[string]int{"http": 8012}, Ready: []string{"10.88.0.5"}},
		}, want: []string{"10.88.0.5:8012"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var tb routing.Table
			tb.SetService(key, c.svc)
			for name, e := range c.slices {
				tb.SetEndpoints(types.NamespacedName{Namespace: "ns", Name: name}, e)
			}
			seen := map[string]int{}
			for range 200 {
				host, h2c := tb.Address(routing.Backend{Namespace: "ns", Service: "web", Port: c.port}, "cluster.local")
				if h2c != c.h2c {
					t.Fatalf("h2c %v, want %v", h2c, c.h2c)
				}
				seen[host]++
			}
			for _, w := range c.want {
				if seen[w] == 0 {
					t.Errorf("never dialled %s; dialled %v", w, seen)
				}
				delete(seen, w)
			}
			if len(seen) > 0 {
				t.Errorf("dialled %v too", seen)
			}
		})
	}
}

// Slices come and go: a deleted one is no longer dialled, and with none
// left the Service's virtual IP is; a slice moved to another Service
// (its label changed) leaves the first.
func TestEndpointsFollowSlices(t *testing.T) {
	var tb routing.Table
	for _, name := range []string{"web", "api"} {
		tb.SetService(types.NamespacedName{Namespace: "ns", Name: name},
			routing.Service{ClusterIP: "10.0.0." + map[string]string{"web": "7", "api": "8"}[name],
				Ports: []routing.ServicePort{{Port: 80, Name: "http"}}})
	}
	address := func(svc string) string {
		host, _ := tb.Address(routing.Backend{Namespace: "ns", Service: svc, Port: 80}, "cluster.local")
		return host
	}
	a, b := types.NamespacedName{Namespace: "ns", Name: "web-a"}, types.NamespacedName{Namespace: "ns", Name: "web-b"}
	tb.SetEndpoints(a, routing.Endpoints{Service: "web", Ports: map[string]int{"http": 8012}, Ready: []string{"10.88.0.5"}})
	tb.SetEndpoints(b, routing.Endpoints{Service: "web", Ports: map[string]int{"http": 8012}})
	if got := address("web"); got != "10.88.0.5:8012" {
		t.Fatalf("dialled %s, want the ready endpoint", got)
	}
	// Not ready any more: the other slice has none either.
	tb.SetEndpoints(a, routing.Endpoints{Service: "web", Ports: map[string]int{"http": 8012}})
	if got := address("web"); got != "10.0.0.7:80" {
		t.Errorf("dialled %s with no ready endpoint, want the virtual IP", got)
	}
	tb.SetEndpoints(b, routing.Endpoints{Service: "web", Ports: map[string]int{"http": 8012}, Ready: []string{"10.88.0.6"}})
	if got := address("web"); got != "10.88.0.6:8012" {
		t.Errorf("dialled %s, want the ready endpoint of the second slice", got)
	}
	tb.SetEndpoints(b, routing.Endpoints{Service: "api", Ports: map[string]int{"http": 8012}, Ready: []string{"10.88.0.6"}})
	if got, api := address("web"), address("api"); got != "10.0.0.7:80" || api != "10.88.0.6:8012" {
		t.Errorf("slice moved to api: web dialled at %s, api at %s", got, api)
	}
	tb.DeleteEndpoints(b)
	tb.DeleteEndpoints(a)
	tb.DeleteEndpoints(a) // twice: a tombstone after the delete
	if got, api := address("web"), address("api"); got != "10.0.0.7:80" || api != "10.0.0.8:80" {
		t.Errorf("slices deleted: web dialled at %s, api at %s; want the virtual IPs", got, api)
	}
}

// An ExternalName Service naming another Service of the cluster is
// dialled at that Service's endpoints, as that Service would be: its own
// DNS name leads through kube-proxy to the same pods. Aliases naming each
// other end at a name.
func TestAddressAliasOfClusterService(t *testing.T) {
	var tb routing.Table
	api := types.NamespacedName{Namespace: "sless-system", Name: "sless-api"}
	tb.SetService(api, routing.Service{ClusterIP: "10.0.0.9", Ports: []routing.ServicePort{{Port: 80, Name: "http"}}})
	for name, alias := range map[string]string{
		"full":  "sless-api.sless-system.svc.cluster.local",
		"short": "sless-api.sless-system.svc",
		"dot":   "Sless-API.sless-system.svc.cluster.local.",
		"loop":  "loop.ns.svc.cluster.local",
	} {
		tb.SetService(types.NamespacedName{Namespace: "ns", Name: name}, routing.Service{ExternalName: alias})
	}
	address := func(svc string) (string, bool) {
		return tb.Address(routing.Backend{Namespace: "ns", Service: svc, Port: 80}, "cluster.local")
	}
	for _, name := range []string{"full", "short", "dot"} {
		if got, h2c := address(name); got != "10.0.0.9:80" || h2c {
			t.Errorf("alias %s dialled at %s (h2c %v), want sless-api's virtual IP", name, got, h2c)
		}
	}
	tb.SetEndpoints(types.NamespacedName{Namespace: "sless-system", Name: "sless-api-x"},
		routing.Endpoints{Service: "sless-api", Ports: map[string]int{"http": 8080}, Ready: []string{"10.88.0.3"}})
	if got, _ := address("full"); got != "10.88.0.3:8080" {
		t.Errorf("alias dialled at %s, want sless-api's endpoint", got)
	}
	if got, _ := address("loop"); got != "loop.ns.svc.cluster.local:80" {
		t.Errorf("an alias of itself dialled at %s, want its name", got)
	}
}

// ServiceOf reads the Service a cluster DNS name names, and nothing else.
func TestServiceOf(t *testing.T) {
	for _, c := range []struct {
		dns  string
		want string // namespace/name, "" for none
	}{
		{"web.ns.svc.cluster.local", "ns/web"},
		{"web.ns.svc.cluster.local.", "ns/web"},
		{"WEB.NS.SVC.Cluster.Local", "ns/web"},
		{"web.ns.svc", "ns/web"},
		{"web.ns", ""},
		{"web.ns.svc.example.com", ""},
		{"a.web.ns.svc.cluster.local", ""},
		{"ns.svc.cluster.local", ""},
		{".ns.svc.cluster.local", ""},
		{"web..svc.cluster.local", ""},
		{"svc.cluster.local", ""},
		{"lb.example.com", ""},
		{"", ""},
	} {
		key, ok := routing.ServiceOf(c.dns, "cluster.local")
		got := ""
		if ok {
			got = key.String()
		}
		if got != c.want {
			t.Errorf("ServiceOf(%q) = %q, want %q", c.dns, got, c.want)
		}
	}
}

// An endpoint a call has tried is drawn again only when the Service has no
// other.
func TestAddressAvoiding(t *testing.T) {
	var tb routing.Table
	tb.SetService(types.NamespacedName{Namespace: "ns", Name: "web"},
		routing.Service{ClusterIP: "10.0.0.7", Ports: []routing.ServicePort{{Port: 80, Name: "http"}}})
	tb.SetEndpoints(types.NamespacedName{Namespace: "ns", Name: "web-a"},
		routing.Endpoints{Service: "web", Ports: map[string]int{"http": 8012}, Ready: []string{"10.88.0.5", "10.88.0.6"}})
	b := routing.Backend{Namespace: "ns", Service: "web", Port: 80}
	for range 20 {
		if got, _ := tb.AddressAvoiding(b, "cluster.local", []string{"10.88.0.5:8012"}); got != "10.88.0.6:8012" {
			t.Fatalf("avoiding 10.88.0.5:8012, dialled %s", got)
		}
	}
	seen := map[string]bool{}
	for range 50 {
		got, _ := tb.AddressAvoiding(b, "cluster.local", []string{"10.88.0.5:8012", "10.88.0.6:8012"})
		seen[got] = true
	}
	if len(seen) != 2 || !seen["10.88.0.5:8012"] || !seen["10.88.0.6:8012"] {
		t.Errorf("every endpoint tried: drew %v, want both again", seen)
	}
}
