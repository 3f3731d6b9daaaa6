package runs

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/local/localtest"
	"github.com/sless-dev/sless/pkg/local/serving"
	"github.com/sless-dev/sless/pkg/queue/natsq/natstest"
)

// Under sless dev a nats trigger consumes its stream in process: each
// message calls the function's revision and is recorded with trigger
// "nats"; a message the function keeps failing is retried and lands in
// the dead-letter subject; the trigger reads Consuming while connected,
// and says it needs -nats-url without one.
func TestNATSTriggerInLocalMode(t *testing.T) {
	ctx := context.Background()
	srv := natstest.Start(t)
	srv.Stream("EVENTS", "events.>")
	_, js := srv.JetStream()
	rig := newRunsRig(t, serving.ServerOptions{IdleTimeout: time.Minute})
	rig.serve(ctx, t, localtest.Function("ns", "worker"),
		"import json\n\ndef handler(event, context):\n    b = event['body']\n    if not isinstance(b, dict):\n        b = json.loads(b)\n    if b.get('n') == 3:\n        raise ValueError('poison')\n    return {'ok': True}\n")
	tr := &slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "events"}, Spec: slessv1alpha1.TriggerSpec{
		Function: "worker", Type: slessv1alpha1.TriggerTypeNATS,
		NATS: &slessv1alpha1.NATSSpec{ConnectionSecret: "unused-locally", Stream: "EVENTS", Subject: "events.>",
			Delivery: slessv1alpha1.Delivery{MaxRetries: ptr.To[int32](1), BackoffSeconds: ptr.To[int32](1), Concurrency: ptr.To[int32](2)}},
	}}
	if err := rig.store.Create(ctx, tr); err != nil {
		t.Fatal(err)
	}
	if _, got := reconcileTriggerOnce(t, rig.runs, "events"); readyOf(got).Reason != slessv1alpha1.TriggerReasonQueueNotSupported ||
		!strings.Contains(readyOf(got).Message, "-nats-url") {
		t.Fatalf("without a NATS URL: Ready %+v", readyOf(got))
	}
	rig.runs.NATS = srv.URL
	reconcileTriggerOnce(t, rig.runs, "events")
	awaitTriggerReady(t, rig.runs, "events", "consuming", func(c metav1.Condition) bool {
		return c.Status == metav1.ConditionTrue && c.Message == "consuming subject events.> of stream EVENTS"
	})
	natstest.Publish(t, js, "events.a", "e", 5)

	deadline := time.Now().Add(60 * time.Second)
	for {
		p, err := rig.records.List(ctx, invoke.Query{Namespace: "ns", Function: "worker", Trigger: invoke.TriggerNATS, Limit: 50})
		if err != nil {
			t.Fatal(err)
		}
		ok, failed := map[string]int{}, map[string]int{}
		for _, rec := range p.Items {
			if rec.Status == http.StatusOK {
				ok[rec.RequestID]++
			} else {
				failed[rec.RequestID]++
			}
		}
		if len(ok) == 4 && failed["e-3"] == 2 && ok["e-3"] == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("records: ok %v, failed %v; want e-0…e-4 but e-3 once each, e-3 failing twice", ok, failed)
		}
		time.Sleep(50 * time.Millisecond)
	}
	dlq, err := js.Stream(ctx, "DLQ_EVENTS_events")
	if err != nil {
		t.Fatal(err)
	}
	for {
		info, err := dlq.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d dead letters, want the poison message", info.State.Msgs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	m, err := dlq.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "dlq.EVENTS.events" || string(m.Data) != fmt.Sprintf(`{"n":%d}`, 3) {
		t.Errorf("dead letter %s %s", m.Subject, m.Data)
	}
}
