// Package nodeapi runs sless-api's invoke path and the controller's
// reconciler of sless's Knative networking class in a test process beside
// a real node (testbed.Node), as cmd/sless wires them on a cluster: the
// informer resolver with the Ingresses' routing table, the proxy with
// Knative Ingresses' hosts, function hosts and /fn/, records in
// PostgreSQL. It listens on the host side of the node's veth, behind a
// selector-less Service sless-system/sless-api whose endpoint is that
// address, so pods reach it through kube-proxy as they would its pods, and
// it reaches revision Services and the activator through the routes the
// bed gives the host into the node, with cluster.local names answered by
// the node's CoreDNS. It is apart from testbed, which cannot import sless's
// reconcilers.
package nodeapi

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	networkingv1alpha1 "knative.dev/networking/pkg/apis/networking/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/sless-dev/sless/pkg/adapter/postgres"
	"github.com/sless-dev/sless/pkg/adapter/postgres/postgrestest"
	"github.com/sless-dev/sless/pkg/auth"
	"github.com/sless-dev/sless/pkg/frontdoor"
	"github.com/sless-dev/sless/pkg/invoke"
	invokekube "github.com/sless-dev/sless/pkg/invoke/kube"
	"github.com/sless-dev/sless/pkg/reconciler/ingress"
	ingressresources "github.com/sless-dev/sless/pkg/reconciler/ingress/resources"
	"github.com/sless-dev/sless/test/testbed"
)

// Where sless-api's Service is, as cmd/sless's controller defaults it.
const (
	Namespace = "sless-system"
	Service   = "sless-api"
	// LoadBalancer is the Service's cluster-local name: every Ingress of
	// sless's class reports it, and Knative points the functions' hosts at
	// it.
	LoadBalancer = Service + "." + Namespace + ".svc.cluster.local"
	// Domain is the domain function hosts are served under,
	// {name}.{namespace}.Domain.
	Domain = "fn.testbed.local"
)

var secret = []byte("sless-node-api-secret-0123456789abcdef")

// API is sless-api beside the node.
type API struct {
	// URL is where it serves: http://<the host side of the veth>:<port>.
	URL string
	// Records is the invocation store the proxy records into.
	Records *postgres.Store
	// Resolver is the proxy's view of Functions, Revisions and Ingresses.
	Resolver *invokekube.Resolver
}

// Start runs sless-api and the ingress reconciler on n until t ends.
func Start(t testing.TB, n *testbed.Node) *API {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	scheme := testbed.NewScheme()
	if err := networkingv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	a := &API{Records: postgrestest.New(t)}
	recorder := invoke.NewRecorder(a.Records, invoke.RecorderOptions{})
	t.Cleanup(func() { _ = recorder.Close(context.Background()) })
	verifier, err := auth.New(ctx, auth.Config{HS256Secret: secret, Audiences: []string{"sless"}})
	if err != nil {
		t.Fatal(err)
	}
	if a.Resolver, err = invokekube.Start(ctx, n.Kube.Config, scheme, invokekube.Options{
		WatchRevisions: true, IngressClass: ingressresources.ClassName, SyncTimeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	proxy, err := invoke.NewProxy(invoke.Options{
		Resolver: a.Resolver, Services: a.Resolver.Services(), Routes: a.Resolver.Routes(), Recorder: recorder,
		Domain: Domain, Transport: ClusterTransport(),
		Authenticator: invoke.AuthenticatorFunc(func(r *http.Request) (invoke.Identity, error) {
			id, err := verifier.Authenticate(r)
			if err != nil {
				return invoke.Identity{}, err
			}
			return invoke.Identity(*id), nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	// On the host side of the veth: pods reach it there, through the
	// Service below.
	ln, err := net.Listen("tcp", net.JoinHostPort(testbed.NodeHostIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	a.URL = "http://" + ln.Addr().String()
	// Cron runs' and queue consumers' calls carry their trigger's
	// credential, checked in front of the proxy as sless-api does.
	calls := frontdoor.TriggerCalls(proxy, secret, "", []string{"sless"}, n.Kube.Client)
	srv := &http.Server{Handler: proxy.Ingresses(proxy.Hosts(calls)), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	if err := publish(ctx, n, ln.Addr().(*net.TCPAddr).Port); err != nil {
		t.Fatal(err)
	}

	// The controller's reconciler of sless's class, probing the Service's
	// endpoints as on a cluster.
	ingCfg := ingress.Config{Class: ingressresources.ClassName, PublicLoadBalancer: LoadBalancer, PrivateLoadBalancer: LoadBalancer,
		Service: types.NamespacedName{Namespace: Namespace, Name: Service}, Port: "http"}
	mgr, err := ctrl.NewManager(n.Kube.Config, ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Cache:      cache.Options{ByObject: ingCfg.CacheByObject()},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := ingress.SetupWithManager(mgr, ingCfg); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ingress reconciler: %v", err)
		}
	})
	return a
}

// publish makes sless-api's Service, its one endpoint this process's
// listener on the host side of the veth, also on a node port.
func publish(ctx context.Context, n *testbed.Node, port int) error {
	cs := n.Clientset
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %w", Namespace, err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: Service, Namespace: Namespace},
		// A NodePort, as a cluster's sless-api behind a load balancer has:
		// a client outside the cluster (Knative's conformance suite, with
		// --ingressendpoint the node) dials it on the node's address.
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(int32(port))}}},
	}
	if _, err := cs.CoreV1().Services(Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("Service %s/%s: %w", Namespace, Service, err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: Service + "-host", Namespace: Namespace,
			Labels: map[string]string{discoveryv1.LabelServiceName: Service, discoveryv1.LabelManagedBy: "sless-testbed"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{testbed.NodeHostIP}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(port)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	if _, err := cs.DiscoveryV1().EndpointSlices(Namespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("EndpointSlice of %s: %w", Service, err)
	}
	return nil
}

// ClusterTransport is the proxy's transport with cluster.local names
// answered by the node's CoreDNS: the host's resolver knows none.
func ClusterTransport() http.RoundTripper {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Resolver: &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, net.JoinHostPort(testbed.NodeIP, "53"))
		},
	}}
	tr := invoke.NewTransport()
	tr.DialContext = dialer.DialContext
	tr.Fallback.(*http.Transport).DialContext = dialer.DialContext
	return tr
}

// Token is a bearer token of namespace ns that the API accepts.
func Token(t testing.TB, ns string) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "node-test", "aud": "sless",
		"exp": time.Now().Add(time.Hour).Unix(), auth.DefaultNamespaceClaim: ns}).SignedString(secret)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Calls lists the records of function ns/name's calls, newest first.
func (a *API) Calls(ctx context.Context, ns, name string) ([]invoke.Record, error) {
	page, err := a.Records.List(ctx, invoke.Query{Namespace: ns, Function: name, Limit: invoke.MaxListLimit})
	if err != nil {
		return nil, fmt.Errorf("records of %s/%s: %w", ns, name, err)
	}
	return page.Items, nil
}
