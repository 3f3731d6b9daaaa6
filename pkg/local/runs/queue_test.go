package runs

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/local/localtest"
	"github.com/sless-dev/sless/pkg/local/serving"
	"github.com/sless-dev/sless/pkg/queue"
	"github.com/sless-dev/sless/test/testbed"
)

// A queue message over the invoke path's body cap is answered 413 and
// recorded as the proxy would on a cluster (where the consumer's call goes
// through it), so it is retried and dead-lettered in both modes rather than
// reaching the function only under sless dev.
func TestQueueMessageOverTheBodyCap(t *testing.T) {
	ctx := context.Background()
	r := newRunsRig(t, serving.ServerOptions{IdleTimeout: time.Minute})
	fn := localtest.Function("ns", "worker")
	r.serve(ctx, t, fn, "def handler(event, context):\n    return {'ok': True}\n")
	caller := &localCaller{r: r.runs, namespace: "ns", function: "worker"}

	at := caller.Invoke(ctx, queue.Call{Trigger: invoke.TriggerQueue, Body: []byte(`{"n": 1}`), ContentType: "application/json", RequestID: "small"})
	if at.Status != http.StatusOK {
		t.Fatalf("a small message: %+v, want 200 from the function", at)
	}
	over := caller.Invoke(ctx, queue.Call{Trigger: invoke.TriggerQueue, Body: make([]byte, invoke.DefaultMaxRequestBytes+1), ContentType: "application/octet-stream", RequestID: "big"})
	if over.Status != http.StatusRequestEntityTooLarge || !strings.Contains(over.PlatformError, "over the") {
		t.Fatalf("a message one byte over the cap: status %d, platform error %q; want 413 from sless", over.Status, over.PlatformError)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, err := r.records.List(ctx, invoke.Query{Namespace: "ns", Function: "worker", Trigger: invoke.TriggerQueue, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range p.Items {
			if rec.RequestID == "big" {
				if rec.Status != http.StatusRequestEntityTooLarge || rec.Error == "" || rec.Revision != "" || rec.BytesIn != invoke.DefaultMaxRequestBytes+1 {
					t.Fatalf("record of the big message: %+v", rec)
				}
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no record of the big message: %+v", p.Items)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// awaitTriggerReady waits until trigger ns/name's Ready condition satisfies
// ok, with no reconcile in between unless reconcile is set: the consumer's
// own state changes write it.
func awaitTriggerReady(t *testing.T, runs *Runs, name, what string, ok func(metav1.Condition) bool) metav1.Condition {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := &slessv1alpha1.Trigger{}
		if err := runs.store.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: name}, got); err != nil {
			t.Fatal(err)
		}
		c := readyOf(got)
		if ok(c) {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: Ready %s %s: %s", what, c.Status, c.Reason, c.Message)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func queueTrigger(name, fn, q string) *slessv1alpha1.Trigger {
	return &slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: slessv1alpha1.TriggerSpec{
		Function: fn, Type: slessv1alpha1.TriggerTypeQueue,
		Queue: &slessv1alpha1.QueueSpec{ConnectionSecret: "unused-locally", Queue: q},
	}}
}

// Under sless dev a queue trigger is Consuming only while its consumer is
// connected to the broker and consuming: not before it connects, not while
// the broker is away (False with the error), and again once it is back.
// Before, it read Consuming as soon as the consumer started, whatever the
// broker said, and the errors were only in sless dev's log.
func TestQueueTriggerReadyFollowsTheBroker(t *testing.T) {
	broker := testbed.AMQPURL(t)
	relay, relayURL := testbed.NewRelay(t, broker)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nowhere, _ := url.Parse(broker)
	nowhere.Host = closed.Addr().String()
	closed.Close()
	refused, _ := url.Parse(broker)
	refused.User = url.UserPassword(refused.User.Username(), "not-the-password")

	for _, tc := range []struct {
		name   string
		broker string
		errHas string
	}{
		{name: "nothing at the URL", broker: nowhere.String(), errHas: "connection refused"},
		// The consumer stops (no retry mends it); the trigger says why.
		{name: "wrong password", broker: refused.String(), errHas: "stopped: queue: connect to the broker"},
		{name: "broker refuses connections", broker: relayURL, errHas: "connect to the broker at " + relay.Addr()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			store, _ := localtest.OpenStore(t)
			runs := New(store, nil, nil)
			runs.Broker = tc.broker
			defer runs.Close()
			if err := store.Create(ctx, localtest.Function("ns", "calc")); err != nil {
				t.Fatal(err)
			}
			q := testbed.UniqueName("local-ready")
			testbed.DeleteQueues(t, broker, q, q+".dlq", q+".retry.1000ms", q+".retry.2000ms", q+".retry.4000ms")
			relay.Cut(true)
			if err := store.Create(ctx, queueTrigger("orders", "calc", q)); err != nil {
				t.Fatal(err)
			}
			if _, got := reconcileTriggerOnce(t, runs, "orders"); readyOf(got).Status == metav1.ConditionTrue {
				t.Fatalf("Ready before the consumer connected: %+v", readyOf(got))
			}
			c := awaitTriggerReady(t, runs, "orders", "the connection's error", func(c metav1.Condition) bool {
				return c.Status == metav1.ConditionFalse && strings.Contains(c.Message, tc.errHas)
			})
			if c.Reason != slessv1alpha1.TriggerReasonConsumerNotAvailable {
				t.Errorf("not connected: Ready %+v", c)
			}
			if strings.Contains(tc.errHas, "stopped") {
				// Made again, as a crashed consumer's pod restarts; it
				// fails alike.
				runs.consumerRestart = time.Millisecond
				key := types.NamespacedName{Namespace: "ns", Name: "orders"}
				runs.mu.Lock()
				first := runs.queues[key]
				runs.mu.Unlock()
				reconcileTriggerOnce(t, runs, "orders")
				runs.mu.Lock()
				again := runs.queues[key]
				runs.mu.Unlock()
				if again == nil || again == first {
					t.Fatal("the stopped consumer was not made again")
				}
				awaitTriggerReady(t, runs, "orders", "the restarted consumer's error", func(c metav1.Condition) bool {
					s, _ := again.consumer.State()
					return s.Stopped && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, tc.errHas)
				})
			}
			if tc.broker != relayURL {
				return
			}
			relay.Up()
			awaitTriggerReady(t, runs, "orders", "consuming", func(c metav1.Condition) bool {
				return c.Status == metav1.ConditionTrue && c.Reason == slessv1alpha1.TriggerReasonConsuming
			})
			relay.Cut(true)
			awaitTriggerReady(t, runs, "orders", "the broker lost", func(c metav1.Condition) bool {
				return c.Status == metav1.ConditionFalse && c.Reason == slessv1alpha1.TriggerReasonConsumerNotAvailable
			})
			relay.Up()
			awaitTriggerReady(t, runs, "orders", "the broker back", func(c metav1.Condition) bool {
				return c.Status == metav1.ConditionTrue && c.Message == "consuming queue "+q
			})
		})
	}
}

// A queue trigger disabled and enabled again while a call is in flight:
// that call finishes and is recorded once (the old consumer acknowledges
// it), and the new consumer starts only after it, so concurrency 1 holds
// across the change; the trigger reads Unknown until the new consumer
// consumes. Before, the new consumer started at once beside the old one's
// call, two calls ran at once under concurrency 1.
func TestQueueTriggerReenabledWhileCallInFlight(t *testing.T) {
	ctx := context.Background()
	rig := newRunsRig(t, serving.ServerOptions{IdleTimeout: time.Minute})
	rig.runs.Broker = testbed.AMQPURL(t)
	marks := filepath.Join(t.TempDir(), "started")
	rig.serve(ctx, t, localtest.Function("ns", "slow"), fmt.Sprintf(
		"import time\n\ndef handler(event, context):\n    b = event['body'] or {}\n    open(%q, 'a').write(b['id'] + '\\n')\n    time.sleep(b.get('sleep', 0))\n    return {'ok': True}\n", marks))
	q := testbed.UniqueName("local-reenable")
	testbed.DeleteQueues(t, rig.runs.Broker, q, q+".dlq", q+".retry.1000ms", q+".retry.2000ms", q+".retry.4000ms")
	conn, err := amqp.Dial(rig.runs.Broker)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	publish := func(id, body string) {
		t.Helper()
		if err := ch.PublishWithContext(ctx, "", q, false, false, amqp.Publishing{MessageId: id, ContentType: "application/json", Body: []byte(body)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := rig.store.Create(ctx, queueTrigger("jobs", "slow", q)); err != nil {
		t.Fatal(err)
	}
	reconcileTriggerOnce(t, rig.runs, "jobs")
	awaitTriggerReady(t, rig.runs, "jobs", "consuming", func(c metav1.Condition) bool { return c.Status == metav1.ConditionTrue })

	publish("first", `{"id": "first", "sleep": 3}`)
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(marks)
		if strings.Contains(string(b), "first") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first call never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	setEnabled := func(on bool) *slessv1alpha1.Trigger {
		t.Helper()
		tr := &slessv1alpha1.Trigger{}
		if err := rig.store.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "jobs"}, tr); err != nil {
			t.Fatal(err)
		}
		tr.Spec.Enabled = ptr.To(on)
		if err := rig.store.Update(ctx, tr); err != nil {
			t.Fatal(err)
		}
		_, got := reconcileTriggerOnce(t, rig.runs, "jobs")
		return got
	}
	if c := readyOf(setEnabled(false)); c.Reason != slessv1alpha1.TriggerReasonDisabled {
		t.Errorf("disabled: Ready %+v", c)
	}
	if c := readyOf(setEnabled(true)); c.Status != metav1.ConditionUnknown || !strings.Contains(c.Message, "previous consumer") {
		t.Errorf("enabled again during the call: Ready %+v, want Unknown waiting for the previous consumer", c)
	}
	publish("second", `{"id": "second"}`)
	awaitTriggerReady(t, rig.runs, "jobs", "consuming again", func(c metav1.Condition) bool { return c.Status == metav1.ConditionTrue })

	var recs []invoke.Record
	deadline = time.Now().Add(30 * time.Second)
	for {
		p, err := rig.records.List(ctx, invoke.Query{Namespace: "ns", Function: "slow", Trigger: invoke.TriggerQueue, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		recs = p.Items
		if len(recs) >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].StartedAt.Before(recs[j].StartedAt) })
	if len(recs) != 2 || recs[0].RequestID != "first" || recs[1].RequestID != "second" || recs[0].Status != 200 || recs[1].Status != 200 {
		t.Fatalf("records %+v, want first and second once each, 200", recs)
	}
	if firstEnd := recs[0].StartedAt.Add(recs[0].Duration); recs[1].StartedAt.Before(firstEnd) {
		t.Errorf("the second call started %v before the first ended: two calls at once under concurrency 1", firstEnd.Sub(recs[1].StartedAt))
	}
}
