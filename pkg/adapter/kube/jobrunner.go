package kube

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/adapter"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/names"
)

// terminationMessageLimit is what a kubelet keeps of a container's
// termination message.
const terminationMessageLimit = 4096

// JobRunner is adapter.JobRunner on a cluster: each FunctionJob run is a batch Job, whose and whose
// Pod's state it reads back.
type JobRunner struct {
	Client ctrl.Client
	// Revisions reads the serving revision's settings, which a run takes
	// (Knative's Revisions).
	Revisions adapter.RevisionReader
	Config    JobConfig
}

var _ adapter.JobRunner = (*JobRunner)(nil)

// ObserveRun implements adapter.JobRunner.
func (k *JobRunner) ObserveRun(ctx context.Context, fj *slessv1alpha1.FunctionJob) (adapter.RunState, bool, error) {
	name := names.Job(fj, fj.Spec.RunID)
	job := &batchv1.Job{}
	if err := k.Client.Get(ctx, types.NamespacedName{Namespace: fj.Namespace, Name: name}, job); err != nil {
		if apierrors.IsNotFound(err) {
			return adapter.RunState{}, false, nil
		}
		return adapter.RunState{}, false, err
	}
	if !metav1.IsControlledBy(job, fj) {
		return adapter.RunState{Conflict: true}, true, nil
	}
	run := adapter.RunState{Where: "Job " + name, Revision: job.Annotations[AnnotationRevision]}
	if job.Status.StartTime != nil {
		run.Started = job.Status.StartTime.Time
	}
	term, running, err := k.podState(ctx, fj, job)
	if err != nil {
		return adapter.RunState{}, false, err
	}
	if term != nil {
		run.ExitCode = &term.ExitCode
		if run.Started.IsZero() {
			run.Started = term.StartedAt.Time
		}
		run.Termination = term.Message
		if len(run.Termination) > terminationMessageLimit {
			run.Termination = run.Termination[:terminationMessageLimit]
		}
	}
	if c := jobCondition(job, batchv1.JobComplete); c != nil {
		run.Done, run.Succeeded, run.Completed = true, true, completionTime(job, c)
		return run, true, nil
	}
	if c := jobCondition(job, batchv1.JobFailed); c != nil {
		run.Done, run.Completed = true, completionTime(job, c)
		run.DeadlineExceeded = c.Reason == batchv1.JobReasonDeadlineExceeded
		switch {
		case term != nil:
			run.Detail = fmt.Sprintf("the function's container exited with code %d (%s)", term.ExitCode, term.Reason)
		case !run.DeadlineExceeded:
			run.Detail = strings.TrimSpace(c.Reason + ": " + c.Message)
		}
		return run, true, nil
	}
	run.Running = running || job.Status.Active > 0 && job.Status.Ready != nil && *job.Status.Ready > 0
	return run, true, nil
}

// StartRun implements adapter.JobRunner: it makes the run's Job.
func (k *JobRunner) StartRun(ctx context.Context, req adapter.RunRequest) (adapter.RunState, error) {
	fn := req.Function
	// The run takes the serving revision's env, resources and timeout along
	// with its image: fn's spec may already be a newer revision's, still
	// deploying or failed, and its code would run with settings made for
	// other code.
	rev, found, err := k.Revisions.ReadRevision(ctx, fn, fn.Status.LatestReadyRevision)
	if err != nil {
		return adapter.RunState{}, err
	}
	if !found {
		return adapter.RunState{}, adapter.ErrRevisionNotServing
	}
	job := MakeJob(req.Job, fn, rev, k.Config)
	if err := k.Client.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
		// AlreadyExists: a reconcile racing this one made it (the name is
		// the run's); the Job's events bring us back to report on it.
		return adapter.RunState{}, fmt.Errorf("create Job %s: %w", job.Name, err)
	}
	return adapter.RunState{Where: "Job " + job.Name, Revision: job.Annotations[AnnotationRevision]}, nil
}

// LostCause implements adapter.JobRunner.
func (k *JobRunner) LostCause(fj *slessv1alpha1.FunctionJob) string {
	return "its Job " + names.Job(fj, fj.Spec.RunID) + " was deleted before the run finished"
}

// podState finds the run's Pod (by the run's labels and the Job's UID, so a
// Pod of an earlier Job of the same name never counts) and returns its
// function container's termination state, or whether it runs.
func (k *JobRunner) podState(ctx context.Context, fj *slessv1alpha1.FunctionJob, job *batchv1.Job) (*corev1.ContainerStateTerminated, bool, error) {
	pods := &corev1.PodList{}
	if err := k.Client.List(ctx, pods, ctrl.InNamespace(fj.Namespace), ctrl.MatchingLabels{
		LabelFunctionJob: fj.Name,
		LabelRunID:       strconv.FormatInt(fj.Spec.RunID, 10),
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
			if cs.Name != ContainerName {
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

func completionTime(job *batchv1.Job, c *batchv1.JobCondition) time.Time {
	if job.Status.CompletionTime != nil {
		return job.Status.CompletionTime.Time
	}
	// Failed Jobs have no completionTime; the condition says when.
	return c.LastTransitionTime.Time
}
