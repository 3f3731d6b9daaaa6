package controller

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/sless-dev/sless/pkg/adapter"
	"github.com/sless-dev/sless/pkg/adapter/resources"
	"github.com/sless-dev/sless/pkg/adapter/s3"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/names"
	fnrec "github.com/sless-dev/sless/pkg/reconciler/function"
	"github.com/sless-dev/sless/pkg/source"
)

// floorSteps are what any controller doing sless's job must write for a
// Function, in order. The floor writes each step for all n Functions
// before the next, so each step's cost can be told apart.
var floorSteps = []string{
	"create the Function",
	"update: the finalizer",
	"put the build context to S3",
	"create the PipelineRun (Tekton's webhook)",
	"status: building",
	"create the Knative Service (Knative's webhook)",
	"status: image",
	"status: Ready",
}

// floorEvents are the Events sless records for a Function on its way to
// Ready. They are not in the floor (a controller could do without), but
// what writing them costs is reported beside it.
var floorEvents = []string{fnrec.EventBuildStarted, fnrec.EventBuildSucceeded, fnrec.EventServiceCreated, fnrec.EventReady}

// recordEvents writes floorEvents for n Functions of ns with the writers.
func recordEvents(ctx context.Context, c client.Client, ns string, n int) (time.Duration, error) {
	now := metav1.NowMicro()
	return each(n, func(i int) error {
		for j, reason := range floorEvents {
			ev := &eventsv1.Event{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("fn-%04d.%d", i, j)},
				EventTime:  now, Type: corev1.EventTypeNormal, Reason: reason, Action: "Build",
				ReportingController: fnrec.RecorderName, ReportingInstance: "bench",
				Regarding: corev1.ObjectReference{APIVersion: slessv1alpha1.SchemeGroupVersion.String(), Kind: "Function",
					Namespace: ns, Name: fmt.Sprintf("fn-%04d", i)},
				Note: "the bench's stand-in for sless's " + reason + " Event",
			}
			if err := c.Create(ctx, ev); err != nil {
				return fmt.Errorf("floor: Event %s of fn-%04d: %w", reason, i, err)
			}
		}
		return nil
	})
}

// floorFn is one Function's objects as the floor's steps make them.
type floorFn struct {
	fn   *slessv1alpha1.Function
	work *slessv1alpha1.Function
	bc   *source.Context
	key  string
	pr   *tektonv1.PipelineRun
	svc  *servingv1.Service
}

// floor writes, for n Functions and with the same writers as the other
// passes, what any controller doing sless's job must write, straight from a
// plain client with no controller and no reads (floorSteps). The objects
// are sless's own builders' for the controller's default configuration; the
// build and the rollout are not waited for: their time is upstream's, not
// the writer's. It returns each step's time.
func floor(ctx context.Context, c client.Client, store s3.Store, cfg resources.Config, ns string, n int) ([]time.Duration, error) {
	fns := make([]floorFn, n)
	steps := []func(f *floorFn, i int) error{
		func(f *floorFn, i int) error {
			f.fn = function(ns, i).(*slessv1alpha1.Function)
			return c.Create(ctx, f.fn)
		},
		func(f *floorFn, _ int) error {
			controllerutil.AddFinalizer(f.fn, names.Finalizer)
			return c.Update(ctx, f.fn)
		},
		func(f *floorFn, _ int) error {
			// The builders take the defaulted spec, as the reconciler gives them.
			f.work = f.fn.DeepCopy()
			f.work.SetDefaults()
			spec := f.work.BuildSpec()
			var err error
			f.bc, err = source.BuildContext(source.Input{Runtime: spec.Runtime, Entrypoint: spec.Entrypoint, Mode: f.work.Mode(),
				Files: source.Inline(spec.Source.Inline.Files)})
			if err != nil {
				return err
			}
			f.key = names.WorkloadContextKey(f.work, f.bc.Digest)
			return store.Put(ctx, f.key, bytes.NewReader(f.bc.TarGz), int64(len(f.bc.TarGz)), "application/gzip")
		},
		func(f *floorFn, _ int) error {
			f.pr = resources.MakePipelineRun(f.work, adapter.BuildInput{Digest: f.bc.Digest, Location: store.Location(f.key)}, 0, cfg)
			return c.Create(ctx, f.pr)
		},
		func(f *floorFn, _ int) error {
			fn := f.fn
			st := &fn.Status
			st.ObservedGeneration, st.SourceDigest, st.BuildRef = fn.Generation, f.bc.Digest, f.pr.Name
			st.MarkSourceStored()
			st.MarkBuilding("", "waiting for PipelineRun "+f.pr.Name)
			st.MarkServiceAwaitingImage()
			return c.Status().Update(ctx, fn)
		},
		func(f *floorFn, _ int) error {
			// The image Tekton would report; the context's digest stands for it.
			image := fmt.Sprintf("%s/%s/%s@%s", cfg.Registry, ns, f.fn.Name, f.bc.Digest)
			f.svc = resources.MakeService(f.work, image, cfg)
			f.fn.Status.Image = image
			return c.Create(ctx, f.svc)
		},
		func(f *floorFn, _ int) error {
			fn := f.fn
			fn.Status.MarkBuildSucceeded()
			fn.Status.MarkServiceRolling("", "waiting for Knative Service "+f.svc.Name)
			return c.Status().Update(ctx, fn)
		},
		func(f *floorFn, _ int) error {
			fn, st := f.fn, &f.fn.Status
			rev := f.svc.Spec.Template.Name
			st.LatestCreatedRevision, st.LatestReadyRevision, st.ServingImage = rev, rev, st.Image
			st.Address = fmt.Sprintf("http://%s.%s.svc.cluster.local", f.svc.Name, ns)
			st.URL = "https://fn.bench.local/fn/" + ns + "/" + fn.Name
			st.MarkServiceReady()
			return c.Status().Update(ctx, fn)
		},
	}
	times := make([]time.Duration, len(steps))
	for s, step := range steps {
		var err error
		if times[s], err = each(n, func(i int) error {
			if err := step(&fns[i], i); err != nil {
				return fmt.Errorf("floor: %s of fn-%04d: %w", floorSteps[s], i, err)
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return times, nil
}

// each runs do for 0..n-1 on the writers and returns how long it took and
// the first error.
func each(n int, do func(i int) error) (time.Duration, error) {
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := do(i); err != nil {
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
