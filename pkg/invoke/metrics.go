package invoke

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
)

// Sources of a response, the "source" label of the request metrics and the
// meaning of the X-Sless-Error header: the function answered, or sless did
// (not found, not ready, timeout, unreachable, refused).
const (
	SourceFunction = "function"
	SourcePlatform = "platform"
)

// Metrics are the proxy's and the recorder's Prometheus metrics. Labels stay
// few on purpose: the per-function breakdown is the invocation history, and a
// label per function would grow without bound with the tenants. A nil
// *Metrics collects nothing.
type Metrics struct {
	requests      [6][2]prometheus.Counter // [status class][source]
	latency       [2]prometheus.Observer   // [source]
	coldStarts    prometheus.Counter
	coldStartWait prometheus.Observer
	dropped       map[string]prometheus.Counter
	written       prometheus.Counter
	writeErrors   prometheus.Counter
	writeLatency  prometheus.Observer
	// proxy is false for recorder-only metrics (NewRecorderMetrics).
	proxy bool

	mu      sync.Mutex
	depth   []func() int
	spooled []func() int
}

// Reasons a record is dropped, the "reason" label of
// sless_invocation_records_dropped_total.
const (
	DropQueueFull = "queue_full" // the queue held QueueSize records
	DropRejected  = "rejected"   // the sink refused the batch for good (ErrPermanent)
	DropShutdown  = "shutdown"   // Close ran out of time before the sink took them
	DropSpoolFull = "spool_full" // the spool held its cap of records
	DropSpoolFail = "spool_fail" // the spool could not be written (disk error)
)

// NewMetrics creates the proxy's and the recorder's metrics and registers
// them with reg (nil: a private registry nobody scrapes).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m, err := NewRecorderMetrics(reg)
	if err != nil {
		return nil, err
	}
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sless_invoke_requests_total",
		Help: "Calls through the invoke proxy by status class and by who answered (function or platform).",
	}, []string{"class", "source"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sless_invoke_duration_seconds",
		Help:    "Time from a call's arrival at the proxy to the last byte of its response.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900},
	}, []string{"source"})
	coldStarts := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sless_invoke_cold_starts_total",
		Help: "Calls that waited for a function instance to start (scale from zero), as far as the proxy can tell.",
	})
	coldStartWait := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "sless_invoke_cold_start_wait_seconds",
		Help:    "How long a cold call waited for an instance before it was forwarded (local mode) or answered (clusters).",
		Buckets: []float64{.05, .1, .25, .5, 1, 2, 4, 8, 16, 32, 64},
	})
	for _, c := range []prometheus.Collector{requests, latency, coldStarts, coldStartWait} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for class := 1; class <= 5; class++ {
		for s, source := range []string{SourceFunction, SourcePlatform} {
			m.requests[class][s] = requests.WithLabelValues(string(rune('0'+class))+"xx", source)
		}
	}
	for s, source := range []string{SourceFunction, SourcePlatform} {
		m.latency[s] = latency.WithLabelValues(source)
	}
	m.coldStarts, m.coldStartWait = coldStarts, coldStartWait
	m.proxy = true
	return m, nil
}

// NewRecorderMetrics creates only the recorder's metrics (queue depth,
// drops, writes), for a process that records runs but proxies no calls (the
// controller recording FunctionJobs): its /metrics then shows no request
// series that would read as "no calls". A proxy given these Metrics counts
// nothing.
func NewRecorderMetrics(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &Metrics{dropped: map[string]prometheus.Counter{}}
	depth := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sless_invocation_queue_depth",
		Help: "Invocation records held in memory, waiting for or being written to the store.",
	}, m.queueDepth)
	spooled := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sless_invocation_spooled_records",
		Help: "Invocation records held in the disk spool, waiting for the store.",
	}, m.spooledRecords)
	dropped := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sless_invocation_records_dropped_total",
		Help: "Invocation records lost: queue full, refused by the store, still queued at shutdown, or the spool full or failing.",
	}, []string{"reason"})
	written := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sless_invocation_records_written_total",
		Help: "Invocation records stored.",
	})
	writeErrors := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sless_invocation_write_errors_total",
		Help: "Failed batch writes to the store (each is retried unless permanent).",
	})
	writeLatency := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "sless_invocation_write_duration_seconds",
		Help:    "Time to store one batch of invocation records.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12),
	})
	for _, c := range []prometheus.Collector{depth, spooled, dropped, written, writeErrors, writeLatency} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, reason := range []string{DropQueueFull, DropRejected, DropShutdown, DropSpoolFull, DropSpoolFail} {
		m.dropped[reason] = dropped.WithLabelValues(reason)
	}
	m.written, m.writeErrors, m.writeLatency = written, writeErrors, writeLatency
	return m, nil
}

func (m *Metrics) queueDepth() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, f := range m.depth {
		n += f()
	}
	return float64(n)
}

func (m *Metrics) spooledRecords() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, f := range m.spooled {
		n += f()
	}
	return float64(n)
}

func (m *Metrics) addSpooled(f func() int) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.spooled = append(m.spooled, f)
	m.mu.Unlock()
}

func (m *Metrics) addDepth(f func() int) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.depth = append(m.depth, f)
	m.mu.Unlock()
}

func (m *Metrics) request(status int, platform bool, d time.Duration, sc trace.SpanContext) {
	if m == nil || !m.proxy {
		return
	}
	class := status / 100
	if class < 1 || class > 5 {
		class = 5
	}
	s := 0
	if platform {
		s = 1
	}
	m.requests[class][s].Inc()
	if sc.IsSampled() {
		// The trace of a call in this bucket, shown beside the histogram
		// (OpenMetrics exemplars).
		m.latency[s].(prometheus.ExemplarObserver).ObserveWithExemplar(d.Seconds(), prometheus.Labels{"trace_id": sc.TraceID().String()})
		return
	}
	m.latency[s].Observe(d.Seconds())
}

func (m *Metrics) coldStart(wait time.Duration) {
	if m == nil || !m.proxy {
		return
	}
	m.coldStarts.Inc()
	m.coldStartWait.Observe(wait.Seconds())
}

func (m *Metrics) drop(reason string, n int) {
	if m == nil || n == 0 {
		return
	}
	m.dropped[reason].Add(float64(n))
}

func (m *Metrics) wrote(n int, d time.Duration) {
	if m == nil {
		return
	}
	m.written.Add(float64(n))
	m.writeLatency.Observe(d.Seconds())
}

func (m *Metrics) writeFailed() {
	if m == nil {
		return
	}
	m.writeErrors.Inc()
}
