package kube

import (
	"log/slog"

	corev1 "k8s.io/api/core/v1"
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
// proxy dials their virtual IPs rather than their DNS names, and speaks
// h2c to the ports Knative's convention marks.
func (g *ingresses) setService(obj any) {
	svc, ok := object(obj).(*corev1.Service)
	if !ok {
		return
	}
	s := routing.Service{ClusterIP: svc.Spec.ClusterIP}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		s.ExternalName = svc.Spec.ExternalName
	}
	for _, p := range svc.Spec.Ports {
		if p.Name == networking.ServicePortNameH2C || ptr.Deref(p.AppProtocol, "") == networking.AppProtocolH2C {
			s.H2C = append(s.H2C, int(p.Port))
		}
	}
	g.table.SetService(types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}, s)
}

func (g *ingresses) deletedService(obj any) {
	if svc, ok := object(obj).(*corev1.Service); ok {
		g.table.DeleteService(types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name})
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
