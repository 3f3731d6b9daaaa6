package devices

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the devices' counters, per namespace.
type Metrics struct {
	refusals *prometheus.CounterVec
	connects *prometheus.CounterVec
}

// NewMetrics registers the devices' metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sless_device_auth_refusals_total",
			Help: "Connects, publishes and subscriptions of devices the broker was told to refuse, by namespace (empty: the username names no device) and reason.",
		}, []string{"namespace", "reason"}),
		connects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sless_device_connects_total",
			Help: "Connects of devices the broker was told to let in, by namespace.",
		}, []string{"namespace"}),
	}
	for _, c := range []prometheus.Collector{m.refusals, m.connects} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Watch makes a count each of a's refusals and connects.
func (m *Metrics) Watch(a *Authority) {
	a.Refused = func(ns, reason string) { m.refusals.WithLabelValues(ns, reason).Inc() }
	a.Connected = func(ns, _ string) { m.connects.WithLabelValues(ns).Inc() }
}
