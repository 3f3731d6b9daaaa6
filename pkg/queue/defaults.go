package queue

import (
	"errors"
	"log/slog"
	"time"
)

// CheckDelivery refuses what every broker's consumer refuses alike: no
// function to call, a negative retry count.
func CheckDelivery(invoker Caller, maxRetries int) []error {
	var errs []error
	if invoker == nil {
		errs = append(errs, errors.New("the function's invoker is required"))
	}
	if maxRetries < 0 {
		errs = append(errs, errors.New("max retries must not be negative"))
	}
	return errs
}

// FillDelivery gives the delivery settings of the nats, kafka and mqtt
// consumers' Configs their defaults: at least one message held, between
// one call at once and prefetch, a first retry after a second and none
// later than DefaultMaxBackoff, reconnects from half a second, slog's
// default logger.
func FillDelivery(prefetch, concurrency *int, backoff, maxBackoff, reconnect *time.Duration, logger **slog.Logger) {
	*prefetch = max(*prefetch, 1)
	*concurrency = min(max(*concurrency, 1), *prefetch)
	if *backoff <= 0 {
		*backoff = time.Second
	}
	if *maxBackoff <= 0 {
		*maxBackoff = DefaultMaxBackoff
	}
	if *reconnect <= 0 {
		*reconnect = 500 * time.Millisecond
	}
	if *logger == nil {
		*logger = slog.Default()
	}
}
