package sandbox

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	adapterresources "github.com/sless-dev/sless/pkg/adapter/resources"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=namespaces/status,verbs=get;update
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=sless.dev,resources=slessservices,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=services,verbs=get,namespace=sless-system

// CacheByObject narrows the manager's cache to the NetworkPolicies sless
// makes.
func CacheByObject() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{&networkingv1.NetworkPolicy{}: {
		Label: labels.SelectorFromSet(labels.Set{adapterresources.LabelManagedBy: adapterresources.ManagedBy}),
	}}
}

// SetupWithManager runs the sandbox reconciler in mgr. A namespace is
// reconciled when its labels change, when a workload in it is made or its
// spec changes, and when someone changes a policy sless keeps there.
func SetupWithManager(mgr ctrl.Manager, cfg Config) error {
	r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Config: cfg}
	toNamespace := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetNamespace()}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("sandbox").
		For(&corev1.Namespace{}, builder.WithPredicates(predicate.LabelChangedPredicate{})).
		Watches(&slessv1alpha1.Function{}, toNamespace, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&slessv1alpha1.SlessService{}, toNamespace, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&networkingv1.NetworkPolicy{}, toNamespace).
		Complete(r)
}
