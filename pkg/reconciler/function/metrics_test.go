package function_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sless-dev/sless/pkg/adapter"
	"github.com/sless-dev/sless/pkg/adapter/knative"
	"github.com/sless-dev/sless/pkg/adapter/tekton"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/reconciler/function"
)

// A build's end is counted once even when the status write telling it is
// lost to a conflict: the next reconcile sees the same end and tells it
// then, as it does the BuildSucceeded Event.
func TestBuildCountedOnceDespiteLostStatusWrite(t *testing.T) {
	w := newWorld(t)
	var lost atomic.Int32
	direct, err := client.NewWithWatch(w.kube.Config, client.Options{Scheme: w.kube.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	cl := interceptor.NewClient(direct, interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			fn, ok := obj.(*slessv1alpha1.Function)
			if ok && sub == "status" && meta.IsStatusConditionTrue(fn.Status.Conditions, slessv1alpha1.FunctionConditionBuildSucceeded) &&
				lost.CompareAndSwap(0, 1) {
				return apierrors.NewConflict(slessv1alpha1.SchemeGroupVersion.WithResource("functions").GroupResource(), fn.Name, nil)
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	})
	var mu sync.Mutex
	var finished []adapter.BuildState
	r := &function.Reconciler{
		Client:  cl,
		Builder: &tekton.Builder{Client: cl, APIReader: cl, Config: w.resourcesConfig()},
		Server:  &knative.Server{Client: cl, APIReader: cl, Config: w.resourcesConfig()},
		Store:   w.store,
		Config:  function.Config{PublicBaseURL: testPublic},
		BuildFinished: func(bs adapter.BuildState) {
			mu.Lock()
			defer mu.Unlock()
			finished = append(finished, bs)
		},
	}
	w.create(pythonFunction(w.ns, "counted", `1`))
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: w.ns, Name: "counted"}}
	w.eventually("Function counted Ready through reconciles called here", func() (bool, string) {
		if _, err := r.Reconcile(context.Background(), req); err != nil {
			return false, err.Error()
		}
		fn := w.fn("counted")
		return fn.IsReady(), describe(fn)
	})
	// Reconciles of the finished Function find nothing new to tell.
	for range 3 {
		if _, err := r.Reconcile(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	if lost.Load() != 1 {
		t.Fatal("no status write was lost; the test proves nothing")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(finished) != 1 {
		t.Fatalf("BuildFinished told %d times, want once: %+v", len(finished), finished)
	}
	if bs := finished[0]; !bs.Succeeded || bs.Name != w.fn("counted").Status.BuildRef || bs.StartTime == nil || bs.CompletionTime == nil {
		t.Errorf("BuildFinished told %+v", bs)
	}
}
