package runs

import (
	"context"
	"errors"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/local/localtest"
	"github.com/sless-dev/sless/pkg/local/serving"
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
		{name: "public", function: "calc", enabled: true, status: metav1.ConditionTrue, reason: slessv1alpha1.TriggerReasonPublic, url: url},
		{name: "disabled", function: "calc", enabled: false, status: metav1.ConditionFalse, reason: slessv1alpha1.TriggerReasonDisabled},
		{name: "missing-function", function: "nope", enabled: true, status: metav1.ConditionFalse, reason: slessv1alpha1.TriggerReasonFunctionNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			store, _ := localtest.OpenStore(t)
			runs := New(store, nil, nil)
			defer runs.Close()
			fn := localtest.Function("ns", "calc")
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
	store, _ := localtest.OpenStore(t)
	recs, err := store.Records()
	if err != nil {
		t.Fatal(err)
	}
	recorder := invoke.NewRecorder(recs, invoke.RecorderOptions{})
	server := serving.NewServer(serving.ServerOptions{Dir: func(string) (string, error) { return "", errors.New("no builds here") }})
	defer server.Close()
	runs := New(store, server, recorder)
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
	if c := readyOf(got); c.Status != metav1.ConditionFalse || c.Reason != slessv1alpha1.TriggerReasonFunctionNotFound || got.Status.NextScheduleTime != nil {
		t.Errorf("without its function: Ready %s/%s, next %v", c.Status, c.Reason, got.Status.NextScheduleTime)
	}
	if scheduled() {
		t.Error("scheduled without its function")
	}
	if res.RequeueAfter <= 0 {
		t.Error("not looked at again: nothing would bring it back when the function appears")
	}

	fn := localtest.Function("ns", "later")
	if err := store.Create(ctx, fn); err != nil {
		t.Fatal(err)
	}
	_, got = reconcileTriggerOnce(t, runs, "tick")
	if c := readyOf(got); c.Status != metav1.ConditionTrue || c.Reason != slessv1alpha1.TriggerReasonScheduled || got.Status.NextScheduleTime == nil {
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
	if c := readyOf(got); c.Reason != slessv1alpha1.TriggerReasonFunctionNotFound {
		t.Errorf("after a skipped run: Ready %s/%s", c.Status, c.Reason)
	}
	_, _ = reconcileTriggerOnce(t, runs, "tick")
	if scheduled() {
		t.Error("still scheduled after its function went away")
	}
}

// A cron trigger disabled and enabled again while a run is in flight: the
// run finishes and is recorded, and the schedule started again counts it
// as the CronJob controller counts a suspended CronJob's active Job —
// Forbid holds the next time until it ends, Replace cancels it (recorded
// 499). Before, the re-enabled trigger forgot the run: Forbid ran the next
// time beside it and Replace let it run on.
func TestCronRunInFlightAcrossDisable(t *testing.T) {
	ctx := context.Background()
	rig := newCronRig(ctx, t)
	t0 := time.Now().Truncate(time.Minute).Add(10 * time.Minute)
	for i, policy := range []slessv1alpha1.ConcurrencyPolicy{slessv1alpha1.ConcurrencyForbid, slessv1alpha1.ConcurrencyReplace} {
		t.Run(string(policy), func(t *testing.T) {
			base := t0.Add(time.Duration(i) * 10 * time.Minute)
			name := "toggled-" + string(rune('a'+i))
			key := types.NamespacedName{Namespace: "ns", Name: name}
			last := base.Add(-time.Minute)
			rig.setClock(base.Add(time.Second))
			since := base.Add(-time.Second)
			rig.trigger(ctx, t, name, "* * * * *", policy, 300, 3, &last)
			rig.awaitLast(ctx, t, name, base)
			setEnabled := func(on bool) {
				t.Helper()
				tr := &slessv1alpha1.Trigger{}
				if err := rig.store.Get(ctx, key, tr); err != nil {
					t.Fatal(err)
				}
				tr.Spec.Enabled = ptr.To(on)
				if err := rig.store.Update(ctx, tr); err != nil {
					t.Fatal(err)
				}
				reconcileTriggerOnce(t, rig.runs, name)
			}
			// The first run takes 3 s; the trigger is off and on during it,
			// and the next time comes.
			setEnabled(false)
			rig.setClock(base.Add(time.Minute + time.Second))
			setEnabled(true)
			rig.awaitLast(ctx, t, name, base.Add(time.Minute))
			recs := rig.cronRecords(ctx, t, since, 2)
			first, second := recs[0], recs[1]
			switch policy {
			case slessv1alpha1.ConcurrencyForbid:
				if first.Status != 200 || second.Status != 200 || second.StartedAt.Before(first.StartedAt.Add(first.Duration)) {
					t.Errorf("Forbid: the run of the re-enabled trigger overlapped the one in flight: %+v", recs)
				}
			case slessv1alpha1.ConcurrencyReplace:
				if first.Status != invoke.StatusClientClosed || second.Status != 200 {
					t.Errorf("Replace: the run in flight was not replaced: %+v", recs)
				}
			}
			// Once the runs are over and the trigger is off, nothing of it is kept.
			setEnabled(false)
			deadline := time.Now().Add(10 * time.Second)
			for {
				rig.runs.mu.Lock()
				_, kept := rig.runs.crons[key]
				rig.runs.mu.Unlock()
				if !kept {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("a disabled trigger's entry is kept after its runs ended")
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}
