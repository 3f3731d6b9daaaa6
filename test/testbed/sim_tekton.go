package testbed

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"knative.dev/pkg/apis"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Names the Tekton simulator reads from a PipelineRun and writes as results.
const (
	// SimParamImage is the PipelineRun parameter naming the image to push
	// (repository without tag or digest). Without it the simulator makes up
	// registry.sim.local/<namespace>/<pipelinerun>.
	SimParamImage = "IMAGE"
	// simParamTag is the tag the image is pushed with.
	simParamTag = "TAG"
	// SimResultDigest and SimResultURL are the results a successful run
	// reports, as kaniko's task does.
	SimResultDigest = "IMAGE_DIGEST"
	SimResultURL    = "IMAGE_URL"
)

// BuildMode says how the Tekton simulator finishes PipelineRuns in a namespace.
type BuildMode int

const (
	// BuildSucceed finishes every run as Succeeded after the policy's Delay.
	BuildSucceed BuildMode = iota
	// BuildFail finishes every run as Failed, with the policy's Reason and
	// Message, after the Delay.
	BuildFail
	// BuildHold marks runs Running and leaves them until Succeed or Fail is called.
	BuildHold
)

// BuildPolicy is how the simulator treats PipelineRuns of one namespace.
type BuildPolicy struct {
	Mode  BuildMode
	Delay time.Duration
	// Reason and Message of a BuildFail: the PipelineRun's reason (Tekton's
	// "Failed" when empty) and the failed TaskRun's message. Without a
	// Message the last step exits 1 and the TaskRun says so in Tekton's
	// words; with one, that text stands in for them, which real Tekton
	// never writes: a step's own output does not reach its status.
	Reason  string
	Message string
}

// TektonSim plays Tekton Pipelines' controller against a test apiserver: it
// marks PipelineRuns Running, then Succeeded with IMAGE_DIGEST and IMAGE_URL
// results, or Failed with a failed child TaskRun whose last step exited 1,
// in the status shape and words of tekton.dev/v1 (test/e2e's agreement test
// holds them to the real controller's). No pod runs and no image is pushed;
// the digest is SimDigest's, the one the real bed's kubelet stand-in reports.
type TektonSim struct {
	kube   *Kube
	cache  client.Reader
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	policies map[string]BuildPolicy
	started  map[types.NamespacedName]int
	// since is when the simulator started each run; the status's startTime
	// is only precise to the second.
	since map[types.NamespacedName]time.Time
}

var (
	tektonOnce   sync.Once
	tektonShared *TektonSim
	tektonErr    error
)

// SharedTekton is the package's Tekton simulator on SharedKube, started on
// first use. Namespaces without a policy build successfully at once.
func SharedTekton(t testing.TB) *TektonSim {
	t.Helper()
	k := SharedKube(t)
	tektonOnce.Do(func() {
		tektonShared, tektonErr = StartTektonSim(k)
		if tektonErr == nil {
			sharedMu.Lock()
			atExit(tektonShared.Stop)
			sharedMu.Unlock()
		}
	})
	if tektonErr != nil {
		t.Fatalf("testbed: Tekton simulator: %v", tektonErr)
	}
	return tektonShared
}

// StartTektonSim starts a simulator on k; call Stop when done.
func StartTektonSim(k *Kube) (*TektonSim, error) {
	s := &TektonSim{kube: k, policies: map[string]BuildPolicy{}, started: map[types.NamespacedName]int{}, since: map[types.NamespacedName]time.Time{}}
	mgr, err := simManager(k)
	if err != nil {
		return nil, err
	}
	s.cache = mgr.GetClient()
	err = ctrl.NewControllerManagedBy(mgr).
		Named("sim-tekton").
		For(&tektonv1.PipelineRun{}).
		Complete(reconcile.Func(s.reconcile))
	if err != nil {
		return nil, err
	}
	return s, runManager(mgr, &s.cancel, &s.done)
}

// Stop ends the simulator.
func (s *TektonSim) Stop() {
	s.cancel()
	<-s.done
}

// SetPolicy sets how runs in namespace ns finish from now on. Runs already
// finished keep their status.
func (s *TektonSim) SetPolicy(ns string, p BuildPolicy) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.policies[ns] = p
}

func (s *TektonSim) policy(ns string) BuildPolicy {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.policies[ns]
}

// Started counts the PipelineRuns of that name the simulator has started;
// a test of "exactly one build" reads it besides listing the runs.
func (s *TektonSim) Started(ns, name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started[types.NamespacedName{Namespace: ns, Name: name}]
}

func (s *TektonSim) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pr := &tektonv1.PipelineRun{}
	if err := s.cache.Get(ctx, req.NamespacedName, pr); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if pr.IsDone() || !pr.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	if pr.Spec.Status == tektonv1.PipelineRunSpecStatusCancelled {
		return reconcile.Result{}, s.finish(ctx, req.Namespace, req.Name, func(pr *tektonv1.PipelineRun, now metav1.Time) {
			pr.Status.MarkFailed(string(tektonv1.PipelineRunReasonCancelled), "PipelineRun %q was cancelled", pr.Name)
			pr.Status.CompletionTime = &now
		})
	}
	if !pr.HasStarted() {
		if err := s.markRunning(ctx, pr); err != nil {
			return reconcile.Result{}, err
		}
	}
	p := s.policy(req.Namespace)
	if p.Mode == BuildHold {
		return reconcile.Result{}, nil
	}
	if wait := time.Until(s.startedAt(pr).Add(p.Delay)); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	if p.Mode == BuildFail {
		return reconcile.Result{}, s.Fail(ctx, req.Namespace, req.Name, p.Reason, p.Message)
	}
	return reconcile.Result{}, s.Succeed(ctx, req.Namespace, req.Name)
}

func (s *TektonSim) markRunning(ctx context.Context, pr *tektonv1.PipelineRun) error {
	now := metav1.Now()
	pr.Status.StartTime = &now
	pr.Status.ObservedGeneration = pr.Generation
	pr.Status.MarkRunning(string(tektonv1.PipelineRunReasonRunning), "Tasks Completed: 0 (Failed: 0, Cancelled 0), Incomplete: %d, Skipped: 0", max(1, taskCount(pr)))
	if err := s.kube.Client.Status().Update(ctx, pr); err != nil {
		return err
	}
	s.mu.Lock()
	key := types.NamespacedName{Namespace: pr.Namespace, Name: pr.Name}
	s.started[key]++
	s.since[key] = time.Now()
	s.mu.Unlock()
	return nil
}

func (s *TektonSim) startedAt(pr *tektonv1.PipelineRun) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.since[types.NamespacedName{Namespace: pr.Namespace, Name: pr.Name}]; ok {
		return t
	}
	return pr.Status.StartTime.Time
}

// Succeed finishes a running PipelineRun as Succeeded with its results.
func (s *TektonSim) Succeed(ctx context.Context, ns, name string) error {
	return s.finish(ctx, ns, name, func(pr *tektonv1.PipelineRun, now metav1.Time) {
		pr.Status.Results = []tektonv1.PipelineRunResult{
			{Name: SimResultDigest, Value: *tektonv1.NewStructuredValues(SimDigest(pr))},
			{Name: SimResultURL, Value: *tektonv1.NewStructuredValues(simImage(pr))},
		}
		pr.Status.CompletionTime = &now
		pr.Status.MarkSucceeded(string(tektonv1.PipelineRunReasonSuccessful), "Tasks Completed: %d (Failed: 0, Cancelled 0), Skipped: 0", max(1, taskCount(pr)))
	})
}

// Fail finishes a running PipelineRun as Failed: its last step exits 1, as
// Tekton reports it on the child TaskRun. reason is the PipelineRun's
// ("Failed" when empty; Tekton also uses e.g. "PipelineRunTimeout");
// message, when not empty, replaces Tekton's words on the TaskRun
// (BuildPolicy.Message).
func (s *TektonSim) Fail(ctx context.Context, ns, name, reason, message string) error {
	if reason == "" {
		reason = string(tektonv1.PipelineRunReasonFailed)
	}
	pr := &tektonv1.PipelineRun{}
	if err := s.kube.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, pr); err != nil {
		return err
	}
	taskName, steps := "build", []string{"build"}
	if ps := pr.Spec.PipelineSpec; ps != nil && len(ps.Tasks) > 0 {
		taskName = ps.Tasks[0].Name
		if ts := ps.Tasks[0].TaskSpec; ts != nil && len(ts.Steps) > 0 {
			steps = steps[:0]
			for _, st := range ts.Steps {
				steps = append(steps, st.Name)
			}
		}
	}
	tr, err := s.failedTaskRun(ctx, pr, taskName, steps, message)
	if err != nil {
		return err
	}
	return s.finish(ctx, ns, name, func(pr *tektonv1.PipelineRun, now metav1.Time) {
		pr.Status.ChildReferences = []tektonv1.ChildStatusReference{{
			TypeMeta:         runtimeTypeMeta("TaskRun"),
			Name:             tr.Name,
			PipelineTaskName: taskName,
		}}
		pr.Status.CompletionTime = &now
		pr.Status.MarkFailed(reason, "Tasks Completed: 1 (Failed: 1, Cancelled 0), Skipped: 0")
	})
}

// failedTaskRun is the TaskRun of a pod whose steps before the last
// completed and whose last exited 1, with the status Tekton gives it.
func (s *TektonSim) failedTaskRun(ctx context.Context, pr *tektonv1.PipelineRun, taskName string, steps []string, message string) (*tektonv1.TaskRun, error) {
	tr := &tektonv1.TaskRun{ObjectMeta: metav1.ObjectMeta{
		Namespace: pr.Namespace,
		Name:      pr.Name + "-" + taskName,
		Labels: map[string]string{
			"tekton.dev/pipelineRun":  pr.Name,
			"tekton.dev/pipelineTask": taskName,
		},
	}}
	if ps := pr.Spec.PipelineSpec; ps != nil && len(ps.Tasks) > 0 && ps.Tasks[0].TaskSpec != nil {
		tr.Spec.TaskSpec = &ps.Tasks[0].TaskSpec.TaskSpec
	}
	if err := controllerutil.SetControllerReference(pr, tr, s.kube.Scheme); err != nil {
		return nil, err
	}
	if err := s.kube.Client.Create(ctx, tr); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	if err := s.kube.Client.Get(ctx, client.ObjectKeyFromObject(tr), tr); err != nil {
		return nil, err
	}
	start := pr.Status.StartTime
	if start == nil {
		now := metav1.Now()
		start = &now
	}
	now := metav1.Now()
	tr.Status.PodName = tr.Name + "-pod"
	tr.Status.StartTime = start
	tr.Status.CompletionTime = &now
	tr.Status.Steps = nil
	for i, name := range steps {
		term := &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: *start, FinishedAt: now}
		if i == len(steps)-1 {
			term.ExitCode, term.Reason = 1, "Error"
			if message == "" {
				// Tekton's words for a step that exited (pod/status.go).
				message = fmt.Sprintf("%q exited with code %d: %s", "step-"+name, term.ExitCode, term.Reason)
			} else {
				term.Message = message
			}
		}
		tr.Status.Steps = append(tr.Status.Steps, tektonv1.StepState{Name: name, Container: "step-" + name,
			ContainerState: corev1.ContainerState{Terminated: term}, TerminationReason: term.Reason})
	}
	tr.Status.SetCondition(&apis.Condition{
		Type:    apis.ConditionSucceeded,
		Status:  corev1.ConditionFalse,
		Reason:  string(tektonv1.TaskRunReasonStepFailed),
		Message: message,
	})
	return tr, s.kube.Client.Status().Update(ctx, tr)
}

// finish applies a terminal status to a PipelineRun that is not done yet.
func (s *TektonSim) finish(ctx context.Context, ns, name string, mark func(*tektonv1.PipelineRun, metav1.Time)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pr := &tektonv1.PipelineRun{}
		if err := s.kube.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, pr); err != nil {
			return err
		}
		if pr.IsDone() {
			return fmt.Errorf("PipelineRun %s/%s is already done (%s)", ns, name, pr.Status.GetCondition(apis.ConditionSucceeded).Reason)
		}
		now := metav1.Now()
		if pr.Status.StartTime == nil {
			pr.Status.StartTime = &now
		}
		pr.Status.ObservedGeneration = pr.Generation
		mark(pr, now)
		return s.kube.Client.Status().Update(ctx, pr)
	})
}

// SimDigest is the digest the simulator reports for a PipelineRun: the
// sha256 of the builder's --destination, IMAGE:TAG, as the real bed's
// kubelet stand-in (KanikoStep) reports it, so both beds build one image.
func SimDigest(pr *tektonv1.PipelineRun) string {
	dest := simImage(pr)
	if tag := paramString(pr, simParamTag); tag != "" {
		dest += ":" + tag
	}
	sum := sha256.Sum256([]byte(dest))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// simImage is the repository a run pushes to: its IMAGE parameter, or one
// made up from its name.
func simImage(pr *tektonv1.PipelineRun) string {
	if image := paramString(pr, SimParamImage); image != "" {
		return image
	}
	return "registry.sim.local/" + pr.Namespace + "/" + pr.Name
}

func paramString(pr *tektonv1.PipelineRun, name string) string {
	for _, p := range pr.Spec.Params {
		if p.Name == name {
			return p.Value.StringVal
		}
	}
	return ""
}

func taskCount(pr *tektonv1.PipelineRun) int {
	if pr.Spec.PipelineSpec == nil {
		return 0
	}
	return len(pr.Spec.PipelineSpec.Tasks)
}

func runtimeTypeMeta(kind string) runtime.TypeMeta {
	return runtime.TypeMeta{APIVersion: tektonv1.SchemeGroupVersion.String(), Kind: kind}
}

// simManager is a controller-runtime manager for a simulator: no metrics
// server, no health probes, no leader election, and controller names that
// may repeat across simulators started in one test binary.
func simManager(k *Kube) (ctrl.Manager, error) {
	return ctrl.NewManager(k.Config, ctrl.Options{
		Scheme:                 k.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Logger:                 logr.Discard(),
		Controller:             config.Controller{SkipNameValidation: ptr.To(true), MaxConcurrentReconciles: 4},
	})
}

func runManager(mgr ctrl.Manager, cancel *context.CancelFunc, done *chan struct{}) error {
	ctx, c := context.WithCancel(context.Background())
	*cancel, *done = c, make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		defer close(*done)
		errc <- mgr.Start(ctx)
	}()
	syncCtx, syncCancel := context.WithTimeout(ctx, 60*time.Second)
	defer syncCancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		c()
		select {
		case err := <-errc:
			return fmt.Errorf("simulator manager: %w", err)
		default:
			return fmt.Errorf("simulator cache did not sync within 60s")
		}
	}
	return nil
}
