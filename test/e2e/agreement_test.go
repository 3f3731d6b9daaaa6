package e2e_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"knative.dev/pkg/apis"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/adapter"
	"github.com/sless-dev/sless/pkg/adapter/knative"
	"github.com/sless-dev/sless/pkg/adapter/resources"
	"github.com/sless-dev/sless/pkg/adapter/tekton"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/test/testbed"
	"github.com/sless-dev/sless/test/testbed/functionctl"
)

// The simulators stand in for Knative's and Tekton's controllers in the
// fast tests of many packages, so they must report what the controllers
// report. TestSimulatorsAgreeWithRealControllers runs each scenario on both
// beds, in a namespace of the same name so that names, URLs and digests
// need no rewriting, and compares what sless reads: the adapters' states
// and the fields of Tekton's and Knative's objects they are made from.

const agreeFunction = "agree"

// buildOutcome is how a side's builds end, each side arranging it its own
// way: the simulator by policy, the real bed by its kubelet stand-in.
type buildOutcome int

const (
	buildSucceeds buildOutcome = iota
	buildStepFails
	buildRuns
)

// crashMessage is what the crashing container wrote to its termination log.
const crashMessage = "Traceback (most recent call last): ImportError: no module named handler"

// side is one bed in one scenario: its apiserver, the namespace, the
// Function and the adapters the reconciler would use on it.
type side struct {
	name    string
	kube    *testbed.Kube
	ns      string
	fn      *slessv1alpha1.Function
	builder *tekton.Builder
	server  *knative.Server
	// builds sets how the side's builds end.
	builds func(buildOutcome)
	// crash makes the container of revision rev exit, as a node reports it.
	crash func(t *testing.T, rev string)
}

// newSides makes the simulators' side and the real controllers' side of
// one scenario, in a fresh namespace of the same name on each.
func newSides(t *testing.T) (sim, upstream *side) {
	t.Helper()
	ctx := context.Background()
	simKube, tk, kn := testbed.SharedKube(t), testbed.SharedTekton(t), testbed.SharedKnative(t)
	bed := testbed.SharedPrimitives(t)
	t.Cleanup(func() { bed.Logs(t) })
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	ns := "agree-" + hex.EncodeToString(b)

	sim = newSide(t, "simulators", simKube, ns)
	sim.builds = func(o buildOutcome) {
		tk.SetPolicy(ns, map[buildOutcome]testbed.BuildPolicy{
			buildSucceeds: {}, buildStepFails: {Mode: testbed.BuildFail}, buildRuns: {Mode: testbed.BuildHold},
		}[o])
	}
	sim.crash = func(t *testing.T, rev string) {
		if err := kn.Crash(ctx, ns, agreeFunction, 1, crashMessage); err != nil {
			t.Fatal(err)
		}
	}

	upstream = newSide(t, "real controllers", bed.Kube, ns)
	// Tekton looks the build's account up; no controller-manager makes it.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}
	if err := bed.Kube.Client.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	upstream.builds = func(o buildOutcome) {
		bed.Kubelet.SetPolicy(ns, map[buildOutcome]testbed.KubeletPolicy{
			buildSucceeds: {}, buildStepFails: {Step: testbed.FailStep("step-build-and-push")}, buildRuns: {Hold: true},
		}[o])
	}
	upstream.crash = func(t *testing.T, rev string) {
		if err := bed.Kubelet.CrashRevision(ctx, ns, rev, 1, crashMessage); err != nil {
			t.Fatal(err)
		}
	}
	return sim, upstream
}

func newSide(t *testing.T, name string, k *testbed.Kube, ns string) *side {
	t.Helper()
	ctx := context.Background()
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"sless.dev/test": "true"}}}
	if err := k.Client.Create(ctx, obj); err != nil {
		t.Fatalf("%s: namespace %s: %v", name, ns, err)
	}
	t.Cleanup(func() { _ = k.Client.Delete(context.Background(), obj) })
	fn := &slessv1alpha1.Function{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: agreeFunction},
		Spec: slessv1alpha1.FunctionSpec{
			WorkloadSpec: slessv1alpha1.WorkloadSpec{
				Runtime:    slessv1alpha1.RuntimePython312,
				Entrypoint: "main.handler",
				Source: slessv1alpha1.FunctionSource{Inline: &slessv1alpha1.InlineSource{Files: map[string]string{
					"main.py": "def handler(event, context):\n    return 'agreed'\n"}}},
			},
		},
	}
	// No Function controller runs: the scenario calls the adapters itself.
	if err := k.Client.Create(ctx, fn); err != nil {
		t.Fatalf("%s: Function: %v", name, err)
	}
	cfg := resources.Config{Registry: functionctl.Registry}
	return &side{name: name, kube: k, ns: ns, fn: fn,
		builder: &tekton.Builder{Client: k.Client, APIReader: k.Client, Config: cfg},
		server:  &knative.Server{Client: k.Client, APIReader: k.Client, Config: cfg}}
}

// await polls f until it reports done; the states it passes through are
// the controllers' to choose, only the end is compared.
func await[T any](t *testing.T, s *side, what string, f func() (T, bool)) T {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		v, done := f()
		if done {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s not reached in 60 s; last saw %+v", s.name, what, v)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// condSeen is a condition as sless reads it: no times.
type condSeen struct{ Status, Reason, Message string }

func seeCondition(c *apis.Condition) condSeen {
	if c == nil {
		return condSeen{}
	}
	return condSeen{string(c.Status), c.Reason, c.Message}
}

// buildSeen is what sless reads of one build.
type buildSeen struct {
	// Asked is EnsureBuild's answer when it made the run; State its
	// answer once the scenario's end was reached.
	Asked, State adapter.BuildState
	// Times stand for the state's start and completion times, which
	// differ between any two runs: whether each is set, and in order.
	Times string
	// The PipelineRun's fields the state is made from.
	SpecStatus string
	Succeeded  condSeen
	Results    map[string]string
	// Failed is the child TaskRun failureMessage reads when the run
	// failed of itself (not stopped by hand).
	Failed *taskSeen
}

type taskSeen struct {
	Kind, Name, PipelineTask string
	Succeeded                condSeen
	Steps                    []stepSeen
}

// stepSeen is a step's end, without its times.
type stepSeen struct {
	Name     string
	ExitCode int32
	Reason   string
	Message  string
}

func (s *side) ensureBuild(t *testing.T) adapter.BuildState {
	t.Helper()
	sum := sha256.Sum256([]byte("agreement source"))
	st, err := s.builder.EnsureBuild(context.Background(), s.fn, adapter.BuildInput{
		Digest: "sha256:" + hex.EncodeToString(sum[:]), Location: "s3://agreement/" + agreeFunction + ".tar.gz"})
	if err != nil {
		t.Fatalf("%s: EnsureBuild: %v", s.name, err)
	}
	return st
}

func (s *side) pipelineRun(t *testing.T, name string) *tektonv1.PipelineRun {
	t.Helper()
	pr := &tektonv1.PipelineRun{}
	if err := s.kube.Client.Get(context.Background(), types.NamespacedName{Namespace: s.ns, Name: name}, pr); err != nil {
		t.Fatalf("%s: %v", s.name, err)
	}
	return pr
}

// seeBuild reads the build's fields once st, a done state, is reached.
func (s *side) seeBuild(t *testing.T, asked, st adapter.BuildState) buildSeen {
	t.Helper()
	seen := buildSeen{Asked: asked, State: st, Times: "no start"}
	if st.StartTime != nil {
		seen.Times = "started"
		if st.CompletionTime != nil && !st.CompletionTime.Before(*st.StartTime) {
			seen.Times = "started, completed after"
		}
	}
	seen.State.StartTime, seen.State.CompletionTime = nil, nil
	pr := s.pipelineRun(t, st.Name)
	seen.SpecStatus = string(pr.Spec.Status)
	seen.Succeeded = seeCondition(pr.Status.GetCondition(apis.ConditionSucceeded))
	if pr.IsSuccessful() {
		// Results are read of a successful run only; a failed one may
		// carry those its earlier steps wrote.
		seen.Results = map[string]string{}
		for _, r := range pr.Status.Results {
			seen.Results[r.Name] = r.Value.StringVal
		}
	}
	if !pr.IsDone() || pr.IsSuccessful() || pr.Spec.Status != "" {
		return seen
	}
	for _, ref := range pr.Status.ChildReferences {
		tr := &tektonv1.TaskRun{}
		if err := s.kube.Client.Get(context.Background(), types.NamespacedName{Namespace: s.ns, Name: ref.Name}, tr); err != nil {
			t.Fatalf("%s: %s %s: %v", s.name, ref.Kind, ref.Name, err)
		}
		task := &taskSeen{Kind: ref.Kind, Name: ref.Name, PipelineTask: ref.PipelineTaskName,
			Succeeded: seeCondition(tr.Status.GetCondition(apis.ConditionSucceeded))}
		for _, step := range tr.Status.Steps {
			ss := stepSeen{Name: step.Name}
			if term := step.Terminated; term != nil {
				ss.ExitCode, ss.Reason = term.ExitCode, term.Reason
				// failureMessage reads the message of a failed step only; a
				// step that succeeded holds the results it wrote there.
				if term.ExitCode != 0 {
					ss.Message = term.Message
				}
			}
			task.Steps = append(task.Steps, ss)
		}
		seen.Failed = task
	}
	return seen
}

// serveSeen is what sless reads of a function's service.
type serveSeen struct {
	// Asked is EnsureService's answer when it wrote the Service; Ensure
	// and Observe are the answers once the scenario's end was reached.
	Asked, Ensure, Observe adapter.ServeState
	Service                serviceSeen
	// Revisions are those the states name, by name.
	Revisions []revisionSeen
}

type serviceSeen struct {
	Generation, ObservedGeneration int64
	Ready, RoutesReady             condSeen
	LatestCreated, LatestReady     string
	AddressURL, URL                string
	// Traffic is spec.traffic as Knative's webhook defaulted it, which
	// sless compares with what it asks for.
	Traffic []servingv1.TrafficTarget
}

type revisionSeen struct {
	Name string
	// Ready is the Revision's condition, which sless revisions shows.
	Ready condSeen
	// Digests are status.containerStatuses, container=imageDigest.
	Digests  []string
	Settings adapter.RevisionSettings
	Found    bool
}

func (s *side) ensureService(t *testing.T, image string) adapter.ServeState {
	t.Helper()
	st, err := s.server.EnsureService(context.Background(), s.fn, image)
	if err != nil {
		t.Fatalf("%s: EnsureService: %v", s.name, err)
	}
	return st
}

// awaitService calls EnsureService, as each reconcile does, until done.
func (s *side) awaitService(t *testing.T, image, what string, done func(adapter.ServeState) bool) adapter.ServeState {
	t.Helper()
	return await(t, s, what, func() (adapter.ServeState, bool) {
		st := s.ensureService(t, image)
		return st, done(st)
	})
}

// seeService reads what sless reads once st, the end, is reached, and the
// revisions st names besides more.
func (s *side) seeService(t *testing.T, asked, st adapter.ServeState, more ...string) serveSeen {
	t.Helper()
	ctx := context.Background()
	seen := serveSeen{Asked: asked, Ensure: st}
	obs, found, err := s.server.Observe(ctx, s.fn)
	if err != nil || !found {
		t.Fatalf("%s: Observe: found %v, %v", s.name, found, err)
	}
	seen.Observe = obs
	svc := &servingv1.Service{}
	if err := s.kube.Client.Get(ctx, types.NamespacedName{Namespace: s.ns, Name: agreeFunction}, svc); err != nil {
		t.Fatalf("%s: %v", s.name, err)
	}
	seen.Service = serviceSeen{Generation: svc.Generation, ObservedGeneration: svc.Status.ObservedGeneration,
		Ready:         seeCondition(svc.Status.GetCondition(servingv1.ServiceConditionReady)),
		RoutesReady:   seeCondition(svc.Status.GetCondition(servingv1.ServiceConditionRoutesReady)),
		LatestCreated: svc.Status.LatestCreatedRevisionName, LatestReady: svc.Status.LatestReadyRevisionName,
		Traffic: svc.Spec.Traffic}
	if a := svc.Status.Address; a != nil && a.URL != nil {
		seen.Service.AddressURL = a.URL.String()
	}
	if svc.Status.URL != nil {
		seen.Service.URL = svc.Status.URL.String()
	}
	names := append([]string{st.Revision, st.LatestCreatedRevision, st.LatestReadyRevision}, more...)
	slices.Sort(names)
	for _, name := range slices.Compact(names) {
		if name == "" {
			continue
		}
		rs := revisionSeen{Name: name}
		rev := &servingv1.Revision{}
		if err := s.kube.Client.Get(ctx, types.NamespacedName{Namespace: s.ns, Name: name}, rev); client.IgnoreNotFound(err) != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		rs.Ready = seeCondition(rev.Status.GetCondition(servingv1.RevisionConditionReady))
		for _, c := range rev.Status.ContainerStatuses {
			rs.Digests = append(rs.Digests, c.Name+"="+c.ImageDigest)
		}
		if rs.Settings, rs.Found, err = s.server.ReadRevision(ctx, s.fn, name); err != nil {
			t.Fatalf("%s: ReadRevision %s: %v", s.name, name, err)
		}
		seen.Revisions = append(seen.Revisions, rs)
	}
	return seen
}

// routesReady is the status of the Service's RoutesReady condition.
func (s *side) routesReady(t *testing.T) corev1.ConditionStatus {
	t.Helper()
	svc := &servingv1.Service{}
	if err := s.kube.Client.Get(context.Background(), types.NamespacedName{Namespace: s.ns, Name: agreeFunction}, svc); err != nil {
		t.Fatalf("%s: %v", s.name, err)
	}
	if c := svc.Status.GetCondition(servingv1.ServiceConditionRoutesReady); c != nil {
		return c.Status
	}
	return corev1.ConditionUnknown
}

// image is a pinned image of the function's repository: no registry is
// asked to resolve it on either side.
func image(ns, content string) string {
	sum := sha256.Sum256([]byte(content))
	return fmt.Sprintf("%s/%s/%s@sha256:%s", functionctl.Registry, ns, agreeFunction, hex.EncodeToString(sum[:]))
}

func ready(st adapter.ServeState) bool { return st.Ready }

// serveFirst makes the Service of image "v1" and waits for it to serve.
func (s *side) serveFirst(t *testing.T) (asked, st adapter.ServeState) {
	t.Helper()
	img := image(s.ns, "v1")
	asked = s.ensureService(t, img)
	return asked, s.awaitService(t, img, "Service Ready", ready)
}

// serveSecond makes the Service of image "v1", then of "v2" with a changed
// spec, and waits for each to serve; it returns the two ready revisions.
func (s *side) serveSecond(t *testing.T) (first, second string) {
	t.Helper()
	_, st := s.serveFirst(t)
	first = st.LatestReadyRevision
	s.fn.Spec.Env = []slessv1alpha1.EnvVar{{Name: "GREETING", Value: "again"}}
	if err := s.kube.Client.Update(context.Background(), s.fn); err != nil {
		t.Fatalf("%s: %v", s.name, err)
	}
	img := image(s.ns, "v2")
	s.ensureService(t, img)
	st = s.awaitService(t, img, "second revision Ready", ready)
	return first, st.LatestReadyRevision
}

// steer sets the Function's spec.traffic and calls EnsureService until
// done; the template stays the second revision's.
func (s *side) steer(t *testing.T, traffic []slessv1alpha1.TrafficTarget, what string, done func(adapter.ServeState) bool) (asked, st adapter.ServeState) {
	t.Helper()
	s.fn.Spec.Traffic = traffic
	if err := s.kube.Client.Update(context.Background(), s.fn); err != nil {
		t.Fatalf("%s: traffic: %v", s.name, err)
	}
	img := image(s.ns, "v2")
	asked = s.ensureService(t, img)
	return asked, s.awaitService(t, img, what, done)
}

// routed says the Service serves the traffic it was last asked for.
func routed(n int) func(adapter.ServeState) bool {
	return func(st adapter.ServeState) bool { return st.Ready && len(st.Traffic) == n }
}

func TestSimulatorsAgreeWithRealControllers(t *testing.T) {
	scenarios := []struct {
		name string
		run  func(t *testing.T, s *side) any
	}{
		{"build succeeds", func(t *testing.T, s *side) any {
			s.builds(buildSucceeds)
			asked := s.ensureBuild(t)
			st := await(t, s, "build done", func() (adapter.BuildState, bool) { st := s.ensureBuild(t); return st, st.Done })
			if !st.Succeeded {
				t.Errorf("%s: build did not succeed: %+v", s.name, st)
			}
			return s.seeBuild(t, asked, st)
		}},
		{"build step exits 1", func(t *testing.T, s *side) any {
			s.builds(buildStepFails)
			asked := s.ensureBuild(t)
			st := await(t, s, "build done", func() (adapter.BuildState, bool) { st := s.ensureBuild(t); return st, st.Done })
			if st.Succeeded {
				t.Errorf("%s: build succeeded: %+v", s.name, st)
			}
			return s.seeBuild(t, asked, st)
		}},
		{"build cancelled while it runs", func(t *testing.T, s *side) any {
			s.builds(buildRuns)
			asked := s.ensureBuild(t)
			running := await(t, s, "build running", func() (adapter.BuildState, bool) {
				st := s.ensureBuild(t)
				return st, st.Reason == tekton.ReasonRunning
			})
			// What `tkn pipelinerun cancel` does: the run is stopped by hand.
			pr := s.pipelineRun(t, running.Name)
			patch := client.MergeFrom(pr.DeepCopy())
			pr.Spec.Status = tektonv1.PipelineRunSpecStatusCancelled
			if err := s.kube.Client.Patch(context.Background(), pr, patch); err != nil {
				t.Fatalf("%s: cancel: %v", s.name, err)
			}
			st := await(t, s, "build done", func() (adapter.BuildState, bool) { st := s.ensureBuild(t); return st, st.Done })
			running.StartTime = nil // a time of its own on each side
			return []any{running, s.seeBuild(t, asked, st)}
		}},
		{"Service becomes Ready", func(t *testing.T, s *side) any {
			asked, st := s.serveFirst(t)
			return s.seeService(t, asked, st)
		}},
		{"update rolls out a second revision", func(t *testing.T, s *side) any {
			_, first := s.serveFirst(t)
			s.fn.Spec.Env = []slessv1alpha1.EnvVar{{Name: "GREETING", Value: "again"}}
			if err := s.kube.Client.Update(context.Background(), s.fn); err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			img := image(s.ns, "v2")
			asked := s.ensureService(t, img)
			st := s.awaitService(t, img, "second revision Ready", ready)
			// The first revision is read too: a FunctionJob started while it
			// served runs with its settings.
			return s.seeService(t, asked, st, first.LatestReadyRevision)
		}},
		{"serving revision's container crashes", func(t *testing.T, s *side) any {
			_, first := s.serveFirst(t)
			s.crash(t, first.LatestReadyRevision)
			// The end: the Configuration and the Route have both seen it,
			// and the Service's Ready takes the Route's words. The routes
			// are read first, so the state read after them has those words.
			st := await(t, s, "Service failed, routes too", func() (adapter.ServeState, bool) {
				routesDown := s.routesReady(t) == corev1.ConditionFalse
				st := s.ensureService(t, image(s.ns, "v1"))
				return st, routesDown && st.Failed
			})
			return s.seeService(t, first, st)
		}},
		{"traffic split between two tagged revisions, then a tag at 0 percent", func(t *testing.T, s *side) any {
			first, _ := s.serveSecond(t)
			asked, split := s.steer(t, []slessv1alpha1.TrafficTarget{
				{RevisionName: first, Percent: ptr.To[int64](40), Tag: "old"},
				{LatestRevision: ptr.To(true), Percent: ptr.To[int64](60), Tag: "new"},
			}, "split routed", routed(2))
			seenSplit := s.seeService(t, asked, split, first)
			asked, back := s.steer(t, []slessv1alpha1.TrafficTarget{
				{RevisionName: first, Percent: ptr.To[int64](100)},
				{Percent: ptr.To[int64](0), Tag: "next"},
			}, "rollback routed", func(st adapter.ServeState) bool {
				return routed(2)(st) && st.Traffic[0].PercentOf() == 100
			})
			return []any{seenSplit, s.seeService(t, asked, back, first)}
		}},
		{"traffic names a revision that does not exist", func(t *testing.T, s *side) any {
			first, _ := s.serveSecond(t)
			asked, st := s.steer(t, []slessv1alpha1.TrafficTarget{
				{RevisionName: agreeFunction + "-99999", Percent: ptr.To[int64](100)},
			}, "route refused", func(st adapter.ServeState) bool { return st.Failed })
			return s.seeService(t, asked, st, first)
		}},
	}
	// cmp cannot look inside a Quantity: compare them by value.
	opts := cmp.Options{cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			sim, upstream := newSides(t)
			start := time.Now()
			want := sc.run(t, upstream)
			realTook := time.Since(start)
			got := sc.run(t, sim)
			if t.Failed() {
				return
			}
			if d := cmp.Diff(want, got, opts); d != "" {
				t.Errorf("the simulators (+) disagree with the real controllers (-):\n%s", d)
			}
			t.Logf("real controllers %v, simulators %v", realTook.Round(time.Millisecond), (time.Since(start) - realTook).Round(time.Millisecond))
		})
	}
}
