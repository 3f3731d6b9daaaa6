package job_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fnresources "github.com/sless-dev/sless/pkg/adapter/resources"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/reconciler/job"
	"github.com/sless-dev/sless/test/testbed"
)

func TestMain(m *testing.M) { testbed.Main(m) }

const image = "registry.example.com/fn/hello@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// runs collects what the controller records.
type runs struct {
	mu  sync.Mutex
	all []job.Run
}

func (r *runs) RecordRun(run job.Run) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, run)
}

func (r *runs) list() []job.Run {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]job.Run(nil), r.all...)
}

// recorders records each run with every one of them.
type recorders []job.Recorder

func (rs recorders) RecordRun(run job.Run) {
	for _, r := range rs {
		r.RecordRun(run)
	}
}

type env struct {
	t   *testing.T
	c   client.Client
	ns  string
	rec *runs
	// knative plays Knative: it makes the Revisions a run reads its
	// settings from.
	knative *testbed.KnativeSim
}

// start runs the FunctionJob controller in a manager watching one fresh
// namespace. Runs are recorded in env.rec and with each of also.
func start(t *testing.T, also ...job.Recorder) *env {
	t.Helper()
	kube := testbed.SharedKube(t)
	ns := kube.Namespace(t)
	rec := &runs{}
	mgr, err := ctrl.NewManager(kube.Config, ctrl.Options{
		Scheme:  kube.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{ns: {}},
			ByObject:          job.CacheByObject(),
		},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := job.SetupWithManager(mgr, job.Options{Recorder: append(recorders{rec}, also...)}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return &env{t: t, c: kube.Client, ns: ns, rec: rec, knative: testbed.SharedKnative(t)}
}

// createFunction makes a Function and, given an image, serves it (see
// serve) with its status saying so, as the Function reconciler would:
// revision <name>-00001 ready with img. mut, if any, changes its spec first.
func (e *env) createFunction(name, img string, mut ...func(*slessv1alpha1.FunctionSpec)) *slessv1alpha1.Function {
	e.t.Helper()
	fn := &slessv1alpha1.Function{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: slessv1alpha1.FunctionSpec{
			WorkloadSpec: slessv1alpha1.WorkloadSpec{
				Runtime:    "python3.12",
				Entrypoint: "main.handler",
				Source:     slessv1alpha1.FunctionSource{Inline: &slessv1alpha1.InlineSource{Files: map[string]string{"main.py": "def handler(e, c): return e"}}},
			},
		},
	}
	for _, m := range mut {
		m(&fn.Spec)
	}
	ctx := context.Background()
	if err := e.c.Create(ctx, fn); err != nil {
		e.t.Fatal(err)
	}
	if img != "" {
		fn.Status.Image, fn.Status.ServingImage = img, img
		fn.Status.LatestCreatedRevision = e.serve(fn, img)
		fn.Status.LatestReadyRevision = fn.Status.LatestCreatedRevision
		if err := e.c.Status().Update(ctx, fn); err != nil {
			e.t.Fatal(err)
		}
	}
	return fn
}

// serve plays the Function reconciler's part with Knative: it makes or
// updates fn's Knative Service for img as the Knative adapter does, and
// waits for the simulator to make the revision of fn's generation and
// settle it (ready, or failed by the namespace's policy). It returns that
// revision's name.
func (e *env) serve(fn *slessv1alpha1.Function, img string) string {
	e.t.Helper()
	ctx := context.Background()
	want := fnresources.MakeService(fn, img, fnresources.Config{})
	svc := &servingv1.Service{}
	err := e.c.Get(ctx, client.ObjectKeyFromObject(want), svc)
	switch {
	case apierrors.IsNotFound(err):
		err = e.c.Create(ctx, want)
	case err == nil:
		svc.Spec.Template = want.Spec.Template
		err = e.c.Update(ctx, svc)
	}
	if err != nil {
		e.t.Fatal(err)
	}
	e.eventually("revision "+want.Spec.Template.Name+" settled", func() (bool, string) {
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(want), svc); err != nil {
			return false, err.Error()
		}
		c := svc.Status.GetCondition(servingv1.ServiceConditionReady)
		return svc.Status.ObservedGeneration == svc.Generation && svc.Status.LatestCreatedRevisionName == want.Spec.Template.Name &&
			c != nil && !c.IsUnknown(), "status " + svc.Status.LatestCreatedRevisionName + "/" + svc.Status.LatestReadyRevisionName
	})
	return want.Spec.Template.Name
}

// eventually polls cond until it holds or the deadline passes.
func (e *env) eventually(what string, cond func() (bool, string)) {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	last := ""
	for time.Now().Before(deadline) {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		time.Sleep(20 * time.Millisecond)
	}
	e.t.Fatalf("timed out waiting for %s; last state: %s", what, last)
}

func (e *env) get(name string) *slessv1alpha1.FunctionJob {
	e.t.Helper()
	fj := &slessv1alpha1.FunctionJob{}
	if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: e.ns, Name: name}, fj); err != nil {
		e.t.Fatal(err)
	}
	return fj
}

func (e *env) waitPhase(name string, runID int64, phase slessv1alpha1.JobPhase) *slessv1alpha1.FunctionJob {
	e.t.Helper()
	var fj *slessv1alpha1.FunctionJob
	e.eventually("FunctionJob "+name+" phase "+string(phase), func() (bool, string) {
		fj = e.get(name)
		return fj.Status.RunID == runID && fj.Status.Phase == phase && fj.Status.ObservedGeneration == fj.Generation,
			describe(fj)
	})
	return fj
}

func describe(fj *slessv1alpha1.FunctionJob) string {
	var b strings.Builder
	b.WriteString("run " + strconv.FormatInt(fj.Status.RunID, 10) + " phase " + string(fj.Status.Phase))
	for _, c := range fj.Status.Conditions {
		b.WriteString("; " + c.Type + "=" + string(c.Status) + " " + c.Reason + ": " + c.Message)
	}
	return b.String()
}

func (e *env) waitJob(name string) *batchv1.Job {
	e.t.Helper()
	j := &batchv1.Job{}
	e.eventually("Job "+name, func() (bool, string) {
		err := e.c.Get(context.Background(), types.NamespacedName{Namespace: e.ns, Name: name}, j)
		return err == nil, "get: " + errString(err)
	})
	return j
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// pod plays the Job controller: it creates the run's Pod as the Job's.
func (e *env) pod(j *batchv1.Job) *corev1.Pod {
	e.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: j.Name + "-x7k2p", Namespace: e.ns, Labels: j.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(j, batchv1.SchemeGroupVersion.WithKind("Job"))},
		},
		Spec: *j.Spec.Template.Spec.DeepCopy(),
	}
	if err := e.c.Create(context.Background(), p); err != nil {
		e.t.Fatal(err)
	}
	return p
}

func (e *env) setContainer(p *corev1.Pod, phase corev1.PodPhase, state corev1.ContainerState) {
	e.t.Helper()
	p.Status.Phase = phase
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "function", Image: image, State: state, Ready: state.Running != nil}}
	if err := e.c.Status().Update(context.Background(), p); err != nil {
		e.t.Fatal(err)
	}
}

// finishJob plays the Job controller's last status write for a run that
// ended: success or failure, with the conditions the apiserver requires.
func (e *env) finishJob(j *batchv1.Job, start, end time.Time, succeeded bool, reason string) {
	e.t.Helper()
	ctx := context.Background()
	if err := e.c.Get(ctx, client.ObjectKeyFromObject(j), j); err != nil {
		e.t.Fatal(err)
	}
	s := metav1.NewTime(start)
	f := metav1.NewTime(end)
	j.Status.StartTime = &s
	j.Status.Active = 0
	j.Status.Ready = ptr.To[int32](0)
	j.Status.Terminating = ptr.To[int32](0)
	j.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
	if succeeded {
		j.Status.Succeeded = 1
		j.Status.CompletionTime = &f
		j.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: f, LastProbeTime: f},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: f, LastProbeTime: f},
		}
	} else {
		j.Status.Failed = 1
		j.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: reason, LastTransitionTime: f, LastProbeTime: f},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: reason, Message: "Job has reached the specified backoff limit", LastTransitionTime: f, LastProbeTime: f},
		}
	}
	if err := e.c.Status().Update(ctx, j); err != nil {
		e.t.Fatalf("job status: %v", err)
	}
}

func (e *env) startJob(j *batchv1.Job, start time.Time) {
	e.t.Helper()
	ctx := context.Background()
	if err := e.c.Get(ctx, client.ObjectKeyFromObject(j), j); err != nil {
		e.t.Fatal(err)
	}
	s := metav1.NewTime(start)
	j.Status.StartTime = &s
	j.Status.Active = 1
	j.Status.Ready = ptr.To[int32](1)
	j.Status.Terminating = ptr.To[int32](0)
	if err := e.c.Status().Update(ctx, j); err != nil {
		e.t.Fatalf("job status: %v", err)
	}
}

func condition(fj *slessv1alpha1.FunctionJob, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(fj.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func TestFunctionJobLifecycle(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	e.createFunction("hello", image)
	fj := &slessv1alpha1.FunctionJob{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: e.ns},
		Spec: slessv1alpha1.FunctionJobSpec{
			Function: "hello", RunID: 1, TimeoutSeconds: ptr.To[int32](90),
			Payload: &apiextensionsv1.JSON{Raw: []byte(`{"day": "2026-12-02"}`)},
		},
	}
	if err := e.c.Create(ctx, fj); err != nil {
		t.Fatal(err)
	}

	// Run 1: the Job appears with the function's image in job mode.
	j1 := e.waitJob("nightly-1")
	if !metav1.IsControlledBy(j1, e.get("nightly")) {
		t.Errorf("Job owner references %v do not name the FunctionJob as controller", j1.OwnerReferences)
	}
	c := j1.Spec.Template.Spec.Containers[0]
	if c.Image != image {
		t.Errorf("image %q, want %q", c.Image, image)
	}
	envs := map[string]string{}
	for _, ev := range c.Env {
		envs[ev.Name] = ev.Value
	}
	if envs["SLESS_MODE"] != "job" || envs["SLESS_PAYLOAD"] != `{"day":"2026-12-02"}` || envs["SLESS_TIMEOUT_SECONDS"] != "90" {
		t.Errorf("job-mode env %v", envs)
	}
	if got := ptr.Deref(j1.Spec.ActiveDeadlineSeconds, 0); got != 150 {
		t.Errorf("activeDeadlineSeconds %d, want 150 (timeout 90 + 60 start-up)", got)
	}
	if j1.Spec.TTLSecondsAfterFinished == nil || *j1.Spec.TTLSecondsAfterFinished <= 0 {
		t.Errorf("ttlSecondsAfterFinished unset: old Jobs would never be cleaned")
	}
	got := e.waitPhase("nightly", 1, slessv1alpha1.JobPhasePending)
	if got.Status.JobName != "nightly-1" || condition(got, "Ready").Status != metav1.ConditionTrue {
		t.Errorf("pending status %+v", got.Status)
	}

	// The Pod runs.
	start1 := time.Now().Add(-3 * time.Second).Truncate(time.Second)
	p1 := e.pod(j1)
	e.startJob(j1, start1)
	e.setContainer(p1, corev1.PodRunning, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(start1)}})
	e.waitPhase("nightly", 1, slessv1alpha1.JobPhaseRunning)
	if n := len(e.rec.list()); n != 0 {
		t.Fatalf("%d runs recorded before the run finished", n)
	}

	// It succeeds: output from the termination message, exit code, times.
	end1 := start1.Add(2 * time.Second)
	e.setContainer(p1, corev1.PodSucceeded, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 0, Reason: "Completed", Message: `{"rows": 42}`, StartedAt: metav1.NewTime(start1), FinishedAt: metav1.NewTime(end1),
	}})
	e.finishJob(j1, start1, end1, true, "")
	got = e.waitPhase("nightly", 1, slessv1alpha1.JobPhaseSucceeded)
	e.eventually("output", func() (bool, string) {
		got = e.get("nightly")
		return got.Status.Output == `{"rows": 42}`, "output " + got.Status.Output
	})
	if got.Status.ExitCode == nil || *got.Status.ExitCode != 0 {
		t.Errorf("exit code %v, want 0", got.Status.ExitCode)
	}
	if got.Status.StartTime == nil || !got.Status.StartTime.Time.Equal(start1) || got.Status.CompletionTime == nil || !got.Status.CompletionTime.Time.Equal(end1) {
		t.Errorf("times %v..%v, want %v..%v", got.Status.StartTime, got.Status.CompletionTime, start1, end1)
	}
	if cc := condition(got, "Complete"); cc.Status != metav1.ConditionTrue || cc.Reason != slessv1alpha1.JobReasonSucceeded {
		t.Errorf("Complete condition %+v", cc)
	}
	e.eventually("one recorded run", func() (bool, string) {
		return len(e.rec.list()) == 1, "recorded " + strconv.Itoa(len(e.rec.list()))
	})
	r := e.rec.list()[0]
	if r.Trigger != "job" || r.Status != 200 || r.Function != "hello" || r.Namespace != e.ns || r.Duration != 2*time.Second ||
		!r.Started.Equal(start1) || r.Revision != "hello-00001" || !strings.HasSuffix(r.RequestID, "-1") {
		t.Errorf("recorded run %+v", r)
	}

	// Run 2: a new runID makes a new Job; this one fails.
	got.Spec.RunID = 2
	if err := e.c.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	j2 := e.waitJob("nightly-2")
	got = e.waitPhase("nightly", 2, slessv1alpha1.JobPhasePending)
	if got.Status.Output != "" || got.Status.ExitCode != nil || got.Status.StartTime != nil {
		t.Errorf("run 2 status carries run 1's result: %+v", got.Status)
	}
	p2 := e.pod(j2)
	start2 := time.Now().Truncate(time.Second)
	end2 := start2.Add(time.Second)
	e.setContainer(p2, corev1.PodFailed, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 1, Reason: "Error", Message: `{"error": {"type": "ValueError", "message": "no rows for 2026-12-02"}, "requestId": "r"}`,
		StartedAt: metav1.NewTime(start2), FinishedAt: metav1.NewTime(end2),
	}})
	e.finishJob(j2, start2, end2, false, batchv1.JobReasonBackoffLimitExceeded)
	got = e.waitPhase("nightly", 2, slessv1alpha1.JobPhaseFailed)
	e.eventually("failure message", func() (bool, string) {
		got = e.get("nightly")
		return strings.Contains(got.Status.Message, "ValueError: no rows for 2026-12-02"), "message " + got.Status.Message
	})
	if got.Status.ExitCode == nil || *got.Status.ExitCode != 1 {
		t.Errorf("exit code %v, want 1", got.Status.ExitCode)
	}
	if cc := condition(got, "Complete"); cc.Status != metav1.ConditionFalse || cc.Reason != slessv1alpha1.JobReasonFailed {
		t.Errorf("Complete condition %+v", cc)
	}
	e.eventually("two recorded runs", func() (bool, string) { return len(e.rec.list()) == 2, "" })
	if r := e.rec.list()[1]; r.Status != 500 || !strings.Contains(r.Error, "ValueError") || !strings.HasSuffix(r.RequestID, "-2") {
		t.Errorf("recorded failed run %+v", r)
	}
	// Run 1's Job is left to its TTL, not deleted by the new run.
	if err := e.c.Get(ctx, client.ObjectKeyFromObject(j1), &batchv1.Job{}); err != nil {
		t.Errorf("run 1's Job: %v", err)
	}

	// runID 0: nothing runs.
	got.Spec.RunID = 0
	if err := e.c.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	got = e.waitPhase("nightly", 0, slessv1alpha1.JobPhaseIdle)
	if meta.FindStatusCondition(got.Status.Conditions, "Complete") != nil || got.Status.JobName != "" {
		t.Errorf("idle status %+v", got.Status)
	}
	jobs := &batchv1.JobList{}
	if err := e.c.List(ctx, jobs, client.InNamespace(e.ns)); err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 2 {
		t.Errorf("%d Jobs, want the 2 of runs 1 and 2", len(jobs.Items))
	}
	// No more records: a status rewrite never records a run twice.
	if n := len(e.rec.list()); n != 2 {
		t.Errorf("%d runs recorded, want 2", n)
	}
}

// TestFunctionJobDeadlineExceeded: a run that outlives its timeout ends
// DeadlineExceeded with a 504 record, however it was stopped — by the Job's
// activeDeadlineSeconds, or by the runtime wrapper, which stops the handler
// at timeoutSeconds (well before that deadline) and exits 1 with its
// "Timeout" error as the termination message.
func TestFunctionJobDeadlineExceeded(t *testing.T) {
	for _, tc := range []struct {
		name string
		// term is the function container's end; nil: no Pod reported one.
		term *corev1.ContainerStateTerminated
		// jobReason is the reason of the Job's Failed condition.
		jobReason   string
		wantMessage string
	}{{
		name:        "Job past activeDeadlineSeconds",
		jobReason:   batchv1.JobReasonDeadlineExceeded,
		wantMessage: "deadline",
	}, {
		name: "wrapper's Timeout exit",
		term: &corev1.ContainerStateTerminated{
			ExitCode: 1, Reason: "Error",
			Message: `{"error": {"type": "Timeout", "message": "function exceeded its timeout of 30s"}, "requestId": "r"}`,
		},
		jobReason:   batchv1.JobReasonBackoffLimitExceeded,
		wantMessage: "function exceeded its timeout of 30s",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			e := start(t)
			ctx := context.Background()
			e.createFunction("slow", image)
			fj := &slessv1alpha1.FunctionJob{ObjectMeta: metav1.ObjectMeta{Name: "slow", Namespace: e.ns}, Spec: slessv1alpha1.FunctionJobSpec{Function: "slow", RunID: 3}}
			if err := e.c.Create(ctx, fj); err != nil {
				t.Fatal(err)
			}
			j := e.waitJob("slow-3")
			now := time.Now().Truncate(time.Second)
			begin := now.Add(-30 * time.Second)
			if tc.term != nil {
				p := e.pod(j)
				term := tc.term.DeepCopy()
				term.StartedAt, term.FinishedAt = metav1.NewTime(begin), metav1.NewTime(now)
				e.setContainer(p, corev1.PodFailed, corev1.ContainerState{Terminated: term})
				// The Job controller fails the Job only after it saw the Pod
				// fail; wait for the Pod to reach this controller's cache
				// too, as it does on a cluster, so the Job's failure meets
				// the termination message.
				e.eventually("exit code", func() (bool, string) {
					got := e.get("slow")
					return got.Status.ExitCode != nil, describe(got)
				})
			}
			e.finishJob(j, begin, now, false, tc.jobReason)
			got := e.waitPhase("slow", 3, slessv1alpha1.JobPhaseFailed)
			if cc := condition(got, "Complete"); cc.Status != metav1.ConditionFalse || cc.Reason != slessv1alpha1.JobReasonDeadlineExceeded || !strings.Contains(cc.Message, tc.wantMessage) {
				t.Errorf("Complete condition %+v, want False %s mentioning %q", cc, slessv1alpha1.JobReasonDeadlineExceeded, tc.wantMessage)
			}
			if got.Status.CompletionTime == nil || !got.Status.CompletionTime.Time.Equal(now) {
				t.Errorf("completion time %v, want the Failed condition's %v", got.Status.CompletionTime, now)
			}
			e.eventually("recorded", func() (bool, string) { return len(e.rec.list()) == 1, "" })
			if r := e.rec.list()[0]; r.Status != 504 || !strings.Contains(r.Error, tc.wantMessage) {
				t.Errorf("recorded run %+v, want status 504 and an error mentioning %q", r, tc.wantMessage)
			}
		})
	}
}

func TestFunctionJobWaitsForItsFunction(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	fj := &slessv1alpha1.FunctionJob{ObjectMeta: metav1.ObjectMeta{Name: "early", Namespace: e.ns}, Spec: slessv1alpha1.FunctionJobSpec{Function: "later", RunID: 1}}
	if err := e.c.Create(ctx, fj); err != nil {
		t.Fatal(err)
	}
	e.eventually("FunctionNotFound", func() (bool, string) {
		got := e.get("early")
		c := condition(got, "Ready")
		return c.Reason == slessv1alpha1.JobReasonFunctionNotFound && c.Status == metav1.ConditionFalse && got.Status.Phase == slessv1alpha1.JobPhasePending, describe(got)
	})
	fn := e.createFunction("later", "")
	e.eventually("FunctionNotBuilt", func() (bool, string) {
		got := e.get("early")
		return condition(got, "Ready").Reason == slessv1alpha1.JobReasonFunctionNotBuilt, describe(got)
	})
	if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "early-1"}, &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a Job exists before the function has an image: %v", err)
	}
	// The function gets its image and its revision serves: the Function's
	// watch starts the run.
	fn.Status.Image, fn.Status.ServingImage = image, image
	fn.Status.LatestReadyRevision = e.serve(fn, image)
	if err := e.c.Status().Update(ctx, fn); err != nil {
		t.Fatal(err)
	}
	j := e.waitJob("early-1")
	if j.Spec.Template.Spec.Containers[0].Image != image {
		t.Errorf("image %q", j.Spec.Template.Spec.Containers[0].Image)
	}
}

func TestFunctionJobRefusesForeignJob(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	e.createFunction("hello", image)
	foreign := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "taken-1", Namespace: e.ns},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "x", Image: "busybox"}},
		}}},
	}
	if err := e.c.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	fj := &slessv1alpha1.FunctionJob{ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: e.ns}, Spec: slessv1alpha1.FunctionJobSpec{Function: "hello", RunID: 1}}
	if err := e.c.Create(ctx, fj); err != nil {
		t.Fatal(err)
	}
	e.eventually("JobConflict", func() (bool, string) {
		got := e.get("taken")
		return condition(got, "Ready").Reason == slessv1alpha1.JobReasonJobConflict, describe(got)
	})
}
