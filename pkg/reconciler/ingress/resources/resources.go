// Package resources builds what the ingress reconciler reports and probes,
// as pure functions of an Ingress and the configuration.
package resources

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"knative.dev/networking/pkg/apis/networking/v1alpha1"
	"knative.dev/networking/pkg/status"
)

// ClassName is sless's Knative networking class: Ingresses annotated
// networking.knative.dev/ingress.class with it are routed by sless-api.
const ClassName = "sless.ingress.networking.knative.dev"

// LoadBalancers are the load balancers an Ingress of sless's class reports:
// sless-api's Services by their cluster-local names, the public door's and
// the cluster-local door's. Knative points each cluster-local host's
// ExternalName Service at the private one.
func LoadBalancers(public, private string) (pub, priv []v1alpha1.LoadBalancerIngressStatus) {
	return []v1alpha1.LoadBalancerIngressStatus{{DomainInternal: public}},
		[]v1alpha1.LoadBalancerIngressStatus{{DomainInternal: private}}
}

// ServiceHost is the cluster-local DNS name of Service key, as a load
// balancer's DomainInternal names it.
func ServiceHost(key types.NamespacedName) string {
	return key.Name + "." + key.Namespace + ".svc.cluster.local"
}

// ProbeTargets are the probes that tell every sless-api replica (host:port
// addresses) serves ing: one per host the Ingress names, on each replica.
func ProbeTargets(ing *v1alpha1.Ingress, replicas []string) ([]status.ProbeTarget, error) {
	if len(replicas) == 0 {
		return nil, errors.New("no sless-api replica to probe")
	}
	var urls []*url.URL
	seen := sets.New[string]()
	for _, r := range ing.Spec.Rules {
		for _, h := range r.Hosts {
			if !seen.Has(h) {
				seen.Insert(h)
				urls = append(urls, &url.URL{Scheme: "http", Host: h, Path: "/"})
			}
		}
	}
	byPort := map[string]*status.ProbeTarget{}
	var ports []string
	for _, addr := range replicas {
		ip, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("sless-api replica %q: %w", addr, err)
		}
		t, ok := byPort[port]
		if !ok {
			t = &status.ProbeTarget{PodIPs: sets.New[string](), PodPort: port, Port: port, URLs: urls}
			byPort[port] = t
			ports = append(ports, port)
		}
		t.PodIPs.Insert(ip)
	}
	out := make([]status.ProbeTarget, 0, len(ports))
	for _, p := range ports {
		out = append(out, *byPort[p])
	}
	return out, nil
}

// Replicas are the ready addresses of the EndpointSlices of sless-api's
// Service, on the port named port (the only port when port is empty).
func Replicas(eps []discoveryv1.EndpointSlice, port string) []string {
	var out []string
	for _, s := range eps {
		var num int32
		for _, p := range s.Ports {
			if p.Port != nil && (port == "" && len(s.Ports) == 1 || p.Name != nil && *p.Name == port) {
				num = *p.Port
			}
		}
		if num == 0 {
			continue
		}
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				out = append(out, net.JoinHostPort(a, fmt.Sprint(num)))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
