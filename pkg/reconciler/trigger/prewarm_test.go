package trigger_test

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/adapter/kube"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

func cronTrigger(name, fn, schedule, tz string, preWarm int32) *slessv1alpha1.Trigger {
	return &slessv1alpha1.Trigger{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       slessv1alpha1.TriggerSpec{Function: fn, Type: slessv1alpha1.TriggerTypeCron, Schedule: schedule, TimeZone: tz, PreWarmSeconds: ptr.To(preWarm)},
	}
}

// finishRun plays the CronJob controller and the Job controller for the run
// scheduled at run: its Job exists and has completed.
func (e *env) finishRun(cronJob string, run time.Time) {
	e.t.Helper()
	ctx := context.Background()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: kube.ScheduledJobName(cronJob, run), Namespace: e.ns, Labels: map[string]string{"sless.dev/trigger": cronJob}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "invoke", Image: "sless"}},
		}}},
	}
	if err := e.c.Create(ctx, job); err != nil {
		e.t.Fatal(err)
	}
	start, end := metav1.NewTime(run), metav1.NewTime(run.Add(3*time.Second))
	job.Status = batchv1.JobStatus{
		StartTime: &start, CompletionTime: &end, Succeeded: 1, Ready: ptr.To[int32](0), Terminating: ptr.To[int32](0),
		UncountedTerminatedPods: &batchv1.UncountedTerminatedPods{},
		Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: end},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: end},
		},
	}
	if err := e.c.Status().Update(ctx, job); err != nil {
		e.t.Fatal(err)
	}
}

func TestPreWarmRaisesAndRestoresMinScale(t *testing.T) {
	// 01:00 UTC is 02:00 in Berlin; the run is at 03:00 Berlin = 02:00 UTC.
	e := setup(t, time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC))
	run := time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC)
	e.function("report")
	e.service("report", "") // scales to zero: no min-scale
	e.create(cronTrigger("nightly", "report", "0 3 * * *", "Europe/Berlin", 120))

	res := e.reconcile("nightly")
	if want := run.Add(-120 * time.Second).Sub(e.clock.Now()); res.RequeueAfter != want {
		t.Errorf("before the window: requeue after %v, want %v (when the window opens)", res.RequeueAfter, want)
	}
	if v, set, _ := e.minScale("report"); set {
		t.Fatalf("min-scale %q raised an hour early", v)
	}
	tr := e.get("nightly")
	if tr.Status.PreWarmedFor != nil || !containsFinalizer(tr) {
		t.Errorf("before the window: preWarmedFor %v finalizers %v", tr.Status.PreWarmedFor, tr.Finalizers)
	}

	// One second before the window: still cold.
	e.clock.SetTime(run.Add(-121 * time.Second))
	e.reconcile("nightly")
	if v, set, _ := e.minScale("report"); set {
		t.Fatalf("min-scale %q raised before the window", v)
	}
	// The window opens: warm, held for this run.
	e.clock.SetTime(run.Add(-120 * time.Second))
	res = e.reconcile("nightly")
	if v, _, ann := e.minScale("report"); v != "1" || ann["prewarm.sless.dev/nightly"] == "" {
		t.Fatalf("in the window: min-scale %q, annotations %v", v, ann)
	}
	tr = e.get("nightly")
	if tr.Status.PreWarmedFor == nil || !tr.Status.PreWarmedFor.Time.Equal(run) {
		t.Errorf("preWarmedFor %v, want %v", tr.Status.PreWarmedFor, run)
	}
	if want := 121 * time.Second; res.RequeueAfter != want {
		t.Errorf("in the window: requeue after %v, want %v (just after the run's time)", res.RequeueAfter, want)
	}

	// The run starts and goes on: still warm.
	e.clock.SetTime(run.Add(30 * time.Second))
	e.reconcile("nightly")
	if v, _, _ := e.minScale("report"); v != "1" {
		t.Fatalf("during the run: min-scale %q", v)
	}
	// The run's Job completes: restored as it was (no min-scale at all).
	e.finishRun("nightly", run)
	e.clock.SetTime(run.Add(35 * time.Second))
	res = e.reconcile("nightly")
	if v, set, ann := e.minScale("report"); set || len(ann) != 0 {
		t.Fatalf("after the run: min-scale %q (set %v), annotations %v", v, set, ann)
	}
	tr = e.get("nightly")
	if tr.Status.PreWarmedFor != nil {
		t.Errorf("after the run: preWarmedFor %v", tr.Status.PreWarmedFor)
	}
	nextWindow := run.Add(24*time.Hour - 120*time.Second)
	if want := nextWindow.Sub(e.clock.Now()); res.RequeueAfter != want {
		t.Errorf("after the run: requeue after %v, want %v (the next window)", res.RequeueAfter, want)
	}
}

func TestPreWarmRestoresWhenTheRunNeverReports(t *testing.T) {
	e := setup(t, time.Date(2026, 12, 2, 11, 59, 0, 0, time.UTC))
	run := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	e.function("report")
	e.service("report", "0")
	e.create(cronTrigger("noon", "report", "0 12 * * *", "", 300))
	e.reconcile("noon")
	if v, _, _ := e.minScale("report"); v != "1" {
		t.Fatalf("in the window: min-scale %q", v)
	}
	cj := &batchv1.CronJob{}
	if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: e.ns, Name: "noon"}, cj); err != nil {
		t.Fatal(err)
	}
	limit := kube.HoldLimit(cj)
	// No Job ever appears (skipped run): held until the limit, then restored.
	e.clock.SetTime(run.Add(limit - time.Second))
	res := e.reconcile("noon")
	if v, _, _ := e.minScale("report"); v != "1" {
		t.Fatalf("before the hold limit: min-scale %q", v)
	}
	if res.RequeueAfter != time.Second {
		t.Errorf("before the hold limit: requeue after %v, want 1s", res.RequeueAfter)
	}
	e.clock.SetTime(run.Add(limit))
	e.reconcile("noon")
	if v, _, ann := e.minScale("report"); v != "0" || len(ann) != 0 {
		t.Fatalf("after the hold limit: min-scale %q (want the original 0), annotations %v", v, ann)
	}
}

func TestPreWarmSharedByTwoTriggersAndRestoredOnDelete(t *testing.T) {
	e := setup(t, time.Date(2026, 12, 2, 8, 59, 30, 0, time.UTC))
	ctx := context.Background()
	e.function("report")
	e.service("report", "")
	e.create(cronTrigger("a", "report", "0 9 * * *", "", 60))
	e.create(cronTrigger("b", "report", "0 9 * * *", "", 60))
	e.reconcile("a")
	e.reconcile("b")
	if v, _, ann := e.minScale("report"); v != "1" || len(ann) != 3 {
		t.Fatalf("two holders: min-scale %q annotations %v", v, ann)
	}
	// a is disabled: b still holds it warm.
	e.update("a", func(tr *slessv1alpha1.Trigger) { tr.Spec.Enabled = ptr.To(false) })
	e.reconcile("a")
	if v, _, ann := e.minScale("report"); v != "1" || ann["prewarm.sless.dev/a"] != "" {
		t.Fatalf("a released, b holds: min-scale %q annotations %v", v, ann)
	}
	if tr := e.get("a"); containsFinalizer(tr) || tr.Status.PreWarmedFor != nil {
		t.Errorf("disabled trigger keeps finalizer %v / preWarmedFor %v", tr.Finalizers, tr.Status.PreWarmedFor)
	}
	// b is deleted while warm: its finalizer restores the min-scale.
	if err := e.c.Delete(ctx, e.get("b")); err != nil {
		t.Fatal(err)
	}
	e.reconcile("b")
	if v, set, ann := e.minScale("report"); set || len(ann) != 0 {
		t.Fatalf("last holder deleted: min-scale %q annotations %v", v, ann)
	}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "b"}, &slessv1alpha1.Trigger{}); err == nil {
		t.Errorf("trigger b still exists: its finalizer was not removed")
	}
}

func TestPreWarmKeepsAHigherMinScale(t *testing.T) {
	e := setup(t, time.Date(2026, 12, 2, 8, 59, 30, 0, time.UTC))
	e.function("report")
	e.service("report", "3")
	e.create(cronTrigger("a", "report", "0 9 * * *", "", 60))
	e.reconcile("a")
	if v, _, _ := e.minScale("report"); v != "3" {
		t.Fatalf("held: min-scale %q, want 3 unchanged", v)
	}
	e.update("a", func(tr *slessv1alpha1.Trigger) { tr.Spec.PreWarmSeconds = nil })
	e.reconcile("a")
	if v, _, ann := e.minScale("report"); v != "3" || len(ann) != 0 {
		t.Fatalf("released: min-scale %q annotations %v", v, ann)
	}
}

func containsFinalizer(tr *slessv1alpha1.Trigger) bool {
	for _, f := range tr.Finalizers {
		if f == kube.PreWarmFinalizer {
			return true
		}
	}
	return false
}
