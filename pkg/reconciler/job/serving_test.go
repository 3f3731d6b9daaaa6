package job_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/reconciler/job"
	"github.com/sless-dev/sless/test/testbed"
)

// newerImage is the image of a revision made after image's.
const newerImage = "registry.example.com/fn/hello@sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

// A run executes the code the function serves. After a bad deploy — the
// latest revision built but failed to become ready — Knative keeps the
// older revision serving, so calls reach its image: the run's Job runs that
// image too, and the Job, the handler's SLESS_REVISION and the record name
// that revision, not the one whose image failed. The failed deploy also
// changed the function's env, memory, CPU and timeout: the run has the
// serving revision's, as its Knative Revision has them, since the old code
// is not meant for the new settings.
func TestFunctionJobRunsTheServingRevision(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	fn := e.createFunction("hello", image, func(s *slessv1alpha1.FunctionSpec) {
		s.Env = []slessv1alpha1.EnvVar{{Name: "GREETING", Value: "old"}}
		s.MemoryMB = ptr.To[int32](256)
		s.TimeoutSeconds = ptr.To[int32](45)
	})
	served := fn.Status.LatestReadyRevision

	// A bad deploy: the new spec's revision fails, the first keeps serving.
	e.knative.SetPolicy(e.ns, testbed.ServePolicy{Mode: testbed.ServeFail, Message: "Unable to fetch image: 401 Unauthorized."})
	fn.Spec.Env = []slessv1alpha1.EnvVar{{Name: "GREETING", Value: "new"}, {Name: "ONLY_NEW", Value: "1"}}
	fn.Spec.MemoryMB = ptr.To[int32](1024)
	fn.Spec.CPU = ptr.To(resource.MustParse("2"))
	fn.Spec.TimeoutSeconds = ptr.To[int32](600)
	if err := e.c.Update(ctx, fn); err != nil {
		t.Fatal(err)
	}
	failed := e.serve(fn, newerImage)
	if failed == served {
		t.Fatalf("the new spec made no new revision (%s)", failed)
	}
	fn.Status.Image = newerImage
	fn.Status.LatestCreatedRevision = failed
	fn.Status.Phase = slessv1alpha1.FunctionPhaseFailed
	if err := e.c.Status().Update(ctx, fn); err != nil {
		t.Fatal(err)
	}
	fj := &slessv1alpha1.FunctionJob{
		ObjectMeta: metav1.ObjectMeta{Name: "after-bad-deploy", Namespace: e.ns},
		Spec:       slessv1alpha1.FunctionJobSpec{Function: "hello", RunID: 1},
	}
	if err := e.c.Create(ctx, fj); err != nil {
		t.Fatal(err)
	}
	j := e.waitJob("after-bad-deploy-1")
	c := j.Spec.Template.Spec.Containers[0]
	if c.Image != image {
		t.Errorf("the run's image is %q, want the serving revision's %q (not the failed revision's %q)", c.Image, image, newerImage)
	}
	envs := map[string]string{}
	for _, ev := range c.Env {
		envs[ev.Name] = ev.Value
	}
	if rev := envs["SLESS_REVISION"]; rev != "hello-00001" || j.Annotations["sless.dev/revision"] != "hello-00001" {
		t.Errorf("SLESS_REVISION %q, revision annotation %q; want hello-00001", rev, j.Annotations["sless.dev/revision"])
	}
	if _, leaked := envs["ONLY_NEW"]; envs["GREETING"] != "old" || leaked || envs["SLESS_TIMEOUT_SECONDS"] != "45" {
		t.Errorf("the run's env %v: want the serving revision's GREETING=old and SLESS_TIMEOUT_SECONDS=45, nothing of the failed spec's", c.Env)
	}
	mem256 := *resource.NewQuantity(256*1024*1024, resource.BinarySI)
	wantRes := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: mem256}, Limits: corev1.ResourceList{corev1.ResourceMemory: mem256}}
	if !equality.Semantic.DeepEqual(c.Resources, wantRes) {
		t.Errorf("the run's resources %+v, want the serving revision's %+v", c.Resources, wantRes)
	}
	if d := j.Spec.ActiveDeadlineSeconds; d == nil || *d != 45+60 {
		t.Errorf("activeDeadlineSeconds %d, want the serving revision's timeout 45 + 60", ptr.Deref(d, 0))
	}

	start1 := time.Now().Add(-2 * time.Second).Truncate(time.Second)
	end1 := start1.Add(time.Second)
	p := e.pod(j)
	e.setContainer(p, corev1.PodSucceeded, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 0, Reason: "Completed", Message: `"ok"`, StartedAt: metav1.NewTime(start1), FinishedAt: metav1.NewTime(end1),
	}})
	e.finishJob(j, start1, end1, true, "")
	e.waitPhase("after-bad-deploy", 1, slessv1alpha1.JobPhaseSucceeded)
	e.eventually("one recorded run", func() (bool, string) {
		return len(e.rec.list()) == 1, "recorded " + strconv.Itoa(len(e.rec.list()))
	})
	if r := e.rec.list()[0]; r.Revision != "hello-00001" || r.Status != 200 {
		t.Errorf("recorded run %+v, want revision hello-00001 and status 200", r)
	}
}

// A built function none of whose revisions is ready yet has no code that
// serves: a run waits with FunctionNotReady, and starts once one is ready.
func TestFunctionJobWaitsForAReadyRevision(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	fn := e.createFunction("fresh", "")
	fn.Status.Image, fn.Status.LatestCreatedRevision = newerImage, "fresh-00001"
	if err := e.c.Status().Update(ctx, fn); err != nil {
		t.Fatal(err)
	}
	fj := &slessv1alpha1.FunctionJob{
		ObjectMeta: metav1.ObjectMeta{Name: "early", Namespace: e.ns},
		Spec:       slessv1alpha1.FunctionJobSpec{Function: "fresh", RunID: 1},
	}
	if err := e.c.Create(ctx, fj); err != nil {
		t.Fatal(err)
	}
	e.eventually("FunctionNotReady", func() (bool, string) {
		got := e.get("early")
		r := condition(got, "Ready")
		return r.Status == metav1.ConditionFalse && r.Reason == slessv1alpha1.JobReasonFunctionNotReady && got.Status.Phase == slessv1alpha1.JobPhasePending, describe(got)
	})
	fn.Status.LatestReadyRevision, fn.Status.ServingImage = e.serve(fn, newerImage), newerImage
	if err := e.c.Status().Update(ctx, fn); err != nil {
		t.Fatal(err)
	}
	if j := e.waitJob("early-1"); j.Spec.Template.Spec.Containers[0].Image != newerImage {
		t.Errorf("image %q, want %q", j.Spec.Template.Spec.Containers[0].Image, newerImage)
	}
}

func TestWaitReason(t *testing.T) {
	failed := func(st slessv1alpha1.FunctionStatus, reason, message string) slessv1alpha1.FunctionStatus {
		st.Phase, st.ObservedGeneration = slessv1alpha1.FunctionPhaseFailed, 1
		st.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: reason, Message: message}}
		return st
	}
	tests := []struct {
		name   string
		status slessv1alpha1.FunctionStatus
		want   string
		// says is what the message must contain beyond the wait itself.
		says string
	}{
		{name: "first build failed", status: failed(slessv1alpha1.FunctionStatus{}, "BuildFailed", `step "build-and-push" failed: exit 1`),
			want: slessv1alpha1.JobReasonFunctionNotBuilt, says: `has no built image yet: it failed (BuildFailed): step "build-and-push" failed: exit 1`},
		{name: "first revision refused", status: failed(slessv1alpha1.FunctionStatus{Image: image, LatestCreatedRevision: "f-00001"}, "ServiceRejected", "expected 0 <= 900 <= 600"),
			want: slessv1alpha1.JobReasonFunctionNotReady, says: "has no ready revision yet: it failed (ServiceRejected): expected 0 <= 900 <= 600"},
		{name: "failed message cut", status: failed(slessv1alpha1.FunctionStatus{}, "BuildFailed", strings.Repeat("é", 2000)),
			want: slessv1alpha1.JobReasonFunctionNotBuilt, says: "it failed (BuildFailed): éé"},
		{name: "nothing built", status: slessv1alpha1.FunctionStatus{}, want: slessv1alpha1.JobReasonFunctionNotBuilt},
		{name: "built, no revision ready", status: slessv1alpha1.FunctionStatus{Image: image, LatestCreatedRevision: "f-00001"}, want: slessv1alpha1.JobReasonFunctionNotReady},
		{name: "a tag not yet resolved", status: slessv1alpha1.FunctionStatus{Image: "registry.example.com/fn/hello:v1"}, want: slessv1alpha1.JobReasonFunctionNotBuilt},
		{name: "ready", status: slessv1alpha1.FunctionStatus{Image: image, ServingImage: image, LatestReadyRevision: "f-00001"}},
		{name: "newer revision failed, older serves", status: slessv1alpha1.FunctionStatus{Image: newerImage, ServingImage: image, LatestReadyRevision: "f-00001"}},
		{name: "newer build failed, older serves", status: slessv1alpha1.FunctionStatus{ServingImage: image, LatestReadyRevision: "f-00001"}},
		{name: "serving image not pinned", status: slessv1alpha1.FunctionStatus{Image: image, ServingImage: "registry.example.com/fn/hello:v1", LatestReadyRevision: "f-00001"}, want: slessv1alpha1.JobReasonFunctionNotReady},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fn := &slessv1alpha1.Function{ObjectMeta: metav1.ObjectMeta{Name: "f", Generation: 1}, Status: tc.status}
			got, msg := job.WaitReason(fn)
			if got != tc.want || (got == "") != (msg == "") {
				t.Errorf("WaitReason = %q (%q), want %q", got, msg, tc.want)
			}
			if !strings.Contains(msg, tc.says) || len(msg) > 1024 || !utf8.ValidString(msg) {
				t.Errorf("WaitReason message %q (%d bytes) does not say %q in at most 1 KiB of UTF-8", msg, len(msg), tc.says)
			}
			if tc.says == "" && strings.Contains(msg, "failed") {
				t.Errorf("WaitReason message %q tells a failure the Function has not", msg)
			}
		})
	}
}
