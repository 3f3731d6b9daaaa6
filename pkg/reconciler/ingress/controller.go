package ingress

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"knative.dev/networking/pkg/apis/networking"
	"knative.dev/networking/pkg/apis/networking/v1alpha1"
	"knative.dev/networking/pkg/status"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/sless-dev/sless/pkg/reconciler/ingress/resources"
)

// +kubebuilder:rbac:groups=networking.internal.knative.dev,resources=ingresses,verbs=get;list;watch
// +kubebuilder:rbac:groups=networking.internal.knative.dev,resources=ingresses/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch,namespace=sless-system

// Config is what the reconciler serves and where sless-api runs.
type Config struct {
	// Class is the networking class served; resources.ClassName by default.
	Class string
	// PublicLoadBalancer and PrivateLoadBalancer are the cluster-local
	// names of sless-api's Services that Ingresses report; Knative points
	// every host of the Ingress at them.
	PublicLoadBalancer, PrivateLoadBalancer string
	// Service is sless-api's Service whose ready endpoints are probed, on
	// the port named Port (its only port when empty). That Service's door
	// must serve every visibility: the cluster-local one.
	Service types.NamespacedName
	Port    string
	// Replicas, when set, are probed (host:port) instead of Service's
	// endpoints.
	Replicas []string
}

// CacheByObject narrows the manager's cache to the EndpointSlices of
// sless-api's Service.
func (c Config) CacheByObject() map[client.Object]cache.ByObject {
	if len(c.Replicas) > 0 {
		return nil
	}
	return map[client.Object]cache.ByObject{&discoveryv1.EndpointSlice{}: {
		Namespaces: map[string]cache.Config{c.Service.Namespace: {}},
	}}
}

// SetupWithManager runs the reconciler and Knative's prober in mgr.
func SetupWithManager(mgr ctrl.Manager, cfg Config) error {
	if cfg.Class == "" {
		cfg.Class = resources.ClassName
	}
	if cfg.PublicLoadBalancer == "" || cfg.PrivateLoadBalancer == "" {
		return errors.New("ingress: the load balancers' names are required")
	}
	if len(cfg.Replicas) == 0 && (cfg.Service.Name == "" || cfg.Service.Namespace == "") {
		return errors.New("ingress: sless-api's Service or its replicas are required")
	}
	ready := make(chan event.TypedGenericEvent[*v1alpha1.Ingress], 64)
	lister := &targets{reader: mgr.GetClient(), cfg: cfg}
	prober := status.NewProber(zap.NewNop().Sugar(), lister, func(ing *v1alpha1.Ingress) {
		ready <- event.TypedGenericEvent[*v1alpha1.Ingress]{Object: ing}
	})
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-prober.Start(ctx.Done())
		return nil
	})); err != nil {
		return err
	}
	r := &Reconciler{Client: mgr.GetClient(), Prober: prober, Config: cfg}
	ofClass := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetAnnotations()[networking.IngressClassAnnotationKey] == cfg.Class
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("ingress").
		For(&v1alpha1.Ingress{}, builder.WithPredicates(ofClass, predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Channel(ready, &handler.TypedEnqueueRequestForObject[*v1alpha1.Ingress]{})).
		Complete(r)
}

// targets lists sless-api's replicas for the prober.
type targets struct {
	reader client.Reader
	cfg    Config
}

func (t *targets) ListProbeTargets(ctx context.Context, ing *v1alpha1.Ingress) ([]status.ProbeTarget, error) {
	replicas := t.cfg.Replicas
	if len(replicas) == 0 {
		var eps discoveryv1.EndpointSliceList
		if err := t.reader.List(ctx, &eps, client.InNamespace(t.cfg.Service.Namespace),
			client.MatchingLabels{discoveryv1.LabelServiceName: t.cfg.Service.Name}); err != nil {
			return nil, fmt.Errorf("endpoints of %s: %w", t.cfg.Service, err)
		}
		replicas = resources.Replicas(eps.Items, t.cfg.Port)
	}
	return resources.ProbeTargets(ing, replicas)
}
