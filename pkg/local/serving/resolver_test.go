package serving

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/local/localtest"
)

func TestResolverFollowsTheStore(t *testing.T) {
	ctx := context.Background()
	bed := newServerBed(t, time.Minute)
	store, _ := localtest.OpenStore(t)
	// An object stored before the resolver exists is indexed from the list.
	early := localtest.Function("ns", "early")
	if err := store.Create(ctx, early); err != nil {
		t.Fatal(err)
	}
	r, err := NewResolver(ctx, store, bed.server)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if tg, err := r.Resolve(ctx, "ns", "early"); err != nil || tg.Ready || tg.Activate != nil {
		t.Fatalf("stored function without a revision: %+v, %v; want not ready", tg, err)
	}
	if _, err := r.Resolve(ctx, "ns", "missing"); !errors.Is(err, invoke.ErrNotFound) {
		t.Fatalf("missing function: %v, want ErrNotFound", err)
	}
	if tg, _ := r.Resolve(ctx, "ns", "early"); tg.Failed != "" {
		t.Fatalf("a function on its way resolves as failed: %+v", tg)
	}
	// Its build fails: the proxy is told why, so it does not ask callers to
	// come back later.
	early.Status.ObservedGeneration = early.Generation
	early.Status.Phase = slessv1alpha1.FunctionPhaseFailed
	early.Status.Conditions = []metav1.Condition{{Type: slessv1alpha1.FunctionConditionReady, Status: metav1.ConditionFalse,
		Reason: "BuildFailed", Message: "pip install exited 1", ObservedGeneration: early.Generation, LastTransitionTime: metav1.Now()}}
	if err := store.Status().Update(ctx, early); err != nil {
		t.Fatal(err)
	}
	if tg, err := r.Resolve(ctx, "ns", "early"); err != nil || tg.Ready || tg.Failed != "BuildFailed" {
		t.Fatalf("function whose build failed: %+v, %v; want not ready, failed BuildFailed", tg, err)
	}

	fn := localtest.Function("ns", "served")
	fn.Spec.TimeoutSeconds = ptr.To[int32](70)
	if err := store.Create(ctx, fn); err != nil {
		t.Fatal(err)
	}
	img := bed.image(fn, replyCode("r"))
	bed.awaitState(fn, img, ready)
	tg, err := r.Resolve(ctx, "ns", "served")
	if err != nil || !tg.Ready || tg.Activate == nil || tg.Timeout != 70*time.Second || tg.Public || tg.Revision != "served-00001" || tg.Idle {
		t.Fatalf("served function: %+v, %v", tg, err)
	}
	act, err := tg.Activate(ctx)
	if err != nil || act.Address == nil || act.Cold {
		t.Fatalf("Activate of a running revision: %+v, %v", act, err)
	}

	// An enabled http trigger makes it public; disabling or deleting it
	// closes it again; a cron trigger does not open it.
	public := func() bool {
		tg, err := r.Resolve(ctx, "ns", "served")
		if err != nil {
			t.Fatal(err)
		}
		return tg.Public
	}
	cronT := &slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nightly"},
		Spec: slessv1alpha1.TriggerSpec{Function: "served", Type: slessv1alpha1.TriggerTypeCron, Schedule: "@daily"}}
	httpT := &slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: slessv1alpha1.TriggerSpec{Function: "served", Type: slessv1alpha1.TriggerTypeHTTP}}
	otherNS := &slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Namespace: "elsewhere", Name: "web"},
		Spec: slessv1alpha1.TriggerSpec{Function: "served", Type: slessv1alpha1.TriggerTypeHTTP}}
	for _, o := range []*slessv1alpha1.Trigger{cronT, otherNS} {
		if err := store.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if public() {
		t.Fatal("a cron trigger, or an http trigger of another namespace, made the function public")
	}
	if err := store.Create(ctx, httpT); err != nil {
		t.Fatal(err)
	}
	if !public() {
		t.Fatal("an enabled http trigger did not make the function public")
	}
	httpT.Spec.Enabled = ptr.To(false)
	if err := store.Update(ctx, httpT); err != nil {
		t.Fatal(err)
	}
	if public() {
		t.Fatal("a disabled http trigger left the function public")
	}
	httpT.Spec.Enabled = ptr.To(true)
	if err := store.Update(ctx, httpT); err != nil {
		t.Fatal(err)
	}
	if !public() {
		t.Fatal("re-enabling did not make it public")
	}
	if err := store.Delete(ctx, httpT); err != nil {
		t.Fatal(err)
	}
	if public() {
		t.Fatal("a deleted http trigger left the function public")
	}

	// A function being deleted is not found.
	fn.Finalizers = []string{"sless.dev/test"}
	if err := store.Update(ctx, fn); err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(ctx, fn); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Resolve(ctx, "ns", "served"); !errors.Is(err, invoke.ErrNotFound) {
		t.Fatalf("deleting function: %v, want ErrNotFound", err)
	}
}
