package kube

import (
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"knative.dev/networking/pkg/apis/networking"
	"knative.dev/networking/pkg/apis/networking/v1alpha1"

	"github.com/sless-dev/sless/pkg/invoke/routing"
)

// ingresses keeps a routing table in step with the Knative Ingresses of
// one networking class. An Ingress that does not compile is unloaded: the
// ingress reconciler reports why on its status, and its prober never sees
// this replica answer that generation's hash.
type ingresses struct {
	class string
	table *routing.Table
	log   *slog.Logger
}

func (g *ingresses) set(obj any) {
	ing, ok := object(obj).(*v1alpha1.Ingress)
	if !ok {
		return
	}
	key := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
	if ing.Annotations[networking.IngressClassAnnotationKey] != g.class || !ing.DeletionTimestamp.IsZero() {
		g.table.Delete(key)
		return
	}
	c, err := routing.Compile(ing)
	if err != nil {
		g.log.Debug("Ingress not routed", "ingress", key.String(), "error", err)
		g.table.Delete(key)
		return
	}
	g.table.Set(c)
}

// setService and deletedService keep the table's view of Services: the
// proxy finds their ports in their EndpointSlices, dials an ExternalName
// Service's alias, and speaks h2c to the ports Knative's convention marks.
func (g *ingresses) setService(obj any) {
	svc, ok := object(obj).(*corev1.Service)
	if !ok {
		return
	}
	g.table.SetService(types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}, serviceOf(svc))
}

// serviceOf is what the routing table keeps of svc.
func serviceOf(svc *corev1.Service) routing.Service {
	s := routing.Service{ClusterIP: svc.Spec.ClusterIP}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		s.ExternalName = svc.Spec.ExternalName
	}
	for _, p := range svc.Spec.Ports {
		s.Ports = append(s.Ports, routing.ServicePort{Port: int(p.Port), Name: p.Name,
			H2C: p.Name == networking.ServicePortNameH2C || ptr.Deref(p.AppProtocol, "") == networking.AppProtocolH2C})
	}
	return s
}

func (g *ingresses) deletedService(obj any) {
	if svc, ok := object(obj).(*corev1.Service); ok {
		g.table.DeleteService(types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name})
	}
}

// setEndpoints and deletedEndpoints keep the table's view of
// EndpointSlices, whose ready endpoints the proxy dials. A slice that
// names no Service is forgotten.
func (g *ingresses) setEndpoints(obj any) {
	eps, ok := object(obj).(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	key := types.NamespacedName{Namespace: eps.Namespace, Name: eps.Name}
	e, ok := endpointsOf(eps)
	if !ok {
		g.table.DeleteEndpoints(key)
		return
	}
	g.table.SetEndpoints(key, e)
}

// endpointsOf is what the routing table keeps of eps; ok is false for a
// slice of no Service. An endpoint whose readiness is unknown is ready,
// as the API says consumers should take it.
func endpointsOf(eps *discoveryv1.EndpointSlice) (e routing.Endpoints, ok bool) {
	e.Service = eps.Labels[discoveryv1.LabelServiceName]
	if e.Service == "" {
		return routing.Endpoints{}, false
	}
	e.Ports = make(map[string]int, len(eps.Ports))
	for _, p := range eps.Ports {
		if p.Port != nil {
			e.Ports[ptr.Deref(p.Name, "")] = int(*p.Port)
		}
	}
	for _, ep := range eps.Endpoints {
		c := ep.Conditions
		switch {
		case ptr.Deref(c.Ready, true):
			e.Ready = append(e.Ready, ep.Addresses...)
		case ptr.Deref(c.Serving, false) && ptr.Deref(c.Terminating, false):
			e.Serving = append(e.Serving, ep.Addresses...)
		}
	}
	return e, true
}

func (g *ingresses) deletedEndpoints(obj any) {
	if eps, ok := object(obj).(*discoveryv1.EndpointSlice); ok {
		g.table.DeleteEndpoints(types.NamespacedName{Namespace: eps.Namespace, Name: eps.Name})
	}
}

func (g *ingresses) deleted(obj any) {
	if ing, ok := object(obj).(*v1alpha1.Ingress); ok {
		g.table.Delete(types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name})
	}
}

// Routes is the routing table of the Ingresses of Options.IngressClass,
// for invoke.Options.Routes; nil without a class.
func (r *Resolver) Routes() *routing.Table { return r.routes }
