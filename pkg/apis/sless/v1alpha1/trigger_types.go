package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultStartingDeadlineSeconds is how late a cron trigger's run may start
// when startingDeadlineSeconds is unset, on a cluster and in local mode.
const DefaultStartingDeadlineSeconds = 300

// TriggerType says what calls the function.
// +kubebuilder:validation:Enum=http;cron;queue;nats;mqtt;kafka
type TriggerType string

const (
	TriggerTypeHTTP  TriggerType = "http"
	TriggerTypeCron  TriggerType = "cron"
	TriggerTypeQueue TriggerType = "queue"
	// TriggerTypeNATS consumes a NATS JetStream stream.
	TriggerTypeNATS TriggerType = "nats"
	// TriggerTypeMQTT subscribes to an MQTT 3.1.1 topic filter.
	TriggerTypeMQTT TriggerType = "mqtt"
	// TriggerTypeKafka consumes a Kafka topic as a consumer group.
	TriggerTypeKafka TriggerType = "kafka"
)

// Consumes says whether triggers of type typ take messages from a broker
// through a consumer (`sless consume` on a cluster).
func (typ TriggerType) Consumes() bool {
	switch typ {
	case TriggerTypeQueue, TriggerTypeNATS, TriggerTypeMQTT, TriggerTypeKafka:
		return true
	}
	return false
}

// ConcurrencyPolicy says what a cron trigger does when a run is still going
// at the next scheduled time; the values are batch/v1 CronJob's.
// +kubebuilder:validation:Enum=Allow;Forbid;Replace
type ConcurrencyPolicy string

const (
	ConcurrencyAllow   ConcurrencyPolicy = "Allow"
	ConcurrencyForbid  ConcurrencyPolicy = "Forbid"
	ConcurrencyReplace ConcurrencyPolicy = "Replace"
)

// MaxPreWarmSeconds bounds how early a cron trigger may wake its function.
const MaxPreWarmSeconds = 3600

// cronFieldRule is the CEL rule that a cron schedule has five fields with
// values in range, or is one of the @ descriptors. The Go validation parses the
// schedule with the same parser CronJobs use; the rule keeps kubectl honest.
// (The marker below must carry the literal.)

// Trigger calls a Function: an HTTP trigger makes it public through the invoke
// proxy, a cron trigger calls it on a schedule, a queue trigger for each message.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=trg,categories=sless
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Function",type=string,JSONPath=`.spec.function`
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.url`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="name must be a DNS-1123 label"
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 52",message="name must be at most 52 characters"
type Trigger struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec TriggerSpec `json:"spec"`
	// +optional
	Status TriggerStatus `json:"status,omitempty"`
}

// TriggerSpec is what the user asks for.
//
// +kubebuilder:validation:XValidation:rule="self.type != 'cron' || has(self.schedule)",message="schedule is required for cron triggers",fieldPath=".schedule",reason="FieldValueRequired"
// +kubebuilder:validation:XValidation:rule="self.type == 'cron' || !has(self.schedule)",message="schedule applies only to cron triggers",fieldPath=".schedule",reason="FieldValueForbidden"
// +kubebuilder:validation:XValidation:rule="self.type == 'cron' || !has(self.timeZone)",message="timeZone applies only to cron triggers",fieldPath=".timeZone",reason="FieldValueForbidden"
// +kubebuilder:validation:XValidation:rule="self.type == 'cron' || !has(self.preWarmSeconds)",message="preWarmSeconds applies only to cron triggers",fieldPath=".preWarmSeconds",reason="FieldValueForbidden"
// +kubebuilder:validation:XValidation:rule="self.type == 'cron' || !has(self.concurrencyPolicy)",message="concurrencyPolicy applies only to cron triggers",fieldPath=".concurrencyPolicy",reason="FieldValueForbidden"
// +kubebuilder:validation:XValidation:rule="self.type != 'queue' || has(self.queue)",message="queue is required for queue triggers",fieldPath=".queue",reason="FieldValueRequired"
// +kubebuilder:validation:XValidation:rule="self.type == 'queue' || !has(self.queue)",message="queue applies only to queue triggers",fieldPath=".queue",reason="FieldValueForbidden"
// +kubebuilder:validation:XValidation:rule="self.type != 'nats' || has(self.nats)",message="nats is required for nats triggers",fieldPath=".nats",reason="FieldValueRequired"
// +kubebuilder:validation:XValidation:rule="self.type == 'nats' || !has(self.nats)",message="nats applies only to nats triggers",fieldPath=".nats",reason="FieldValueForbidden"
// +kubebuilder:validation:XValidation:rule="self.type != 'mqtt' || has(self.mqtt)",message="mqtt is required for mqtt triggers",fieldPath=".mqtt",reason="FieldValueRequired"
// +kubebuilder:validation:XValidation:rule="self.type == 'mqtt' || !has(self.mqtt)",message="mqtt applies only to mqtt triggers",fieldPath=".mqtt",reason="FieldValueForbidden"
// +kubebuilder:validation:XValidation:rule="self.type != 'kafka' || has(self.kafka)",message="kafka is required for kafka triggers",fieldPath=".kafka",reason="FieldValueRequired"
// +kubebuilder:validation:XValidation:rule="self.type == 'kafka' || !has(self.kafka)",message="kafka applies only to kafka triggers",fieldPath=".kafka",reason="FieldValueForbidden"
type TriggerSpec struct {
	// Function names the Function in the same namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=52
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Function string `json:"function"`

	// Type is http (anyone may call the function through the invoke
	// proxy), cron (sless calls it on a schedule), or queue, nats, mqtt
	// or kafka (sless calls it for each message of a RabbitMQ queue, a
	// NATS JetStream stream, an MQTT topic filter or a Kafka topic).
	// +required
	Type TriggerType `json:"type"`

	// Enabled false stops every invocation from this trigger (and for http,
	// closes the public route) without deleting it.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// Schedule in cron syntax (five fields, or @hourly, @daily, ...), for cron triggers.
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^@(yearly|annually|monthly|weekly|daily|midnight|hourly)$') || self.matches('^((\\\\*|\\\\?|[0-5]?[0-9](-[0-5]?[0-9])?)(/[1-9][0-9]*)?)(,((\\\\*|\\\\?|[0-5]?[0-9](-[0-5]?[0-9])?)(/[1-9][0-9]*)?))* +((\\\\*|\\\\?|(1?[0-9]|2[0-3])(-(1?[0-9]|2[0-3]))?)(/[1-9][0-9]*)?)(,((\\\\*|\\\\?|(1?[0-9]|2[0-3])(-(1?[0-9]|2[0-3]))?)(/[1-9][0-9]*)?))* +((\\\\*|\\\\?|([1-9]|[12][0-9]|3[01])(-([1-9]|[12][0-9]|3[01]))?)(/[1-9][0-9]*)?)(,((\\\\*|\\\\?|([1-9]|[12][0-9]|3[01])(-([1-9]|[12][0-9]|3[01]))?)(/[1-9][0-9]*)?))* +((\\\\*|\\\\?|([1-9]|1[0-2]|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec))(-([1-9]|1[0-2]|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)))?)(/[1-9][0-9]*)?)(,((\\\\*|\\\\?|([1-9]|1[0-2]|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec))(-([1-9]|1[0-2]|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)))?)(/[1-9][0-9]*)?))* +((\\\\*|\\\\?|([0-6]|(?i:sun|mon|tue|wed|thu|fri|sat))(-([0-6]|(?i:sun|mon|tue|wed|thu|fri|sat)))?)(/[1-9][0-9]*)?)(,((\\\\*|\\\\?|([0-6]|(?i:sun|mon|tue|wed|thu|fri|sat))(-([0-6]|(?i:sun|mon|tue|wed|thu|fri|sat)))?)(/[1-9][0-9]*)?))*$')",message="schedule must be five cron fields with values in range, or one of @yearly, @monthly, @weekly, @daily, @hourly"
	// +optional
	Schedule string `json:"schedule,omitempty"`

	// TimeZone of the schedule, an IANA name such as Europe/Berlin; UTC if
	// unset. "Local" is refused, as CronJobs refuse it: it would be the
	// controller's own zone.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z][A-Za-z0-9_+-]{0,13}(/[A-Za-z0-9_+][A-Za-z0-9_+-]{0,13})*$`
	// +kubebuilder:validation:XValidation:rule="self.lowerAscii() != 'local'",message="timeZone must name an IANA time zone such as Europe/Berlin, not Local"
	// +optional
	TimeZone string `json:"timeZone,omitempty"`

	// Payload is the event body a cron run sends.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	Payload *apiextensionsv1.JSON `json:"payload,omitempty"`

	// ConcurrencyPolicy for cron runs; Forbid when unset.
	// +optional
	ConcurrencyPolicy ConcurrencyPolicy `json:"concurrencyPolicy,omitempty"`

	// StartingDeadlineSeconds: a run that could not start within this many
	// seconds of its time is skipped; 300 when unset.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	// +optional
	StartingDeadlineSeconds *int64 `json:"startingDeadlineSeconds,omitempty"`

	// PreWarmSeconds raises the function's min-scale to one this many seconds
	// before each scheduled run and lowers it after, so the run has no cold start.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	// +optional
	PreWarmSeconds *int32 `json:"preWarmSeconds,omitempty"`

	// Queue configures a queue trigger.
	// +optional
	Queue *QueueSpec `json:"queue,omitempty"`

	// NATS configures a nats trigger.
	// +optional
	NATS *NATSSpec `json:"nats,omitempty"`

	// MQTT configures an mqtt trigger.
	// +optional
	MQTT *MQTTSpec `json:"mqtt,omitempty"`

	// Kafka configures a kafka trigger.
	// +optional
	Kafka *KafkaSpec `json:"kafka,omitempty"`
}

// Delivery is how a consumer hands a broker's messages to the function,
// the same for every broker.
type Delivery struct {
	// Prefetch is how many unacknowledged messages a consumer holds.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +kubebuilder:default=10
	// +optional
	Prefetch *int32 `json:"prefetch,omitempty"`
	// Concurrency is how many messages are delivered to the function at once.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=1
	// +optional
	Concurrency *int32 `json:"concurrency,omitempty"`
	// MaxRetries before a message is dead-lettered.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=3
	// +optional
	MaxRetries *int32 `json:"maxRetries,omitempty"`
	// BackoffSeconds is the first retry delay; it doubles on each retry.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	// +kubebuilder:default=1
	// +optional
	BackoffSeconds *int32 `json:"backoffSeconds,omitempty"`
}

// MaxQueueNameBytes bounds a queue trigger's queue name: RabbitMQ takes
// names of up to 255 bytes, and the consumer's retry queues are named
// <queue>.retry.<delay in ms>ms, up to an hour (16 bytes more).
const MaxQueueNameBytes = 255 - len(".retry.3600000ms")

// QueueSpec is a RabbitMQ (AMQP 0-9-1) queue whose messages call the
// function. The consumer declares its delay and dead-letter queues, so
// their names must be ones RabbitMQ lets a client declare.
//
// +kubebuilder:validation:XValidation:rule="size(bytes(self.queue)) <= 239",message="queue must be at most 239 bytes, leaving room for the names of its retry queues (<queue>.retry.<delay>ms)",fieldPath=".queue"
// +kubebuilder:validation:XValidation:rule="!self.queue.startsWith('amq.')",message="queue names starting with amq. are reserved by RabbitMQ",fieldPath=".queue"
// +kubebuilder:validation:XValidation:rule="!has(self.deadLetterQueue) || self.deadLetterQueue != self.queue",message="deadLetterQueue must differ from queue, or dead letters would be consumed again",fieldPath=".deadLetterQueue"
// +kubebuilder:validation:XValidation:rule="!has(self.deadLetterQueue) || (size(bytes(self.deadLetterQueue)) <= 255 && !self.deadLetterQueue.startsWith('amq.'))",message="deadLetterQueue must be at most 255 bytes and not start with amq., which RabbitMQ reserves",fieldPath=".deadLetterQueue"
type QueueSpec struct {
	// ConnectionSecret names a Secret in the trigger's namespace whose key
	// "url" holds the amqp:// URL.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	ConnectionSecret string `json:"connectionSecret"`
	// Queue to consume.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	// +required
	Queue    string `json:"queue"`
	Delivery `json:",inline"`
	// DeadLetterQueue receives messages whose retries ran out; "<queue>.dlq" if unset.
	// +kubebuilder:validation:MaxLength=255
	// +optional
	DeadLetterQueue string `json:"deadLetterQueue,omitempty"`
}

// NATSSpec is a NATS JetStream stream whose messages call the function,
// through a durable pull consumer that sless creates or updates. Failed
// calls are redelivered by JetStream after a delay (nak); a message
// delivered maxRetries+1 times is copied to the dead-letter subject.
//
// +kubebuilder:validation:XValidation:rule="!has(self.deadLetterSubject) || self.deadLetterSubject != self.subject",message="deadLetterSubject must differ from subject, or dead letters would be consumed again",fieldPath=".deadLetterSubject"
type NATSSpec struct {
	// ConnectionSecret names a Secret in the trigger's namespace: key "url"
	// holds the server URL(s), nats://[user:password@]host:4222 or tls://,
	// comma-separated; optional keys "username", "password", "token",
	// "ca.crt", "tls.crt" and "tls.key" as nats.go's options.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	ConnectionSecret string `json:"connectionSecret"`
	// Stream is the JetStream stream to consume; it must exist.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[^\s.*>/\\]+$`
	// +required
	Stream string `json:"stream"`
	// Subject filters the stream's messages; wildcards * and > allowed.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^(>|(\*|[^\s.*>]+)(\.(\*|[^\s.*>]+))*(\.>)?)$`
	// +required
	Subject string `json:"subject"`
	// Durable is the name of the JetStream consumer; the trigger's name if unset.
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[^\s.*>/\\]+$`
	// +optional
	Durable  string `json:"durable,omitempty"`
	Delivery `json:",inline"`
	// DeadLetterSubject receives a copy of each message whose retries ran
	// out; "dlq.<stream>.<durable>" if unset. A stream must capture it:
	// the consumer creates one (DLQ_<stream>_<durable>) if none does.
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[^\s.*>]+(\.[^\s.*>]+)*$`
	// +optional
	DeadLetterSubject string `json:"deadLetterSubject,omitempty"`
}

// MQTTSpec is an MQTT 3.1.1 topic filter whose messages call the
// function, subscribed at QoS 1 in a persistent session (clean session
// false) under a stable client id, so the broker keeps the messages of a
// consumer that is away and delivers again those it did not acknowledge.
// A message is acknowledged after the function answered 2xx; failed calls
// are retried by the consumer, and after maxRetries the message is
// published to the dead-letter topic.
//
// +kubebuilder:validation:XValidation:rule="!has(self.deadLetterTopic) || self.deadLetterTopic != self.topic",message="deadLetterTopic must differ from topic, or dead letters would be consumed again",fieldPath=".deadLetterTopic"
type MQTTSpec struct {
	// ConnectionSecret names a Secret in the trigger's namespace: key "url"
	// holds the broker's URL, tcp://host:1883, ssl://host:8883, ws:// or
	// wss:// (mqtt:// and mqtts:// too); optional keys "username",
	// "password", "ca.crt", "tls.crt" and "tls.key".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	ConnectionSecret string `json:"connectionSecret"`
	// Topic is the topic filter to subscribe to: levels separated by /,
	// + a whole level, # only as the last level.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^(#|(\+|[^+#/]*)(/(\+|[^+#/]*))*(/#)?)$`
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('$share/')",message="topic must be a plain filter: set shareGroup for a shared subscription"
	// +required
	Topic string `json:"topic"`
	// ShareGroup subscribes as $share/<shareGroup>/<topic>: the broker
	// hands each message to one of the group's subscribers, so triggers
	// (or consumers) in one group split the load.
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[^/+#\s]+$`
	// +optional
	ShareGroup string `json:"shareGroup,omitempty"`
	// ClientID is the MQTT client id of the consumer's persistent session;
	// "sless-<namespace>-<trigger>" if unset. Two clients with one id
	// take the session from each other: keep it unique on the broker.
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[0-9A-Za-z_.:-]+$`
	// +optional
	ClientID string `json:"clientID,omitempty"`
	Delivery `json:",inline"`
	// DeadLetterTopic receives each message whose retries ran out;
	// "sless/dlq/<namespace>/<trigger>" if unset. No wildcards.
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^[^+#$][^+#]*$`
	// +optional
	DeadLetterTopic string `json:"deadLetterTopic,omitempty"`
}

// MaxKafkaTopicBytes is the longest topic name Kafka takes.
const MaxKafkaTopicBytes = 249

// KafkaSpec is a Kafka topic whose records call the function, read by a
// consumer group. A record's offset is committed only once it and every
// record before it in its partition were answered 2xx or dead-lettered; a
// failed call is tried again after a doubling delay, and a record that
// failed maxRetries+1 times is produced to the dead-letter topic.
//
// +kubebuilder:validation:XValidation:rule="self.topic != '.' && self.topic != '..'",message="topic must not be . or .., which Kafka refuses",fieldPath=".topic"
// +kubebuilder:validation:XValidation:rule="has(self.deadLetterTopic) || size(self.topic) <= 245",message="topic must be at most 245 characters when deadLetterTopic is unset, leaving room for <topic>.dlq",fieldPath=".topic"
// +kubebuilder:validation:XValidation:rule="!has(self.deadLetterTopic) || self.deadLetterTopic != self.topic",message="deadLetterTopic must differ from topic, or dead letters would be consumed again",fieldPath=".deadLetterTopic"
// +kubebuilder:validation:XValidation:rule="!has(self.deadLetterTopic) || (self.deadLetterTopic != '.' && self.deadLetterTopic != '..')",message="deadLetterTopic must not be . or .., which Kafka refuses",fieldPath=".deadLetterTopic"
type KafkaSpec struct {
	// ConnectionSecret names a Secret in the trigger's namespace: key
	// "brokers" holds the seed brokers, host:port separated by commas;
	// optional keys "sasl.mechanism" (PLAIN, SCRAM-SHA-256 or
	// SCRAM-SHA-512) with "username" and "password", "tls" ("true" dials
	// TLS), and "ca.crt", "tls.crt" and "tls.key" (which imply it).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	ConnectionSecret string `json:"connectionSecret"`
	// Topic to consume; it must exist.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=249
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9._-]+$`
	// +required
	Topic string `json:"topic"`
	// Group is the consumer group's id; "sless.<namespace>.<trigger>" if
	// unset. A group new to the topic starts at its earliest record.
	// +kubebuilder:validation:MaxLength=249
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9._-]+$`
	// +optional
	Group    string `json:"group,omitempty"`
	Delivery `json:",inline"`
	// DeadLetterTopic receives the records whose retries ran out;
	// "<topic>.dlq" if unset. The consumer creates it if it is missing.
	// +kubebuilder:validation:MaxLength=249
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9._-]+$`
	// +optional
	DeadLetterTopic string `json:"deadLetterTopic,omitempty"`
}

// Condition types of a Trigger.
const (
	TriggerConditionReady = "Ready"
)

// TriggerStatus is what sless observed and did.
type TriggerStatus struct {
	// ObservedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions holds Ready: True while the trigger calls its function
	// (Public, Scheduled, Consuming), False with the reason it does not
	// (Disabled, FunctionNotFound, InvalidSchedule, Rejected, ...), and
	// Unknown while a queue trigger's consumer is on its way
	// (ConsumerNotAvailable: rolling out, or not yet connected).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// URL of the public route, for enabled http triggers.
	// +optional
	URL string `json:"url,omitempty"`
	// LastScheduleTime of a cron trigger.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
	// NextScheduleTime of a cron trigger.
	// +optional
	NextScheduleTime *metav1.Time `json:"nextScheduleTime,omitempty"`
	// PreWarmedFor is the scheduled run for which the function's min-scale is
	// raised now (preWarmSeconds); unset when it is not raised by this trigger.
	// +optional
	PreWarmedFor *metav1.Time `json:"preWarmedFor,omitempty"`
}

// TriggerList is a list of Triggers.
//
// +kubebuilder:object:root=true
type TriggerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Trigger `json:"items"`
}
