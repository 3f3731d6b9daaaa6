package job_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/reconciler/job"
)

// newerImage is the image of a revision made after image's.
const newerImage = "registry.example.com/fn/hello@sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

// A run executes the code the function serves. After a bad deploy — the
// latest revision built but failed to become ready — Knative keeps the
// older revision serving, so calls reach its image: the run's Job runs that
// image too, and the Job, the handler's SLESS_REVISION and the record name
// that revision, not the one whose image failed.
func TestFunctionJobRunsTheServingRevision(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	fn := e.createFunction("hello", image)
	fn.Status.Image = newerImage
	fn.Status.LatestCreatedRevision = "hello-00002"
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
	rev := ""
	for _, ev := range c.Env {
		if ev.Name == "SLESS_REVISION" {
			rev = ev.Value
		}
	}
	if rev != "hello-00001" || j.Annotations["sless.dev/revision"] != "hello-00001" {
		t.Errorf("SLESS_REVISION %q, revision annotation %q; want hello-00001", rev, j.Annotations["sless.dev/revision"])
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
		return r.Status == metav1.ConditionFalse && r.Reason == job.ReasonFunctionNotReady && got.Status.Phase == slessv1alpha1.JobPhasePending, describe(got)
	})
	fn.Status.LatestReadyRevision, fn.Status.ServingImage = "fresh-00001", newerImage
	if err := e.c.Status().Update(ctx, fn); err != nil {
		t.Fatal(err)
	}
	if j := e.waitJob("early-1"); j.Spec.Template.Spec.Containers[0].Image != newerImage {
		t.Errorf("image %q, want %q", j.Spec.Template.Spec.Containers[0].Image, newerImage)
	}
}

func TestWaitReason(t *testing.T) {
	tests := []struct {
		name   string
		status slessv1alpha1.FunctionStatus
		want   string
	}{
		{"nothing built", slessv1alpha1.FunctionStatus{}, job.ReasonFunctionNotBuilt},
		{"built, no revision ready", slessv1alpha1.FunctionStatus{Image: image, LatestCreatedRevision: "f-00001"}, job.ReasonFunctionNotReady},
		{"a tag not yet resolved", slessv1alpha1.FunctionStatus{Image: "registry.example.com/fn/hello:v1"}, job.ReasonFunctionNotBuilt},
		{"ready", slessv1alpha1.FunctionStatus{Image: image, ServingImage: image, LatestReadyRevision: "f-00001"}, ""},
		{"newer revision failed, older serves", slessv1alpha1.FunctionStatus{Image: newerImage, ServingImage: image, LatestReadyRevision: "f-00001"}, ""},
		{"newer build failed, older serves", slessv1alpha1.FunctionStatus{ServingImage: image, LatestReadyRevision: "f-00001"}, ""},
		{"serving image not pinned", slessv1alpha1.FunctionStatus{Image: image, ServingImage: "registry.example.com/fn/hello:v1", LatestReadyRevision: "f-00001"}, job.ReasonFunctionNotReady},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fn := &slessv1alpha1.Function{ObjectMeta: metav1.ObjectMeta{Name: "f"}, Status: tc.status}
			if got, msg := job.WaitReason(fn); got != tc.want || (got == "") != (msg == "") {
				t.Errorf("WaitReason = %q (%q), want %q", got, msg, tc.want)
			}
		})
	}
}
