package async

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the runner's series:
//
//	sless_async_calls_accepted_total        calls kept (repeats of an Idempotency-Key not counted)
//	sless_async_attempts_total              attempts made
//	sless_async_calls_finished_total{state} calls that reached succeeded, failed or dead-lettered
//	sless_async_calls_pending               calls not final (queued, waiting for a retry, running)
//	sless_async_oldest_pending_age_seconds  how long ago the oldest of them was accepted
//	sless_async_callback_attempts_total     deliveries of results tried
//	sless_async_callbacks_total{outcome}    results delivered, failed, or refused by the callback policy
type metrics struct {
	accepted         prometheus.Counter
	attempts         prometheus.Counter
	finished         *prometheus.CounterVec
	callbackAttempts prometheus.Counter
	callbacks        *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, pending func() (int, time.Duration)) (*metrics, error) {
	m := &metrics{
		accepted: prometheus.NewCounter(prometheus.CounterOpts{Name: "sless_async_calls_accepted_total",
			Help: "Asynchronous calls kept (repeats of an Idempotency-Key not counted)."}),
		attempts: prometheus.NewCounter(prometheus.CounterOpts{Name: "sless_async_attempts_total",
			Help: "Attempts of asynchronous calls."}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sless_async_calls_finished_total",
			Help: "Asynchronous calls that reached a final state."}, []string{"state"}),
		callbackAttempts: prometheus.NewCounter(prometheus.CounterOpts{Name: "sless_async_callback_attempts_total",
			Help: "Deliveries of asynchronous calls' results to their callback URLs."}),
		callbacks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sless_async_callbacks_total",
			Help: "Results of asynchronous calls posted to their callback URLs, by outcome: delivered, failed, or refused by the callback policy."}, []string{"outcome"}),
	}
	if reg == nil {
		return m, nil
	}
	count := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sless_async_calls_pending",
		Help: "Asynchronous calls not yet in a final state."}, func() float64 { n, _ := pending(); return float64(n) })
	age := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sless_async_oldest_pending_age_seconds",
		Help: "Age of the oldest asynchronous call not yet in a final state (0 when none)."},
		func() float64 { _, d := pending(); return d.Seconds() })
	for _, c := range []prometheus.Collector{m.accepted, m.attempts, m.finished, m.callbackAttempts, m.callbacks, count, age} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, s := range []State{StateSucceeded, StateFailed, StateDeadLettered} {
		m.finished.WithLabelValues(string(s))
	}
	for _, o := range []string{"delivered", "failed", "refused"} {
		m.callbacks.WithLabelValues(o)
	}
	return m, nil
}
