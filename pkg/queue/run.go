package queue

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"golang.org/x/net/http/httpguts"
)

// Source is a consumer of one broker's messages for one function: the
// RabbitMQ Consumer here, and the NATS, MQTT and Kafka consumers beside
// it. `sless consume` serves its health and sless dev follows its State.
type Source interface {
	// Run consumes until ctx ends, reconnecting as needed; it returns an
	// error only when no retry can help.
	Run(ctx context.Context) error
	// State is what it does now and a channel closed at the next change.
	State() (State, <-chan struct{})
	// What names what it consumes, for messages: "queue orders".
	What() string
}

// PermanentError ends Sessions: retrying cannot help (access refused, a
// declaration that conflicts with the broker's).
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent marks err as one no reconnect mends.
func Permanent(err error) error { return &PermanentError{Err: err} }

// MaxReconnectDelay caps the doubling wait between sessions.
const MaxReconnectDelay = 30 * time.Second

// Sessions runs session again and again, with a doubling wait from first
// up to MaxReconnectDelay between them, until ctx ends (then nil) or a
// session fails with a PermanentError (then its error). A session returns
// consumed once it got as far as consuming; it sets tr's consuming state
// itself, and Sessions records why each one ended.
func Sessions(ctx context.Context, tr *Tracker, first time.Duration, log *slog.Logger, what string, session func(context.Context) (consumed bool, err error)) error {
	delay := first
	for {
		consumed, err := session(ctx)
		if ctx.Err() != nil {
			tr.Set(false, nil, true)
			return nil
		}
		if perm, ok := errors.AsType[*PermanentError](err); ok {
			tr.Set(false, perm.Err, true)
			return perm.Err
		}
		// Until a session consumes again, the state names what ended the
		// last one or kept it from starting, not only the log.
		tr.Set(false, err, false)
		// A session that got as far as consuming ended a good spell: this
		// outage starts from the first delay again. Keeping the doubled
		// delay of outages before would leave a consumer whose broker
		// flapped a few times idle for 30 s after each later restart.
		if consumed {
			delay = first
		}
		log.Warn("queue: connection lost, reconnecting", "source", what, "error", err, "in", delay)
		select {
		case <-ctx.Done():
			tr.Set(false, nil, true)
			return nil
		case <-time.After(delay):
		}
		delay = min(delay*2, MaxReconnectDelay)
	}
}

// Backoff is the wait before retry n (1-based): first, doubling each
// retry, up to limit.
func Backoff(first, limit time.Duration, n int) time.Duration {
	d := first
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// HeaderValue is id as an HTTP header value. Broker ids are any bytes, and
// an HTTP client refuses a header with control characters: such an id goes
// Go-quoted ("order\n42") rather than fail every call of its message.
func HeaderValue(id string) string {
	if httpguts.ValidHeaderFieldValue(id) {
		return id
	}
	return strconv.Quote(id)
}

// Why says why a call that was not OK failed, at most 512 bytes, for the
// header a retried or dead-lettered copy carries.
func (o Outcome) Why() string {
	switch {
	case o.Err != nil:
		return truncate(o.Err.Error(), 512)
	case o.PlatformError != "":
		return o.PlatformError
	}
	return truncate(string(o.Body), 512)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
