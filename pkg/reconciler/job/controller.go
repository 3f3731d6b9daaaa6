package job

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
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
)

// +kubebuilder:rbac:groups=sless.dev,resources=functionjobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=sless.dev,resources=functionjobs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=sless.dev,resources=functions,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=serving.knative.dev,resources=revisions,verbs=get

// Options configure the FunctionJob controller.
type Options struct {
	Config   kube.JobConfig
	Recorder Recorder
	// Revisions reads the serving revision's settings; nil means Knative's
	// Revisions, read past the manager's cache.
	Revisions adapter.RevisionReader
	// MaxConcurrentReconciles; 1 if zero.
	MaxConcurrentReconciles int
}

// functionIndex indexes FunctionJobs by the Function they run, so a Function
// that becomes built wakes the runs waiting for it.
const functionIndex = "spec.function"

// PodCacheSelector is the label selector the manager's cache should use for
// Pods (cache.Options.ByObject), so the controller caches only the Pods of
// FunctionJob runs rather than every Pod of the cluster. CacheByObject gives
// the whole entry.
func PodCacheSelector() labels.Selector {
	req, err := labels.NewRequirement(kube.LabelFunctionJob, selection.Exists, nil)
	if err != nil {
		panic(err)
	}
	return labels.NewSelector().Add(*req)
}

// CacheByObject is the cache.Options.ByObject entry for Pods this controller needs.
func CacheByObject() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{&corev1.Pod{}: {Label: PodCacheSelector()}}
}

// SetupWithManager registers the FunctionJob controller with mgr.
func SetupWithManager(mgr ctrl.Manager, opts Options) error {
	revisions := opts.Revisions
	if revisions == nil {
		revisions = &knative.Server{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}
	}
	r := &Reconciler{Client: mgr.GetClient(), Runner: &kube.JobRunner{Client: mgr.GetClient(), Revisions: revisions, Config: opts.Config}, Recorder: opts.Recorder}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &slessv1alpha1.FunctionJob{}, functionIndex, func(o client.Object) []string {
		return []string{o.(*slessv1alpha1.FunctionJob).Spec.Function}
	}); err != nil {
		return err
	}
	workers := opts.MaxConcurrentReconciles
	if workers <= 0 {
		workers = 1
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("functionjob").
		For(&slessv1alpha1.FunctionJob{}).
		Owns(&batchv1.Job{}).
		// A run's Pods are the Job's, not ours; their labels name the FunctionJob.
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			name := o.GetLabels()[kube.LabelFunctionJob]
			if name == "" {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
		})).
		Watches(&slessv1alpha1.Function{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			list := &slessv1alpha1.FunctionJobList{}
			if err := mgr.GetClient().List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingFields{functionIndex: o.GetName()}); err != nil {
				return nil
			}
			reqs := make([]reconcile.Request, 0, len(list.Items))
			for _, j := range list.Items {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: j.Namespace, Name: j.Name}})
			}
			return reqs
		})).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}
