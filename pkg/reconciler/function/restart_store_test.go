package function_test

import (
	"context"
	"io"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sless-dev/sless/pkg/adapter/knative"
	"github.com/sless-dev/sless/pkg/adapter/s3"
	"github.com/sless-dev/sless/pkg/adapter/tekton"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/names"
	"github.com/sless-dev/sless/pkg/reconciler/function"
	"github.com/sless-dev/sless/test/testbed"
)

// countingStore counts the calls a reconcile makes to storage.
type countingStore struct {
	s3.Store
	exists, puts atomic.Int32
}

func (c *countingStore) Exists(ctx context.Context, key string) (bool, error) {
	c.exists.Add(1)
	return c.Store.Exists(ctx, key)
}

func (c *countingStore) Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error {
	c.puts.Add(1)
	return c.Store.Put(ctx, key, r, size, contentType)
}

// A controller started anew (a restart, a new leader) does not ask storage
// for the build context the Function's status names as stored: a round
// trip per Function after every restart. A changed source is stored.
func TestRestartTrustsStoredContextInStatus(t *testing.T) {
	w := newWorld(t)
	w.tekton.SetPolicy(w.ns, testbed.BuildPolicy{Mode: testbed.BuildHold})
	store := &countingStore{Store: w.store}
	reconciler := func() *function.Reconciler {
		cl := w.kube.Client
		return &function.Reconciler{
			Client:  cl,
			Builder: &tekton.Builder{Client: cl, APIReader: cl, Config: w.resourcesConfig()},
			Server:  &knative.Server{Client: cl, APIReader: cl, Config: w.resourcesConfig()},
			Store:   store,
			Config:  function.Config{PublicBaseURL: testPublic},
		}
	}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: w.ns, Name: "restarted"}}
	w.create(pythonFunction(w.ns, "restarted", `1`))
	if _, err := reconciler().Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	building := w.fn("restarted")
	if building.Status.Phase != slessv1alpha1.FunctionPhaseBuilding || store.exists.Load() != 1 || store.puts.Load() != 1 {
		t.Fatalf("first reconcile: %s; %d existence checks and %d puts, want one each", describe(building), store.exists.Load(), store.puts.Load())
	}

	store.exists.Store(0)
	store.puts.Store(0)
	r := reconciler()
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if store.exists.Load() != 0 || store.puts.Load() != 0 {
		t.Fatalf("reconcile after a restart: %d existence checks and %d puts, want none", store.exists.Load(), store.puts.Load())
	}
	if got := w.fn("restarted"); got.Status.BuildRef != building.Status.BuildRef || len(w.pipelineRuns("restarted")) != 1 {
		t.Fatalf("after the restart: build %s (was %s), %d PipelineRuns", got.Status.BuildRef, building.Status.BuildRef, len(w.pipelineRuns("restarted")))
	}

	w.update("restarted", func(fn *slessv1alpha1.Function) {
		fn.Spec.Source.Inline.Files["main.py"] = "def handler(event, context):\n    return 2\n"
	})
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	got := w.fn("restarted")
	if got.Status.SourceDigest == building.Status.SourceDigest || store.exists.Load() != 1 || store.puts.Load() != 1 {
		t.Fatalf("after the edit: digest %s (was %s); %d existence checks and %d puts, want one each",
			got.Status.SourceDigest, building.Status.SourceDigest, store.exists.Load(), store.puts.Load())
	}
	if ok, err := w.store.Exists(context.Background(), names.WorkloadContextKey(got, got.Status.SourceDigest)); !ok || err != nil {
		t.Fatalf("the new context is not stored: %v %v", ok, err)
	}
}
