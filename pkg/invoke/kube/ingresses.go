package kube

import (
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
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

// setService and deletedService keep the table's Services' virtual IPs,
// which the proxy dials instead of their DNS names.
func (g *ingresses) setService(obj any) {
	if svc, ok := object(obj).(*corev1.Service); ok {
		g.table.SetClusterIP(types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}, svc.Spec.ClusterIP)
	}
}

func (g *ingresses) deletedService(obj any) {
	if svc, ok := object(obj).(*corev1.Service); ok {
		g.table.DeleteClusterIP(types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name})
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
