// Package tekton implements adapter.Builder with Tekton Pipelines: one
// PipelineRun per function and source digest, whose kaniko step pushes the
// image and reports its digest as a result.
package tekton

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"knative.dev/pkg/apis"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/adapter"
	"github.com/sless-dev/sless/pkg/adapter/resources"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// Reasons this builder reports besides Tekton's own.
const (
	ReasonPending        = "BuildPending"
	ReasonRunning        = "Building"
	ReasonBadResult      = "BadBuildResult"
	ReasonOldRunDeleting = "PreviousBuildDeleting"
)

var digestPattern = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)

// Builder is adapter.Builder on a cluster with Tekton Pipelines.
type Builder struct {
	// Client reads (from the manager's cache) and creates PipelineRuns.
	Client client.Client
	// APIReader reads past the cache; it settles an AlreadyExists, when the
	// cache has not seen the run another reconcile just created.
	APIReader client.Reader
	Config    resources.Config
}

var _ adapter.Builder = (*Builder)(nil)

// EnsureBuild creates the PipelineRun of fn and in.Digest unless it exists,
// and reports on it. The name derives from both, so concurrent or repeated
// calls converge on one run: the apiserver refuses the second create. A run
// of the digest that sless cancelled as superseded is passed over for the
// next attempt's name: it will never yield the image. So is a failed run
// made for another spec.rebuild than the Function's now, or stopped at a
// buildTimeoutSeconds since raised: the user asked to build again.
func (b *Builder) EnsureBuild(ctx context.Context, fn slessv1alpha1.Workload, in adapter.BuildInput) (adapter.BuildState, error) {
	for attempt := 0; ; attempt++ {
		want := resources.MakePipelineRun(fn, in, attempt, b.Config)
		pr, created, err := b.getOrCreate(ctx, want)
		if err != nil {
			return adapter.BuildState{}, err
		}
		if superseded(pr) && !pr.IsSuccessful() || retried(pr, fn) {
			continue
		}
		if !pr.DeletionTimestamp.IsZero() {
			// A run of the same name from a Function deleted and created again;
			// a new one can start once garbage collection has removed it.
			return adapter.BuildState{Name: pr.Name, Reason: ReasonOldRunDeleting,
				Message: fmt.Sprintf("waiting for PipelineRun %s, which is being deleted", pr.Name)}, nil
		}
		st := b.state(ctx, pr)
		st.Created = created
		return st, nil
	}
}

func (b *Builder) getOrCreate(ctx context.Context, want *tektonv1.PipelineRun) (pr *tektonv1.PipelineRun, created bool, err error) {
	key := client.ObjectKeyFromObject(want)
	pr = &tektonv1.PipelineRun{}
	err = b.Client.Get(ctx, key, pr)
	if apierrors.IsNotFound(err) {
		err = b.Client.Create(ctx, want)
		switch {
		case err == nil:
			return want, true, nil
		case apierrors.IsAlreadyExists(err):
			err = b.APIReader.Get(ctx, key, pr)
		}
	}
	if err != nil {
		return nil, false, fmt.Errorf("PipelineRun %s: %w", key, err)
	}
	return pr, false, nil
}

// CancelBuilds cancels fn's PipelineRuns that have not finished and build
// another digest than keep ("" keeps none), and names those it cancelled.
// Runs someone else already cancels or stops are left to that.
func (b *Builder) CancelBuilds(ctx context.Context, fn slessv1alpha1.Workload, keep string) ([]string, error) {
	var runs tektonv1.PipelineRunList
	if err := b.Client.List(ctx, &runs, client.InNamespace(fn.GetNamespace()), client.MatchingLabels{resources.OwnerLabel(fn): fn.GetName()}); err != nil {
		return nil, fmt.Errorf("list PipelineRuns of %s/%s: %w", fn.GetNamespace(), fn.GetName(), err)
	}
	var cancelled []string
	var errs []error
	for i := range runs.Items {
		pr := &runs.Items[i]
		if !metav1.IsControlledBy(pr, fn) || pr.IsDone() || !pr.DeletionTimestamp.IsZero() || pr.Spec.Status != "" ||
			(keep != "" && pr.Annotations[resources.AnnotationSourceDigest] == keep) {
			continue
		}
		ok, err := b.cancel(ctx, pr, fn.GetGeneration())
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			cancelled = append(cancelled, pr.Name)
		}
	}
	return cancelled, errors.Join(errs...)
}

// cancel sets spec.status Cancelled on pr, as read, and marks it superseded
// by generation. It is patched, not deleted, so its logs stay for kubectl
// and tkn. The patch carries the resourceVersion read: a run that finished
// since, or that the cache showed late, is never touched — the apiserver
// refuses the patch, and the change it refuses for brings another
// reconcile, which reads the run again.
func (b *Builder) cancel(ctx context.Context, pr *tektonv1.PipelineRun, generation int64) (bool, error) {
	pr = pr.DeepCopy()
	patch := client.MergeFromWithOptions(pr.DeepCopy(), client.MergeFromWithOptimisticLock{})
	pr.Spec.Status = tektonv1.PipelineRunSpecStatusCancelled
	metav1.SetMetaDataAnnotation(&pr.ObjectMeta, resources.AnnotationSupersededBy, strconv.FormatInt(generation, 10))
	err := b.Client.Patch(ctx, pr, patch)
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("cancel PipelineRun %s/%s: %w", pr.Namespace, pr.Name, err)
}

// retried tells a run that ended without an image and that fn asks to run
// again: by a spec.rebuild other than the one the run was made for, or by
// a buildTimeoutSeconds above the one the run timed out at.
func retried(pr *tektonv1.PipelineRun, fn slessv1alpha1.Workload) bool {
	if !pr.IsDone() || pr.IsSuccessful() {
		return false
	}
	if pr.Annotations[resources.AnnotationRebuild] != fn.BuildSpec().Rebuild {
		return true
	}
	c := pr.Status.GetCondition(apis.ConditionSucceeded)
	if c == nil || c.Reason != string(tektonv1.PipelineRunReasonTimedOut) || pr.Spec.Timeouts == nil || pr.Spec.Timeouts.Pipeline == nil {
		return false
	}
	return time.Duration(fn.BuildTimeout())*time.Second > pr.Spec.Timeouts.Pipeline.Duration
}

// superseded tells a run sless cancelled because its Function moved on.
func superseded(pr *tektonv1.PipelineRun) bool {
	return pr.Annotations[resources.AnnotationSupersededBy] != ""
}

func (b *Builder) state(ctx context.Context, pr *tektonv1.PipelineRun) adapter.BuildState {
	st := adapter.BuildState{Name: pr.Name, Started: true}
	if t := pr.Status.StartTime; t != nil {
		st.StartTime = &t.Time
	}
	if t := pr.Status.CompletionTime; t != nil {
		st.CompletionTime = &t.Time
	}
	c := pr.Status.GetCondition(apis.ConditionSucceeded)
	if c == nil {
		st.Reason, st.Message = ReasonPending, fmt.Sprintf("PipelineRun %s is waiting for Tekton", pr.Name)
		return st
	}
	if !pr.IsDone() {
		st.Reason = ReasonRunning
		switch tektonv1.PipelineRunReason(c.Reason) {
		case tektonv1.PipelineRunReasonStarted, tektonv1.PipelineRunReasonRunning:
			// Tekton's task counts while it runs change nothing a user acts
			// on; one steady message spares a status write per change.
			st.Message = fmt.Sprintf("PipelineRun %s is running", pr.Name)
		default:
			st.Message = fmt.Sprintf("PipelineRun %s: %s: %s", pr.Name, c.Reason, c.Message)
		}
		return st
	}
	st.Done = true
	if !pr.IsSuccessful() && pr.Spec.Status != "" {
		// Cancelled by someone, not as superseded (those are passed over):
		// they meant this build to stop, so it is not started again.
		st.Reason = c.Reason
		st.Message = fmt.Sprintf("PipelineRun %s was stopped by hand (spec.status %s); delete it, or change the Function's spec.rebuild, to build this source again", pr.Name, pr.Spec.Status)
		return st
	}
	if !pr.IsSuccessful() {
		st.Reason, st.Message = c.Reason, b.failureMessage(ctx, pr, c)
		return st
	}
	var digest, url string
	for _, r := range pr.Status.Results {
		switch r.Name {
		case resources.ResultImageDigest:
			digest = strings.TrimSpace(r.Value.StringVal)
		case resources.ResultImageURL:
			url = strings.TrimSpace(r.Value.StringVal)
		}
	}
	if !digestPattern.MatchString(digest) || url == "" || strings.Contains(url, "@") {
		st.Reason = ReasonBadResult
		st.Message = fmt.Sprintf("PipelineRun %s succeeded without usable results: %s=%q, %s=%q",
			pr.Name, resources.ResultImageDigest, digest, resources.ResultImageURL, url)
		return st
	}
	st.Succeeded = true
	st.Image = url + "@" + digest
	st.Reason = string(tektonv1.PipelineRunReasonSuccessful)
	return st
}

// failureMessage is what the failing step said: Tekton's PipelineRun
// message only counts tasks, the TaskRun's condition and its terminated
// step carry the cause.
func (b *Builder) failureMessage(ctx context.Context, pr *tektonv1.PipelineRun, c *apis.Condition) string {
	for _, ref := range pr.Status.ChildReferences {
		if ref.Kind != "TaskRun" {
			continue
		}
		tr := &tektonv1.TaskRun{}
		if err := b.Client.Get(ctx, types.NamespacedName{Namespace: pr.Namespace, Name: ref.Name}, tr); err != nil {
			continue
		}
		tc := tr.Status.GetCondition(apis.ConditionSucceeded)
		if tc == nil || tc.Status != corev1.ConditionFalse {
			continue
		}
		msg := tc.Message
		for _, s := range tr.Status.Steps {
			if t := s.Terminated; t != nil && t.ExitCode != 0 {
				if m := strings.TrimSpace(t.Message); m != "" && !strings.Contains(msg, m) {
					msg = strings.TrimSpace(msg + ": " + m)
				}
				msg = fmt.Sprintf("step %q of PipelineRun %s failed: %s", s.Name, pr.Name, msg)
				if tr.Status.PodName != "" && s.Container != "" {
					// Tekton keeps a step's output out of its status: the
					// cause (a package that does not resolve, a syntax
					// error) is in the step's log.
					msg += fmt.Sprintf("; its log: kubectl logs -n %s %s -c %s", pr.Namespace, tr.Status.PodName, s.Container)
				}
				return msg
			}
		}
		return fmt.Sprintf("task %q of PipelineRun %s failed: %s", ref.PipelineTaskName, pr.Name, msg)
	}
	return fmt.Sprintf("PipelineRun %s: %s", pr.Name, c.Message)
}
