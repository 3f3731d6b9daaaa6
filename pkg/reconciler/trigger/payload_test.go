package trigger_test

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

func jsonOfSize(n int) *apiextensionsv1.JSON {
	return &apiextensionsv1.JSON{Raw: []byte(`"` + strings.Repeat("a", n-2) + `"`)}
}

// A cron payload that SLESS_PAYLOAD cannot hold pauses the trigger as an
// invalid schedule does — Ready False PayloadTooLarge, its CronJob of the
// earlier payload suspended — since every run's pod would fail to start
// ("argument list too long"); before, the CronJob was made with it. One at
// the limit schedules as usual.
func TestCronPayloadTooLarge(t *testing.T) {
	e := setup(t, time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	ctx := context.Background()
	e.function("report")
	e.create(&slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Name: "bulky"}, Spec: slessv1alpha1.TriggerSpec{
		Function: "report", Type: slessv1alpha1.TriggerTypeCron, Schedule: "@hourly", Payload: jsonOfSize(slessv1alpha1.MaxPayloadBytes)}})
	e.reconcile("bulky")
	cronJob := func() *batchv1.CronJob {
		cj := &batchv1.CronJob{}
		if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "bulky"}, cj); err != nil {
			t.Fatal(err)
		}
		return cj
	}
	if c := ready(e.get("bulky")); c.Status != metav1.ConditionTrue || ptr.Deref(cronJob().Spec.Suspend, true) {
		t.Fatalf("at the limit: Ready %+v, suspend %v", c, cronJob().Spec.Suspend)
	}

	e.update("bulky", func(tr *slessv1alpha1.Trigger) { tr.Spec.Payload = jsonOfSize(slessv1alpha1.MaxPayloadBytes + 1) })
	e.reconcile("bulky")
	tr := e.get("bulky")
	if c := ready(tr); c.Status != metav1.ConditionFalse || c.Reason != slessv1alpha1.TriggerReasonPayloadTooLarge || !strings.Contains(c.Message, "SLESS_PAYLOAD") {
		t.Errorf("one byte over: Ready %+v, want False %s", c, slessv1alpha1.TriggerReasonPayloadTooLarge)
	}
	if tr.Status.NextScheduleTime != nil || !ptr.Deref(cronJob().Spec.Suspend, false) {
		t.Errorf("one byte over: next run %v, suspend %v; want none, suspended", tr.Status.NextScheduleTime, cronJob().Spec.Suspend)
	}
}
