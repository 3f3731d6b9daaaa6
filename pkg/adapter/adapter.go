// Package adapter holds the interfaces between sless's decisions and the
// systems that carry them out. On a cluster Tekton builds and Knative serves;
// in local mode (`sless dev`) a local builder and a process server do. The
// Function reconcile logic is written once against these interfaces.
package adapter

import (
	"context"
	"errors"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// BuildInput is what one build needs: the function and its build context,
// already stored where the builder can fetch it.
type BuildInput struct {
	// Digest is "sha256:<hex>" of the build context tar.gz.
	Digest string
	// Location is where the builder fetches the context from (s3://bucket/key
	// on clusters, a file path in local mode).
	Location string
}

// BuildState is what a builder reports of the build of one digest.
type BuildState struct {
	// Name identifies the build (the PipelineRun's name); status.buildRef.
	Name string
	// Started is false when no build for the digest exists yet.
	Started bool
	// Created is true when this call started the build (on a cluster, made
	// the PipelineRun); a call that found it already there says false, so
	// the reconciler can tell a build's start from a report on it.
	Created   bool
	Done      bool
	Succeeded bool
	// Image is the built image pinned by digest (repo@sha256:...), set on success.
	Image string
	// Reason and Message explain a failure, or where a running build is.
	Reason  string
	Message string
	// StartTime and CompletionTime when known.
	StartTime      *time.Time
	CompletionTime *time.Time
	// Steps are the finished build's steps, when the builder reports them
	// with its state (local mode); see StepReader for the others.
	Steps []BuildStep
}

// BuildStep is one step of a finished build, with its own times.
type BuildStep struct {
	Name  string    `json:"name"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Failed is true for the step that failed the build.
	Failed bool `json:"failed,omitempty"`
}

// StepReader is a Builder that reads a finished build's steps on demand
// (Tekton: from the TaskRuns, a read the reconciler makes only to trace).
type StepReader interface {
	BuildSteps(ctx context.Context, namespace, name string) ([]BuildStep, error)
}

// Builder turns a build context into an image. EnsureBuild is idempotent per
// digest: a second call for the same function and digest reports on the
// build the first one started rather than starting another.
type Builder interface {
	EnsureBuild(ctx context.Context, fn slessv1alpha1.Workload, in BuildInput) (BuildState, error)
}

// ServeState is what a server reports of a function's service.
type ServeState struct {
	// Ready is true when the revision serving the function's current
	// generation is ready to take traffic.
	Ready bool
	// Failed is true when the revision of the current generation cannot
	// become ready (Knative's Ready=False, e.g. an image it cannot pull);
	// false while it is still on its way.
	Failed  bool
	Reason  string
	Message string
	// LatestCreatedRevision and LatestReadyRevision name revisions.
	LatestCreatedRevision string
	LatestReadyRevision   string
	// Address is where the invoke proxy forwards calls (cluster-local URL, or
	// a loopback URL in local mode).
	Address string
	// Revision is the revision the service is asked to run now (Knative's
	// template name), which Knative may not have created yet.
	Revision string
	// Image is the image that revision runs, pinned by digest: the image
	// asked for when it names a digest, else the digest its tag was
	// resolved to (empty until it is).
	Image string
	// ServingImage is the image LatestReadyRevision runs, pinned by digest:
	// Image when that is the revision asked for, else the older revision's
	// own (empty when no revision is ready, or its image is not known).
	ServingImage string
	// Traffic is the split that serves: each target with the revision it
	// resolved to, its percent and tag, and a tagged target's address.
	Traffic []slessv1alpha1.TrafficTarget
	// Created and Updated say what this call changed: it created the
	// service, or updated it to match the function (a new revision). Both
	// are false when the service already matched.
	Created bool
	Updated bool
}

// Server runs a function's image and reports whether it serves. EnsureService
// creates or updates the service to match the function and image, and makes
// no change when they already match.
//
// Observe reports what serves fn now and changes nothing: the ready
// revision, its image and the address (Ready, Failed and Reason are of
// the revision asked for last). found is false when fn has no service. It
// keeps the status current while a newer generation builds and
// EnsureService is not called: an older revision may become ready
// meanwhile.
type Server interface {
	EnsureService(ctx context.Context, fn slessv1alpha1.Workload, image string) (ServeState, error)
	Observe(ctx context.Context, fn slessv1alpha1.Workload) (st ServeState, found bool, err error)
}

// RevisionInfo is what sless tells of one of a workload's revisions.
type RevisionInfo struct {
	Name    string
	Created time.Time
	// Image is the image it runs, pinned by digest ("" while unknown).
	Image string
	// SourceDigest is the digest of the build context it was built from;
	// empty for a prebuilt image.
	SourceDigest string
	// Ready says it serves, or can when called; Reason and Message say
	// why not.
	Ready           bool
	Reason, Message string
}

// RevisionLister lists a workload's revisions, oldest first: Knative's
// Revisions on a cluster, the process server's in local mode.
type RevisionLister interface {
	ListRevisions(ctx context.Context, w slessv1alpha1.Workload) ([]RevisionInfo, error)
}

// RevisionSettings are what a revision runs with besides its image, as
// that revision was made: a FunctionJob run of the serving revision takes
// them from it rather than from the Function's spec, which may already
// describe a newer revision that is deploying or failed.
type RevisionSettings struct {
	// Env is the function's own env (spec.env) as the revision has it,
	// without the runtime contract's SLESS_* variables.
	Env []corev1.EnvVar
	// Resources are the revision's container's.
	Resources corev1.ResourceRequirements
	// Placement is the revision's pod spec with only its scheduling
	// fields (node selector, tolerations, affinity, priority and runtime
	// class) set.
	Placement corev1.PodSpec
	// TimeoutSeconds is the function's timeout as the revision has it.
	TimeoutSeconds int32
	// Entrypoint is the SLESS_ENTRYPOINT the revision was given, empty when
	// it was given none: an image sless built carries its own, a prebuilt
	// one may depend on it.
	Entrypoint string
}

// RevisionReader reads the settings of one of a function's revisions by
// name; found is false when no such revision exists.
type RevisionReader interface {
	ReadRevision(ctx context.Context, fn slessv1alpha1.Workload, name string) (settings RevisionSettings, found bool, err error)
}

// Pinned tells an image reference that names its digest.
func Pinned(image string) bool { return strings.Contains(image, "@sha256:") }

// Refusal is a write an adapter itself knows would be refused, said in
// its own words before the apiserver or a webhook says it less helpfully
// (a Knative feature flag a Function needs is off). Rejected takes it.
type Refusal struct{ Message string }

func (r *Refusal) Error() string { return r.Message }

// Rejected tells a write the apiserver or an admission webhook refused
// (Knative's refusing a timeoutSeconds above its max-revision-timeout-seconds,
// a quota, missing RBAC) from one that may pass as it is when retried. The
// same write is refused until the spec or the cluster changes, so the
// owner's status says so (a Failed Function, a Trigger not Ready) rather
// than waiting for ever; it is still retried with backoff, so a cluster
// fixed meanwhile is picked up.
func Rejected(err error) bool {
	var r *Refusal
	return errors.As(err, &r) || apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsRequestEntityTooLargeError(err)
}

// RunState is what a JobRunner reports of one FunctionJob run. The
// FunctionJob reconciler turns it into the run's status and words its
// failure, so a run reads alike on a cluster and in local mode.
type RunState struct {
	// Where names what carries the run out, for the status ("Job x").
	Where string
	// Conflict: the run's name is taken by something the FunctionJob does
	// not own (a Job made by hand); nothing is reported of it.
	Conflict bool
	// Revision is the function's revision the run executes.
	Revision string
	// Started and Completed are when the run started and ended, zero
	// while unknown.
	Started, Completed time.Time
	Running            bool
	Done               bool
	Succeeded          bool
	// ExitCode of the function's process, nil while unknown.
	ExitCode *int32
	// Termination is the termination message the wrapper left: the
	// handler's answer, or its error (status.output).
	Termination string
	// DeadlineExceeded: the runner stopped the run at its deadline.
	DeadlineExceeded bool
	// Detail says why the run failed in the runner's words, for when the
	// function left no termination message (an exit reason, last lines).
	Detail string
	// BytesIn and BytesOut are the payload's and the answer's sizes, when
	// the runner knows them.
	BytesIn, BytesOut int64
}

// RunRequest is one run a JobRunner is asked to start.
type RunRequest struct {
	Job      *slessv1alpha1.FunctionJob
	Function *slessv1alpha1.Function
	// Name is the run's (names.Job); RequestID its invocation record's.
	Name, RequestID string
}

// ErrRunLater tells the reconciler a run cannot start now (an earlier run
// of the same FunctionJob still goes, the runner stops) and to look again.
var ErrRunLater = errors.New("the run cannot start yet")

// ErrRevisionNotServing tells the reconciler the function's serving
// revision, which a run executes, is not there (the status names one that
// a newer revision replaced and has yet to say so).
var ErrRevisionNotServing = errors.New("the function's serving revision is not found")

// JobRunner carries out FunctionJob runs: a batch Job each on a cluster, a
// process in local mode. The reconciler decides; the runner runs.
//
// ObserveRun reports on the run fj.Spec.RunID names; found is false when
// the runner has no such run (not started, or gone). StartRun starts the
// run of the function's serving revision (fn.Status.LatestReadyRevision).
type JobRunner interface {
	ObserveRun(ctx context.Context, fj *slessv1alpha1.FunctionJob) (st RunState, found bool, err error)
	StartRun(ctx context.Context, req RunRequest) (RunState, error)
	// LostCause words why a run that started is gone, for its status.
	LostCause(fj *slessv1alpha1.FunctionJob) string
}
