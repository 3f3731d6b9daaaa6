package resources_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
	"knative.dev/networking/pkg/apis/networking/v1alpha1"

	"github.com/sless-dev/sless/pkg/reconciler/ingress/resources"
)

func TestProbeTargets(t *testing.T) {
	ing := &v1alpha1.Ingress{Spec: v1alpha1.IngressSpec{Rules: []v1alpha1.IngressRule{
		{Hosts: []string{"hello.team-a", "hello.team-a.svc.cluster.local"}},
		{Hosts: []string{"hello.team-a", "hello.example.com"}},
	}}}
	tests := []struct {
		name     string
		replicas []string
		want     map[string][]string // port to IPs
		err      string
	}{
		{name: "none", err: "no sless-api replica"},
		{name: "bad address", replicas: []string{"10.0.0.1"}, err: `replica "10.0.0.1"`},
		{name: "one", replicas: []string{"127.0.0.1:8081"}, want: map[string][]string{"8081": {"127.0.0.1"}}},
		{name: "by port", replicas: []string{"10.0.0.1:8081", "10.0.0.2:8081", "[fd00::1]:9000"},
			want: map[string][]string{"8081": {"10.0.0.1", "10.0.0.2"}, "9000": {"fd00::1"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resources.ProbeTargets(ing, tc.replicas)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ports := map[string][]string{}
			for _, pt := range got {
				if pt.Port != pt.PodPort {
					t.Errorf("port %s, pod port %s", pt.Port, pt.PodPort)
				}
				ports[pt.PodPort] = sets.List(pt.PodIPs)
				var urls []string
				for _, u := range pt.URLs {
					urls = append(urls, u.String())
				}
				want := []string{"http://hello.team-a/", "http://hello.team-a.svc.cluster.local/", "http://hello.example.com/"}
				if diff := cmp.Diff(want, urls); diff != "" {
					t.Errorf("URLs (-want +got):\n%s", diff)
				}
			}
			if diff := cmp.Diff(tc.want, ports); diff != "" {
				t.Errorf("targets (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReplicas(t *testing.T) {
	slice := func(ports map[string]int32, eps ...discoveryv1.Endpoint) discoveryv1.EndpointSlice {
		s := discoveryv1.EndpointSlice{Endpoints: eps}
		for n, p := range ports {
			s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: ptr.To(n), Port: ptr.To(p)})
		}
		return s
	}
	ep := func(ready *bool, addrs ...string) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: addrs, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
	}
	tests := []struct {
		name   string
		slices []discoveryv1.EndpointSlice
		port   string
		want   []string
	}{
		{"nothing", nil, "", nil},
		{"only port", []discoveryv1.EndpointSlice{slice(map[string]int32{"http": 8080}, ep(nil, "10.0.0.2"), ep(ptr.To(true), "10.0.0.1"))}, "",
			[]string{"10.0.0.1:8080", "10.0.0.2:8080"}},
		{"not ready left out", []discoveryv1.EndpointSlice{slice(map[string]int32{"http": 8080}, ep(ptr.To(false), "10.0.0.1"), ep(nil, "10.0.0.2"))}, "",
			[]string{"10.0.0.2:8080"}},
		{"named port", []discoveryv1.EndpointSlice{slice(map[string]int32{"http": 8080, "local": 8081}, ep(nil, "10.0.0.1"))}, "local",
			[]string{"10.0.0.1:8081"}},
		{"two ports, none named", []discoveryv1.EndpointSlice{slice(map[string]int32{"http": 8080, "local": 8081}, ep(nil, "10.0.0.1"))}, "", nil},
		{"named port missing", []discoveryv1.EndpointSlice{slice(map[string]int32{"http": 8080}, ep(nil, "10.0.0.1"))}, "local", nil},
		{"two slices, one address twice", []discoveryv1.EndpointSlice{
			slice(map[string]int32{"http": 8080}, ep(nil, "10.0.0.1")), slice(map[string]int32{"http": 8080}, ep(nil, "10.0.0.1", "10.0.0.3"))}, "http",
			[]string{"10.0.0.1:8080", "10.0.0.3:8080"}},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, resources.Replicas(tc.slices, tc.port)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

// The public load balancer is the public door's Service, the private one
// the cluster-local door's.
func TestLoadBalancers(t *testing.T) {
	pub, priv := resources.LoadBalancers(
		resources.ServiceHost(types.NamespacedName{Namespace: "sless-system", Name: "sless-api-public"}),
		resources.ServiceHost(types.NamespacedName{Namespace: "sless-system", Name: "sless-api"}))
	if len(pub) != 1 || pub[0].DomainInternal != "sless-api-public.sless-system.svc.cluster.local" ||
		len(priv) != 1 || priv[0].DomainInternal != "sless-api.sless-system.svc.cluster.local" {
		t.Errorf("load balancers %+v %+v", pub, priv)
	}
}
