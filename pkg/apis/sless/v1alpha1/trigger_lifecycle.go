package v1alpha1

import "fmt"

// TriggerConditionSet is a Trigger's: Ready alone, True while the trigger
// calls its function.
var TriggerConditionSet = ConditionSet{Ready: TriggerConditionReady}

// Reasons of a Trigger's Ready condition, the same on a cluster and in
// local mode.
const (
	TriggerReasonPublic                   = "Public"
	TriggerReasonScheduled                = "Scheduled"
	TriggerReasonConsuming                = "Consuming"
	TriggerReasonDisabled                 = "Disabled"
	TriggerReasonFunctionNotFound         = "FunctionNotFound"
	TriggerReasonConnectionSecretNotFound = "ConnectionSecretNotFound"
	TriggerReasonConsumerNotAvailable     = "ConsumerNotAvailable"
	TriggerReasonInvalidSchedule          = "InvalidSchedule"
	TriggerReasonPayloadTooLarge          = "PayloadTooLarge"
	TriggerReasonCredentialFailed         = "CredentialFailed"
	TriggerReasonPreWarmFailed            = "PreWarmFailed"
	TriggerReasonConflict                 = "Conflict"
	TriggerReasonNoCallerImage            = "NoCallerImage"
	// TriggerReasonRejected: the apiserver or a webhook (a quota, a
	// policy) refused a child as the trigger asks for it.
	TriggerReasonRejected = "Rejected"
	// TriggerReasonQueueNotSupported: sless dev was started without a
	// broker to consume the trigger's messages from.
	TriggerReasonQueueNotSupported = "QueueNotSupportedLocally"
	// TriggerReasonInvalidQueue: local mode cannot make a consumer of the
	// queue as given.
	TriggerReasonInvalidQueue = "InvalidQueue"
)

// The verbs below describe the generation in s.ObservedGeneration: a
// reconciler sets it to the generation it reconciles before it marks
// anything.

func (s *TriggerStatus) conditions() conditions {
	return conditions{list: &s.Conditions, generation: s.ObservedGeneration}
}

// MarkPublic: anyone may call the http trigger's function.
func (s *TriggerStatus) MarkPublic() {
	s.conditions().markTrue(TriggerConditionReady, TriggerReasonPublic, "anyone may call the function at its URL")
}

// MarkScheduled: the cron trigger calls its function on schedule, in time
// zone tz ("" is UTC).
func (s *TriggerStatus) MarkScheduled(schedule, tz string) {
	if tz == "" {
		tz = "UTC"
	}
	s.conditions().markTrue(TriggerConditionReady, TriggerReasonScheduled, "runs on schedule "+schedule+" ("+tz+")")
}

// MarkConsuming: the trigger's consumer is connected and consumes what
// (Trigger.Source).
func (s *TriggerStatus) MarkConsuming(what string) {
	s.conditions().markTrue(TriggerConditionReady, TriggerReasonConsuming, "consuming "+what)
}

// MarkConsumerStarting: the consumer is on its way (rolling out,
// connecting, waiting for its predecessor to drain).
func (s *TriggerStatus) MarkConsumerStarting(message string) {
	s.conditions().markUnknown(TriggerConditionReady, TriggerReasonConsumerNotAvailable, message)
}

// MarkConsumerFailed: the consumer cannot consume, for the reason message
// gives (refused by the broker, crashing).
func (s *TriggerStatus) MarkConsumerFailed(message string) {
	s.conditions().markFalse(TriggerConditionReady, TriggerReasonConsumerNotAvailable, message)
}

// MarkDisabled: spec.enabled is false; what that means depends on the type.
func (s *TriggerStatus) MarkDisabled(typ TriggerType) {
	what := "it is not scheduled"
	switch typ {
	case TriggerTypeHTTP:
		what = "the function is private"
	case TriggerTypeQueue:
		what = "messages wait in the queue"
	case TriggerTypeNATS:
		what = "messages wait in the stream"
	case TriggerTypeMQTT:
		what = "QoS 1 messages wait in the consumer's session on the broker, up to its queue limit"
	case TriggerTypeKafka:
		what = "records wait in the topic"
	}
	s.conditions().markFalse(TriggerConditionReady, TriggerReasonDisabled, "the trigger is disabled: "+what)
}

// MarkFunctionNotFound: the function does not exist; the trigger stops
// calling it until it does.
func (s *TriggerStatus) MarkFunctionNotFound(function string) {
	s.conditions().markFalse(TriggerConditionReady, TriggerReasonFunctionNotFound,
		"Function "+function+" does not exist: the trigger is paused until it does")
}

// MarkInvalidSchedule: the schedule or time zone cannot be run (err says
// why); the trigger is paused until it is fixed.
func (s *TriggerStatus) MarkInvalidSchedule(err error) {
	s.conditions().markFalse(TriggerConditionReady, TriggerReasonInvalidSchedule,
		err.Error()+": the trigger is paused until its schedule is fixed")
}

// MarkPayloadTooLarge: a run could not carry the payload (message says
// why); the trigger is paused until it is smaller.
func (s *TriggerStatus) MarkPayloadTooLarge(message string) {
	s.conditions().markFalse(TriggerConditionReady, TriggerReasonPayloadTooLarge, message+": the trigger is paused until it is smaller")
}

// MarkNoCallerImage: the controller has no sless image to run cron and
// queue triggers with.
func (s *TriggerStatus) MarkNoCallerImage(typ TriggerType) {
	s.conditions().markFalse(TriggerConditionReady, TriggerReasonNoCallerImage,
		"the controller has no sless image configured (SLESS_IMAGE, --sless-image) to run "+string(typ)+" triggers with")
}

// MarkConnectionSecretNotFound: the queue trigger's connection Secret, or
// its key, is missing.
func (s *TriggerStatus) MarkConnectionSecretNotFound(secret, key string, secretExists bool) {
	msg := "Secret " + secret + " (key " + key + ") does not exist"
	if secretExists {
		msg = "Secret " + secret + " has no key " + key
	}
	s.conditions().markFalse(TriggerConditionReady, TriggerReasonConnectionSecretNotFound, msg)
}

// MarkCredentialFailed: the trigger's credential could not be issued.
func (s *TriggerStatus) MarkCredentialFailed(message string) {
	s.conditions().markFalse(TriggerConditionReady, TriggerReasonCredentialFailed, message)
}

// MarkPreWarmFailed: the function's min-scale could not be raised or
// restored around a run.
func (s *TriggerStatus) MarkPreWarmFailed(message string) {
	s.conditions().markFalse(TriggerConditionReady, TriggerReasonPreWarmFailed, message)
}

// MarkConflict: a child's name is taken by an object the trigger does not own.
func (s *TriggerStatus) MarkConflict(kind, name string) {
	s.conditions().markFalse(TriggerConditionReady, TriggerReasonConflict,
		fmt.Sprintf("%s %s exists and is not owned by this trigger", kind, name))
}

// MarkRejected: the apiserver or a webhook refused a child as asked.
func (s *TriggerStatus) MarkRejected(kind, name string, err error) {
	s.conditions().markFalse(TriggerConditionReady, TriggerReasonRejected,
		fmt.Sprintf("%s %s was refused: %v", kind, name, err))
}

// MarkQueueNotSupported: local mode was given no broker of typ to consume from.
func (s *TriggerStatus) MarkQueueNotSupported(typ TriggerType) {
	msg := "sless dev consumes queues only from a broker it is given (-amqp-url or SLESS_AMQP_URL)"
	switch typ {
	case TriggerTypeNATS:
		msg = "sless dev consumes nats triggers only from a server it is given (-nats-url or SLESS_NATS_URL)"
	case TriggerTypeMQTT:
		msg = "sless dev consumes mqtt triggers only from a broker it is given (-mqtt-url or SLESS_MQTT_URL)"
	case TriggerTypeKafka:
		msg = "sless dev consumes kafka triggers only from brokers it is given (-kafka-brokers or SLESS_KAFKA_BROKERS)"
	}
	s.conditions().markFalse(TriggerConditionReady, TriggerReasonQueueNotSupported, msg)
}

// MarkInvalidQueue: local mode cannot consume the queue as given.
func (s *TriggerStatus) MarkInvalidQueue(err error) {
	s.conditions().markFalse(TriggerConditionReady, TriggerReasonInvalidQueue, err.Error())
}
