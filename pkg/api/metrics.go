package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the API's Prometheus series. Routes are labelled by their
// pattern (/v1/namespaces/:ns/functions/:name), never by the raw path, so
// the series stay bounded whatever callers send.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	uploads  *prometheus.CounterVec
	upBytes  prometheus.Counter
	// upSlots is Options.MaxUploads and upTenantSlots MaxUploadsPerTenant;
	// upActive and upWaiting are the uploads holding one of those slots and
	// those queued for one.
	upSlots       prometheus.Gauge
	upTenantSlots prometheus.Gauge
	upActive      prometheus.Gauge
	upWaiting     prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sless", Subsystem: "api", Name: "requests_total",
			Help: "API requests by method, route pattern and status code.",
		}, []string{"method", "route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "sless", Subsystem: "api", Name: "request_duration_seconds",
			Help:    "API request latency by method and route pattern.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12),
		}, []string{"method", "route"}),
		uploads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sless", Subsystem: "api", Name: "source_uploads_total",
			Help: "Source uploads by result: changed, unchanged, refused (invalid), busy (no upload slot within the queue wait), tenant-busy (the tenant's share of the slots held), too-slow (below the minimum rate) or stalled (idle timeout).",
		}, []string{"result"}),
		upBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sless", Subsystem: "api", Name: "source_upload_bytes_total",
			Help: "Bytes of accepted source archives.",
		}),
		upSlots: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "sless", Subsystem: "api", Name: "source_upload_slots",
			Help: "Source uploads this server runs at once (-max-uploads).",
		}),
		upTenantSlots: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "sless", Subsystem: "api", Name: "source_upload_tenant_slots",
			Help: "Of the -max-uploads slots, those one tenant's uploads may hold at once (-max-uploads-per-tenant).",
		}),
		upActive: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "sless", Subsystem: "api", Name: "source_uploads_in_progress",
			Help: "Source uploads holding one of the -max-uploads slots.",
		}),
		upWaiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "sless", Subsystem: "api", Name: "source_uploads_waiting",
			Help: "Source uploads waiting for a free slot.",
		}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.uploads, m.upBytes, m.upSlots, m.upTenantSlots, m.upActive, m.upWaiting} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) handler(g prometheus.Gatherer) http.Handler {
	// OpenMetrics when the scraper asks for it: only that format carries
	// the invoke histogram's exemplars (trace ids).
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{EnableOpenMetrics: true})
}

// observe records every request once it is answered. Each label takes its
// value from a closed set: anything a caller or a function can choose would
// otherwise add series, and memory, for good.
func (s *Server) observe(c *gin.Context) {
	start := time.Now()
	c.Next()
	// FullPath is the pattern of a registered route, never the raw path.
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	method := methodLabel(c.Request.Method)
	s.metrics.requests.WithLabelValues(method, route, codeLabel(c.Writer.Status())).Inc()
	s.metrics.duration.WithLabelValues(method, route).Observe(time.Since(start).Seconds())
}

// otherLabel stands for every value outside a label's closed set.
const otherLabel = "other"

// methodLabel is the method when HTTP defines it (RFC 9110 §9, RFC 5789),
// else "other": a client may send any token as a method.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return otherLabel
}

// codeLabel is the status code when it is a registered one, else "other":
// on /fn/ a function's own status, anything from 100 to 999, passes through.
func codeLabel(code int) string {
	if http.StatusText(code) == "" {
		return otherLabel
	}
	return strconv.Itoa(code)
}
