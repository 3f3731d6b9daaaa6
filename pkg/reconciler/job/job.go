// Package job reconciles FunctionJobs: each run (a runID) becomes one batch
// Job running the function's image in the runtime's job mode; the Job's and
// its Pod's status flow back into the FunctionJob, and every finished run is
// recorded in the invocation history with trigger=job.
package job

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sless-dev/sless/pkg/adapter"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/names"
	"github.com/sless-dev/sless/pkg/reconciler/job/resources"
)

const (
	TriggerJob              = "job"
	terminationMessageLimit = 4096
)

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
}

// Recorder takes finished runs into the invocation history. The invoke
// package's recorder satisfies it through a one-line adapter; it must not
// block (records are queued and written in batches).
type Recorder interface {
	RecordRun(Run)
}

// Reconciler makes the batch Job of a FunctionJob's current run and reports on it.
type Reconciler struct {
	Client ctrl.Client
	// Revisions reads the serving revision's settings, which a run takes
	// (Knative's Revisions on a cluster).
	Revisions adapter.RevisionReader
	Config    resources.Config
	Recorder  Recorder
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	return reconcile.Result{}, r.ReconcileKey(ctx, req.NamespacedName)
}

// ReconcileKey brings the FunctionJob key and its run's Job together once.
func (r *Reconciler) ReconcileKey(ctx context.Context, key types.NamespacedName) error {
	fj := &slessv1alpha1.FunctionJob{}
	if err := r.Client.Get(ctx, key, fj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	if fj.DeletionTimestamp != nil {
		// The Jobs are owned; garbage collection removes them.
		return nil
	}
	before := fj.Status.DeepCopy()
	fj.Status.ObservedGeneration = fj.Generation
	revision, reconcileErr := r.reconcile(ctx, fj)
	if !equality.Semantic.DeepEqual(before, &fj.Status) {
		if err := r.Client.Status().Update(ctx, fj); err != nil {
			if reconcileErr != nil {
				return reconcileErr
			}
			return err
		}
		// Recorded only once the status that says "finished" is stored: a
		// conflict above means another reconcile will see the same
		// transition and record it then, not twice.
		if r.Recorder != nil && fj.Status.IsFinished() && !(before.RunID == fj.Status.RunID && before.IsFinished()) {
			r.Recorder.RecordRun(runOf(fj, revision))
		}
	}
	return reconcileErr
}

func (r *Reconciler) reconcile(ctx context.Context, fj *slessv1alpha1.FunctionJob) (revision string, err error) {
	st := &fj.Status
	runID := fj.Spec.RunID
	if runID == 0 {
		// 0 runs nothing. The Jobs of earlier runs stay until their TTL, so
		// a run in flight is not cut off by setting 0.
		st.MarkIdle()
		return "", nil
	}
	st.BeginRun(runID)
	jobName := names.Job(fj, runID)
	st.JobName = jobName

	job := &batchv1.Job{}
	err = r.Client.Get(ctx, types.NamespacedName{Namespace: fj.Namespace, Name: jobName}, job)
	switch {
	case apierrors.IsNotFound(err):
		if st.IsFinished() {
			// The run ended and its Job was cleaned up by its TTL; the
			// status keeps what it reported.
			return st.Revision, nil
		}
		if st.StartTime != nil {
			// It ran, and the Job went away before it finished (deleted by
			// hand): the run is lost. Its end is when it was seen gone, the
			// last moment anything could say of it, so the record has a
			// duration as every other run's does.
			if st.CompletionTime == nil {
				now := metav1.Now()
				st.CompletionTime = &now
			}
			st.MarkRunLost("its Job " + jobName + " was deleted before the run finished")
			return st.Revision, nil
		}
		return "", r.createJob(ctx, fj)
	case err != nil:
		return "", err
	}
	if !metav1.IsControlledBy(job, fj) {
		st.MarkJobConflict(jobName)
		return "", nil
	}
	st.MarkRunCreated("Job " + jobName)
	if rev := job.Annotations[resources.AnnotationRevision]; rev != "" {
		st.Revision = rev
	}
	return st.Revision, r.observe(ctx, fj, job)
}

func (r *Reconciler) createJob(ctx context.Context, fj *slessv1alpha1.FunctionJob) error {
	st := &fj.Status
	st.Phase = slessv1alpha1.JobPhasePending
	// Refused before a Job is made: its Pod could never start. A smaller
	// payload (a change of the spec) starts the same runID.
	if msg := slessv1alpha1.PayloadTooLarge(fj.Spec.Payload); msg != "" {
		st.MarkPayloadTooLarge(msg)
		return nil
	}
	fn := &slessv1alpha1.Function{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: fj.Namespace, Name: fj.Spec.Function}, fn); err != nil {
		if apierrors.IsNotFound(err) {
			st.MarkFunctionNotFound(fj.Spec.Function)
			return nil
		}
		return err
	}
	if reason, message := WaitReason(fn); reason != "" {
		st.MarkFunctionNotRunnable(reason, message)
		return nil
	}
	// The run takes the serving revision's env, resources and timeout along
	// with its image: fn's spec may already be a newer revision's, still
	// deploying or failed, and its code would run with settings made for
	// other code.
	rev, found, err := r.Revisions.ReadRevision(ctx, fn, fn.Status.LatestReadyRevision)
	if err != nil {
		return err
	}
	if !found {
		// Knative keeps the revision that serves; not finding it is a
		// moment's disagreement with the Function's status, looked at again
		// with backoff.
		st.MarkRevisionNotServing(fn.Name, fn.Status.LatestReadyRevision)
		return fmt.Errorf("revision %s of Function %s was not found", fn.Status.LatestReadyRevision, fn.Name)
	}
	job := resources.MakeJob(fj, fn, rev, r.Config)
	if err := r.Client.Create(ctx, job); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// A reconcile racing this one made it (the name is the run's);
			// the Job's event brings us back to report on it.
			return nil
		}
		st.MarkCreateFailed(fmt.Sprintf("create Job %s: %v", job.Name, err))
		return err
	}
	st.Revision = job.Annotations[resources.AnnotationRevision]
	st.MarkRunCreated("Job " + job.Name)
	st.MarkRunPending()
	return nil
}

// WaitReason says why a run of fn cannot start yet, as the reason and
// message of the FunctionJob's Ready condition; "" when it can. A run must
// execute exactly the code the function serves: the image of the revision
// calls reach (status.servingImage, digest-pinned), which is not the
// latest image while a newer revision deploys or after it failed.
// Local mode's runs wait on the same terms.
func WaitReason(fn *slessv1alpha1.Function) (reason, message string) {
	switch {
	case resources.Runnable(fn):
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

// observe copies the Job's and its Pod's state into the status.
func (r *Reconciler) observe(ctx context.Context, fj *slessv1alpha1.FunctionJob, job *batchv1.Job) error {
	st := &fj.Status
	if job.Status.StartTime != nil {
		st.StartTime = job.Status.StartTime.DeepCopy()
	}
	term, running, err := r.podState(ctx, fj, job)
	if err != nil {
		return err
	}
	if term != nil {
		st.ExitCode = &term.ExitCode
		if term.StartedAt.Time.After(time.Time{}) && st.StartTime == nil {
			st.StartTime = term.StartedAt.DeepCopy()
		}
	}
	message := ""
	if term != nil {
		message = term.Message
		if len(message) > terminationMessageLimit {
			message = message[:terminationMessageLimit]
		}
	}

	if c := jobCondition(job, batchv1.JobComplete); c != nil {
		st.CompletionTime = completionTime(job, c)
		st.Output = message
		st.MarkRunSucceeded()
		return nil
	}
	if c := jobCondition(job, batchv1.JobFailed); c != nil {
		st.CompletionTime = completionTime(job, c)
		st.Output = message
		why := failureMessage(c, term)
		if c.Reason == batchv1.JobReasonDeadlineExceeded || term != nil && resources.WrapperTimedOut(term.ExitCode, term.Message) {
			st.MarkRunTimedOut(why)
		} else {
			st.MarkRunFailed(why)
		}
		return nil
	}
	if running || job.Status.Active > 0 && job.Status.Ready != nil && *job.Status.Ready > 0 {
		st.MarkRunRunning()
		return nil
	}
	st.MarkRunPending()
	return nil
}

// podState finds the run's Pod (by the run's labels and the Job's UID, so a
// Pod of an earlier Job of the same name never counts) and returns its
// function container's termination state, or whether it runs.
func (r *Reconciler) podState(ctx context.Context, fj *slessv1alpha1.FunctionJob, job *batchv1.Job) (*corev1.ContainerStateTerminated, bool, error) {
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, ctrl.InNamespace(fj.Namespace), ctrl.MatchingLabels{
		resources.LabelFunctionJob: fj.Name,
		resources.LabelRunID:       strconv.FormatInt(fj.Spec.RunID, 10),
	}); err != nil {
		return nil, false, err
	}
	var term *corev1.ContainerStateTerminated
	running := false
	for i := range pods.Items {
		p := &pods.Items[i]
		if !metav1.IsControlledBy(p, job) {
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name != resources.ContainerName {
				continue
			}
			if t := cs.State.Terminated; t != nil {
				// With backoffLimit 0 there is one Pod; should a node loss
				// have made two, the one that ended last speaks.
				if term == nil || t.FinishedAt.After(term.FinishedAt.Time) {
					term = t.DeepCopy()
				}
			}
			if cs.State.Running != nil {
				running = true
			}
		}
	}
	return term, running, nil
}

func jobCondition(job *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range job.Status.Conditions {
		if c := &job.Status.Conditions[i]; c.Type == t && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

func completionTime(job *batchv1.Job, c *batchv1.JobCondition) *metav1.Time {
	if job.Status.CompletionTime != nil {
		return job.Status.CompletionTime.DeepCopy()
	}
	// Failed Jobs have no completionTime; the condition says when.
	return c.LastTransitionTime.DeepCopy()
}

// failureMessage says why a run failed: the function's own error when its
// runtime wrote one, else the Job's reason.
func failureMessage(c *batchv1.JobCondition, term *corev1.ContainerStateTerminated) string {
	msg := ""
	if term != nil {
		msg = resources.FailureMessage(term.ExitCode, term.Message)
		if msg == "" {
			msg = fmt.Sprintf("the function's container exited with code %d (%s)", term.ExitCode, term.Reason)
		}
	}
	if c.Reason == batchv1.JobReasonDeadlineExceeded {
		msg = strings.TrimSpace("the run exceeded its deadline (timeoutSeconds plus start-up allowance). " + msg)
	}
	if msg == "" {
		msg = strings.TrimSpace(c.Reason + ": " + c.Message)
	}
	return resources.Truncate(msg)
}

// runOf is the invocation record of fj's finished run.
func runOf(fj *slessv1alpha1.FunctionJob, revision string) Run {
	st := &fj.Status
	run := Run{
		Namespace: fj.Namespace,
		Function:  fj.Spec.Function,
		Revision:  revision,
		Trigger:   TriggerJob,
		RequestID: resources.RequestID(fj, st.RunID),
		Status:    200,
	}
	if st.StartTime != nil {
		run.Started = st.StartTime.Time
		if st.CompletionTime != nil {
			run.Duration = st.CompletionTime.Sub(st.StartTime.Time)
		}
	} else if st.CompletionTime != nil {
		run.Started = st.CompletionTime.Time
	}
	if st.Phase == slessv1alpha1.JobPhaseFailed {
		run.Status = 500
		if st.TimedOut() {
			run.Status = 504
		}
		run.Error = st.Message
	}
	return run
}
