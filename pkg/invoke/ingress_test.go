package invoke_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"knative.dev/networking/pkg/apis/networking/v1alpha1"

	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/invoketest"
	"github.com/sless-dev/sless/pkg/invoke/routing"
)

// The hosts Knative gives a cluster-local Knative Service hello in team-a.
const helloHost = "hello.team-a.svc.cluster.local"

// backends plays the cluster's DNS and kube-proxy for revision Services:
// their names dial loopback servers the test starts.
type backends struct {
	mu    sync.Mutex
	addrs map[string]string // service.namespace.svc.cluster.local:port to host:port
}

func (b *backends) add(t testing.TB, svcHost string, h http.Handler) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	b.set(svcHost, strings.TrimPrefix(srv.URL, "http://"))
}

func (b *backends) set(svcHost, addr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.addrs == nil {
		b.addrs = map[string]string{}
	}
	b.addrs[svcHost] = addr
}

func (b *backends) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	b.mu.Lock()
	to, ok := b.addrs[addr]
	b.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("no such host %s", addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, to)
}

// transports forward to the backends: HTTP/1 and h2c.
func (b *backends) transports() (http.RoundTripper, http.RoundTripper) {
	tr := invoke.NewTransport()
	tr.DialContext = b.dial
	tr.Fallback.(*http.Transport).DialContext = b.dial
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	return tr, &http.Transport{DialContext: b.dial, Protocols: &protocols}
}

func ingressSplit(svc string, port, pct int) v1alpha1.IngressBackendSplit {
	return v1alpha1.IngressBackendSplit{
		IngressBackend: v1alpha1.IngressBackend{ServiceNamespace: "team-a", ServiceName: svc, ServicePort: intstr.FromInt(port)},
		Percent:        pct, AppendHeaders: map[string]string{invoke.RevisionHeader: svc},
	}
}

// helloIngress is what Knative's route reconciler makes for the Function
// hello: its cluster-local hosts, split between two revisions.
func helloIngress(labels map[string]string, paths ...v1alpha1.HTTPIngressPath) *v1alpha1.Ingress {
	if len(paths) == 0 {
		paths = []v1alpha1.HTTPIngressPath{{
			AppendHeaders: map[string]string{invoke.NamespaceHeader: "team-a"},
			Splits:        []v1alpha1.IngressBackendSplit{ingressSplit("hello-00001", 80, 30), ingressSplit("hello-00002", 80, 70)},
		}}
	}
	return &v1alpha1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "team-a", Generation: 1, Labels: labels},
		Spec: v1alpha1.IngressSpec{Rules: []v1alpha1.IngressRule{{
			Hosts:      []string{"hello.team-a", "hello.team-a.svc", helloHost},
			Visibility: v1alpha1.IngressVisibilityClusterLocal,
			HTTP:       &v1alpha1.HTTPIngressRuleValue{Paths: paths},
		}}},
	}
}

var functionLabels = map[string]string{routing.LabelFunction: "hello"}

// ingressRig is a proxy serving Ingress hosts in front of /fn/, with the
// revision Services played by loopback servers.
type ingressRig struct {
	*rig
	table    *routing.Table
	backends *backends
	pick     atomic.Int64 // what the table draws for a split, of 100
	url      string       // the server with Ingresses in front
	public   string       // the server with PublicIngresses in front
}

func newIngressRig(t *testing.T, opts invoke.Options, ings ...*v1alpha1.Ingress) *ingressRig {
	t.Helper()
	ir := &ingressRig{table: &routing.Table{}, backends: &backends{}}
	ir.table.Pick = func(int) int { return int(ir.pick.Load()) }
	for _, ing := range ings {
		c, err := routing.Compile(ing)
		if err != nil {
			t.Fatal(err)
		}
		ir.table.Set(c)
	}
	opts.Routes = ir.table
	opts.Transport, opts.H2CTransport = ir.backends.transports()
	ir.rig = newRig(t, opts)
	srv := httptest.NewServer(ir.proxy.Ingresses(ir.proxy))
	t.Cleanup(srv.Close)
	pub := httptest.NewServer(ir.proxy.PublicIngresses(ir.proxy))
	t.Cleanup(pub.Close)
	ir.url, ir.public = srv.URL, pub.URL
	return ir
}

// call sends a request to host through the rig's cluster-local door.
func (ir *ingressRig) call(t *testing.T, host, path string, header ...string) *http.Response {
	t.Helper()
	return ir.callAt(t, ir.url, host, path, header...)
}

// callAt sends a request to host through the door at base.
func (ir *ingressRig) callAt(t *testing.T, base, host, path string, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// mirror answers with what the backend was sent: its name, the Host and the
// Knative headers.
func mirror(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s host=%s path=%s rev=%s ns=%s auth=%q proto=%d", name, r.Host, r.URL.Path,
			r.Header.Get(invoke.RevisionHeader), r.Header.Get(invoke.NamespaceHeader), r.Header.Get("Authorization"), r.ProtoMajor)
	}
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A Function's cluster-local host is held to its policy: no token is
// refused, a token of its namespace is answered by the revision the split
// draws, with Knative's headers, and the call is recorded.
func TestIngressHostOfAFunction(t *testing.T) {
	ir := newIngressRig(t, invoke.Options{}, helloIngress(functionLabels))
	ir.backends.add(t, "hello-00001.team-a.svc.cluster.local:80", mirror("one"))
	ir.backends.add(t, "hello-00002.team-a.svc.cluster.local:80", mirror("two"))
	ir.targets.set("team-a", "hello", invoke.Target{Address: &url.URL{Scheme: "http", Host: helloHost}, Ready: true, Revision: "hello-00002"})

	invoketest.Refusal(t, ir.call(t, helloHost, "/x"), http.StatusUnauthorized, invoke.ReasonUnauthorized)
	invoketest.Refusal(t, ir.call(t, "hello.team-a.svc:80", "/x", "Authorization", "Bearer team-b:bob"), http.StatusForbidden, invoke.ReasonForbidden)

	ir.pick.Store(29) // the first 30 of 100 go to hello-00001
	resp := ir.call(t, helloHost, "/x", "Authorization", "Bearer team-a:alice", invoke.RevisionHeader, "forged")
	want := `one host=hello.team-a.svc.cluster.local path=/x rev=hello-00001 ns=team-a auth="" proto=1`
	if got := body(t, resp); resp.StatusCode != http.StatusOK || got != want {
		t.Fatalf("%d %q, want %q", resp.StatusCode, got, want)
	}
	ir.pick.Store(30)
	if got := body(t, ir.call(t, "hello.team-a", "/y", "Authorization", "Bearer team-a:alice")); !strings.HasPrefix(got, "two host=hello.team-a path=/y rev=hello-00002") {
		t.Fatalf("body %q", got)
	}
	recs := ir.records(t, "team-a", "hello", 2)
	if recs[0].Revision != "hello-00002" || recs[1].Revision != "hello-00001" || recs[0].Trigger != invoke.TriggerHTTP || recs[0].Status != http.StatusOK {
		t.Fatalf("records %+v", recs)
	}

	// A public trigger opens the host as it opens /fn/.
	ir.targets.set("team-a", "hello", invoke.Target{Address: &url.URL{Scheme: "http", Host: helloHost}, Ready: true, Public: true})
	if resp := ir.call(t, helloHost, "/"); resp.StatusCode != http.StatusOK {
		t.Fatalf("public call: %d", resp.StatusCode)
	}
}

// A call by /fn/ resolves to the Function's cluster-local host, which
// leads back to sless-api: the Ingress holding that host routes it.
func TestIngressRoutesCallsByPath(t *testing.T) {
	ir := newIngressRig(t, invoke.Options{}, helloIngress(functionLabels))
	ir.backends.add(t, "hello-00002.team-a.svc.cluster.local:80", mirror("two"))
	ir.targets.set("team-a", "hello", invoke.Target{Address: &url.URL{Scheme: "http", Host: helloHost}, Ready: true, Public: true})
	ir.pick.Store(99)
	resp := ir.call(t, "sless.example.com", "/fn/team-a/hello/z")
	want := `two host=hello.team-a.svc.cluster.local path=/z rev=hello-00002 ns=team-a auth="" proto=1`
	if got := body(t, resp); got != want {
		t.Fatalf("%d %q, want %q", resp.StatusCode, got, want)
	}
}

// Knative's prober gets the hash of the generation loaded, from any host
// of the Ingress, and nothing reaches a backend.
func TestIngressAnswersKnativesProbe(t *testing.T) {
	ing := helloIngress(functionLabels)
	compiled, err := routing.Compile(ing)
	if err != nil {
		t.Fatal(err)
	}
	ir := newIngressRig(t, invoke.Options{}, ing)
	for _, host := range []string{helloHost, "hello.team-a.svc:8080"} {
		resp := ir.call(t, host, "/healthz", "K-Network-Probe", "probe", "K-Network-Hash", "override", "User-Agent", "Knative-Ingress-Probe")
		if resp.StatusCode != http.StatusOK || resp.Header.Get("K-Network-Hash") != compiled.Hash {
			t.Fatalf("%s: %d hash %q, want %q", host, resp.StatusCode, resp.Header.Get("K-Network-Hash"), compiled.Hash)
		}
	}
	// A hash other than "override" comes back as sent, as a backend's
	// probe handler would echo it.
	const other = "2701a1b241db6af811992c57a5e11171847148ac3d2e1a8cc992a62f9e4fa111"
	resp := ir.call(t, helloHost, "/", "K-Network-Probe", "probe", "K-Network-Hash", other)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("K-Network-Hash") != other {
		t.Fatalf("%d hash %q, want %q", resp.StatusCode, resp.Header.Get("K-Network-Hash"), other)
	}
}

// A pod is a ready endpoint before its server listens: a call whose
// connection an endpoint refused goes to another, and answers 502 only when
// every try was refused.
func TestIngressRetriesARefusedConnection(t *testing.T) {
	ing := helloIngress(nil, v1alpha1.HTTPIngressPath{Splits: []v1alpha1.IngressBackendSplit{ingressSplit("web", 80, 100)}})
	ing.Name, ing.Spec.Rules[0].Hosts = "web", []string{"web.team-a.svc.cluster.local"}
	ir := newIngressRig(t, invoke.Options{}, ing)
	ir.table.SetService(types.NamespacedName{Namespace: "team-a", Name: "web"},
		routing.Service{ClusterIP: "10.0.0.9", Ports: []routing.ServicePort{{Port: 80, Name: "http"}}})
	live := httptest.NewServer(mirror("live"))
	t.Cleanup(live.Close)
	dead := httptest.NewServer(mirror("dead"))
	dead.Close() // its port now refuses connections
	slice := func(name, addr string) {
		host, port, _ := net.SplitHostPort(addr)
		n, _ := strconv.Atoi(port)
		ir.backends.set(addr, addr)
		ir.table.SetEndpoints(types.NamespacedName{Namespace: "team-a", Name: name},
			routing.Endpoints{Service: "web", Ports: map[string]int{"http": n}, Ready: []string{host}})
	}
	slice("web-dead", strings.TrimPrefix(dead.URL, "http://"))
	slice("web-live", strings.TrimPrefix(live.URL, "http://"))
	for i := range 30 {
		resp := ir.call(t, "web.team-a.svc.cluster.local", "/")
		if got := body(t, resp); resp.StatusCode != http.StatusOK || !strings.HasPrefix(got, "live ") {
			t.Fatalf("call %d: %d %q, want the live endpoint's answer", i, resp.StatusCode, got)
		}
	}
	ir.table.DeleteEndpoints(types.NamespacedName{Namespace: "team-a", Name: "web-live"})
	if resp := ir.call(t, "web.team-a.svc.cluster.local", "/"); resp.StatusCode != http.StatusBadGateway {
		t.Errorf("only a refusing endpoint: %d %q, want 502", resp.StatusCode, body(t, resp))
	}
}

func TestIngressEdgeCases(t *testing.T) {
	canary := v1alpha1.HTTPIngressPath{
		Headers: map[string]v1alpha1.HeaderMatch{"X-Tag": {Exact: "canary"}},
		Splits:  []v1alpha1.IngressBackendSplit{ingressSplit("hello-00003", 80, 100)},
	}
	api := v1alpha1.HTTPIngressPath{Path: "/api", Splits: []v1alpha1.IngressBackendSplit{ingressSplit("hello-00001", 80, 100)}}
	h2c := v1alpha1.HTTPIngressPath{Path: "/grpc", Splits: []v1alpha1.IngressBackendSplit{ingressSplit("hello-00004", 81, 100)}}
	user := helloIngress(nil, canary, api, h2c)
	user.Name, user.Spec.Rules[0].Hosts = "mine", []string{"mine.team-a.svc.cluster.local"}
	ir := newIngressRig(t, invoke.Options{IngressTimeout: 200 * time.Millisecond, TimeoutGrace: time.Millisecond}, user)
	ir.backends.add(t, "hello-00001.team-a.svc.cluster.local:80", mirror("api"))
	ir.backends.add(t, "hello-00003.team-a.svc.cluster.local:80", mirror("canary"))
	h2cSrv := httptest.NewUnstartedServer(mirror("h2c"))
	h2cSrv.Config.Protocols = new(http.Protocols)
	h2cSrv.Config.Protocols.SetUnencryptedHTTP2(true)
	h2cSrv.Start()
	t.Cleanup(h2cSrv.Close)
	ir.backends.set("hello-00004.team-a.svc.cluster.local:81", strings.TrimPrefix(h2cSrv.URL, "http://"))
	ir.backends.add(t, "slow.team-a.svc.cluster.local:80", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	const host = "mine.team-a.svc.cluster.local"

	for _, tc := range []struct {
		name, host, path string
		header           []string
		status           int
		want             string // the body's start, or the problem's reason
	}{
		{"header match", host, "/api", []string{"X-Tag", "canary"}, http.StatusOK, "canary "},
		{"path prefix", host, "/api/v1", nil, http.StatusOK, "api "},
		{"h2c on port 81", host, "/grpc", nil, http.StatusOK, "h2c host=mine.team-a.svc.cluster.local path=/grpc rev=hello-00004 ns= auth=\"\" proto=2"},
		{"no path matches", host, "/other", nil, http.StatusNotFound, invoke.ReasonNotFound},
		{"unknown host", "nobody.team-a.svc.cluster.local", "/api", nil, http.StatusNotFound, invoke.ReasonNotFound},
		// An Ingress of the user's is routed without sless's policy.
		{"no token needed", host, "/api", []string{"Authorization", "Bearer x"}, http.StatusOK, `api host=mine.team-a.svc.cluster.local path=/api rev=hello-00001 ns= auth="Bearer x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := ir.call(t, tc.host, tc.path, tc.header...)
			if tc.status != http.StatusOK {
				invoketest.Refusal(t, resp, tc.status, tc.want)
				return
			}
			if got := body(t, resp); resp.StatusCode != tc.status || !strings.HasPrefix(got, tc.want) {
				t.Fatalf("%d %q, want %d %q", resp.StatusCode, got, tc.status, tc.want)
			}
		})
	}

	t.Run("timeout", func(t *testing.T) {
		slow := helloIngress(nil, v1alpha1.HTTPIngressPath{Splits: []v1alpha1.IngressBackendSplit{ingressSplit("slow", 80, 100)}})
		slow.Name, slow.Spec.Rules[0].Hosts = "slow", []string{"slow.team-a.svc.cluster.local"}
		c, err := routing.Compile(slow)
		if err != nil {
			t.Fatal(err)
		}
		ir.table.Set(c)
		began := time.Now()
		invoketest.Refusal(t, ir.call(t, "slow.team-a.svc.cluster.local", "/"), http.StatusGatewayTimeout, invoke.ReasonTimeout)
		if d := time.Since(began); d > 3*time.Second {
			t.Fatalf("answered after %s", d)
		}
	})
}

// The public door serves ExternalIP rules only: a host that only a
// ClusterLocal rule holds is 404 there, even to Knative's prober, while
// the cluster-local door serves both; a host no Ingress holds goes on to
// the rest of the front door at either.
func TestIngressPublicDoor(t *testing.T) {
	ing := helloIngress(nil)
	ing.Name = "web"
	ing.Spec.Rules = append(ing.Spec.Rules, v1alpha1.IngressRule{
		Hosts:      []string{"web.example.com"},
		Visibility: v1alpha1.IngressVisibilityExternalIP,
		HTTP: &v1alpha1.HTTPIngressRuleValue{Paths: []v1alpha1.HTTPIngressPath{{
			Splits: []v1alpha1.IngressBackendSplit{ingressSplit("web-00001", 80, 100)}}}},
	})
	ir := newIngressRig(t, invoke.Options{}, ing)
	ir.backends.add(t, "hello-00001.team-a.svc.cluster.local:80", mirror("one"))
	ir.backends.add(t, "hello-00002.team-a.svc.cluster.local:80", mirror("two"))
	ir.backends.add(t, "web-00001.team-a.svc.cluster.local:80", mirror("web"))

	for _, tc := range []struct {
		name, host string
		public     bool
		header     []string
		status     int
		want       string // the body's start, or the problem's reason
	}{
		{"public host, public door", "web.example.com", true, nil, http.StatusOK, "web host=web.example.com"},
		{"public host, local door", "web.example.com:80", false, nil, http.StatusOK, "web host=web.example.com"},
		{"local host, local door", helloHost, false, nil, http.StatusOK, "one host=" + helloHost},
		{"local host, public door", helloHost, true, nil, http.StatusNotFound, invoke.ReasonNotFound},
		{"short local host, public door", "hello.team-a:80", true, nil, http.StatusNotFound, invoke.ReasonNotFound},
		{"probe of a local host, public door", "hello.team-a.svc", true, []string{"K-Network-Probe", "probe"}, http.StatusNotFound, invoke.ReasonNotFound},
		{"unknown host, public door", "nobody.example.com", true, nil, http.StatusNotFound, invoke.ReasonNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := ir.url
			if tc.public {
				base = ir.public
			}
			resp := ir.callAt(t, base, tc.host, "/", tc.header...)
			if tc.status != http.StatusOK {
				invoketest.Refusal(t, resp, tc.status, tc.want)
				return
			}
			if got := body(t, resp); resp.StatusCode != tc.status || !strings.HasPrefix(got, tc.want) {
				t.Fatalf("%d %q, want %d %q", resp.StatusCode, got, tc.status, tc.want)
			}
		})
	}
	// The probe of a public host is answered at the public door too.
	resp := ir.callAt(t, ir.public, "web.example.com", "/", "K-Network-Probe", "probe")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("K-Network-Hash") == "" {
		t.Fatalf("probe at the public door: %d, hash %q", resp.StatusCode, resp.Header.Get("K-Network-Hash"))
	}
}

// A Function's own timeout bounds a call through its host.
func TestIngressFunctionTimeout(t *testing.T) {
	ir := newIngressRig(t, invoke.Options{TimeoutGrace: time.Millisecond}, helloIngress(functionLabels))
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	ir.backends.add(t, "hello-00001.team-a.svc.cluster.local:80", slow)
	ir.backends.add(t, "hello-00002.team-a.svc.cluster.local:80", slow)
	ir.targets.set("team-a", "hello", invoke.Target{Address: &url.URL{Scheme: "http", Host: helloHost}, Ready: true, Public: true, Timeout: 150 * time.Millisecond})
	invoketest.Refusal(t, ir.call(t, helloHost, "/"), http.StatusGatewayTimeout, invoke.ReasonTimeout)
	if rec := ir.records(t, "team-a", "hello", 1)[0]; rec.Status != http.StatusGatewayTimeout {
		t.Fatalf("record %+v", rec)
	}
}

// A WebSocket through a Function's host echoes both ways; a stream
// reaches the caller as the backend flushes it.
func TestIngressWebSocketAndStreaming(t *testing.T) {
	ir := newIngressRig(t, invoke.Options{}, helloIngress(functionLabels,
		v1alpha1.HTTPIngressPath{Path: "/ws", Splits: []v1alpha1.IngressBackendSplit{ingressSplit("hello-00001", 80, 100)}},
		v1alpha1.HTTPIngressPath{Splits: []v1alpha1.IngressBackendSplit{ingressSplit("hello-00002", 80, 100)}}))
	ir.backends.add(t, "hello-00001.team-a.svc.cluster.local:80", websocket.Server{Handler: func(ws *websocket.Conn) {
		var msg string
		for websocket.Message.Receive(ws, &msg) == nil {
			if websocket.Message.Send(ws, ws.Request().Header.Get(invoke.RevisionHeader)+": "+msg) != nil {
				return
			}
		}
	}, Handshake: func(*websocket.Config, *http.Request) error { return nil }})
	release := make(chan struct{})
	ir.backends.add(t, "hello-00002.team-a.svc.cluster.local:80", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "first\n")
		w.(http.Flusher).Flush()
		<-release
		fmt.Fprint(w, "second\n")
	}))
	ir.targets.set("team-a", "hello", invoke.Target{Address: &url.URL{Scheme: "http", Host: helloHost}, Ready: true, Public: true})

	conn, err := net.Dial("tcp", strings.TrimPrefix(ir.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cfg, err := websocket.NewConfig("ws://"+helloHost+"/ws", "http://"+helloHost)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := websocket.NewClient(cfg, conn)
	if err != nil {
		t.Fatal(err)
	}
	_ = ws.SetDeadline(time.Now().Add(10 * time.Second))
	var got string
	if err := websocket.Message.Send(ws, "hi"); err != nil {
		t.Fatal(err)
	}
	if err := websocket.Message.Receive(ws, &got); err != nil || got != "hello-00001: hi" {
		t.Fatalf("echo %q, %v", got, err)
	}

	resp := ir.call(t, helloHost, "/stream")
	buf := make([]byte, 6)
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "first\n" {
		t.Fatalf("stream %q, %v", buf, err)
	}
	close(release)
	if rest := body(t, resp); rest != "second\n" {
		t.Fatalf("rest %q", rest)
	}
	ws.Close()
	recs := ir.records(t, "team-a", "hello", 2)
	statuses := []int{recs[0].Status, recs[1].Status}
	if !slices.Contains(statuses, http.StatusSwitchingProtocols) || !slices.Contains(statuses, http.StatusOK) {
		t.Fatalf("records %+v", recs)
	}
}

// The table changes while calls are routed through it (run with -race).
func TestIngressTableChangesUnderCalls(t *testing.T) {
	ir := newIngressRig(t, invoke.Options{}, helloIngress(functionLabels))
	ir.backends.add(t, "hello-00001.team-a.svc.cluster.local:80", mirror("one"))
	ir.backends.add(t, "hello-00002.team-a.svc.cluster.local:80", mirror("two"))
	ir.targets.set("team-a", "hello", invoke.Target{Address: &url.URL{Scheme: "http", Host: helloHost}, Ready: true, Public: true})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			ing := helloIngress(functionLabels)
			ing.Generation = int64(i)
			ing.Spec.Rules[0].HTTP.Paths[0].AppendHeaders["X-Gen"] = fmt.Sprint(i)
			c, err := routing.Compile(ing)
			if err != nil {
				t.Error(err)
				return
			}
			ir.table.Set(c)
		}
	}()
	var calls sync.WaitGroup
	for g := 0; g < 4; g++ {
		calls.Add(1)
		go func() {
			defer calls.Done()
			for i := 0; i < 25; i++ {
				req, _ := http.NewRequest(http.MethodGet, ir.url+"/", nil)
				req.Host = helloHost
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("status %d", resp.StatusCode)
				}
			}
		}()
	}
	calls.Wait()
	close(stop)
	wg.Wait()
}
