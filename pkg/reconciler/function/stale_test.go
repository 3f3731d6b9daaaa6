package function_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sless-dev/sless/pkg/adapter/knative"
	"github.com/sless-dev/sless/pkg/adapter/tekton"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/reconciler/function"
	"github.com/sless-dev/sless/test/testbed"
)

// A reconcile that reads the Function from a cache that has not yet seen
// the reconciler's own last writes (as an event of its PipelineRun often
// brings one) works from what it wrote: it neither writes again nor has a
// write refused as a conflict. Once the Function changes otherwise, the
// change is what the reconcile works from.
func TestReconcileAfterOwnWriteDespiteStaleCache(t *testing.T) {
	w := newWorld(t)
	w.tekton.SetPolicy(w.ns, testbed.BuildPolicy{Mode: testbed.BuildHold})
	direct, err := client.NewWithWatch(w.kube.Config, client.Options{Scheme: w.kube.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var stale *slessv1alpha1.Function          // served by Get when set, as a lagging cache would
	var afterFinalizer *slessv1alpha1.Function // the version the finalizer's write made
	var writes, conflicts atomic.Int32
	count := func(err error) error {
		writes.Add(1)
		if apierrors.IsConflict(err) {
			conflicts.Add(1)
		}
		return err
	}
	cl := interceptor.NewClient(direct, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			mu.Lock()
			s := stale
			mu.Unlock()
			if fn, ok := obj.(*slessv1alpha1.Function); ok && s != nil {
				s.DeepCopyInto(fn)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			err := c.Update(ctx, obj, opts...)
			if fn, ok := obj.(*slessv1alpha1.Function); ok && err == nil {
				mu.Lock()
				afterFinalizer = fn.DeepCopy()
				mu.Unlock()
			}
			return count(err)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			return count(c.SubResource(sub).Update(ctx, obj, opts...))
		},
	})
	r := &function.Reconciler{
		Client:  cl,
		Builder: &tekton.Builder{Client: cl, APIReader: cl, Config: w.resourcesConfig()},
		Server:  &knative.Server{Client: cl, APIReader: cl, Config: w.resourcesConfig()},
		Store:   w.store,
		Config:  function.Config{PublicBaseURL: testPublic},
	}
	w.create(pythonFunction(w.ns, "stale", `1`))
	created := w.fn("stale")
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: w.ns, Name: "stale"}}
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	building := w.fn("stale")
	if building.Status.Phase != slessv1alpha1.FunctionPhaseBuilding || writes.Load() != 2 {
		t.Fatalf("first reconcile: %d writes, %s; want the finalizer and a Building status", writes.Load(), describe(building))
	}

	// The cache still holds the Function as created, and then as the
	// finalizer's write left it: both are older than the reconciler's
	// status write. The status may change once with the run's start,
	// which the simulator reports on its own time; nothing else is
	// written, and nothing conflicts.
	mu.Lock()
	versions := []*slessv1alpha1.Function{created, afterFinalizer, created, afterFinalizer}
	mu.Unlock()
	writes.Store(0)
	for _, old := range versions {
		mu.Lock()
		stale = old
		mu.Unlock()
		res, err := r.Reconcile(context.Background(), req)
		if err != nil || !res.IsZero() {
			t.Fatalf("reconcile from version %s: %v, %+v", old.ResourceVersion, err, res)
		}
	}
	if writes.Load() > 1 || conflicts.Load() != 0 {
		t.Fatalf("reconciles from stale versions: %d writes, %d conflicts; want at most the run's start, and no conflict", writes.Load(), conflicts.Load())
	}
	if got := w.fn("stale"); got.Status.BuildRef != building.Status.BuildRef || got.Status.Phase != slessv1alpha1.FunctionPhaseBuilding {
		t.Fatalf("after stale reconciles: %s, build %s", describe(got), got.Status.BuildRef)
	}

	// The cache catches up with an edit of the spec: the reconcile builds
	// the new source, not the remembered one.
	mu.Lock()
	stale = nil
	mu.Unlock()
	w.update("stale", func(fn *slessv1alpha1.Function) {
		fn.Spec.Source.Inline.Files["main.py"] = "def handler(event, context):\n    return 2\n"
	})
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	got := w.fn("stale")
	if got.Status.ObservedGeneration != 2 || got.Status.SourceDigest == building.Status.SourceDigest || conflicts.Load() != 0 {
		t.Fatalf("after the edit: %s, digest %s (was %s), %d conflicts", describe(got), got.Status.SourceDigest, building.Status.SourceDigest, conflicts.Load())
	}
	if prs := w.pipelineRuns("stale"); len(prs) != 2 {
		t.Errorf("%d PipelineRuns after the edit, want 2", len(prs))
	}
}
