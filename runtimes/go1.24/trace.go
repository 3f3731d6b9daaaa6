package sless

// OpenTelemetry traces, standard library only: one span per call around the
// handler (a child of the caller's W3C traceparent, or the root of a new
// trace), exported with OTLP/HTTP in its JSON encoding, in batches, from a
// goroutine of its own. Off (tracerFromEnv returns nil) unless
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set;
// docs/observability.md has the variables, the same in every runtime.

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	spanKindServer = 2 // OTLP SpanKind
	statusError    = 2 // OTLP Status.code
)

// parseTraceparent reads a W3C traceparent header; ok is false when it is
// absent or malformed (the call then starts a new trace).
func parseTraceparent(v string) (traceID, spanID string, sampled, ok bool) {
	v = strings.TrimSpace(v)
	if len(v) < 55 || (len(v) > 55 && v[55] != '-') || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return "", "", false, false
	}
	version, traceID, spanID, flags := v[:2], v[3:35], v[36:52], v[53:55]
	if !lowerHex(version) || !lowerHex(traceID) || !lowerHex(spanID) || !lowerHex(flags) {
		return "", "", false, false
	}
	// Version ff is invalid; version 00 has nothing after the flags.
	if version == "ff" || (version == "00" && len(v) > 55) ||
		traceID == strings.Repeat("0", 32) || spanID == strings.Repeat("0", 16) {
		return "", "", false, false
	}
	f, _ := strconv.ParseUint(flags, 16, 8)
	return traceID, spanID, f&1 == 1, true
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// envList reads key=value,key=value with percent-encoded values, the form of
// OTEL_RESOURCE_ATTRIBUTES and OTEL_EXPORTER_OTLP_HEADERS.
func envList(s string) map[string]string {
	out := map[string]string{}
	for _, item := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(item, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			continue
		}
		v = strings.TrimSpace(v)
		if u, err := url.PathUnescape(v); err == nil {
			v = u
		}
		out[k] = v
	}
	return out
}

type otlpValue struct {
	String *string  `json:"stringValue,omitempty"`
	Bool   *bool    `json:"boolValue,omitempty"`
	Int    *string  `json:"intValue,omitempty"` // int64 is a string in OTLP/JSON
	Double *float64 `json:"doubleValue,omitempty"`
}

type otlpAttr struct {
	Key   string    `json:"key"`
	Value otlpValue `json:"value"`
}

func attr(key string, v any) otlpAttr {
	a := otlpAttr{Key: key}
	switch v := v.(type) {
	case bool:
		a.Value.Bool = &v
	case int:
		s := strconv.Itoa(v)
		a.Value.Int = &s
	case float64:
		a.Value.Double = &v
	default:
		s := fmt.Sprint(v)
		a.Value.String = &s
	}
	return a
}

type otlpStatus struct {
	Code    int    `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

type otlpSpan struct {
	TraceID      string     `json:"traceId"`
	SpanID       string     `json:"spanId"`
	ParentSpanID string     `json:"parentSpanId,omitempty"`
	TraceState   string     `json:"traceState,omitempty"`
	Name         string     `json:"name"`
	Kind         int        `json:"kind"`
	Start        string     `json:"startTimeUnixNano"`
	End          string     `json:"endTimeUnixNano"`
	Attributes   []otlpAttr `json:"attributes"`
	Status       otlpStatus `json:"status"`
}

// span is one call's span; ended once, then queued for export when sampled.
type span struct {
	tracer     *tracer
	traceID    string
	spanID     string
	parentID   string
	traceState string
	sampled    bool
	name       string
	start      time.Time
	attrs      []otlpAttr
	status     otlpStatus
	ended      bool
}

// traceparent is the span as the parent of calls the handler makes.
func (s *span) traceparent() string {
	flags := "00"
	if s.sampled {
		flags = "01"
	}
	return "00-" + s.traceID + "-" + s.spanID + "-" + flags
}

func (s *span) set(key string, v any) {
	if s != nil {
		s.attrs = append(s.attrs, attr(key, v))
	}
}

// fail marks the span an error of type typ; nil-safe, as tracing may be off.
func (s *span) fail(typ, msg string) {
	if s == nil {
		return
	}
	s.set("error.type", typ)
	s.status = otlpStatus{Code: statusError, Message: msg}
}

func (s *span) end() {
	if s == nil || s.ended {
		return
	}
	s.ended = true
	if !s.sampled {
		return
	}
	s.tracer.queue(otlpSpan{TraceID: s.traceID, SpanID: s.spanID, ParentSpanID: s.parentID,
		TraceState: s.traceState, Name: s.name, Kind: spanKindServer,
		Start: strconv.FormatInt(s.start.UnixNano(), 10), End: strconv.FormatInt(time.Now().UnixNano(), 10),
		Attributes: s.attrs, Status: s.status})
}

// logAttrs are the trace's keys on a log line of the call.
func (s *span) logAttrs() []any {
	if s == nil {
		return nil
	}
	return []any{"traceId", s.traceID, "spanId", s.spanID}
}

// tracer makes spans and sends the ended ones in batches, off the request
// path: a full queue drops spans rather than slow a call.
type tracer struct {
	endpoint string
	headers  map[string]string
	resource []otlpAttr
	client   *http.Client
	delay    time.Duration
	maxQueue int
	maxBatch int

	mu       sync.Mutex
	spans    []otlpSpan
	dropped  int
	lastWarn time.Time
	wake     chan struct{}
	stop     chan struct{}
	done     chan struct{}
	cold     bool
}

func newTracer(endpoint string, headers map[string]string, resource map[string]string, delay, timeout time.Duration) *tracer {
	t := &tracer{endpoint: endpoint, headers: headers, client: &http.Client{Timeout: timeout},
		delay: max(delay, 10*time.Millisecond), maxQueue: 2048, maxBatch: 512,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), cold: true}
	for k, v := range resource {
		t.resource = append(t.resource, attr(k, v))
	}
	go t.run()
	return t
}

// start opens a span around one call: the caller's child when traceparent
// is valid, else the root of a new, sampled trace. first says whether it is
// the process's first call (faas.coldstart).
func (t *tracer) start(name, traceparent, tracestate string) (s *span, first bool) {
	t.mu.Lock()
	first, t.cold = t.cold, false
	t.mu.Unlock()
	s = &span{tracer: t, name: name, spanID: randomHex(8), start: time.Now(), sampled: true}
	if tid, pid, sampled, ok := parseTraceparent(traceparent); ok {
		s.traceID, s.parentID, s.sampled, s.traceState = tid, pid, sampled, strings.TrimSpace(tracestate)
	} else {
		s.traceID = randomHex(16)
	}
	return s, first
}

func (t *tracer) queue(s otlpSpan) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.spans) >= t.maxQueue {
		t.dropped++
		return
	}
	t.spans = append(t.spans, s)
	if len(t.spans) >= t.maxBatch {
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
}

func (t *tracer) run() {
	defer close(t.done)
	tick := time.NewTicker(t.delay)
	defer tick.Stop()
	for {
		stopping := false
		select {
		case <-tick.C:
		case <-t.wake:
		case <-t.stop:
			stopping = true
		}
		for t.sendBatch() {
		}
		if stopping {
			return
		}
	}
}

// sendBatch sends up to maxBatch queued spans; false when none were queued.
func (t *tracer) sendBatch() bool {
	t.mu.Lock()
	n := min(len(t.spans), t.maxBatch)
	batch := t.spans[:n:n]
	t.spans = t.spans[n:]
	dropped := t.dropped
	t.dropped = 0
	t.mu.Unlock()
	if n == 0 {
		return false
	}
	if dropped > 0 {
		t.warn(fmt.Sprintf("dropped %d spans: the export queue was full", dropped))
	}
	type scope struct {
		Name string `json:"name"`
	}
	doc := map[string]any{"resourceSpans": []any{map[string]any{
		"resource":   map[string]any{"attributes": t.resource},
		"scopeSpans": []any{map[string]any{"scope": scope{Name: "sless-runtime-go"}, "spans": batch}},
	}}}
	body, err := json.Marshal(doc)
	if err != nil {
		t.warn("cannot encode spans: " + err.Error())
		return true
	}
	req, err := http.NewRequest(http.MethodPost, t.endpoint, bytes.NewReader(body))
	if err != nil {
		t.warn(fmt.Sprintf("cannot export %d spans to %s: %v", n, t.endpoint, err))
		return true
	}
	for k, v := range t.headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.client.Do(req)
	if err != nil {
		t.warn(fmt.Sprintf("cannot export %d spans to %s: %v", n, t.endpoint, err))
		return true
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.warn(fmt.Sprintf("cannot export %d spans to %s: %s", n, t.endpoint, resp.Status))
	}
	return true
}

// warn logs at most once a minute: a collector that is down must not flood the log.
func (t *tracer) warn(msg string) {
	t.mu.Lock()
	if !t.lastWarn.IsZero() && time.Since(t.lastWarn) < time.Minute {
		t.mu.Unlock()
		return
	}
	t.lastWarn = time.Now()
	t.mu.Unlock()
	baseLogger.Warn(msg)
}

// shutdown sends what is queued, waiting at most timeout.
func (t *tracer) shutdown(timeout time.Duration) {
	if t == nil {
		return
	}
	close(t.stop)
	select {
	case <-t.done:
	case <-time.After(timeout):
	}
}

func envMillis(getenv func(string) string, name string, fallback time.Duration) time.Duration {
	if n, err := strconv.ParseFloat(getenv(name), 64); err == nil && n >= 0 {
		return time.Duration(n * float64(time.Millisecond))
	}
	return fallback
}

// tracesEndpoint is the OTLP/HTTP traces URL, or "" when tracing is off.
func tracesEndpoint(getenv func(string) string) string {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return ""
	}
	if e := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))); e != "" && e != "otlp" {
		return ""
	}
	if e := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")); e != "" {
		return e
	}
	if e := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT")); e != "" {
		return strings.TrimRight(e, "/") + "/v1/traces"
	}
	return ""
}

// tracerFromEnv is a tracer configured by the standard OTEL_* variables, or
// nil when they turn tracing off (no endpoint, OTEL_SDK_DISABLED, another
// exporter, or the gRPC protocol, which the wrapper does not speak).
func tracerFromEnv(getenv func(string) string, cfg config) *tracer {
	endpoint := tracesEndpoint(getenv)
	if endpoint == "" {
		return nil
	}
	protocol := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if strings.TrimSpace(protocol) == "grpc" {
		baseLogger.Warn("traces are off: the runtime exports OTLP over HTTP (JSON) and OTEL_EXPORTER_OTLP_PROTOCOL " +
			"is grpc; point OTEL_EXPORTER_OTLP_TRACES_ENDPOINT at the collector's HTTP port")
		return nil
	}
	if u, err := url.Parse(endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		baseLogger.Warn(fmt.Sprintf("traces are off: the OTLP endpoint %q is not an http or https URL", endpoint))
		return nil
	}
	headers := envList(getenv("OTEL_EXPORTER_OTLP_HEADERS"))
	for k, v := range envList(getenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS")) {
		headers[k] = v
	}
	res := map[string]string{}
	if cfg.functionName != "" {
		res["service.name"], res["faas.name"] = cfg.functionName, cfg.functionName
	}
	if cfg.revision != "" {
		res["faas.version"] = cfg.revision
	}
	if cfg.namespace != "" {
		res["service.namespace"] = cfg.namespace
	}
	for k, v := range envList(getenv("OTEL_RESOURCE_ATTRIBUTES")) {
		res[k] = v
	}
	if n := getenv("OTEL_SERVICE_NAME"); n != "" {
		res["service.name"] = n
	}
	if res["service.name"] == "" {
		res["service.name"] = "unknown_service:go"
	}
	res["telemetry.sdk.name"], res["telemetry.sdk.language"] = "sless-runtime", "go"
	timeout := envMillis(getenv, "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", envMillis(getenv, "OTEL_EXPORTER_OTLP_TIMEOUT", 10*time.Second))
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	return newTracer(endpoint, headers, res, envMillis(getenv, "OTEL_BSP_SCHEDULE_DELAY", 5*time.Second), timeout)
}
