// Package job reconciles FunctionJobs: each run (a runID) becomes one batch
// Job running the function's image in the runtime's job mode; the Job's and
// its Pod's status flow back into the FunctionJob, and every finished run is
// recorded in the invocation history with trigger=job.
package job

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sless-dev/sless/pkg/adapter"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/reconciler/job/resources"
	"github.com/sless-dev/sless/pkg/reconciler/job/resources/names"
)

// Condition reasons of a FunctionJob.
const (
	ReasonIdle              = "Idle"
	ReasonFunctionNotFound  = "FunctionNotFound"
	ReasonFunctionNotBuilt  = "FunctionNotBuilt"
	ReasonFunctionNotReady  = "FunctionNotReady"
	ReasonJobCreated        = "JobCreated"
	ReasonJobConflict       = "JobConflict"
	ReasonJobGone           = "JobGone"
	ReasonPayloadTooLarge   = "PayloadTooLarge"
	ReasonPending           = "Pending"
	ReasonRunning           = "Running"
	ReasonSucceeded         = "Succeeded"
	ReasonFailed            = "Failed"
	ReasonDeadlineExceeded  = "DeadlineExceeded"
	ReasonCreateFailed      = "CreateFailed"
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
	revision, reconcileErr := r.reconcile(ctx, fj)
	fj.Status.ObservedGeneration = fj.Generation
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
		if r.Recorder != nil && isFinished(fj.Status.Phase) && !(before.RunID == fj.Status.RunID && isFinished(before.Phase)) {
			r.Recorder.RecordRun(runOf(fj, revision))
		}
	}
	return reconcileErr
}

func isFinished(p slessv1alpha1.JobPhase) bool {
	return p == slessv1alpha1.JobPhaseSucceeded || p == slessv1alpha1.JobPhaseFailed
}

func (r *Reconciler) reconcile(ctx context.Context, fj *slessv1alpha1.FunctionJob) (revision string, err error) {
	st := &fj.Status
	runID := fj.Spec.RunID
	if runID == 0 {
		// 0 runs nothing. The Jobs of earlier runs stay until their TTL, so
		// a run in flight is not cut off by setting 0.
		*st = slessv1alpha1.FunctionJobStatus{ObservedGeneration: st.ObservedGeneration, Phase: slessv1alpha1.JobPhaseIdle, Conditions: st.Conditions}
		meta.RemoveStatusCondition(&st.Conditions, slessv1alpha1.JobConditionComplete)
		r.setReady(fj, metav1.ConditionTrue, ReasonIdle, "runID is 0: nothing runs")
		return "", nil
	}
	if st.RunID != runID {
		// A new run: nothing of the last one describes it.
		*st = slessv1alpha1.FunctionJobStatus{ObservedGeneration: st.ObservedGeneration, Conditions: st.Conditions, RunID: runID, Phase: slessv1alpha1.JobPhasePending}
		meta.RemoveStatusCondition(&st.Conditions, slessv1alpha1.JobConditionComplete)
	}
	jobName := names.Job(fj, runID)
	st.JobName = jobName

	job := &batchv1.Job{}
	err = r.Client.Get(ctx, types.NamespacedName{Namespace: fj.Namespace, Name: jobName}, job)
	switch {
	case apierrors.IsNotFound(err):
		if isFinished(st.Phase) {
			// The run ended and its Job was cleaned up by its TTL; the
			// status keeps what it reported.
			return st.Revision, nil
		}
		if st.StartTime != nil {
			// It ran, and the Job went away before it finished (deleted by
			// hand): the run is lost, and starting it again would run the
			// same runID twice.
			// status.message says it too, as for any failure: it is what
			// the run's record shows as its error. Its end is when it was
			// seen gone, the last moment anything could say of it, so the
			// record has a duration as every other run's does.
			st.Message = "the Job " + jobName + " was deleted before the run finished; set a new runID to run again"
			if st.CompletionTime == nil {
				now := metav1.Now()
				st.CompletionTime = &now
			}
			r.finish(fj, slessv1alpha1.JobPhaseFailed, ReasonJobGone, st.Message)
			return st.Revision, nil
		}
		return "", r.createJob(ctx, fj)
	case err != nil:
		return "", err
	}
	if !metav1.IsControlledBy(job, fj) {
		st.Phase = slessv1alpha1.JobPhasePending
		r.setReady(fj, metav1.ConditionFalse, ReasonJobConflict, "a Job named "+jobName+" exists and is not owned by this FunctionJob")
		return "", nil
	}
	r.setReady(fj, metav1.ConditionTrue, ReasonJobCreated, "Job "+jobName+" runs run "+strconv.FormatInt(runID, 10))
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
		r.setReady(fj, metav1.ConditionFalse, ReasonPayloadTooLarge, msg)
		return nil
	}
	fn := &slessv1alpha1.Function{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: fj.Namespace, Name: fj.Spec.Function}, fn); err != nil {
		if apierrors.IsNotFound(err) {
			r.setReady(fj, metav1.ConditionFalse, ReasonFunctionNotFound, "Function "+fj.Spec.Function+" does not exist")
			return nil
		}
		return err
	}
	if reason, message := WaitReason(fn); reason != "" {
		r.setReady(fj, metav1.ConditionFalse, reason, message)
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
		message := "revision " + fn.Status.LatestReadyRevision + " of Function " + fn.Name + " was not found"
		r.setReady(fj, metav1.ConditionFalse, ReasonFunctionNotReady, message)
		return errors.New(message)
	}
	job := resources.MakeJob(fj, fn, rev, r.Config)
	if err := r.Client.Create(ctx, job); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// A reconcile racing this one made it (the name is the run's);
			// the Job's event brings us back to report on it.
			return nil
		}
		r.setReady(fj, metav1.ConditionFalse, ReasonCreateFailed, "create Job: "+err.Error())
		return err
	}
	st.Revision = job.Annotations[resources.AnnotationRevision]
	r.setReady(fj, metav1.ConditionTrue, ReasonJobCreated, "Job "+job.Name+" runs run "+strconv.FormatInt(fj.Spec.RunID, 10))
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: slessv1alpha1.JobConditionComplete, Status: metav1.ConditionUnknown, Reason: ReasonPending, Message: "the Job's Pod has not started", ObservedGeneration: fj.Generation})
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
		reason, message = ReasonFunctionNotBuilt, "Function "+fn.Name+" has no built image yet"
	default:
		reason, message = ReasonFunctionNotReady, "Function "+fn.Name+" has no ready revision yet"
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
		st.Message = ""
		r.finish(fj, slessv1alpha1.JobPhaseSucceeded, ReasonSucceeded, "the run succeeded")
		return nil
	}
	if c := jobCondition(job, batchv1.JobFailed); c != nil {
		st.CompletionTime = completionTime(job, c)
		st.Output = message
		reason := ReasonFailed
		why := failureMessage(c, term)
		if c.Reason == batchv1.JobReasonDeadlineExceeded || term != nil && resources.WrapperTimedOut(term.ExitCode, term.Message) {
			reason = ReasonDeadlineExceeded
		}
		st.Message = why
		r.finish(fj, slessv1alpha1.JobPhaseFailed, reason, why)
		return nil
	}
	if running || job.Status.Active > 0 && job.Status.Ready != nil && *job.Status.Ready > 0 {
		st.Phase = slessv1alpha1.JobPhaseRunning
		r.setComplete(fj, metav1.ConditionUnknown, ReasonRunning, "the function runs")
		return nil
	}
	st.Phase = slessv1alpha1.JobPhasePending
	r.setComplete(fj, metav1.ConditionUnknown, ReasonPending, "the Job's Pod has not started")
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

func (r *Reconciler) finish(fj *slessv1alpha1.FunctionJob, phase slessv1alpha1.JobPhase, reason, msg string) {
	fj.Status.Phase = phase
	status := metav1.ConditionTrue
	if phase == slessv1alpha1.JobPhaseFailed {
		status = metav1.ConditionFalse
	}
	r.setComplete(fj, status, reason, msg)
}

func (r *Reconciler) setReady(fj *slessv1alpha1.FunctionJob, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&fj.Status.Conditions, metav1.Condition{Type: slessv1alpha1.JobConditionReady, Status: s, Reason: reason, Message: msg, ObservedGeneration: fj.Generation})
}

func (r *Reconciler) setComplete(fj *slessv1alpha1.FunctionJob, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&fj.Status.Conditions, metav1.Condition{Type: slessv1alpha1.JobConditionComplete, Status: s, Reason: reason, Message: msg, ObservedGeneration: fj.Generation})
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
		if c := meta.FindStatusCondition(st.Conditions, slessv1alpha1.JobConditionComplete); c != nil && c.Reason == ReasonDeadlineExceeded {
			run.Status = 504
		}
		run.Error = st.Message
	}
	return run
}
