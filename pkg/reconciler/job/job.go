// Package job reconciles FunctionJobs: each run (a runID) is carried out
// once by a JobRunner (a batch Job running the function's image in the
// runtime's job mode on a cluster, a process in local mode); what the
// runner reports flows back into the FunctionJob, and every finished run is
// recorded in the invocation history with trigger=job.
package job

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sless-dev/sless/pkg/adapter"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/names"
	"github.com/sless-dev/sless/pkg/reconciler/job/resources"
)

// TriggerJob is the trigger of a run's invocation record.
const TriggerJob = "job"

// Run is one finished FunctionJob run as the invocation history records it.
type Run struct {
	Namespace string
	Function  string
	Revision  string
	// Trigger is always "job".
	Trigger   string
	RequestID string
	Started   time.Time
	Duration  time.Duration
	// Status is 200 for a run that succeeded, 500 for one that failed, 504
	// for one that outlived its timeout (the Job's deadline or the wrapper's
	// Timeout exit): the codes the same failure has when the function is
	// called over HTTP.
	Status int
	Error  string
	// BytesIn and BytesOut are the payload's and the answer's sizes where
	// the runner knows them (local mode).
	BytesIn, BytesOut int64
}

// Recorder takes finished runs into the invocation history. The invoke
// package's recorder satisfies it through a one-line adapter; it must not
// block (records are queued and written in batches).
type Recorder interface {
	RecordRun(Run)
}

// Reconciler runs each FunctionJob run once through its Runner and reports
// on it: the one state machine of FunctionJobs, on a cluster (Runner: batch
// Jobs) and in local mode (Runner: processes).
type Reconciler struct {
	Client   ctrl.Client
	Runner   adapter.JobRunner
	Recorder Recorder
	// Recheck is how soon a run waiting for its function looks again where
	// nothing watches Functions (local mode); 0 on a cluster, whose
	// controller watches them.
	Recheck time.Duration
	// Clock; time.Now when nil.
	Clock func() time.Time
}

// runLater is how soon a run that cannot start yet (adapter.ErrRunLater)
// is looked at again.
const runLater = time.Second

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	after, err := r.reconcileKey(ctx, req.NamespacedName)
	return reconcile.Result{RequeueAfter: after}, err
}

// ReconcileKey brings the FunctionJob key and its run together once.
func (r *Reconciler) ReconcileKey(ctx context.Context, key types.NamespacedName) error {
	_, err := r.reconcileKey(ctx, key)
	return err
}

func (r *Reconciler) reconcileKey(ctx context.Context, key types.NamespacedName) (time.Duration, error) {
	fj := &slessv1alpha1.FunctionJob{}
	if err := r.Client.Get(ctx, key, fj); err != nil {
		if apierrors.IsNotFound(err) {
			return 0, nil
		}
		return 0, err
	}
	if fj.DeletionTimestamp != nil {
		// A cluster's Jobs are owned; garbage collection removes them.
		return 0, nil
	}
	before := fj.Status.DeepCopy()
	fj.Status.ObservedGeneration = fj.Generation
	run, after, reconcileErr := r.reconcile(ctx, fj)
	if !equality.Semantic.DeepEqual(before, &fj.Status) {
		if err := r.Client.Status().Update(ctx, fj); err != nil {
			if reconcileErr != nil || apierrors.IsConflict(err) {
				// A conflict: the newer version's event brings this back.
				return 0, reconcileErr
			}
			return 0, err
		}
		// Recorded only once the status that says "finished" is stored: a
		// conflict above means another reconcile will see the same
		// transition and record it then, not twice.
		if r.Recorder != nil && fj.Status.IsFinished() && !(before.RunID == fj.Status.RunID && before.IsFinished()) {
			r.Recorder.RecordRun(runOf(fj, run))
		}
	}
	return after, reconcileErr
}

func (r *Reconciler) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock()
}

// reconcile moves fj's status on from what its runner reports, and returns
// that report (nil when the runner has no run) and when to look again.
func (r *Reconciler) reconcile(ctx context.Context, fj *slessv1alpha1.FunctionJob) (*adapter.RunState, time.Duration, error) {
	st := &fj.Status
	runID := fj.Spec.RunID
	if runID == 0 {
		// 0 runs nothing, and does not cut a run in flight off: that run
		// is still recorded, its outcome no longer shown.
		st.MarkIdle()
		return nil, 0, nil
	}
	st.BeginRun(runID)
	st.JobName = names.Job(fj, runID)
	run, found, err := r.Runner.ObserveRun(ctx, fj)
	if err != nil {
		return nil, 0, err
	}
	if found {
		if run.Conflict {
			st.MarkJobConflict(st.JobName)
			return nil, 0, nil
		}
		r.observe(st, &run)
		return &run, 0, nil
	}
	if st.IsFinished() {
		// The run ended and what carried it out is gone (a Job's TTL, a
		// restart of sless dev); the status keeps what it reported.
		return nil, 0, nil
	}
	if st.StartTime != nil {
		// It ran, and went away before it finished: the run is lost, not
		// started again, which would run the same runID twice. Its end is
		// when it was seen gone, the last moment anything could say of it,
		// so the record has a duration as every other run's does.
		if st.CompletionTime == nil {
			now := metav1.NewTime(r.now().UTC())
			st.CompletionTime = &now
		}
		st.MarkRunLost(r.Runner.LostCause(fj))
		return nil, 0, nil
	}
	return r.start(ctx, fj)
}

// start starts fj's run once it can: its payload fits and its function
// serves.
func (r *Reconciler) start(ctx context.Context, fj *slessv1alpha1.FunctionJob) (*adapter.RunState, time.Duration, error) {
	st := &fj.Status
	st.Phase = slessv1alpha1.JobPhasePending
	// Refused before anything starts: a cluster's Pod could never hold it.
	// A smaller payload (a change of the spec) starts the same runID.
	if msg := slessv1alpha1.PayloadTooLarge(fj.Spec.Payload); msg != "" {
		st.MarkPayloadTooLarge(msg)
		return nil, 0, nil
	}
	fn := &slessv1alpha1.Function{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: fj.Namespace, Name: fj.Spec.Function}, fn); err != nil {
		if apierrors.IsNotFound(err) {
			st.MarkFunctionNotFound(fj.Spec.Function)
			return nil, r.Recheck, nil
		}
		return nil, 0, err
	}
	if reason, message := WaitReason(fn); reason != "" {
		st.MarkFunctionNotRunnable(reason, message)
		return nil, r.Recheck, nil
	}
	run, err := r.Runner.StartRun(ctx, adapter.RunRequest{Job: fj, Function: fn, Name: st.JobName, RequestID: fj.RunRequestID(fj.Spec.RunID)})
	switch {
	case errors.Is(err, adapter.ErrRunLater):
		return nil, runLater, nil
	case errors.Is(err, adapter.ErrRevisionNotServing):
		// The serving revision is kept; not finding it is a moment's
		// disagreement with the Function's status, looked at again.
		st.MarkRevisionNotServing(fn.Name, fn.Status.LatestReadyRevision)
		return nil, r.Recheck, fmt.Errorf("revision %s of Function %s: %w", fn.Status.LatestReadyRevision, fn.Name, err)
	case err != nil:
		st.MarkCreateFailed(err.Error())
		return nil, 0, err
	}
	r.observe(st, &run)
	return &run, 0, nil
}

// observe copies what the runner reports of the run into the status.
func (r *Reconciler) observe(st *slessv1alpha1.FunctionJobStatus, run *adapter.RunState) {
	st.MarkRunCreated(run.Where)
	if run.Revision != "" {
		st.Revision = run.Revision
	}
	if !run.Started.IsZero() {
		t := metav1.NewTime(run.Started)
		st.StartTime = &t
	}
	if run.ExitCode != nil {
		st.ExitCode = ptr.To(*run.ExitCode)
	}
	switch {
	case run.Done:
		t := metav1.NewTime(run.Completed)
		st.CompletionTime = &t
		st.Output = run.Termination
		switch {
		case run.Succeeded:
			st.MarkRunSucceeded()
		case run.DeadlineExceeded || run.ExitCode != nil && resources.WrapperTimedOut(*run.ExitCode, run.Termination):
			st.MarkRunTimedOut(failureMessage(run))
		default:
			st.MarkRunFailed(failureMessage(run))
		}
	case run.Running:
		st.MarkRunRunning()
	default:
		st.MarkRunPending()
	}
}

// failureMessage says why a run failed: the function's own error when its
// wrapper wrote one, else the runner's words.
func failureMessage(run *adapter.RunState) string {
	msg := ""
	if run.ExitCode != nil {
		msg = resources.FailureMessage(*run.ExitCode, run.Termination)
	}
	if msg == "" {
		msg = run.Detail
	}
	if run.DeadlineExceeded {
		msg = strings.TrimSpace("the run exceeded its deadline (timeoutSeconds plus start-up allowance). " + msg)
	}
	return resources.Truncate(msg)
}

// WaitReason says why a run of fn cannot start yet, as the reason and
// message of the FunctionJob's Ready condition; "" when it can. A run must
// execute exactly the code the function serves: the image of the revision
// calls reach (status.servingImage, digest-pinned), which is not the
// latest image while a newer revision deploys or after it failed.
// Local mode's runs wait on the same terms.
func WaitReason(fn *slessv1alpha1.Function) (reason, message string) {
	switch {
	case fn.Status.LatestReadyRevision != "" && adapter.Pinned(fn.Status.ServingImage):
		// It has what a run executes: a ready revision and that
		// revision's image, pinned by digest.
		return "", ""
	case !adapter.Pinned(fn.Status.Image):
		reason, message = slessv1alpha1.JobReasonFunctionNotBuilt, "Function "+fn.Name+" has no built image yet"
	default:
		reason, message = slessv1alpha1.JobReasonFunctionNotReady, "Function "+fn.Name+" has no ready revision yet"
	}
	// A Failed Function gets no image or revision until its spec changes:
	// the run says why it waits, rather than sounding as if it soon starts.
	if why, detail, failed := fn.Failure(); failed {
		message += ": it failed (" + why + ")"
		if detail != "" {
			message += ": " + detail
		}
		message = resources.Truncate(message)
	}
	return reason, message
}

// runOf is the invocation record of fj's finished run; run, when the
// runner still has it, gives its times to the instant and its sizes.
func runOf(fj *slessv1alpha1.FunctionJob, run *adapter.RunState) Run {
	st := &fj.Status
	rec := Run{
		Namespace: fj.Namespace,
		Function:  fj.Spec.Function,
		Revision:  st.Revision,
		Trigger:   TriggerJob,
		RequestID: fj.RunRequestID(st.RunID),
		Status:    200,
	}
	if st.StartTime != nil {
		rec.Started = st.StartTime.Time
		if st.CompletionTime != nil {
			rec.Duration = st.CompletionTime.Sub(st.StartTime.Time)
		}
	} else if st.CompletionTime != nil {
		rec.Started = st.CompletionTime.Time
	}
	if run != nil {
		if !run.Started.IsZero() && !run.Completed.IsZero() {
			rec.Started, rec.Duration = run.Started, run.Completed.Sub(run.Started)
		}
		rec.BytesIn, rec.BytesOut = run.BytesIn, run.BytesOut
	}
	if st.Phase == slessv1alpha1.JobPhaseFailed {
		rec.Status = 500
		if st.TimedOut() {
			rec.Status = 504
		}
		rec.Error = st.Message
	}
	return rec
}
