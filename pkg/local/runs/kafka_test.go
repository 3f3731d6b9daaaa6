package runs

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/local/localtest"
	"github.com/sless-dev/sless/pkg/local/serving"
	"github.com/sless-dev/sless/pkg/queue"
	"github.com/sless-dev/sless/pkg/queue/kafkaq"
	"github.com/sless-dev/sless/pkg/queue/kafkaq/kafkatest"
)

// kafkaCalls is the trigger's recorded calls, by request id (the record's
// topic-partition-offset): the 2xx ones and the failed ones.
func kafkaCalls(t *testing.T, rig *runsRig) (ok, failed map[string]int) {
	t.Helper()
	ok, failed = map[string]int{}, map[string]int{}
	q := invoke.Query{Namespace: "ns", Function: "worker", Trigger: invoke.TriggerKafka, Limit: invoke.MaxListLimit}
	for {
		p, err := rig.records.List(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range p.Items {
			if rec.Status == http.StatusOK {
				ok[rec.RequestID]++
			} else {
				failed[rec.RequestID]++
			}
		}
		if p.Next == nil {
			return ok, failed
		}
		q.After = p.Next
	}
}

// Under sless dev a kafka trigger consumes its topic in process: 1,000
// records each reach the function's revision at least once, recorded
// with trigger "kafka", across a forced restart of the consumer and a
// restart of the broker; duplicates come only from those restarts; the
// poison record is tried maxRetries+1 times and lands on the dead-letter
// topic; the trigger reads Consuming while connected, and says it needs
// -kafka-brokers without them.
func TestKafkaTriggerInLocalMode(t *testing.T) {
	ctx := context.Background()
	k := kafkatest.Start(t)
	k.Topic("events", 3)
	rig := newRunsRig(t, serving.ServerOptions{IdleTimeout: time.Minute})
	rig.serve(ctx, t, localtest.Function("ns", "worker"),
		"import json, time\n\ndef handler(event, context):\n    time.sleep(0.005)\n    b = event['body']\n    if not isinstance(b, dict):\n        b = json.loads(b)\n    if b.get('n') == 3:\n        raise ValueError('poison')\n    return {'ok': True}\n")
	const prefetch = 20
	tr := &slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "events"}, Spec: slessv1alpha1.TriggerSpec{
		Function: "worker", Type: slessv1alpha1.TriggerTypeKafka,
		Kafka: &slessv1alpha1.KafkaSpec{ConnectionSecret: "unused-locally", Topic: "events",
			Delivery: slessv1alpha1.Delivery{MaxRetries: ptr.To[int32](1), BackoffSeconds: ptr.To[int32](1), Concurrency: ptr.To[int32](4), Prefetch: ptr.To[int32](prefetch)}},
	}}
	if err := rig.store.Create(ctx, tr); err != nil {
		t.Fatal(err)
	}
	if _, got := reconcileTriggerOnce(t, rig.runs, "events"); readyOf(got).Reason != slessv1alpha1.TriggerReasonQueueNotSupported ||
		!strings.Contains(readyOf(got).Message, "-kafka-brokers") {
		t.Fatalf("without brokers: Ready %+v", readyOf(got))
	}
	rig.runs.Kafka = []string{k.Addr}
	reconcileTriggerOnce(t, rig.runs, "events")
	awaitTriggerReady(t, rig.runs, "events", "consuming", func(c metav1.Condition) bool {
		return c.Status == metav1.ConditionTrue && c.Message == "consuming topic events"
	})
	const n = 1000
	kafkatest.Produce(t, k.Client(), "events", "e", n)
	waitCalls := func(what string, want int) int {
		t.Helper()
		deadline := time.Now().Add(3 * time.Minute)
		for {
			ok, failed := kafkaCalls(t, rig)
			if len(ok) >= want {
				return len(ok)
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d records answered 2xx (%d failed ids), want %d", what, len(ok), len(failed), want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// The consumer killed mid-stream and made again, as a crashed pod is.
	// Mid-stream: the kill comes with records still to call.
	midStream := func(what string, at int) {
		t.Helper()
		if at >= n-1 {
			t.Fatalf("%s came after every record was called", what)
		}
		t.Logf("%s after %d records", what, at)
	}
	midStream("consumer killed", waitCalls("a third", n/3))
	key := types.NamespacedName{Namespace: "ns", Name: "events"}
	rig.runs.stopConsuming(key)
	reconcileTriggerOnce(t, rig.runs, "events")
	// The broker killed mid-stream and started again on its data.
	midStream("broker killed", waitCalls("two thirds", 2*n/3))
	k.Stop()
	awaitTriggerReady(t, rig.runs, "events", "the broker lost", func(c metav1.Condition) bool {
		return c.Status == metav1.ConditionFalse && c.Reason == slessv1alpha1.TriggerReasonConsumerNotAvailable
	})
	k.Restart()
	awaitTriggerReady(t, rig.runs, "events", "the broker back", func(c metav1.Condition) bool {
		return c.Status == metav1.ConditionTrue
	})
	waitCalls("every record but the poison one", n-1)

	dead := kafkatest.Records(t, k, "events.dlq", 1)
	if len(dead) != 1 || string(dead[0].Value) != `{"n":3}` || string(dead[0].Key) != "e-3" {
		t.Fatalf("dead letters %v", dead)
	}
	headers := map[string]string{}
	for _, h := range dead[0].Headers {
		headers[h.Key] = string(h.Value)
	}
	poison := "events-" + headers[kafkaq.OriginalPartitionHeader] + "-" + headers[kafkaq.OriginalOffsetHeader]
	if headers[queue.RetriesHeader] != "1" {
		t.Errorf("dead letter headers %v", headers)
	}
	// Records are written behind the calls.
	var ok, failed map[string]int
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if ok, failed = kafkaCalls(t, rig); failed[poison] >= 2 || time.Now().After(deadline) {
			break
		}
	}
	if ok[poison] != 0 || failed[poison] < 2 {
		t.Errorf("the poison record %s: %d answered, %d failed; want 0 and at least 2 (1 retry)", poison, ok[poison], failed[poison])
	}
	// Duplicates are records past their partition's last commit at a
	// restart: in the poison record's partition, those after it (its
	// retries hold that partition's commit back); elsewhere at most what
	// a consumer holds, once per restart.
	var poisonPart, poisonOffset int
	if _, err := fmt.Sscanf(poison, "events-%d-%d", &poisonPart, &poisonOffset); err != nil {
		t.Fatalf("poison id %q", poison)
	}
	calls, behindPoison, elsewhere := 0, 0, 0
	for id, c := range ok {
		calls += c
		if c == 1 {
			continue
		}
		var part, off int
		if _, err := fmt.Sscanf(id, "events-%d-%d", &part, &off); err != nil {
			t.Fatalf("request id %q", id)
		}
		if part == poisonPart && off > poisonOffset {
			behindPoison += c - 1
		} else {
			elsewhere += c - 1
			t.Logf("%s called %d times", id, c)
		}
	}
	t.Logf("%d records, %d answered calls: %d duplicates behind the retried poison record, %d elsewhere, across one consumer and one broker restart",
		n-1, calls, behindPoison, elsewhere)
	// Behind the poison record its partition pauses with twice prefetch
	// held, a poll's worth more at most, once per restart.
	if behindPoison > 2*3*prefetch {
		t.Errorf("%d duplicates behind the poison record, more than the %d two restarts may bring", behindPoison, 2*3*prefetch)
	}
	if elsewhere > 2*prefetch {
		t.Errorf("%d duplicates outside the poison record's partition, more than the %d two restarts may bring", elsewhere, 2*prefetch)
	}
	kafkatest.AwaitCommitted(t, k, "sless.ns.events", "events")
}

// A topic that does not exist keeps the trigger from Ready, saying so,
// until it is made.
func TestKafkaTriggerWaitsForItsTopic(t *testing.T) {
	ctx := context.Background()
	k := kafkatest.Start(t)
	store, _ := localtest.OpenStore(t)
	runs := New(store, nil, nil)
	runs.Kafka = []string{k.Addr}
	defer runs.Close()
	if err := store.Create(ctx, localtest.Function("ns", "calc")); err != nil {
		t.Fatal(err)
	}
	if err := store.Create(ctx, &slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "orders"}, Spec: slessv1alpha1.TriggerSpec{
		Function: "calc", Type: slessv1alpha1.TriggerTypeKafka, Kafka: &slessv1alpha1.KafkaSpec{ConnectionSecret: "k", Topic: "later"},
	}}); err != nil {
		t.Fatal(err)
	}
	reconcileTriggerOnce(t, runs, "orders")
	awaitTriggerReady(t, runs, "orders", "the missing topic", func(c metav1.Condition) bool {
		return c.Status == metav1.ConditionFalse && c.Reason == slessv1alpha1.TriggerReasonConsumerNotAvailable &&
			strings.Contains(c.Message, "topic later does not exist on the brokers at "+k.Addr)
	})
	k.Topic("later", 1)
	awaitTriggerReady(t, runs, "orders", "consuming", func(c metav1.Condition) bool {
		return c.Status == metav1.ConditionTrue && c.Message == "consuming topic later"
	})
}
