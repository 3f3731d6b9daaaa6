package job_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/reconciler/job"
)

// A Job deleted mid-run fails the run with JobGone, says why in
// status.message as any failure does, and records it once as a 500 with
// that error. Before, status.message and the record's error were empty.
func TestFunctionJobJobGone(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	e.createFunction("hello", image)
	fj := &slessv1alpha1.FunctionJob{ObjectMeta: metav1.ObjectMeta{Name: "gone", Namespace: e.ns},
		Spec: slessv1alpha1.FunctionJobSpec{Function: "hello", RunID: 3}}
	if err := e.c.Create(ctx, fj); err != nil {
		t.Fatal(err)
	}
	j := e.waitJob("gone-3")
	e.startJob(j, time.Now().Add(-time.Minute))
	e.waitPhase("gone", 3, slessv1alpha1.JobPhaseRunning)
	if err := e.c.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	got := e.waitPhase("gone", 3, slessv1alpha1.JobPhaseFailed)
	if c := condition(got, slessv1alpha1.JobConditionComplete); c.Reason != job.ReasonJobGone || !strings.Contains(got.Status.Message, "was deleted before the run finished") {
		t.Errorf("Complete %+v, message %q; want JobGone saying so in status.message", c, got.Status.Message)
	}
	e.eventually("the lost run recorded", func() (bool, string) {
		runs := e.rec.list()
		return len(runs) == 1 && runs[0].Status == 500 && strings.Contains(runs[0].Error, "was deleted before the run finished"),
			describe(e.get("gone"))
	})
}
