// Package service reconciles SlessServices, sless's long-running web apps.
// A SlessService takes the Function's path — source → build context →
// Tekton build → Knative Service → status — written once in
// pkg/reconciler/function against slessv1alpha1.Workload, with the
// differences the Workload carries: the build context is made for the
// runtime's service mode, the Knative Service keeps minScale instances
// (default 1), children are labelled sless.dev/service and owned by the
// SlessService, objects in storage lie under their own prefix, and
// status.url is /svc/{ns}/{name}/.
package service

import (
	"github.com/sless-dev/sless/pkg/adapter"
	"github.com/sless-dev/sless/pkg/adapter/s3"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/reconciler/function"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NewReconciler is the Function reconciler set to reconcile SlessServices.
func NewReconciler(c client.Client, b adapter.Builder, s adapter.Server, store s3.Store, cfg function.Config, rec events.EventRecorder) *function.Reconciler {
	return &function.Reconciler{
		Client:    c,
		Builder:   b,
		Server:    s,
		Store:     store,
		Config:    cfg,
		Recorder:  rec,
		NewObject: func() slessv1alpha1.Workload { return &slessv1alpha1.SlessService{} },
	}
}
