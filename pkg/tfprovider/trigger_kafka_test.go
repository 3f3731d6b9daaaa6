package tfprovider

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// A kafka trigger read into Terraform state and written back is the same
// trigger, its unset group and dead-letter topic null rather than "".
func TestKafkaTriggerStateRoundTrip(t *testing.T) {
	for _, k := range []*slessv1alpha1.KafkaSpec{
		{ConnectionSecret: "kafka", Topic: "orders", Group: "g", DeadLetterTopic: "orders.dead",
			Delivery: slessv1alpha1.Delivery{Prefetch: ptr.To[int32](50), Concurrency: ptr.To[int32](8), MaxRetries: ptr.To[int32](0), BackoffSeconds: ptr.To[int32](30)}},
		{ConnectionSecret: "kafka", Topic: "orders",
			Delivery: slessv1alpha1.Delivery{Prefetch: ptr.To[int32](10), Concurrency: ptr.To[int32](1), MaxRetries: ptr.To[int32](3), BackoffSeconds: ptr.To[int32](1)}},
	} {
		m := stateRoundTrip(t, slessv1alpha1.TriggerSpec{Function: "f", Type: slessv1alpha1.TriggerTypeKafka, Enabled: ptr.To(true), Kafka: k})
		if k.Group == "" && !m.Kafka.Attributes()["group"].IsNull() {
			t.Errorf("an unset group is %v in state, want null", m.Kafka.Attributes()["group"])
		}
	}
}

// An mqtt trigger alike, its unset share group, client id and dead-letter
// topic null.
func TestMQTTTriggerStateRoundTrip(t *testing.T) {
	for _, q := range []*slessv1alpha1.MQTTSpec{
		{ConnectionSecret: "mqtt", Topic: "sensors/+/temp", ShareGroup: "g", ClientID: "c-1", DeadLetterTopic: "dead/temp",
			Delivery: slessv1alpha1.Delivery{Prefetch: ptr.To[int32](50), Concurrency: ptr.To[int32](8), MaxRetries: ptr.To[int32](0), BackoffSeconds: ptr.To[int32](30)}},
		{ConnectionSecret: "mqtt", Topic: "#",
			Delivery: slessv1alpha1.Delivery{Prefetch: ptr.To[int32](10), Concurrency: ptr.To[int32](1), MaxRetries: ptr.To[int32](3), BackoffSeconds: ptr.To[int32](1)}},
	} {
		m := stateRoundTrip(t, slessv1alpha1.TriggerSpec{Function: "f", Type: slessv1alpha1.TriggerTypeMQTT, Enabled: ptr.To(true), MQTT: q})
		for _, a := range []string{"share_group", "client_id", "dead_letter_topic"} {
			if q.ClientID == "" && !m.MQTT.Attributes()[a].IsNull() {
				t.Errorf("an unset %s is %v in state, want null", a, m.MQTT.Attributes()[a])
			}
		}
	}
}

// stateRoundTrip reads a trigger of spec into state, writes it back and
// wants the same spec.
func stateRoundTrip(t *testing.T, spec slessv1alpha1.TriggerSpec) triggerModel {
	t.Helper()
	in := &slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: "ns"}, Spec: spec}
	m, diags := triggerState(in, &triggerModel{})
	if diags.HasError() {
		t.Fatal(diags)
	}
	out, diags := m.object(context.Background(), "ns")
	if diags.HasError() {
		t.Fatal(diags)
	}
	if d := cmp.Diff(in.Spec, out.Spec); d != "" {
		t.Errorf("round trip (-in +out):\n%s", d)
	}
	return m
}
