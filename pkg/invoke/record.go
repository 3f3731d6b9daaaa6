package invoke

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Triggers: what caused an invocation. Record.Trigger holds one of them.
const (
	// TriggerHTTP is a call through the proxy at /fn/{ns}/{name}, public or
	// authenticated alike (the access check happened before the call).
	TriggerHTTP = "http"
	// TriggerCron is a scheduled run of a cron Trigger.
	TriggerCron = "cron"
	// TriggerQueue is a message delivered by a queue Trigger.
	TriggerQueue = "queue"
	// TriggerNATS is a message delivered by a nats Trigger.
	TriggerNATS = "nats"
	// TriggerMQTT is a message delivered by an mqtt Trigger.
	TriggerMQTT = "mqtt"
	// TriggerKafka is a record delivered by a kafka Trigger.
	TriggerKafka = "kafka"
	// TriggerJob is a FunctionJob run.
	TriggerJob = "job"
	// TriggerService is a call of a SlessService at /svc/{ns}/{name}; its
	// record's Function field holds the service's name.
	TriggerService = "service"
)

// ValidTrigger reports whether t is one of the Trigger constants.
func ValidTrigger(t string) bool {
	switch t {
	case TriggerHTTP, TriggerCron, TriggerQueue, TriggerNATS, TriggerMQTT, TriggerKafka, TriggerJob, TriggerService, TriggerAsync:
		return true
	}
	return false
}

// Bounds of a Record's text fields; the Recorder cuts longer values.
const (
	MaxRequestIDLength = 128
	MaxRevisionLength  = 253
	MaxErrorLength     = 1024
)

// StatusClientClosed is the status recorded for a call whose caller went
// away before the response was complete (nginx's 499). It is never sent.
const StatusClientClosed = 499

// Record is one invocation of a function.
type Record struct {
	// ID is assigned by the store; zero until the record is stored.
	ID        int64
	Namespace string
	Function  string
	// Revision that served the call; empty when the call never reached one.
	Revision string
	// Trigger is one of TriggerHTTP, TriggerCron, TriggerQueue, TriggerNATS, TriggerMQTT, TriggerKafka, TriggerJob,
	// TriggerService, TriggerAsync (one attempt of an asynchronous call).
	Trigger string
	// RequestID is the X-Request-Id the call carried (given or generated).
	RequestID string
	// StartedAt is when the call arrived; stores keep microseconds.
	StartedAt time.Time
	// Duration is from arrival to the last byte of the response.
	Duration time.Duration
	// Status is the HTTP status the caller got (for jobs: 200 for success,
	// 500 for failure), or StatusClientClosed.
	Status int
	// BytesIn and BytesOut count request and response body bytes.
	BytesIn  int64
	BytesOut int64
	// ColdStart is true when the call waited for an instance to start.
	ColdStart bool
	// Error says what went wrong when the platform, not the function,
	// answered (timeout, unreachable, not ready, a request body the caller
	// did not send whole) or the response was cut short; empty otherwise.
	Error string
}

// normalize makes a record storable anywhere: valid UTF-8 without NUL bytes
// (PostgreSQL's text refuses both), bounded lengths, microsecond times.
func (r *Record) normalize() {
	r.Namespace = cleanText(r.Namespace, 63)
	r.Function = cleanText(r.Function, 63)
	r.Revision = cleanText(r.Revision, MaxRevisionLength)
	r.Trigger = cleanText(r.Trigger, 16)
	r.RequestID = cleanText(r.RequestID, MaxRequestIDLength)
	r.Error = cleanText(r.Error, MaxErrorLength)
	r.StartedAt = r.StartedAt.Truncate(time.Microsecond)
	if r.Duration < 0 {
		r.Duration = 0
	}
	if r.BytesIn < 0 {
		r.BytesIn = 0
	}
	if r.BytesOut < 0 {
		r.BytesOut = 0
	}
}

func cleanText(s string, max int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "")
	}
	if len(s) > max {
		// Cut at a rune boundary.
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		// A copy: a record waits in the queue, and a slice would keep all
		// of a long text alive with it.
		s = strings.Clone(s[:cut])
	}
	return s
}

// Batch is a group of records a Sink stores together.
type Batch struct {
	// ID identifies the batch. The Recorder gives the same ID on every retry
	// of the same records, so a sink that can tell a batch it already stored
	// (an acknowledgement lost with the connection) answers nil for it and
	// nothing is stored twice.
	ID      string
	Records []Record
}

// Sink stores invocation records. Write stores the whole batch or nothing,
// except that it may store all but the records it refuses and answer a
// *RefusedError saying how many. An error wrapping ErrPermanent means
// retrying cannot help (the Recorder drops the batch, or the refused
// records, and counts them); any other error is retried with backoff, for
// as long as the Recorder runs.
type Sink interface {
	Write(ctx context.Context, batch Batch) error
}

// ErrPermanent marks a Sink error that retrying cannot fix.
var ErrPermanent = errors.New("permanent sink error")

// RefusedError is a Sink's answer when it stored a batch but for Refused
// of its records, which no retry can store (Err says why). It wraps
// ErrPermanent.
type RefusedError struct {
	Refused int
	Err     error
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%d records refused: %v", e.Refused, e.Err)
}

func (e *RefusedError) Unwrap() []error { return []error{ErrPermanent, e.Err} }

// refused is how many of a batch of n records err lost for good.
func refused(err error, n int) int {
	if re, ok := errors.AsType[*RefusedError](err); ok {
		return min(re.Refused, n)
	}
	return n
}
