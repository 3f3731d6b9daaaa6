package service

import (
	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/sless-dev/sless/pkg/adapter/knative"
	"github.com/sless-dev/sless/pkg/adapter/tekton"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/reconciler/function"
)

// +kubebuilder:rbac:groups=sless.dev,resources=slessservices,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=sless.dev,resources=slessservices/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=sless.dev,resources=slessservices/finalizers,verbs=update

// RecorderName is the reporting controller of the SlessService's Events.
const RecorderName = "sless-service-controller"

// SetupWithManager registers the SlessService controller with mgr,
// building with Tekton and serving with Knative as the Function controller
// does (the Options are the Function controller's); it owns the
// PipelineRuns and Knative Services it creates.
func SetupWithManager(mgr ctrl.Manager, opts function.Options) error {
	rec := opts.Recorder
	if rec == nil {
		rec = mgr.GetEventRecorder(RecorderName)
	}
	r := NewReconciler(mgr.GetClient(),
		&tekton.Builder{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Config: opts.Resources},
		&knative.Server{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Config: opts.Resources},
		opts.Store, opts.Config, rec)
	r.BuildFinished, r.TracerProvider = function.ObserveBuild, opts.TracerProvider
	workers := opts.MaxConcurrentReconciles
	if workers <= 0 {
		workers = 1
	}
	// A Secret set or rotated rolls the services referring to it, as it
	// does Functions.
	referring, err := function.SecretReferrers(mgr, &slessv1alpha1.SlessService{}, &slessv1alpha1.SlessServiceList{})
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("slessservice").
		// Spec changes and deletion only: the controller's own finalizer
		// and status writes would otherwise each cause another reconcile.
		For(&slessv1alpha1.SlessService{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&tektonv1.PipelineRun{}, function.OwnedSettling(mgr, &slessv1alpha1.SlessService{}, function.SettleWindow)).
		Watches(&servingv1.Service{}, function.OwnedSettling(mgr, &slessv1alpha1.SlessService{}, function.SettleWindow)).
		Watches(&corev1.Secret{}, referring).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}
