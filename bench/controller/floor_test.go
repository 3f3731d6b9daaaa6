package controller

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/sless-dev/sless/pkg/adapter"
	"github.com/sless-dev/sless/pkg/adapter/s3"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	fnrec "github.com/sless-dev/sless/pkg/reconciler/function"
	"github.com/sless-dev/sless/pkg/reconciler/function/resources"
	"github.com/sless-dev/sless/pkg/reconciler/function/resources/names"
	"github.com/sless-dev/sless/pkg/source"
)

// floor writes, for n Functions and with the same writers as the other
// passes, what any controller doing sless's job must write, straight from a
// plain client with no controller and no reads: the Function's create, one
// update adding the finalizer, the build context to S3, the PipelineRun
// (admitted by Tekton's webhook), a status write telling the build, the
// Knative Service (admitted by Knative's webhook), a status write telling
// the image and one telling Ready. The objects are sless's own builders'
// for the controller's default configuration; the build and the rollout
// are not waited for: their time is upstream's, not the writer's.
func floor(ctx context.Context, c client.Client, store s3.Store, cfg resources.Config, ns string, n int) (time.Duration, error) {
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := floorOne(ctx, c, store, cfg, ns, i); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	return time.Since(start), <-errs
}

func floorOne(ctx context.Context, c client.Client, store s3.Store, cfg resources.Config, ns string, i int) error {
	fn := function(ns, i).(*slessv1alpha1.Function)
	if err := c.Create(ctx, fn); err != nil {
		return fmt.Errorf("floor: create Function %s: %w", fn.Name, err)
	}
	controllerutil.AddFinalizer(fn, names.Finalizer)
	if err := c.Update(ctx, fn); err != nil {
		return fmt.Errorf("floor: finalizer of %s: %w", fn.Name, err)
	}
	// The builders take the defaulted spec, as the reconciler gives them.
	work := fn.DeepCopy()
	work.SetDefaults()
	spec := work.BuildSpec()
	bc, err := source.BuildContext(source.Input{Runtime: spec.Runtime, Entrypoint: spec.Entrypoint, Mode: work.Mode(),
		Files: source.Inline(spec.Source.Inline.Files)})
	if err != nil {
		return fmt.Errorf("floor: build context of %s: %w", fn.Name, err)
	}
	key := names.WorkloadContextKey(work, bc.Digest)
	if err := store.Put(ctx, key, bytes.NewReader(bc.TarGz), int64(len(bc.TarGz)), "application/gzip"); err != nil {
		return fmt.Errorf("floor: store %s: %w", key, err)
	}
	pr := resources.MakePipelineRun(work, adapter.BuildInput{Digest: bc.Digest, Location: store.Location(key)}, 0, cfg)
	if err := c.Create(ctx, pr); err != nil {
		return fmt.Errorf("floor: PipelineRun of %s: %w", fn.Name, err)
	}

	st := &fn.Status
	st.ObservedGeneration, st.SourceDigest, st.BuildRef, st.Phase = fn.Generation, bc.Digest, pr.Name, slessv1alpha1.FunctionPhaseBuilding
	condition(fn, slessv1alpha1.FunctionConditionSourceReady, metav1.ConditionTrue, fnrec.ReasonContextStored, "")
	condition(fn, slessv1alpha1.FunctionConditionBuildSucceeded, metav1.ConditionUnknown, fnrec.ReasonBuilding, "waiting for PipelineRun "+pr.Name)
	condition(fn, slessv1alpha1.FunctionConditionServiceReady, metav1.ConditionUnknown, fnrec.ReasonWaitingForBuild, "the service is deployed once the image is built")
	condition(fn, slessv1alpha1.FunctionConditionReady, metav1.ConditionUnknown, fnrec.ReasonBuilding, "")
	if err := c.Status().Update(ctx, fn); err != nil {
		return fmt.Errorf("floor: status (build) of %s: %w", fn.Name, err)
	}

	// The image Tekton would report; the context's digest stands for it.
	image := fmt.Sprintf("%s/%s/%s@%s", cfg.Registry, ns, fn.Name, bc.Digest)
	svc := resources.MakeService(work, image, cfg)
	if err := c.Create(ctx, svc); err != nil {
		return fmt.Errorf("floor: Knative Service of %s: %w", fn.Name, err)
	}
	st.Image, st.Phase = image, slessv1alpha1.FunctionPhaseDeploying
	condition(fn, slessv1alpha1.FunctionConditionBuildSucceeded, metav1.ConditionTrue, fnrec.ReasonBuildSucceeded, "")
	condition(fn, slessv1alpha1.FunctionConditionServiceReady, metav1.ConditionUnknown, fnrec.ReasonDeploying, "waiting for Knative Service "+svc.Name)
	condition(fn, slessv1alpha1.FunctionConditionReady, metav1.ConditionUnknown, fnrec.ReasonDeploying, "")
	if err := c.Status().Update(ctx, fn); err != nil {
		return fmt.Errorf("floor: status (image) of %s: %w", fn.Name, err)
	}

	rev := svc.Spec.Template.Name
	st.LatestCreatedRevision, st.LatestReadyRevision, st.ServingImage, st.Phase = rev, rev, image, slessv1alpha1.FunctionPhaseReady
	st.Address = fmt.Sprintf("http://%s.%s.svc.cluster.local", svc.Name, ns)
	st.URL = "https://fn.bench.local/fn/" + ns + "/" + fn.Name
	condition(fn, slessv1alpha1.FunctionConditionServiceReady, metav1.ConditionTrue, fnrec.ReasonReady, "")
	condition(fn, slessv1alpha1.FunctionConditionReady, metav1.ConditionTrue, fnrec.ReasonReady, "")
	if err := c.Status().Update(ctx, fn); err != nil {
		return fmt.Errorf("floor: status (ready) of %s: %w", fn.Name, err)
	}
	return nil
}

func condition(fn *slessv1alpha1.Function, typ string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&fn.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: fn.Generation,
	})
}
