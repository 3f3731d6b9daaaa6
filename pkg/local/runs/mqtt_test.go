package runs

import (
	"context"
	"encoding/json"
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
	"github.com/sless-dev/sless/pkg/queue/mqttq"
	"github.com/sless-dev/sless/pkg/queue/mqttq/mqtttest"
)

// Under sless dev an mqtt trigger consumes its topic filter in process,
// end to end with a real Python function and a real Mosquitto: 1,000
// messages each reach the function at least once (counted by message id
// in the records, trigger "mqtt") although the broker is stopped and
// started mid-stream and the consumer is replaced by a spec change; the
// poison message is retried maxRetries times and lands on the dead-letter
// topic. Without -mqtt-url the trigger says it needs one.
func TestMQTTTriggerInLocalMode(t *testing.T) {
	ctx := context.Background()
	b := mqtttest.StartMosquitto(t)
	rig := newRunsRig(t, serving.ServerOptions{IdleTimeout: time.Minute})
	rig.serve(ctx, t, localtest.Function("ns", "worker"),
		"def handler(event, context):\n    if event['headers'].get('x-queue-topic') != 'sensors/kitchen/temp':\n        return {'statusCode': 400}\n"+
			"    if event['body'].startswith('poison'):\n        raise ValueError('poison')\n    return {'ok': True}\n")
	tr := &slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "temps"}, Spec: slessv1alpha1.TriggerSpec{
		Function: "worker", Type: slessv1alpha1.TriggerTypeMQTT,
		MQTT: &slessv1alpha1.MQTTSpec{ConnectionSecret: "unused-locally", Topic: "sensors/+/temp",
			Delivery: slessv1alpha1.Delivery{MaxRetries: ptr.To[int32](1), BackoffSeconds: ptr.To[int32](1), Concurrency: ptr.To[int32](4)}},
	}}
	if err := rig.store.Create(ctx, tr); err != nil {
		t.Fatal(err)
	}
	if _, got := reconcileTriggerOnce(t, rig.runs, "temps"); readyOf(got).Reason != slessv1alpha1.TriggerReasonQueueNotSupported ||
		!strings.Contains(readyOf(got).Message, "-mqtt-url") {
		t.Fatalf("without an MQTT URL: Ready %+v", readyOf(got))
	}
	rig.runs.MQTT = b.URL
	reconcileTriggerOnce(t, rig.runs, "temps")
	awaitTriggerReady(t, rig.runs, "temps", "consuming", func(c metav1.Condition) bool {
		return c.Status == metav1.ConditionTrue && c.Message == "consuming topic sensors/+/temp"
	})
	dead := mqtttest.Connect(t, b.URL, "", "").Subscribe("sless/dlq/ns/temps")

	const n = 1000
	const topic = "sensors/kitchen/temp"
	msgs := make([]string, n)
	for i := range msgs {
		msgs[i] = fmt.Sprintf("m-%d", i)
	}
	mqtttest.Connect(t, b.URL, "", "").Publish(topic, append(msgs, "poison-0")...)

	okCalls := func() (ids, calls int, failed map[string]int) {
		ok, failed := map[string]int{}, map[string]int{}
		q := invoke.Query{Namespace: "ns", Function: "worker", Trigger: invoke.TriggerMQTT, Limit: invoke.MaxListLimit}
		for {
			p, err := rig.records.List(ctx, q)
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
				break
			}
			q.After = p.Next
		}
		for _, m := range msgs {
			if c := ok[mqttq.MessageID(topic, []byte(m))]; c > 0 {
				ids++
				calls += c
			}
		}
		return ids, calls, failed
	}
	await := func(what string, cond func(ids int) bool) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			ids, calls, _ := okCalls()
			if cond(ids) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s: %d of %d messages called, %d calls", what, ids, n, calls)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	await("a third called", func(ids int) bool { return ids > n/3 })
	b.Stop()
	awaitTriggerReady(t, rig.runs, "temps", "the outage shown", func(c metav1.Condition) bool { return c.Status != metav1.ConditionTrue })
	b.Restart()
	awaitTriggerReady(t, rig.runs, "temps", "consuming again", func(c metav1.Condition) bool { return c.Status == metav1.ConditionTrue })
	await("two thirds called", func(ids int) bool { return ids > 2*n/3 })
	// A spec change replaces the consumer: the old one finishes its calls,
	// the new one takes the same session.
	got := &slessv1alpha1.Trigger{}
	if err := rig.store.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "temps"}, got); err != nil {
		t.Fatal(err)
	}
	got.Spec.MQTT.Concurrency = ptr.To[int32](3)
	if err := rig.store.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	reconcileTriggerOnce(t, rig.runs, "temps")
	await("every message called", func(ids int) bool { return ids == n })

	m := mqtttest.Await(t, dead, time.Minute)
	var dl mqttq.DeadLetter
	if err := json.Unmarshal(m.Payload(), &dl); err != nil || string(dl.Payload) != "poison-0" || dl.Topic != topic || dl.Retries != 1 || dl.LastStatus != http.StatusInternalServerError {
		t.Errorf("dead letter %s: %v", m.Payload(), err)
	}
	// Records reach the store in batches: the last failure's may follow.
	deadline := time.Now().Add(30 * time.Second)
	ids, calls, failed := okCalls()
	for ; failed[mqttq.MessageID(topic, []byte("poison-0"))] < 2; ids, calls, failed = okCalls() {
		if time.Now().After(deadline) {
			t.Fatalf("the poison message failed %d times, want 1 + maxRetries 1", failed[mqttq.MessageID(topic, []byte("poison-0"))])
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Duplicates come only from messages in flight at the broker's stop and
	// the consumer's replacement: the broker's in-flight window (20) and
	// the consumer's prefetch (10) bound them.
	if calls-ids > 2*(20+10) {
		t.Errorf("%d duplicate calls, more than the messages in flight at two interruptions", calls-ids)
	}
	t.Logf("%d messages, %d calls (%d duplicates across the broker and consumer restarts)", ids, calls, calls-ids)
}

// A broker URL the consumer cannot use, or a trigger it refuses, shows on
// the trigger rather than in a log: Ready False, InvalidQueue, saying why.
func TestMQTTTriggerRefusedLocally(t *testing.T) {
	ctx := context.Background()
	rig := newRunsRig(t, serving.ServerOptions{IdleTimeout: time.Minute})
	if err := rig.store.Create(ctx, localtest.Function("ns", "worker")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, url, topic, want string
	}{
		{"amqp URL", "amqp://u:secret@rabbit:5672/", "a/b", `server URL "amqp://rabbit:5672/": scheme must be tcp, mqtt, ssl, tls, mqtts, tcps, ws or wss`},
		{"no host", "tcp://", "a/b", "is not a URL like tcp://host:1883"},
		// The CRD refuses it at apply; a stored object that slipped by is
		// refused by the consumer too.
		{"bad filter", "tcp://127.0.0.1:1", "a/#/b", "# only as the whole last level"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := strings.ReplaceAll(strings.ToLower(tc.name), " ", "-")
			tr := &slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: slessv1alpha1.TriggerSpec{
				Function: "worker", Type: slessv1alpha1.TriggerTypeMQTT,
				MQTT: &slessv1alpha1.MQTTSpec{ConnectionSecret: "unused-locally", Topic: tc.topic}}}
			if err := rig.store.Create(ctx, tr); err != nil {
				t.Fatal(err)
			}
			rig.runs.MQTT = tc.url
			_, got := reconcileTriggerOnce(t, rig.runs, name)
			c := readyOf(got)
			if c.Status != metav1.ConditionFalse || c.Reason != slessv1alpha1.TriggerReasonInvalidQueue || !strings.Contains(c.Message, tc.want) ||
				strings.Contains(c.Message, "secret") {
				t.Errorf("Ready %s %s: %s; want InvalidQueue saying %q", c.Status, c.Reason, c.Message, tc.want)
			}
		})
	}
}
