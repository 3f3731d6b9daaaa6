package function

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sless-dev/sless/pkg/adapter"
	"github.com/sless-dev/sless/pkg/adapter/knative"
	"github.com/sless-dev/sless/pkg/adapter/resources"
	"github.com/sless-dev/sless/pkg/adapter/s3"
	"github.com/sless-dev/sless/pkg/adapter/tekton"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/secrets"
)

// +kubebuilder:rbac:groups=sless.dev,resources=functions,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=sless.dev,resources=functions/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=sless.dev,resources=functions/finalizers,verbs=update
// +kubebuilder:rbac:groups=tekton.dev,resources=pipelineruns,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=tekton.dev,resources=taskruns,verbs=get;list;watch
// +kubebuilder:rbac:groups=serving.knative.dev,resources=services,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=serving.knative.dev,resources=revisions,verbs=get
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete,namespace=sless-system
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get,namespace=knative-serving
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// BuildDuration is how long builds took, from the builder's start to its
// completion, by result. Registered once in controller-runtime's registry,
// which `sless controller` serves on /metrics.
var BuildDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "sless_function_build_duration_seconds",
	Help:    "Duration of function image builds, from start to completion.",
	Buckets: []float64{5, 10, 20, 30, 60, 90, 120, 180, 300, 600, 900, 1800, 3600},
}, []string{"result"})

func init() {
	metrics.Registry.MustRegister(BuildDuration)
}

// ObserveBuild records a finished build in BuildDuration.
func ObserveBuild(bs adapter.BuildState) {
	if bs.StartTime == nil || bs.CompletionTime == nil {
		return
	}
	result := "succeeded"
	if !bs.Succeeded {
		result = "failed"
	}
	BuildDuration.WithLabelValues(result).Observe(bs.CompletionTime.Sub(*bs.StartTime).Seconds())
}

const secretIndex = "spec.env.secretKeyRef.name"

// SecretReferrers indexes the Workloads of obj's kind by the Secrets their
// env refers to and returns the handler that maps a Secret to the
// Workloads (listed as list) referring to it. A Secret set or rotated must
// reconcile them: Knative would not restart their pods for it (see
// resources.AnnotationSecretVersions).
func SecretReferrers(mgr ctrl.Manager, obj slessv1alpha1.Workload, list client.ObjectList) (handler.EventHandler, error) {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), obj, secretIndex, func(o client.Object) []string {
		return secrets.Referenced(o.(slessv1alpha1.Workload).BuildSpec().CoreEnv())
	}); err != nil {
		return nil, fmt.Errorf("index %T by secret: %w", obj, err)
	}
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		l := list.DeepCopyObject().(client.ObjectList)
		if err := mgr.GetClient().List(ctx, l, client.InNamespace(o.GetNamespace()), client.MatchingFields{secretIndex: o.GetName()}); err != nil {
			mgr.GetLogger().Error(err, "list workloads referring to a secret", "secret", client.ObjectKeyFromObject(o))
			return nil
		}
		var reqs []reconcile.Request
		_ = meta.EachListItem(l, func(item runtime.Object) error {
			w := item.(client.Object)
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: w.GetNamespace(), Name: w.GetName()}})
			return nil
		})
		return reqs
	}), nil
}

// CacheByObject is the cache.Options.ByObject entry for the Secrets this
// controller watches: those sless makes, not every Secret of the cluster.
func CacheByObject() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{&corev1.Secret{}: {Label: secrets.CacheSelector()}}
}

// Options configure the Function controller on a cluster.
type Options struct {
	Config    Config
	Resources resources.Config
	Store     s3.Store
	// MaxConcurrentReconciles; 1 if zero.
	MaxConcurrentReconciles int
	// Recorder records the Function's Events; nil means the manager's
	// recorder for RecorderName.
	Recorder events.EventRecorder
	// TracerProvider, when set, traces builds.
	TracerProvider trace.TracerProvider
}

// RecorderName is the reporting controller of the Function's Events.
const RecorderName = "sless-function-controller"

// SetupWithManager registers the Function controller with mgr, building
// with Tekton and serving with Knative. It owns the PipelineRuns and
// Knative Services it creates: their changes (a build finishing, a
// revision becoming ready, a hand-deleted Service) reconcile the Function.
func SetupWithManager(mgr ctrl.Manager, opts Options) error {
	rec := opts.Recorder
	if rec == nil {
		// The events.k8s.io recorder, which controller-runtime recommends
		// over the deprecated core/v1 one; leader election still writes
		// core/v1 Events, hence both RBAC rules above.
		rec = mgr.GetEventRecorder(RecorderName)
	}
	r := &Reconciler{
		Client:         mgr.GetClient(),
		Builder:        &tekton.Builder{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Config: opts.Resources},
		Server:         &knative.Server{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Config: opts.Resources},
		Store:          opts.Store,
		Config:         opts.Config,
		BuildFinished:  ObserveBuild,
		Recorder:       rec,
		TracerProvider: opts.TracerProvider,
	}
	workers := opts.MaxConcurrentReconciles
	if workers <= 0 {
		workers = 1
	}
	referring, err := SecretReferrers(mgr, &slessv1alpha1.Function{}, &slessv1alpha1.FunctionList{})
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("function").
		// Only spec changes and deletion (which bumps the generation of an
		// object with finalizers) need a reconcile: the controller's own
		// finalizer and status writes would otherwise each cause another.
		For(&slessv1alpha1.Function{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&tektonv1.PipelineRun{}, OwnedSettling(mgr, &slessv1alpha1.Function{}, SettleWindow)).
		Watches(&servingv1.Service{}, OwnedSettling(mgr, &slessv1alpha1.Function{}, SettleWindow)).
		Watches(&corev1.Secret{}, referring).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}
