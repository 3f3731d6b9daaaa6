package local

import (
	"context"
	"errors"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/reconciler/trigger"
)

// reconcileTriggerOnce reconciles trigger ns/name and returns it as stored.
func reconcileTriggerOnce(t *testing.T, runs *Runs, name string) (reconcile.Result, *slessv1alpha1.Trigger) {
	t.Helper()
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "ns", Name: name}
	res, err := runs.TriggerReconciler().Reconcile(ctx, reconcile.Request{NamespacedName: key})
	if err != nil {
		t.Fatal(err)
	}
	got := &slessv1alpha1.Trigger{}
	if err := runs.store.Get(ctx, key, got); err != nil {
		t.Fatal(err)
	}
	return res, got
}

func readyOf(tr *slessv1alpha1.Trigger) metav1.Condition {
	if c := meta.FindStatusCondition(tr.Status.Conditions, slessv1alpha1.TriggerConditionReady); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// An http Trigger reports what docs/triggers.md promises, with the cluster
// reconciler's reasons: Public with the function's URL, or why not.
func TestHTTPTriggerStatus(t *testing.T) {
	const url = "http://127.0.0.1:8080/fn/ns/calc"
	for _, tc := range []struct {
		name     string
		function string
		enabled  bool
		status   metav1.ConditionStatus
		reason   string
		url      string
	}{
		{name: "public", function: "calc", enabled: true, status: metav1.ConditionTrue, reason: trigger.ReasonPublic, url: url},
		{name: "disabled", function: "calc", enabled: false, status: metav1.ConditionFalse, reason: trigger.ReasonDisabled},
		{name: "missing-function", function: "nope", enabled: true, status: metav1.ConditionFalse, reason: trigger.ReasonFunctionNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			store, _ := openTestStore(t)
			runs := NewRuns(store, nil, nil)
			defer runs.Close()
			fn := newFunction("ns", "calc")
			if err := store.Create(ctx, fn); err != nil {
				t.Fatal(err)
			}
			fn.Status.URL = url
			if err := store.Status().Update(ctx, fn); err != nil {
				t.Fatal(err)
			}
			tr := &slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
				Spec: slessv1alpha1.TriggerSpec{Function: tc.function, Type: slessv1alpha1.TriggerTypeHTTP, Enabled: ptr.To(tc.enabled)}}
			if err := store.Create(ctx, tr); err != nil {
				t.Fatal(err)
			}
			_, got := reconcileTriggerOnce(t, runs, "web")
			c := readyOf(got)
			if c.Status != tc.status || c.Reason != tc.reason || got.Status.URL != tc.url {
				t.Errorf("Ready %s/%s (%s), url %q; want %s/%s, url %q", c.Status, c.Reason, c.Message, got.Status.URL, tc.status, tc.reason, tc.url)
			}
			if got.Status.ObservedGeneration != got.Generation {
				t.Errorf("observedGeneration %d, generation %d", got.Status.ObservedGeneration, got.Generation)
			}
		})
	}
}

// A cron Trigger whose function does not exist is paused, as on a cluster:
// not scheduled, FunctionNotFound, looked at again; it resumes once the
// function exists; a run due after the function went away is skipped
// rather than recorded as a failure against a function that is not there.
func TestCronTriggerPausedWithoutFunction(t *testing.T) {
	ctx := context.Background()
	store, _ := openTestStore(t)
	recs, err := store.Records()
	if err != nil {
		t.Fatal(err)
	}
	recorder := invoke.NewRecorder(recs, invoke.RecorderOptions{})
	server := NewServer(ServerOptions{Dir: func(string) (string, error) { return "", errors.New("no builds here") }})
	defer server.Close()
	runs := NewRuns(store, server, recorder)
	defer runs.Close()
	scheduled := func() bool {
		runs.mu.Lock()
		defer runs.mu.Unlock()
		return runs.crons[types.NamespacedName{Namespace: "ns", Name: "tick"}] != nil
	}

	tr := &slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tick"},
		Spec: slessv1alpha1.TriggerSpec{Function: "later", Type: slessv1alpha1.TriggerTypeCron, Schedule: "* * * * *",
			Payload: &apiextensionsv1.JSON{Raw: []byte(`{}`)}}}
	if err := store.Create(ctx, tr); err != nil {
		t.Fatal(err)
	}
	res, got := reconcileTriggerOnce(t, runs, "tick")
	if c := readyOf(got); c.Status != metav1.ConditionFalse || c.Reason != trigger.ReasonFunctionNotFound || got.Status.NextScheduleTime != nil {
		t.Errorf("without its function: Ready %s/%s, next %v", c.Status, c.Reason, got.Status.NextScheduleTime)
	}
	if scheduled() {
		t.Error("scheduled without its function")
	}
	if res.RequeueAfter <= 0 {
		t.Error("not looked at again: nothing would bring it back when the function appears")
	}

	fn := newFunction("ns", "later")
	if err := store.Create(ctx, fn); err != nil {
		t.Fatal(err)
	}
	_, got = reconcileTriggerOnce(t, runs, "tick")
	if c := readyOf(got); c.Status != metav1.ConditionTrue || c.Reason != trigger.ReasonScheduled || got.Status.NextScheduleTime == nil {
		t.Errorf("with its function: Ready %s/%s, next %v", c.Status, c.Reason, got.Status.NextScheduleTime)
	}
	if !scheduled() {
		t.Error("not scheduled once its function exists")
	}

	// The function goes away between the reconcile and the scheduled time.
	if err := store.Delete(ctx, fn); err != nil {
		t.Fatal(err)
	}
	runs.cronRun(ctx, types.NamespacedName{Namespace: "ns", Name: "tick"}, got)
	if err := recorder.Close(ctx); err != nil {
		t.Fatal(err)
	}
	page, err := recs.List(ctx, invoke.Query{Namespace: "ns", Function: "later", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 0 {
		t.Errorf("a run against the missing function was recorded: %+v", page.Items[0])
	}
	if err := store.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "tick"}, got); err != nil {
		t.Fatal(err)
	}
	if c := readyOf(got); c.Reason != trigger.ReasonFunctionNotFound {
		t.Errorf("after a skipped run: Ready %s/%s", c.Status, c.Reason)
	}
	_, _ = reconcileTriggerOnce(t, runs, "tick")
	if scheduled() {
		t.Error("still scheduled after its function went away")
	}
}
