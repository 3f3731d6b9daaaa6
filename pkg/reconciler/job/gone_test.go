package job_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/adapter/postgres"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/reconciler/job"
	"github.com/sless-dev/sless/test/testbed"
)

// pgRecorder records runs in PostgreSQL as sless controller does.
type pgRecorder struct{ r *invoke.Recorder }

func (p pgRecorder) RecordRun(run job.Run) {
	p.r.Record(invoke.Record{Namespace: run.Namespace, Function: run.Function, Revision: run.Revision, Trigger: invoke.TriggerJob,
		RequestID: run.RequestID, StartedAt: run.Started, Duration: run.Duration, Status: run.Status, Error: run.Error})
}

// A Job deleted mid-run fails the run with JobGone, says why in
// status.message as any failure does, and records it once as a 500 with
// that error, the revision that ran and the time from its start to when
// it was seen gone (status.completionTime), as every other run's row has.
// Before, status.message and the record's error were empty, and then the
// row's revision was empty and its duration 0.
func TestFunctionJobJobGone(t *testing.T) {
	ctx := context.Background()
	pg, err := postgres.Open(testbed.DatabaseURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pg.Close)
	if err := pg.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	rec := invoke.NewRecorder(pg, invoke.RecorderOptions{FlushInterval: -1})
	t.Cleanup(func() { _ = rec.Close(context.Background()) })
	e := start(t, pgRecorder{rec})
	fn := e.createFunction("hello", image)
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
	if c := condition(got, slessv1alpha1.JobConditionComplete); c.Reason != slessv1alpha1.JobReasonJobGone || !strings.Contains(got.Status.Message, "was deleted before the run finished") {
		t.Errorf("Complete %+v, message %q; want JobGone saying so in status.message", c, got.Status.Message)
	}
	if got.Status.Revision != fn.Status.LatestReadyRevision || got.Status.CompletionTime == nil {
		t.Errorf("status revision %q, completionTime %v; want %q and when the run was seen gone",
			got.Status.Revision, got.Status.CompletionTime, fn.Status.LatestReadyRevision)
	}
	e.eventually("the lost run recorded", func() (bool, string) {
		runs := e.rec.list()
		return len(runs) == 1 && runs[0].Status == 500 && strings.Contains(runs[0].Error, "was deleted before the run finished"),
			describe(e.get("gone"))
	})
	e.eventually("the lost run's row in PostgreSQL", func() (bool, string) {
		page, err := pg.List(ctx, invoke.Query{Namespace: e.ns, Function: "hello", Limit: 10})
		if err != nil {
			return false, err.Error()
		}
		if len(page.Items) != 1 {
			return false, fmt.Sprintf("%d rows", len(page.Items))
		}
		r := page.Items[0]
		return r.Status == 500 && r.Trigger == invoke.TriggerJob && r.Revision == fn.Status.LatestReadyRevision &&
				r.Duration >= time.Minute && strings.Contains(r.Error, "was deleted before the run finished"),
			fmt.Sprintf("row %+v", r)
	})
}
