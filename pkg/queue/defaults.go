package queue

import (
	"errors"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// Delivery are the settings the nats, kafka and mqtt consumers share,
// embedded in each one's Config.
type Delivery struct {
	// Prefetch is how many messages the consumer holds unfinished (what
	// each broker makes of it is in its Config).
	Prefetch    int
	Concurrency int
	// MaxRetries is how often a failed call is made again before the
	// message is dead-lettered.
	MaxRetries int
	// Backoff is the first retry's delay; it doubles each retry, up to MaxBackoff.
	Backoff, MaxBackoff time.Duration
	Invoker             Caller
	ReconnectDelay      time.Duration
	Logger              *slog.Logger
	// TracerProvider, when set, makes a CONSUMER span of each delivery
	// (NewTracer); nil makes none.
	TracerProvider trace.TracerProvider
}

// Check refuses what every broker's consumer refuses alike: no function
// to call, a negative retry count.
func (d *Delivery) Check() []error {
	var errs []error
	if d.Invoker == nil {
		errs = append(errs, errors.New("the function's invoker is required"))
	}
	if d.MaxRetries < 0 {
		errs = append(errs, errors.New("max retries must not be negative"))
	}
	return errs
}

// Fill gives the settings their defaults: at least one message held,
// between one call at once and prefetch, a first retry after a second and
// none later than DefaultMaxBackoff, reconnects from half a second, slog's
// default logger.
func (d *Delivery) Fill() {
	d.Prefetch = max(d.Prefetch, 1)
	d.Concurrency = min(max(d.Concurrency, 1), d.Prefetch)
	if d.Backoff <= 0 {
		d.Backoff = time.Second
	}
	if d.MaxBackoff <= 0 {
		d.MaxBackoff = DefaultMaxBackoff
	}
	if d.ReconnectDelay <= 0 {
		d.ReconnectDelay = 500 * time.Millisecond
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
}
