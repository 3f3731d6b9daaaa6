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
		in := &slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: "ns"},
			Spec: slessv1alpha1.TriggerSpec{Function: "f", Type: slessv1alpha1.TriggerTypeKafka, Enabled: ptr.To(true), Kafka: k}}
		m, diags := triggerState(in, &triggerModel{})
		if diags.HasError() {
			t.Fatal(diags)
		}
		if k.Group == "" && !m.Kafka.Attributes()["group"].IsNull() {
			t.Errorf("an unset group is %v in state, want null", m.Kafka.Attributes()["group"])
		}
		out, diags := m.object(context.Background(), "ns")
		if diags.HasError() {
			t.Fatal(diags)
		}
		if d := cmp.Diff(in.Spec, out.Spec); d != "" {
			t.Errorf("round trip (-in +out):\n%s", d)
		}
	}
}
