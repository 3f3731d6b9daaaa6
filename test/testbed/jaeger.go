package testbed

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Jaeger is Jaeger v2 (built by hack/test-assets.sh jaeger) as a process of
// the test's own: in-memory storage, an OTLP/HTTP receiver and the query
// API, each on a free loopback port.
type Jaeger struct {
	// OTLPEndpoint is the OTLP/HTTP base URL, what OTEL_EXPORTER_OTLP_ENDPOINT
	// names (the receiver serves /v1/traces under it).
	OTLPEndpoint string
	// QueryURL is the query API's base URL (/api/traces/{id}).
	QueryURL string

	log    string
	cmd    *exec.Cmd
	exited chan struct{}
}

// jaegerConfig is the collector configuration: OTLP over HTTP only, every
// port given (the defaults, such as the health check's gRPC 13132, would
// clash between instances), no metrics endpoint of its own (:8888).
func jaegerConfig(otlp, query, queryGRPC, health, healthGRPC int) string {
	return fmt.Sprintf(`service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  healthcheckv2:
    use_v2: true
    http:
      endpoint: 127.0.0.1:%d
    grpc:
      endpoint: 127.0.0.1:%d
      transport: tcp
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:%d
    grpc:
      endpoint: 127.0.0.1:%d
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%d
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`, health, healthGRPC, query, queryGRPC, otlp)
}

// jaegerBinary is SLESS_JAEGER when set, else what hack/test-assets.sh
// jaeger prints (it builds Jaeger on first use, about 3 minutes cold).
func jaegerBinary() (string, error) {
	if b := os.Getenv("SLESS_JAEGER"); b != "" {
		return b, nil
	}
	return testAssets("jaeger", "builds Jaeger v2 from the Go module proxy on first use")
}

// StartJaeger starts Jaeger for t, returns once its receiver and query API
// answer, and stops it when t ends.
func StartJaeger(t testing.TB) *Jaeger {
	t.Helper()
	bin, err := jaegerBinary()
	if err != nil {
		t.Fatalf("testbed: %v", err)
	}
	var ports [5]int
	for i := range ports {
		if ports[i], err = FreePort(); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	config := filepath.Join(dir, "jaeger.yaml")
	if err := os.WriteFile(config, []byte(jaegerConfig(ports[0], ports[1], ports[2], ports[3], ports[4])), 0o644); err != nil {
		t.Fatal(err)
	}
	j := &Jaeger{OTLPEndpoint: fmt.Sprintf("http://127.0.0.1:%d", ports[0]),
		QueryURL: fmt.Sprintf("http://127.0.0.1:%d", ports[1]), log: filepath.Join(dir, "jaeger.log"),
		exited: make(chan struct{})}
	logf, err := os.Create(j.log)
	if err != nil {
		t.Fatal(err)
	}
	j.cmd = exec.Command(bin, "--config", config)
	// Jaeger traces nothing of its own to a collector.
	j.cmd.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=none", "OTEL_SDK_DISABLED=true")
	j.cmd.Stdout, j.cmd.Stderr = logf, logf
	j.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := j.cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("start jaeger: %v", err)
	}
	go func() { _ = j.cmd.Wait(); logf.Close(); close(j.exited) }()
	t.Cleanup(j.stop)
	if err := j.awaitReady(fmt.Sprintf("http://127.0.0.1:%d/status", ports[3]), 60*time.Second); err != nil {
		b, _ := os.ReadFile(j.log)
		t.Fatalf("jaeger: %v\n%s", err, b)
	}
	return j
}

// awaitReady waits for the health check to say every component is up and
// the query API to answer.
func (j *Jaeger) awaitReady(health string, within time.Duration) error {
	deadline := time.Now().Add(within)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		err := func() error {
			for _, u := range []string{health, j.QueryURL + "/api/services"} {
				resp, err := client.Get(u)
				if err != nil {
					return err
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					return fmt.Errorf("GET %s: %s", u, resp.Status)
				}
			}
			return nil
		}()
		if err == nil {
			return nil
		}
		select {
		case <-j.exited:
			return fmt.Errorf("exited before it was ready: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready within %v: %v", within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (j *Jaeger) stop() {
	_ = j.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-j.exited:
	case <-time.After(10 * time.Second):
		_ = j.cmd.Process.Kill()
		<-j.exited
	}
}

// JaegerTrace is a trace as Jaeger's query API (/api/traces/{id}) gives it.
type JaegerTrace struct {
	TraceID   string                   `json:"traceID"`
	Spans     []JaegerSpan             `json:"spans"`
	Processes map[string]JaegerProcess `json:"processes"`
}

// JaegerSpan is one span of a JaegerTrace; StartTime and Duration are
// microseconds.
type JaegerSpan struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	StartTime int64       `json:"startTime"`
	Duration  int64       `json:"duration"`
	Tags      []JaegerTag `json:"tags"`
	ProcessID string      `json:"processID"`
}

// JaegerProcess is the service a span's resource names.
type JaegerProcess struct {
	ServiceName string      `json:"serviceName"`
	Tags        []JaegerTag `json:"tags"`
}

// JaegerTag is an attribute: Value is a string, number or bool by Type.
type JaegerTag struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

// Parent is the span's CHILD_OF reference's span id, "" for a root.
func (s JaegerSpan) Parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// Tag is the value of the span's tag key, as text ("" when absent).
func (s JaegerSpan) Tag(key string) string {
	for _, tag := range s.Tags {
		if tag.Key == key {
			return fmt.Sprint(tag.Value)
		}
	}
	return ""
}

// Service is the service name of the span's process.
func (tr JaegerTrace) Service(s JaegerSpan) string { return tr.Processes[s.ProcessID].ServiceName }

// Span is the span with id, if the trace has it.
func (tr JaegerTrace) Span(id string) (JaegerSpan, bool) {
	for _, s := range tr.Spans {
		if s.SpanID == id {
			return s, true
		}
	}
	return JaegerSpan{}, false
}

// Trace reads one trace; found is false while Jaeger has none of its spans.
func (j *Jaeger) Trace(traceID string) (tr JaegerTrace, found bool, err error) {
	resp, err := http.Get(j.QueryURL + "/api/traces/" + traceID)
	if err != nil {
		return tr, false, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusNotFound {
		return tr, false, nil
	}
	if resp.StatusCode != http.StatusOK {
		return tr, false, fmt.Errorf("GET /api/traces/%s: %s: %s", traceID, resp.Status, b)
	}
	var doc struct {
		Data []JaegerTrace `json:"data"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return tr, false, fmt.Errorf("GET /api/traces/%s: %w: %s", traceID, err, b)
	}
	if len(doc.Data) == 0 {
		return tr, false, nil
	}
	return doc.Data[0], true, nil
}

// AwaitTrace polls the query API until the trace holds what done asks of
// it, and fails t with the last trace seen after within.
func (j *Jaeger) AwaitTrace(t testing.TB, traceID string, within time.Duration, done func(JaegerTrace) bool) JaegerTrace {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		tr, found, err := j.Trace(traceID)
		if err != nil {
			t.Fatal(err)
		}
		if found && done(tr) {
			return tr
		}
		if time.Now().After(deadline) {
			b, _ := json.MarshalIndent(tr, "", "  ")
			t.Fatalf("trace %s not complete in Jaeger within %v; last seen:\n%s", traceID, within, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
