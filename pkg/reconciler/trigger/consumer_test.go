package trigger_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/test/testbed"
)

// A queue trigger is Ready while its consumer Deployment has every replica
// of its current spec ready, and a consumer is ready only while connected
// to the broker and consuming (its readiness probe): a consumer that never
// reaches its broker, loses it, or whose new spec has not rolled out keeps
// the trigger from Ready, with a reason and the replicas in the message.
// Before, one available replica of any spec made the trigger Ready, so a
// spec change read "consuming queue <new>" while the old pod consumed the
// old queue and the new one could not start.
func TestQueueTriggerReadyFollowsConsumer(t *testing.T) {
	e := setup(t, time.Now())
	ctx := context.Background()
	sim := testbed.SharedDeployments(t)
	sim.Manage(e.ns)
	const consumer = "orders-consumer"
	sim.SetReady(e.ns, consumer, false)
	e.function("worker")
	if err := e.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "rabbit", Namespace: e.ns}, StringData: map[string]string{"url": "amqp://guest:guest@nowhere:5672/"}}); err != nil {
		t.Fatal(err)
	}
	e.create(&slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Name: "orders"}, Spec: slessv1alpha1.TriggerSpec{
		Function: "worker", Type: slessv1alpha1.TriggerTypeQueue,
		Queue: &slessv1alpha1.QueueSpec{ConnectionSecret: "rabbit", Queue: "orders"},
	}})

	// A new consumer that does not reach its broker: rolling out, not ready.
	c := e.awaitReady("orders", "a rollout that waits for its consumer", func(c metav1.Condition) bool {
		return c.Status == metav1.ConditionUnknown && strings.Contains(c.Message, "0 of 1 replicas")
	})
	if c.Reason != slessv1alpha1.TriggerReasonConsumerNotAvailable || !strings.Contains(c.Message, "connected to the broker") {
		t.Errorf("consumer not reaching the broker: Ready %+v", c)
	}

	sim.SetReady(e.ns, consumer, true)
	e.awaitReady("orders", "consuming", func(c metav1.Condition) bool {
		return c.Status == metav1.ConditionTrue && c.Reason == slessv1alpha1.TriggerReasonConsuming && c.Message == "consuming queue orders"
	})

	// The broker goes away after the rollout: False, not a rollout under way.
	sim.SetReady(e.ns, consumer, false)
	e.awaitReady("orders", "the broker lost", func(c metav1.Condition) bool {
		return c.Status == metav1.ConditionFalse && c.Reason == slessv1alpha1.TriggerReasonConsumerNotAvailable && strings.Contains(c.Message, "0 of 1 replicas")
	})
	sim.SetReady(e.ns, consumer, true)
	e.awaitReady("orders", "the broker back", func(c metav1.Condition) bool { return c.Status == metav1.ConditionTrue })

	// A new queue the consumer may not read: the old pod still runs and is
	// available, but it consumes the old queue.
	sim.SetReadiness(e.ns, consumer, func(p *corev1.PodTemplateSpec) bool {
		return slices.Contains(p.Spec.Containers[0].Args, "--queue=orders")
	})
	e.update("orders", func(tr *slessv1alpha1.Trigger) { tr.Spec.Queue.Queue = "invoices" })
	c = e.awaitReady("orders", "the new spec rolling out", func(c metav1.Condition) bool {
		return c.Status == metav1.ConditionUnknown && strings.Contains(c.Message, "old replicas still run")
	})
	if c.Reason != slessv1alpha1.TriggerReasonConsumerNotAvailable {
		t.Errorf("new spec rolling out: Ready %+v", c)
	}
	sim.SetReady(e.ns, consumer, true)
	e.awaitReady("orders", "consuming the new queue", func(c metav1.Condition) bool {
		return c.Status == metav1.ConditionTrue && c.Message == "consuming queue invoices"
	})

	// Disabled: scaled to zero; enabled again, not Ready before its
	// consumer is.
	e.update("orders", func(tr *slessv1alpha1.Trigger) { tr.Spec.Enabled = ptr.To(false) })
	e.awaitReady("orders", "disabled", func(c metav1.Condition) bool { return c.Reason == slessv1alpha1.TriggerReasonDisabled })
	sim.SetReady(e.ns, consumer, false)
	e.update("orders", func(tr *slessv1alpha1.Trigger) { tr.Spec.Enabled = nil })
	e.awaitReady("orders", "enabled again, scaling up", func(c metav1.Condition) bool {
		return c.Status == metav1.ConditionUnknown && c.Reason == slessv1alpha1.TriggerReasonConsumerNotAvailable
	})
	sim.SetReady(e.ns, consumer, true)
	e.awaitReady("orders", "enabled again, consuming", func(c metav1.Condition) bool { return c.Status == metav1.ConditionTrue })
}

// A nats trigger runs the same consumer Deployment, with sless consume's
// nats flags and the connection Secret's keys in its environment; its
// missing Secret and its consumer's readiness show as a queue trigger's do.
func TestNATSTriggerRunsConsumer(t *testing.T) {
	e := setup(t, time.Now())
	ctx := context.Background()
	sim := testbed.SharedDeployments(t)
	sim.Manage(e.ns)
	const consumer = "events-consumer"
	sim.SetReady(e.ns, consumer, false)
	e.function("worker")
	e.create(&slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Name: "events"}, Spec: slessv1alpha1.TriggerSpec{
		Function: "worker", Type: slessv1alpha1.TriggerTypeNATS,
		NATS: &slessv1alpha1.NATSSpec{ConnectionSecret: "nats", Stream: "EVENTS", Subject: "events.>"},
	}})
	e.awaitReady("events", "the missing Secret", func(c metav1.Condition) bool {
		return c.Status == metav1.ConditionFalse && c.Reason == slessv1alpha1.TriggerReasonConnectionSecretNotFound &&
			c.Message == "Secret nats (key url) does not exist"
	})
	if err := e.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "nats", Namespace: e.ns}, StringData: map[string]string{"url": "nats://nowhere:4222"}}); err != nil {
		t.Fatal(err)
	}
	c := e.awaitReady("events", "a consumer not yet connected", func(c metav1.Condition) bool {
		return c.Reason == slessv1alpha1.TriggerReasonConsumerNotAvailable
	})
	if !strings.Contains(c.Message, "consuming subject events.> of stream EVENTS") && !strings.Contains(c.Message, "rolling out") {
		t.Errorf("Ready %+v", c)
	}
	sim.SetReady(e.ns, consumer, true)
	e.awaitReady("events", "consuming", func(c metav1.Condition) bool {
		return c.Status == metav1.ConditionTrue && c.Message == "consuming subject events.> of stream EVENTS"
	})
	d := &appsv1.Deployment{}
	if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: consumer}, d); err != nil {
		t.Fatal(err)
	}
	args := d.Spec.Template.Spec.Containers[0].Args
	for _, want := range []string{"--broker=nats", "--stream=EVENTS", "--subject=events.>", "--durable=events", "--dead-letter-subject=dlq.EVENTS.events"} {
		if !slices.Contains(args, want) {
			t.Errorf("consumer args %q lack %s", args, want)
		}
	}
	// Back to a queue trigger: the same Deployment, rebuilt for RabbitMQ.
	e.update("events", func(tr *slessv1alpha1.Trigger) {
		tr.Spec.Type, tr.Spec.NATS = slessv1alpha1.TriggerTypeQueue, nil
		tr.Spec.Queue = &slessv1alpha1.QueueSpec{ConnectionSecret: "nats", Queue: "events"}
	})
	e.awaitReady("events", "consuming the queue", func(c metav1.Condition) bool {
		return c.Status == metav1.ConditionTrue && c.Message == "consuming queue events"
	})
}

// A kafka trigger runs the same consumer Deployment with sless consume's
// kafka flags; its connection Secret must hold "brokers", and its
// consumer's readiness shows as the other consumers' do.
func TestKafkaTriggerRunsConsumer(t *testing.T) {
	e := setup(t, time.Now())
	ctx := context.Background()
	sim := testbed.SharedDeployments(t)
	sim.Manage(e.ns)
	const consumer = "orders-consumer"
	sim.SetReady(e.ns, consumer, false)
	e.function("worker")
	e.create(&slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Name: "orders"}, Spec: slessv1alpha1.TriggerSpec{
		Function: "worker", Type: slessv1alpha1.TriggerTypeKafka,
		Kafka: &slessv1alpha1.KafkaSpec{ConnectionSecret: "kafka", Topic: "orders"},
	}})
	e.awaitReady("orders", "the missing Secret", func(c metav1.Condition) bool {
		return c.Status == metav1.ConditionFalse && c.Reason == slessv1alpha1.TriggerReasonConnectionSecretNotFound &&
			c.Message == "Secret kafka (key brokers) does not exist"
	})
	// A Secret with a url but no brokers is refused by its key.
	if err := e.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kafka", Namespace: e.ns}, StringData: map[string]string{"url": "k:9092"}}); err != nil {
		t.Fatal(err)
	}
	e.update("orders", func(tr *slessv1alpha1.Trigger) { tr.Spec.Kafka.MaxRetries = ptr.To[int32](4) })
	e.awaitReady("orders", "the missing key", func(c metav1.Condition) bool {
		return c.Reason == slessv1alpha1.TriggerReasonConnectionSecretNotFound && c.Message == "Secret kafka has no key brokers"
	})
	sec := &corev1.Secret{}
	if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "kafka"}, sec); err != nil {
		t.Fatal(err)
	}
	sec.Data["brokers"] = []byte("k-0:9092")
	if err := e.c.Update(ctx, sec); err != nil {
		t.Fatal(err)
	}
	e.update("orders", func(tr *slessv1alpha1.Trigger) { tr.Spec.Kafka.MaxRetries = ptr.To[int32](5) })
	e.awaitReady("orders", "a consumer not yet connected", func(c metav1.Condition) bool {
		return c.Reason == slessv1alpha1.TriggerReasonConsumerNotAvailable
	})
	sim.SetReady(e.ns, consumer, true)
	e.awaitReady("orders", "consuming", func(c metav1.Condition) bool {
		return c.Status == metav1.ConditionTrue && c.Message == "consuming topic orders"
	})
	d := &appsv1.Deployment{}
	if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: consumer}, d); err != nil {
		t.Fatal(err)
	}
	args := d.Spec.Template.Spec.Containers[0].Args
	for _, want := range []string{"--broker=kafka", "--topic=orders", "--group=sless." + e.ns + ".orders", "--dead-letter-topic=orders.dlq", "--max-retries=5"} {
		if !slices.Contains(args, want) {
			t.Errorf("consumer args %q lack %s", args, want)
		}
	}
	e.update("orders", func(tr *slessv1alpha1.Trigger) { tr.Spec.Enabled = ptr.To(false) })
	e.awaitReady("orders", "disabled", func(c metav1.Condition) bool {
		return c.Reason == slessv1alpha1.TriggerReasonDisabled && strings.Contains(c.Message, "records wait in the topic")
	})
}

// An mqtt trigger runs the same consumer Deployment, recreated rather than
// rolled (one client id, one session), with sless consume's mqtt flags;
// its missing Secret and its consumer's readiness show as a queue
// trigger's do.
func TestMQTTTriggerRunsConsumer(t *testing.T) {
	e := setup(t, time.Now())
	ctx := context.Background()
	sim := testbed.SharedDeployments(t)
	sim.Manage(e.ns)
	const consumer = "temps-consumer"
	sim.SetReady(e.ns, consumer, false)
	e.function("worker")
	e.create(&slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Name: "temps"}, Spec: slessv1alpha1.TriggerSpec{
		Function: "worker", Type: slessv1alpha1.TriggerTypeMQTT,
		MQTT: &slessv1alpha1.MQTTSpec{ConnectionSecret: "mqtt", Topic: "sensors/+/temp", ShareGroup: "workers"},
	}})
	e.awaitReady("temps", "the missing Secret", func(c metav1.Condition) bool {
		return c.Status == metav1.ConditionFalse && c.Reason == slessv1alpha1.TriggerReasonConnectionSecretNotFound &&
			c.Message == "Secret mqtt (key url) does not exist"
	})
	if err := e.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "mqtt", Namespace: e.ns}, StringData: map[string]string{"url": "tcp://nowhere:1883"}}); err != nil {
		t.Fatal(err)
	}
	c := e.awaitReady("temps", "a consumer not yet connected", func(c metav1.Condition) bool {
		return c.Reason == slessv1alpha1.TriggerReasonConsumerNotAvailable
	})
	if !strings.Contains(c.Message, "consuming topic sensors/+/temp in share group workers") && !strings.Contains(c.Message, "rolling out") {
		t.Errorf("Ready %+v", c)
	}
	sim.SetReady(e.ns, consumer, true)
	e.awaitReady("temps", "consuming", func(c metav1.Condition) bool {
		return c.Status == metav1.ConditionTrue && c.Message == "consuming topic sensors/+/temp in share group workers"
	})
	d := &appsv1.Deployment{}
	if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: consumer}, d); err != nil {
		t.Fatal(err)
	}
	if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("strategy %+v, want Recreate", d.Spec.Strategy)
	}
	args := d.Spec.Template.Spec.Containers[0].Args
	for _, want := range []string{"--broker=mqtt", "--topic=sensors/+/temp", "--share-group=workers", "--client-id=sless-" + e.ns + "-temps", "--dead-letter-topic=sless/dlq/" + e.ns + "/temps"} {
		if !slices.Contains(args, want) {
			t.Errorf("consumer args %q lack %s", args, want)
		}
	}
	e.update("temps", func(tr *slessv1alpha1.Trigger) { tr.Spec.Enabled = ptr.To(false) })
	e.awaitReady("temps", "disabled", func(c metav1.Condition) bool {
		return c.Reason == slessv1alpha1.TriggerReasonDisabled && strings.Contains(c.Message, "session on the broker")
	})
}
