package kube

import (
	"context"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// PreWarmWindow says whether a cron trigger's function should be held warm
// at now, for which scheduled run, and when the answer next changes.
//
// It is warm from preWarm before a scheduled time T until T's run has
// finished — or, should the run never report (skipped past its starting
// deadline, its Job deleted), until holdLimit after T, the longest a run can
// last. The window of the next run may open while a run goes on: then it
// is held for the later one.
func PreWarmWindow(sched cron.Schedule, preWarm, holdLimit time.Duration, now time.Time, warmedFor *time.Time, runFinished func(time.Time) bool) (warm bool, forRun time.Time, recheck time.Duration) {
	next := sched.Next(now)
	opens := next.Add(-preWarm)
	if !now.Before(opens) {
		return true, next, next.Sub(now) + time.Second
	}
	if warmedFor != nil && !now.Before(*warmedFor) {
		limit := warmedFor.Add(holdLimit)
		if now.Before(limit) && !runFinished(*warmedFor) {
			// Looked at again when the run's Job reports (a watch) or at
			// the limit, whichever is first.
			return true, *warmedFor, sooner(limit.Sub(now), opens.Sub(now))
		}
	}
	// Not warm, also when it was held for a run that is no longer due (the
	// schedule changed).
	return false, time.Time{}, opens.Sub(now)
}

// HoldLimit is the longest a pre-warm is held after its scheduled time: the
// run may start up to the starting deadline late and then runs at most its
// Job's activeDeadlineSeconds.
func HoldLimit(cj *batchv1.CronJob) time.Duration {
	d := time.Duration(ptr.Deref(cj.Spec.StartingDeadlineSeconds, slessv1alpha1.DefaultStartingDeadlineSeconds)) * time.Second
	d += time.Duration(ptr.Deref(cj.Spec.JobTemplate.Spec.ActiveDeadlineSeconds, 0)) * time.Second
	return d + time.Minute
}

// ScheduledJobName is the name the CronJob controller gives the Job of the
// run scheduled at t (its scheduled time in minutes since the epoch).
func ScheduledJobName(cronJob string, t time.Time) string {
	return fmt.Sprintf("%s-%d", cronJob, t.Unix()/60)
}

// preWarm raises or restores the function's min-scale for t and returns when
// to look again.
func (r *Carrier) preWarm(ctx context.Context, t *slessv1alpha1.Trigger, fn *slessv1alpha1.Function, cj *batchv1.CronJob, sched cron.Schedule, now time.Time) (time.Duration, error) {
	seconds := ptr.Deref(t.Spec.PreWarmSeconds, 0)
	if seconds == 0 || !t.IsEnabled() || r.MinScale == nil {
		return 0, r.releasePreWarm(ctx, t)
	}
	if !controllerutil.ContainsFinalizer(t, PreWarmFinalizer) {
		// Before the first raise, so a deleted trigger can always restore.
		status := t.Status.DeepCopy()
		controllerutil.AddFinalizer(t, PreWarmFinalizer)
		if err := r.Client.Update(ctx, t); err != nil {
			return 0, err
		}
		t.Status = *status
	}
	var warmedFor *time.Time
	if t.Status.PreWarmedFor != nil {
		warmedFor = ptr.To(t.Status.PreWarmedFor.Time)
	}
	var lookupErr error
	finished := func(run time.Time) bool {
		done, err := r.runFinished(ctx, cj, run)
		if err != nil {
			lookupErr = err
		}
		return done
	}
	warm, forRun, recheck := PreWarmWindow(sched, time.Duration(seconds)*time.Second, HoldLimit(cj), now, warmedFor, finished)
	if lookupErr != nil {
		return 0, lookupErr
	}
	if !warm {
		// Restored, but the finalizer stays: the next window comes.
		if err := r.MinScale.RestoreMinScale(ctx, t.Namespace, fn.Name, t.Name); err != nil {
			return 0, fmt.Errorf("restore min-scale of %s: %w", fn.Name, err)
		}
		t.Status.PreWarmedFor = nil
		return recheck, nil
	}
	if err := r.MinScale.RaiseMinScale(ctx, t.Namespace, fn.Name, t.Name); err != nil {
		return 0, fmt.Errorf("raise min-scale of %s: %w", fn.Name, err)
	}
	t.Status.PreWarmedFor = &metav1.Time{Time: forRun}
	return recheck, nil
}

// releasePreWarm restores the min-scale t may hold and drops its finalizer,
// for a trigger that no longer pre-warms (disabled, preWarmSeconds removed,
// another type, its function gone).
func (r *Carrier) releasePreWarm(ctx context.Context, t *slessv1alpha1.Trigger) error {
	if r.MinScale != nil && (t.Status.PreWarmedFor != nil || controllerutil.ContainsFinalizer(t, PreWarmFinalizer)) {
		if err := r.MinScale.RestoreMinScale(ctx, t.Namespace, t.Spec.Function, t.Name); err != nil {
			return fmt.Errorf("restore min-scale of %s: %w", t.Spec.Function, err)
		}
	}
	t.Status.PreWarmedFor = nil
	if controllerutil.ContainsFinalizer(t, PreWarmFinalizer) {
		status := t.Status.DeepCopy()
		controllerutil.RemoveFinalizer(t, PreWarmFinalizer)
		if err := r.Client.Update(ctx, t); err != nil {
			return err
		}
		t.Status = *status
	}
	return nil
}

// runFinished says whether the CronJob's run scheduled at run has ended.
func (r *Carrier) runFinished(ctx context.Context, cj *batchv1.CronJob, run time.Time) (bool, error) {
	job := &batchv1.Job{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: cj.Namespace, Name: ScheduledJobName(cj.Name, run)}, job)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true, nil
		}
	}
	return false, nil
}
