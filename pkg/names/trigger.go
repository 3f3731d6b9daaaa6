// The names of what a Trigger makes.

package names

import slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"

// CronJob of a cron trigger: the trigger's own name. Trigger names are at most
// 52 characters, the limit batch/v1 sets on CronJob names (the Jobs it makes
// append 11 characters).
func CronJob(t *slessv1alpha1.Trigger) string { return t.Name }

// ConsumerDeployment runs `sless consume` for a queue trigger.
func ConsumerDeployment(t *slessv1alpha1.Trigger) string { return t.Name + "-consumer" }

// TokenSecret holds the trigger's credential for the invoke proxy.
func TokenSecret(t *slessv1alpha1.Trigger) string { return t.Name + "-trigger-token" }

// DeadLetterQueue is where a queue trigger's exhausted messages go.
func DeadLetterQueue(q *slessv1alpha1.QueueSpec) string {
	if q.DeadLetterQueue != "" {
		return q.DeadLetterQueue
	}
	return q.Queue + ".dlq"
}

// NATSDurable is the JetStream consumer a nats trigger consumes through.
func NATSDurable(t *slessv1alpha1.Trigger) string {
	if d := t.Spec.NATS.Durable; d != "" {
		return d
	}
	return t.Name
}

// NATSDeadLetterSubject is where a nats trigger's exhausted messages go.
func NATSDeadLetterSubject(t *slessv1alpha1.Trigger) string {
	if s := t.Spec.NATS.DeadLetterSubject; s != "" {
		return s
	}
	return "dlq." + t.Spec.NATS.Stream + "." + NATSDurable(t)
}

// MQTTClientID is the client id of an mqtt trigger's persistent session.
func MQTTClientID(t *slessv1alpha1.Trigger) string {
	if id := t.Spec.MQTT.ClientID; id != "" {
		return id
	}
	return "sless-" + t.Namespace + "-" + t.Name
}

// MQTTDeadLetterTopic is where an mqtt trigger's exhausted messages go.
func MQTTDeadLetterTopic(t *slessv1alpha1.Trigger) string {
	if s := t.Spec.MQTT.DeadLetterTopic; s != "" {
		return s
	}
	return "sless/dlq/" + t.Namespace + "/" + t.Name
}

// KafkaGroup is the consumer group a kafka trigger reads its topic in:
// group ids are cluster-wide, so the default names the namespace too.
func KafkaGroup(t *slessv1alpha1.Trigger) string {
	if g := t.Spec.Kafka.Group; g != "" {
		return g
	}
	return "sless." + t.Namespace + "." + t.Name
}

// KafkaDeadLetterTopic is where a kafka trigger's exhausted records go.
func KafkaDeadLetterTopic(t *slessv1alpha1.Trigger) string {
	if d := t.Spec.Kafka.DeadLetterTopic; d != "" {
		return d
	}
	return t.Spec.Kafka.Topic + ".dlq"
}
