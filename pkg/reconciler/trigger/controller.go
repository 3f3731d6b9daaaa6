package trigger

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sless-dev/sless/pkg/adapter"
	"github.com/sless-dev/sless/pkg/adapter/knative"
	"github.com/sless-dev/sless/pkg/adapter/kube"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/secrets"
)

// +kubebuilder:rbac:groups=sless.dev,resources=triggers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=sless.dev,resources=triggers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=sless.dev,resources=triggers/finalizers,verbs=update
// +kubebuilder:rbac:groups=sless.dev,resources=functions,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=cronjobs,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=serving.knative.dev,resources=services,verbs=get;list;watch;patch

// Options configure the Trigger controller.
type Options struct {
	Config    kube.TriggerConfig
	PublicURL string
	Tokens    adapter.TokenIssuer
	// MinScale pre-warms functions; a knative.MinScale on the manager's
	// client when nil.
	MinScale adapter.MinScaleSetter
	// Clock; the real one when nil.
	Clock                   clock.PassiveClock
	MaxConcurrentReconciles int
}

const functionIndex = "spec.function"

// CacheByObject is the cache.Options.ByObject entry for Secrets this
// controller needs: the trigger credentials it makes, among the Secrets sless
// makes (the Function controller watches the same set), not every Secret of
// the cluster. (Connection Secrets of queue triggers are read uncached.)
func CacheByObject() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{&corev1.Secret{}: {Label: secrets.CacheSelector()}}
}

// SetupWithManager registers the Trigger controller with mgr.
func SetupWithManager(mgr ctrl.Manager, opts Options) error {
	k := &kube.Carrier{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Config:    opts.Config,
		PublicURL: opts.PublicURL,
		Tokens:    opts.Tokens,
		MinScale:  opts.MinScale,
		Clock:     opts.Clock,
	}
	if k.MinScale == nil {
		k.MinScale = &knative.MinScale{Client: mgr.GetClient()}
	}
	if k.Clock == nil {
		k.Clock = clock.RealClock{}
	}
	r := &Reconciler{Client: k.Client, Carrier: k, Clock: k.Clock}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &slessv1alpha1.Trigger{}, functionIndex, func(o client.Object) []string {
		return []string{o.(*slessv1alpha1.Trigger).Spec.Function}
	}); err != nil {
		return err
	}
	workers := opts.MaxConcurrentReconciles
	if workers <= 0 {
		workers = 1
	}
	byFunction := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		list := &slessv1alpha1.TriggerList{}
		if err := mgr.GetClient().List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingFields{functionIndex: o.GetName()}); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for _, t := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: t.Namespace, Name: t.Name}})
		}
		return reqs
	})
	// The Jobs of a cron run belong to the CronJob; their labels name the
	// trigger, whose pre-warm ends when the run does.
	byTriggerLabel := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		name := o.GetLabels()[kube.LabelTrigger]
		if name == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("trigger").
		For(&slessv1alpha1.Trigger{}).
		Owns(&batchv1.CronJob{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Secret{}).
		Watches(&slessv1alpha1.Function{}, byFunction).
		Watches(&batchv1.Job{}, byTriggerLabel).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}
