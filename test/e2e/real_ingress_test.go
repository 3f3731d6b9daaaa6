package e2e_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"k8s.io/utils/ptr"
	"knative.dev/networking/pkg/apis/networking"
	networkingv1alpha1 "knative.dev/networking/pkg/apis/networking/v1alpha1"
	"knative.dev/serving/pkg/apis/serving"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/sless-dev/sless/pkg/adapter/resources"
	"github.com/sless-dev/sless/pkg/auth"
	"github.com/sless-dev/sless/pkg/invoke"
	invokekube "github.com/sless-dev/sless/pkg/invoke/kube"
	"github.com/sless-dev/sless/pkg/reconciler/ingress"
	ingressresources "github.com/sless-dev/sless/pkg/reconciler/ingress/resources"
	"github.com/sless-dev/sless/test/testbed"
	"github.com/sless-dev/sless/test/testbed/functionctl"
)

const apiLoadBalancer = "sless-api.sless-system.svc.cluster.local"

// TestIngressClassOnRealKnative: a Function whose Knative Service carries
// sless's ingress class gets, from Knative's own route reconciler, a
// Knative Ingress of that class; sless's reconciler marks it ready once
// Knative's prober finds sless-api (its resolver, routing table and proxy,
// run here on a loopback port) answering with the generation's hash; the
// Function then turns Ready, and its cluster-local host is routed to the
// revision with Knative's headers, under the Function's access policy.
//
// No node runs here, so no revision pod or kube-proxy either: the proxy's
// transport dials the revision Service's DNS name to a loopback backend
// the test starts, which plays the revision and reports what it was sent.
func TestIngressClassOnRealKnative(t *testing.T) {
	bed := testbed.SharedPrimitives(t)
	t.Cleanup(func() { bed.Logs(t) })
	s := &realSlice{t: t, bed: bed, ns: bed.Namespace(t), kctl: testbed.Kubectl(t), dir: t.TempDir()}
	functionctl.Run(t, bed.Kube, s.ns, func(c *resources.Config) { c.IngressClass = ingressresources.ClassName })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	scheme := testbed.NewScheme()
	if err := networkingv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}

	// The revision, as the backend Service's DNS name leads to it.
	revision := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "host=%s rev=%s ns=%s", r.Host, r.Header.Get(invoke.RevisionHeader), r.Header.Get(invoke.NamespaceHeader))
	}))
	t.Cleanup(revision.Close)
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if !strings.HasSuffix(addr, "."+s.ns+".svc.cluster.local:80") {
			return nil, fmt.Errorf("no route to %s here", addr)
		}
		var d net.Dialer
		return d.DialContext(ctx, network, revision.Listener.Addr().String())
	}
	tr := invoke.NewTransport()
	tr.DialContext = dial
	tr.Fallback.(*http.Transport).DialContext = dial

	// sless-api: the resolver with the routing table, the proxy, a token verifier.
	secret := []byte("ingress-test-secret-0123456789abcdef")
	verifier, err := auth.New(ctx, auth.Config{HS256Secret: secret, Issuer: "https://issuer.test", Audiences: []string{"sless"}})
	if err != nil {
		t.Fatal(err)
	}
	resolver, err := invokekube.Start(ctx, bed.Kube.Config, scheme, invokekube.Options{IngressClass: ingressresources.ClassName, SyncTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := invoke.NewProxy(invoke.Options{Resolver: resolver, Services: resolver.Services(), Routes: resolver.Routes(), Transport: tr,
		Authenticator: invoke.AuthenticatorFunc(func(r *http.Request) (invoke.Identity, error) {
			id, err := verifier.Authenticate(r)
			if err != nil {
				return invoke.Identity{}, err
			}
			return invoke.Identity(*id), nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(proxy.Ingresses(proxy))
	t.Cleanup(api.Close)

	// The controller's ingress reconciler, probing that one replica.
	mgr, err := ctrl.NewManager(bed.Kube.Config, ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Cache:      cache.Options{DefaultNamespaces: map[string]cache.Config{s.ns: {}}},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := ingress.SetupWithManager(mgr, ingress.Config{PublicLoadBalancer: apiLoadBalancer, PrivateLoadBalancer: apiLoadBalancer,
		Replicas: []string{api.Listener.Addr().String()}}); err != nil {
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

	s.apply("hello", "hi", 10)
	fn := s.settle("hello", 1)
	s.ready(fn)

	var ings networkingv1alpha1.IngressList
	if err := mgr.GetAPIReader().List(ctx, &ings, client.InNamespace(s.ns), client.MatchingLabels{serving.RouteLabelKey: "hello"}); err != nil {
		t.Fatal(err)
	}
	if len(ings.Items) != 1 {
		t.Fatalf("%d Ingresses of Route hello", len(ings.Items))
	}
	ing := &ings.Items[0]
	if c := ing.Annotations[networking.IngressClassAnnotationKey]; c != ingressresources.ClassName {
		t.Fatalf("Ingress class %q", c)
	}
	if !ing.IsReady() || len(ing.Status.PrivateLoadBalancer.Ingress) != 1 || ing.Status.PrivateLoadBalancer.Ingress[0].DomainInternal != apiLoadBalancer {
		t.Fatalf("Ingress status %+v", ing.Status)
	}
	host := "hello." + s.ns + ".svc.cluster.local"
	if _, ok := resolver.Routes().Owner(host, true); !ok {
		t.Fatalf("sless-api's table does not hold %s", host)
	}

	call := func(token string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, api.URL+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	token := func(ns string) string {
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "caller", "iss": "https://issuer.test", "aud": "sless",
			"exp": time.Now().Add(time.Hour).Unix(), auth.DefaultNamespaceClaim: ns}).SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	if status, body := call(""); status != http.StatusUnauthorized {
		t.Fatalf("no token: %d %s", status, body)
	}
	if status, body := call(token("someone-else")); status != http.StatusForbidden {
		t.Fatalf("another namespace's token: %d %s", status, body)
	}
	want := fmt.Sprintf("host=%s rev=%s ns=%s", host, fn.Status.LatestReadyRevision, s.ns)
	if status, body := call(token(s.ns)); status != http.StatusOK || body != want {
		t.Fatalf("with a token: %d %q, want %q", status, body, want)
	}
}
