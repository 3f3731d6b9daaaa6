package runs

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/local/apiserver"
	"github.com/sless-dev/sless/pkg/local/localtest"
	"github.com/sless-dev/sless/pkg/local/serving"
	"github.com/sless-dev/sless/pkg/queue"
	"github.com/sless-dev/sless/test/testbed"
)

// TestMain stops what the test bed started (a RabbitMQ node, where none
// listens on localhost) when the package's tests end.
func TestMain(m *testing.M) { testbed.Main(m) }

func TestRunsJobsAndCron(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rig := newRunsRig(t, serving.ServerOptions{IdleTimeout: time.Minute})
	store, recs, runs := rig.store, rig.records, rig.runs
	runs.Broker = testbed.AMQPURL(t)
	// The clock is set, before the cron trigger is made, to one second
	// before a minute boundary, so its "* * * * *" fires in about a second.
	var offset atomic.Int64
	runs.now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }

	// A function, built and served as the Function reconciler would.
	fn := localtest.Function("ns", "calc")
	code := "def handler(event, context):\n    b = event['body'] or {}\n    if b.get('fail'):\n        raise ValueError('asked to fail')\n    return {'doubled': b.get('n', 0) * 2, 'function': context.function_name}\n"
	rig.serve(ctx, t, fn, code)

	jobLoop := apiserver.NewLoop("job", store, slessv1alpha1.SchemeGroupVersion.WithKind("FunctionJob").GroupKind(), runs.JobReconciler(), nil)
	trigLoop := apiserver.NewLoop("trigger", store, slessv1alpha1.SchemeGroupVersion.WithKind("Trigger").GroupKind(), runs.TriggerReconciler(), nil)
	go jobLoop.Run(ctx, nil, 1)
	go trigLoop.Run(ctx, nil, 1)

	awaitJob := func(name string, want slessv1alpha1.JobPhase, runID int64) *slessv1alpha1.FunctionJob {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			j := &slessv1alpha1.FunctionJob{}
			if err := store.Get(ctx, types.NamespacedName{Namespace: "ns", Name: name}, j); err != nil {
				t.Fatal(err)
			}
			if j.Status.Phase == want && j.Status.RunID == runID {
				return j
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %s: phase %q run %d, want %q run %d (%s)", name, j.Status.Phase, j.Status.RunID, want, runID, j.Status.Message)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	job := &slessv1alpha1.FunctionJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "double"},
		Spec: slessv1alpha1.FunctionJobSpec{Function: "calc", RunID: 1, Payload: &apiextensionsv1.JSON{Raw: []byte(`{"n": 21}`)}}}
	if err := store.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	j := awaitJob("double", slessv1alpha1.JobPhaseSucceeded, 1)
	if !strings.Contains(j.Status.Output, `"doubled": 42`) || !strings.Contains(j.Status.Output, `"function": "calc"`) ||
		j.Status.ExitCode == nil || *j.Status.ExitCode != 0 || j.Status.StartTime == nil || j.Status.CompletionTime == nil {
		t.Fatalf("succeeded job status: %+v", j.Status)
	}
	// A new runID runs again; this payload makes the handler raise.
	j.Spec.RunID = 2
	j.Spec.Payload = &apiextensionsv1.JSON{Raw: []byte(`{"fail": true}`)}
	if err := store.Update(ctx, j); err != nil {
		t.Fatal(err)
	}
	j = awaitJob("double", slessv1alpha1.JobPhaseFailed, 2)
	if j.Status.ExitCode == nil || *j.Status.ExitCode == 0 || !strings.Contains(j.Status.Message, "asked to fail") {
		t.Fatalf("failed job status: exit %v message %q", j.Status.ExitCode, j.Status.Message)
	}
	idle := &slessv1alpha1.FunctionJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "idle"}, Spec: slessv1alpha1.FunctionJobSpec{Function: "calc"}}
	if err := store.Create(ctx, idle); err != nil {
		t.Fatal(err)
	}
	awaitJob("idle", slessv1alpha1.JobPhaseIdle, 0)

	// A cron trigger calls the function at its time, recorded as cron.
	now := time.Now()
	offset.Store(int64(now.Truncate(time.Minute).Add(time.Minute - time.Second).Sub(now)))
	trig := &slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "every-minute"},
		Spec: slessv1alpha1.TriggerSpec{Function: "calc", Type: slessv1alpha1.TriggerTypeCron, Schedule: "* * * * *",
			Payload: &apiextensionsv1.JSON{Raw: []byte(`{"n": 5}`)}}}
	if err := store.Create(ctx, trig); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := &slessv1alpha1.Trigger{}
		_ = store.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "every-minute"}, got)
		if got.Status.LastScheduleTime != nil && got.Status.NextScheduleTime != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cron trigger never ran: %+v", got.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	count := func(trigger string, status int) int {
		p, err := recs.List(ctx, invoke.Query{Namespace: "ns", Function: "calc", Trigger: trigger, StatusClass: status / 100, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return len(p.Items)
	}
	deadline = time.Now().Add(10 * time.Second)
	for count(invoke.TriggerCron, 200) != 1 || count(invoke.TriggerJob, 200) != 1 || count(invoke.TriggerJob, 500) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("records: cron 2xx %d, job 2xx %d, job 5xx %d; want 1 each",
				count(invoke.TriggerCron, 200), count(invoke.TriggerJob, 200), count(invoke.TriggerJob, 500))
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Disabling the trigger stops its schedule.
	got := &slessv1alpha1.Trigger{}
	_ = store.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "every-minute"}, got)
	f := false
	got.Spec.Enabled = &f
	if err := store.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		runs.mu.Lock()
		n := len(runs.crons)
		runs.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a disabled trigger keeps its schedule")
		}
		time.Sleep(20 * time.Millisecond)
	}

	// A queue trigger, consumed from the broker sless dev was given: each
	// message is delivered to the function and recorded as queue; one the
	// function fails on is tried once more, then dead-lettered.
	qname := testbed.UniqueName("local-orders")
	qcfg := queue.Config{Queue: qname}
	testbed.DeleteQueues(t, runs.Broker, qname, qname+".dlq", qcfg.RetryQueue(1))
	conn, err := amqp.Dial(runs.Broker)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(qname, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	qt := &slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "orders"}, Spec: slessv1alpha1.TriggerSpec{
		Function: "calc", Type: slessv1alpha1.TriggerTypeQueue,
		Queue: &slessv1alpha1.QueueSpec{ConnectionSecret: "unused-locally", Queue: qname, Delivery: slessv1alpha1.Delivery{MaxRetries: ptr.To[int32](1), BackoffSeconds: ptr.To[int32](1)}},
	}}
	if err := store.Create(ctx, qt); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		got := &slessv1alpha1.Trigger{}
		_ = store.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "orders"}, got)
		if c := meta.FindStatusCondition(got.Status.Conditions, slessv1alpha1.TriggerConditionReady); c != nil && c.Reason == slessv1alpha1.TriggerReasonConsuming {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue trigger never consuming: %+v", got.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i, body := range []string{`{"n": 1}`, `{"n": 2}`, `{"fail": true}`, `{"n": 3}`} {
		if err := ch.PublishWithContext(ctx, "", qname, false, false, amqp.Publishing{
			MessageId: fmt.Sprint("m", i), ContentType: "application/json", DeliveryMode: amqp.Persistent, Body: []byte(body),
		}); err != nil {
			t.Fatal(err)
		}
	}
	deadline = time.Now().Add(60 * time.Second)
	for count(invoke.TriggerQueue, 200) != 3 || count(invoke.TriggerQueue, 500) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("queue records: 2xx %d, 5xx %d; want 3 and 2", count(invoke.TriggerQueue, 200), count(invoke.TriggerQueue, 500))
		}
		time.Sleep(50 * time.Millisecond)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		dlq, err := ch.QueueDeclarePassive(qname+".dlq", true, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if dlq.Messages == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dead-letter queue holds %d messages, want 1", dlq.Messages)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Deleting the trigger stops its consumer.
	if err := store.Delete(ctx, qt); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		runs.mu.Lock()
		n := len(runs.queues)
		runs.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a deleted queue trigger keeps its consumer")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// An enabled queue Trigger says local mode does not consume it, rather than
// look Ready; disabled, it says so with the cluster's reason.
func TestQueueTriggerNotConsumedLocally(t *testing.T) {
	ctx := context.Background()
	store, _ := localtest.OpenStore(t)
	runs := New(store, nil, nil)
	defer runs.Close()
	if err := store.Create(ctx, localtest.Function("ns", "calc")); err != nil {
		t.Fatal(err)
	}
	tr := &slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "orders"}, Spec: slessv1alpha1.TriggerSpec{
		Function: "calc", Type: slessv1alpha1.TriggerTypeQueue,
		Queue: &slessv1alpha1.QueueSpec{ConnectionSecret: "rabbit", Queue: "orders"},
	}}
	if err := store.Create(ctx, tr); err != nil {
		t.Fatal(err)
	}
	ready := func() metav1.Condition {
		t.Helper()
		if _, err := runs.TriggerReconciler().Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "orders"}}); err != nil {
			t.Fatal(err)
		}
		got := &slessv1alpha1.Trigger{}
		if err := store.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "orders"}, got); err != nil {
			t.Fatal(err)
		}
		if c := meta.FindStatusCondition(got.Status.Conditions, slessv1alpha1.TriggerConditionReady); c != nil {
			return *c
		}
		return metav1.Condition{}
	}
	if c := ready(); c.Status != metav1.ConditionFalse || c.Reason != slessv1alpha1.TriggerReasonQueueNotSupported {
		t.Errorf("enabled queue trigger: Ready %+v", c)
	}
	if err := store.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "orders"}, tr); err != nil {
		t.Fatal(err)
	}
	tr.Spec.Enabled = ptr.To(false)
	if err := store.Update(ctx, tr); err != nil {
		t.Fatal(err)
	}
	if c := ready(); c.Status != metav1.ConditionFalse || c.Reason != slessv1alpha1.TriggerReasonDisabled {
		t.Errorf("disabled queue trigger: Ready %+v", c)
	}
}
