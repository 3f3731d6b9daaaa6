package kube_test

import (
	"context"
	"maps"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"knative.dev/networking/pkg/apis/networking"
	"knative.dev/networking/pkg/apis/networking/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/invoke/kube"
	"github.com/sless-dev/sless/pkg/invoke/routing"
	"github.com/sless-dev/sless/test/testbed"
)

const class = "sless.ingress.networking.knative.dev"

func kingress(ns, name, class string) *v1alpha1.Ingress {
	return &v1alpha1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Annotations: map[string]string{networking.IngressClassAnnotationKey: class},
			Labels:      map[string]string{routing.LabelFunction: name}},
		Spec: v1alpha1.IngressSpec{Rules: []v1alpha1.IngressRule{{
			Hosts:      []string{name + "." + ns + ".svc.cluster.local"},
			Visibility: v1alpha1.IngressVisibilityClusterLocal,
			HTTP: &v1alpha1.HTTPIngressRuleValue{Paths: []v1alpha1.HTTPIngressPath{{Splits: []v1alpha1.IngressBackendSplit{{
				IngressBackend: v1alpha1.IngressBackend{ServiceNamespace: ns, ServiceName: name + "-00001", ServicePort: intstr.FromInt(80)},
				Percent:        100,
			}}}}},
		}}},
	}
}

// The Ingresses of sless's class are loaded into Routes as the apiserver
// has them; those of another class, or that cannot be routed, are not.
func TestRoutesFollowIngressesOfTheClass(t *testing.T) {
	k := testbed.SharedKube(t)
	scheme := testbed.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(k.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r, err := kube.Start(ctx, k.Config, scheme, kube.Options{IngressClass: class, SyncTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ns := k.Namespace(t)
	hosted := func(host string) bool {
		_, ok := r.Routes().Owner(host, true)
		return ok
	}
	eventually := func(what string, f func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !f() {
			if time.Now().After(deadline) {
				t.Fatalf("not %s after 30s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	mine, theirs := kingress(ns, "hello", class), kingress(ns, "other", "kourier.ingress.networking.knative.dev")
	for _, ing := range []*v1alpha1.Ingress{mine, theirs} {
		if err := c.Create(ctx, ing); err != nil {
			t.Fatal(err)
		}
	}
	eventually("loaded", func() bool { return hosted("hello." + ns + ".svc.cluster.local") })
	if hosted("other." + ns + ".svc.cluster.local") {
		t.Fatal("an Ingress of Kourier's class is routed")
	}

	// A new generation's hash replaces the old one.
	old, _ := r.Routes().Owner("hello."+ns+".svc.cluster.local", true)
	mine.Spec.Rules[0].HTTP.Paths[0].AppendHeaders = map[string]string{"Knative-Serving-Revision": "hello-00001"}
	if err := c.Update(ctx, mine); err != nil {
		t.Fatal(err)
	}
	eventually("updated", func() bool {
		cur, ok := r.Routes().Owner("hello."+ns+".svc.cluster.local", true)
		return ok && cur.Hash != old.Hash
	})

	// Another class takes it away; deletion too.
	mine.Annotations[networking.IngressClassAnnotationKey] = "istio.ingress.networking.knative.dev"
	if err := c.Update(ctx, mine); err != nil {
		t.Fatal(err)
	}
	eventually("unloaded", func() bool { return !hosted("hello." + ns + ".svc.cluster.local") })
	mine.Annotations[networking.IngressClassAnnotationKey] = class
	if err := c.Update(ctx, mine); err != nil {
		t.Fatal(err)
	}
	eventually("loaded again", func() bool { return hosted("hello." + ns + ".svc.cluster.local") })
	if err := c.Delete(ctx, mine); err != nil {
		t.Fatal(err)
	}
	eventually("deleted", func() bool { return !hosted("hello." + ns + ".svc.cluster.local") })
}

// Backends are dialled at their Services' virtual IPs as soon as the watch
// has them, and by DNS name when a Service has none or is gone.
func TestRoutesDialServicesByClusterIP(t *testing.T) {
	k := testbed.SharedKube(t)
	scheme := testbed.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r, err := kube.Start(ctx, k.Config, scheme, kube.Options{IngressClass: class, SyncTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ns := k.Namespace(t)
	virtual := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "hello-00001", Namespace: ns}, Spec: corev1.ServiceSpec{Ports: revisionPorts}}
	headless := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "hello-00002", Namespace: ns},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: revisionPorts}}
	alias := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "hello-alias", Namespace: ns},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "lb.example.com"}}
	for _, svc := range []*corev1.Service{virtual, headless, alias} {
		if err := k.Client.Create(ctx, svc); err != nil {
			t.Fatal(err)
		}
	}
	address := func(svc string) string {
		host, _ := r.Routes().Address(routing.Backend{Namespace: ns, Service: svc, Port: 80}, "cluster.local")
		return host
	}
	awaitAddress := func(svc, want string) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return address(svc) == want, nil
		})
		if err != nil {
			t.Fatalf("%s dialled at %s, want %s", svc, address(svc), want)
		}
	}
	awaitAddress(virtual.Name, net.JoinHostPort(virtual.Spec.ClusterIP, "80"))
	if got, want := address(headless.Name), "hello-00002."+ns+".svc.cluster.local:80"; got != want {
		t.Errorf("headless Service dialled at %s, want its DNS name %s", got, want)
	}
	awaitAddress(alias.Name, "lb.example.com:80")
	// h2c by the port's name or appProtocol, as Knative marks it.
	for port, want := range map[int]bool{80: false, 81: true, 82: true} {
		if _, h2c := r.Routes().Address(routing.Backend{Namespace: ns, Service: virtual.Name, Port: port}, "cluster.local"); h2c != want {
			t.Errorf("port %d speaks h2c: %v, want %v", port, h2c, want)
		}
	}
	if err := k.Client.Delete(ctx, virtual); err != nil {
		t.Fatal(err)
	}
	awaitAddress(virtual.Name, "hello-00001."+ns+".svc.cluster.local:80")
}

// revisionPorts are a Knative revision Service's: HTTP/1 on 80, h2c on 81
// by name, and one marked h2c by appProtocol.
var revisionPorts = []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt(8012)},
	{Name: "http2", Port: 81, TargetPort: intstr.FromInt(8013)},
	{Name: "grpc", Port: 82, TargetPort: intstr.FromInt(8014), AppProtocol: ptr.To("kubernetes.io/h2c")}}

func endpoint(addr string, ready, serving, terminating bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{addr},
		Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &serving, Terminating: &terminating}}
}

// Once an EndpointSlice of a backend's Service has a ready endpoint on the
// port, it is dialled, on the slice's port of the Service port's name;
// not-ready endpoints never, terminating ones only when none is ready; the
// virtual IP again when the slice has none or is deleted. An ExternalName
// Service naming the backend's is dialled at the same endpoints.
func TestRoutesDialEndpoints(t *testing.T) {
	k := testbed.SharedKube(t)
	scheme := testbed.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r, err := kube.Start(ctx, k.Config, scheme, kube.Options{IngressClass: class, SyncTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ns := k.Namespace(t)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "hello-00001", Namespace: ns}, Spec: corev1.ServiceSpec{Ports: revisionPorts}}
	alias := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "vanity", Namespace: ns},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "hello-00001." + ns + ".svc.cluster.local"}}
	for _, s := range []*corev1.Service{svc, alias} {
		if err := k.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	// The addresses a backend is dialled at over 50 draws.
	dialled := func(name string, port int) map[string]bool {
		seen := map[string]bool{}
		for range 50 {
			host, _ := r.Routes().Address(routing.Backend{Namespace: ns, Service: name, Port: port}, "cluster.local")
			seen[host] = true
		}
		return seen
	}
	await := func(what, name string, port int, want ...string) {
		t.Helper()
		wantSet := map[string]bool{}
		for _, w := range want {
			wantSet[w] = true
		}
		err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return maps.Equal(dialled(name, port), wantSet), nil
		})
		if err != nil {
			t.Fatalf("%s: %s:%d dialled at %v, want %v", what, name, port, dialled(name, port), want)
		}
	}
	clusterIP := func(port string) string { return net.JoinHostPort(svc.Spec.ClusterIP, port) }
	await("no slice yet", svc.Name, 80, clusterIP("80"))

	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "hello-00001-abcde", Namespace: ns,
			Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8012)},
			{Name: ptr.To("http2"), Port: ptr.To[int32](8013)}},
		Endpoints: []discoveryv1.Endpoint{
			endpoint("10.88.0.5", true, true, false),
			endpoint("10.88.0.6", true, true, false),
			endpoint("10.88.0.7", false, false, false),
			endpoint("10.88.0.8", false, true, true),
		},
	}
	if err := k.Client.Create(ctx, slice); err != nil {
		t.Fatal(err)
	}
	await("ready endpoints", svc.Name, 80, "10.88.0.5:8012", "10.88.0.6:8012")
	await("h2c port by name", svc.Name, 81, "10.88.0.5:8013", "10.88.0.6:8013")
	await("a port the slice lacks", svc.Name, 82, clusterIP("82"))
	await("through the alias", alias.Name, 80, "10.88.0.5:8012", "10.88.0.6:8012")

	// A roll-out: the old endpoints terminate before the new one is ready.
	slice.Endpoints = []discoveryv1.Endpoint{endpoint("10.88.0.5", false, true, true), endpoint("10.88.0.9", false, false, false)}
	if err := k.Client.Update(ctx, slice); err != nil {
		t.Fatal(err)
	}
	await("terminating, none ready", svc.Name, 80, "10.88.0.5:8012")
	slice.Endpoints = []discoveryv1.Endpoint{endpoint("10.88.0.9", false, false, false)}
	if err := k.Client.Update(ctx, slice); err != nil {
		t.Fatal(err)
	}
	await("none ready", svc.Name, 80, clusterIP("80"))
	slice.Endpoints = []discoveryv1.Endpoint{endpoint("10.88.0.9", true, true, false)}
	if err := k.Client.Update(ctx, slice); err != nil {
		t.Fatal(err)
	}
	await("new endpoint ready", svc.Name, 80, "10.88.0.9:8012")
	if err := k.Client.Delete(ctx, slice); err != nil {
		t.Fatal(err)
	}
	await("slice deleted", svc.Name, 80, clusterIP("80"))
}
