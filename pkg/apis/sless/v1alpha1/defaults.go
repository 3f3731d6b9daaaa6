package v1alpha1

import (
	"time"

	"k8s.io/utils/ptr"
)

// SetDefaults fills what the CRD schema defaults, so code that builds a
// Function in Go sees what the apiserver would store.
func (fn *Function) SetDefaults() {
	s := &fn.Spec
	if s.TimeoutSeconds == nil {
		s.TimeoutSeconds = ptr.To[int32](DefaultTimeoutSeconds)
	}
	if s.BuildTimeoutSeconds == nil {
		s.BuildTimeoutSeconds = ptr.To[int32](DefaultBuildTimeoutSeconds)
	}
	if a := s.Async; a != nil {
		if a.Concurrency == nil {
			a.Concurrency = ptr.To[int32](DefaultAsyncConcurrency)
		}
		if a.MaxRetries == nil {
			a.MaxRetries = ptr.To[int32](DefaultAsyncMaxRetries)
		}
		if a.MaxEventAgeSeconds == nil {
			a.MaxEventAgeSeconds = ptr.To[int32](DefaultAsyncMaxEventAgeSeconds)
		}
	}
}

// SetDefaults fills what the CRD schema defaults.
func (t *Trigger) SetDefaults() {
	if t.Spec.Enabled == nil {
		t.Spec.Enabled = ptr.To(true)
	}
	if d := t.Delivery(); d != nil {
		d.setDefaults()
	}
}

func (d *Delivery) setDefaults() {
	if d.Prefetch == nil {
		d.Prefetch = ptr.To[int32](10)
	}
	if d.Concurrency == nil {
		d.Concurrency = ptr.To[int32](1)
	}
	if d.MaxRetries == nil {
		d.MaxRetries = ptr.To[int32](3)
	}
	if d.BackoffSeconds == nil {
		d.BackoffSeconds = ptr.To[int32](1)
	}
}

// Delivery is the delivery settings of a trigger that consumes a broker's
// messages, nil for any other (or one whose broker block is missing).
func (t *Trigger) Delivery() *Delivery {
	switch {
	case t.Spec.Type == TriggerTypeQueue && t.Spec.Queue != nil:
		return &t.Spec.Queue.Delivery
	case t.Spec.Type == TriggerTypeNATS && t.Spec.NATS != nil:
		return &t.Spec.NATS.Delivery
	case t.Spec.Type == TriggerTypeMQTT && t.Spec.MQTT != nil:
		return &t.Spec.MQTT.Delivery
	case t.Spec.Type == TriggerTypeKafka && t.Spec.Kafka != nil:
		return &t.Spec.Kafka.Delivery
	}
	return nil
}

// ConnectionSecret is the Secret a consumer's broker connection is read
// from; "" for triggers that consume nothing.
func (t *Trigger) ConnectionSecret() string {
	switch {
	case t.Spec.Type == TriggerTypeQueue && t.Spec.Queue != nil:
		return t.Spec.Queue.ConnectionSecret
	case t.Spec.Type == TriggerTypeNATS && t.Spec.NATS != nil:
		return t.Spec.NATS.ConnectionSecret
	case t.Spec.Type == TriggerTypeMQTT && t.Spec.MQTT != nil:
		return t.Spec.MQTT.ConnectionSecret
	case t.Spec.Type == TriggerTypeKafka && t.Spec.Kafka != nil:
		return t.Spec.Kafka.ConnectionSecret
	}
	return ""
}

// Source names what a consuming trigger consumes, for status messages:
// "queue orders", "subject orders.> of stream ORDERS", "topic a/+".
func (t *Trigger) Source() string {
	switch {
	case t.Spec.Type == TriggerTypeQueue && t.Spec.Queue != nil:
		return "queue " + t.Spec.Queue.Queue
	case t.Spec.Type == TriggerTypeNATS && t.Spec.NATS != nil:
		return NATSSource(t.Spec.NATS.Subject, t.Spec.NATS.Stream)
	case t.Spec.Type == TriggerTypeMQTT && t.Spec.MQTT != nil:
		return MQTTSource(t.Spec.MQTT.Topic, t.Spec.MQTT.ShareGroup)
	case t.Spec.Type == TriggerTypeKafka && t.Spec.Kafka != nil:
		return KafkaSource(t.Spec.Kafka.Topic)
	}
	return ""
}

// MQTTSource names what an mqtt consumer consumes, as Trigger.Source does:
// "topic sensors/+/temp", "topic sensors/# in share group g".
func MQTTSource(topic, group string) string {
	if group == "" {
		return "topic " + topic
	}
	return "topic " + topic + " in share group " + group
}

// KafkaSource names what a kafka consumer consumes, as Trigger.Source does.
func KafkaSource(topic string) string { return "topic " + topic }

// NATSSource names what a nats consumer consumes, as Trigger.Source does.
func NATSSource(subject, stream string) string {
	return "subject " + subject + " of stream " + stream
}

// IsEnabled says whether the trigger may call its function.
func (t *Trigger) IsEnabled() bool { return t.Spec.Enabled == nil || *t.Spec.Enabled }

// EffectiveConcurrencyPolicy is Forbid unless the user chose otherwise.
func (t *Trigger) EffectiveConcurrencyPolicy() ConcurrencyPolicy {
	if t.Spec.ConcurrencyPolicy == "" {
		return ConcurrencyForbid
	}
	return t.Spec.ConcurrencyPolicy
}

// Timeout is the function's per-invocation budget in seconds.
func (fn *Function) Timeout() int32 {
	if fn.Spec.TimeoutSeconds == nil {
		return DefaultTimeoutSeconds
	}
	return *fn.Spec.TimeoutSeconds
}

// BuildTimeout is the bound of one build of the function, in seconds.
func (fn *Function) BuildTimeout() int32 {
	if fn.Spec.BuildTimeoutSeconds == nil {
		return DefaultBuildTimeoutSeconds
	}
	return *fn.Spec.BuildTimeoutSeconds
}

// IsReady says whether the Function's Ready condition is True for its current generation.
func (fn *Function) IsReady() bool {
	if fn.Status.ObservedGeneration != fn.Generation {
		return false
	}
	for _, c := range fn.Status.Conditions {
		if c.Type == FunctionConditionReady {
			return c.Status == "True"
		}
	}
	return false
}

// AsyncPolicy is spec.async with its defaults filled in.
func (fn *Function) AsyncPolicy() (concurrency, maxRetries int, maxEventAge time.Duration) {
	concurrency, maxRetries, age := DefaultAsyncConcurrency, DefaultAsyncMaxRetries, DefaultAsyncMaxEventAgeSeconds
	if a := fn.Spec.Async; a != nil {
		if a.Concurrency != nil {
			concurrency = int(*a.Concurrency)
		}
		if a.MaxRetries != nil {
			maxRetries = int(*a.MaxRetries)
		}
		if a.MaxEventAgeSeconds != nil {
			age = int(*a.MaxEventAgeSeconds)
		}
	}
	return concurrency, maxRetries, time.Duration(age) * time.Second
}
