package runtimes_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/source"
	"github.com/sless-dev/sless/runtimes"
)

// otlpReceiver is a loopback OTLP/HTTP traces endpoint that keeps what each
// runtime posts, decoded strictly: a field the OTLP JSON encoding does not
// have fails the test.
type otlpReceiver struct {
	t   testing.TB
	url string
	mu  sync.Mutex
	got []otlpPost
}

type otlpPost struct {
	header http.Header
	doc    otlpDoc
}

type otlpKV struct {
	Key   string         `json:"key"`
	Value map[string]any `json:"value"`
}

type otlpDoc struct {
	ResourceSpans []struct {
		Resource struct {
			Attributes []otlpKV `json:"attributes"`
		} `json:"resource"`
		ScopeSpans []struct {
			Scope struct {
				Name string `json:"name"`
			} `json:"scope"`
			Spans []otlpSpan `json:"spans"`
		} `json:"scopeSpans"`
	} `json:"resourceSpans"`
}

type otlpSpan struct {
	TraceID           string   `json:"traceId"`
	SpanID            string   `json:"spanId"`
	ParentSpanID      string   `json:"parentSpanId"`
	TraceState        string   `json:"traceState"`
	Name              string   `json:"name"`
	Kind              int      `json:"kind"`
	StartTimeUnixNano string   `json:"startTimeUnixNano"`
	EndTimeUnixNano   string   `json:"endTimeUnixNano"`
	Attributes        []otlpKV `json:"attributes"`
	Status            struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"status"`
	resource map[string]string
	header   http.Header
}

// attrs flattens OTLP attributes to their JSON values as text: intValue
// stays a string ("200"), as OTLP/JSON writes int64.
func attrs(kvs []otlpKV) map[string]string {
	out := map[string]string{}
	for _, kv := range kvs {
		for typ, v := range kv.Value {
			out[kv.Key] = fmt.Sprintf("%s:%v", typ, v)
		}
	}
	return out
}

func newOTLPReceiver(t testing.TB) *otlpReceiver {
	r := &otlpReceiver{t: t}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var doc otlpDoc
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
			t.Errorf("OTLP receiver: %s %s, want POST /v1/traces", req.Method, req.URL.Path)
		} else if err := dec.Decode(&doc); err != nil {
			t.Errorf("OTLP receiver: the body is not OTLP/JSON: %v\n%s", err, body)
		}
		r.mu.Lock()
		r.got = append(r.got, otlpPost{header: req.Header.Clone(), doc: doc})
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{}`))
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

// spans are every span received so far, each with its resource and the
// request's headers.
func (r *otlpReceiver) spans() []otlpSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []otlpSpan
	for _, p := range r.got {
		for _, rs := range p.doc.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					s.resource = attrs(rs.Resource.Attributes)
					s.header = p.header
					out = append(out, s)
				}
			}
		}
	}
	return out
}

func (r *otlpReceiver) find(spanID string) (otlpSpan, bool) {
	for _, s := range r.spans() {
		if s.SpanID == spanID {
			return s, true
		}
	}
	return otlpSpan{}, false
}

func (r *otlpReceiver) wait(t testing.TB, spanID string) otlpSpan {
	t.Helper()
	waitFor(t, 20*time.Second, "span "+spanID+" at the OTLP receiver", func() bool {
		_, ok := r.find(spanID)
		return ok
	})
	s, _ := r.find(spanID)
	return s
}

// logLines are the process's JSON log lines.
func logLines(t testing.TB, in *instance) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(in.stdout.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil {
			out = append(out, rec)
		}
	}
	return out
}

var (
	traceIDForm = regexp.MustCompile(`^[0-9a-f]{32}$`)
	spanIDForm  = regexp.MustCompile(`^[0-9a-f]{16}$`)
)

// The handler of each runtime answers with its context's trace fields and
// prints a line; ?fail=1 makes it fail.
var tracedFunctions = []struct {
	runtime, entrypoint, errorType string
	files                          source.Files
}{
	{runtimes.Python312, "traced.handler", "ValueError", source.Files{"traced.py": []byte(`
def handler(event, context):
    print("in the handler")
    if event["query"].get("fail"):
        raise ValueError("asked to fail")
    return {"traceId": context.trace_id, "spanId": context.span_id, "traceparent": context.traceparent}
`)}},
	{runtimes.NodeJS22, "traced.handler", "TypeError", source.Files{"traced.js": []byte(`
exports.handler = async (event, context) => {
  console.log('in the handler');
  if (event.query.fail) throw new TypeError('asked to fail');
  return { traceId: context.traceId, spanId: context.spanId, traceparent: context.traceparent };
};
`)}},
	{runtimes.Go124, "traced.Handle", "Error", source.Files{"traced/traced.go": []byte(`package traced

import (
	"context"
	"errors"

	sless "github.com/sless-dev/sless/runtimes/go1.24"
)

func Handle(ctx context.Context, ev sless.Event) (any, error) {
	sless.Logger(ctx).Info("in the handler")
	if ev.Query["fail"] != "" {
		return nil, errors.New("asked to fail")
	}
	c := sless.FromContext(ctx)
	return map[string]string{"traceId": c.TraceID, "spanId": c.SpanID, "traceparent": c.TraceParent}, nil
}
`)}},
}

type tracedAnswer struct {
	status                       int
	TraceID, SpanID, Traceparent string
}

func callTraced(t testing.TB, in *instance, target string, header map[string]string) tracedAnswer {
	t.Helper()
	req, _ := http.NewRequest("GET", in.base+target, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a tracedAnswer
	b, _ := io.ReadAll(resp.Body)
	a.status = resp.StatusCode
	if resp.StatusCode == 200 {
		if err := json.Unmarshal(b, &a); err != nil {
			t.Fatalf("%s: %v: %s", target, err, b)
		}
	}
	return a
}

// TestTracesJoinTheCaller holds each runtime to the tracing contract
// (docs/observability.md): a span per call, the caller's child, posted as
// OTLP/JSON to the configured endpoint, its ids in the handler's context and
// on every log line of the call.
func TestTracesJoinTheCaller(t *testing.T) {
	requireTools(t, "python3", "node", "go")
	const (
		callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
		callerSpan  = "00f067aa0ba902b7"
	)
	for _, fn := range tracedFunctions {
		t.Run(fn.runtime, func(t *testing.T) {
			t.Parallel()
			p := prepare(t, fn.runtime, fn.entrypoint, fn.files)
			recv := newOTLPReceiver(t)
			opts := runtimes.LocalOptions{FunctionName: "traced", Namespace: "team-a", Revision: "traced-00001",
				Env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + recv.url + "/", "OTEL_BSP_SCHEDULE_DELAY=50",
					"OTEL_RESOURCE_ATTRIBUTES=deployment.environment.name=test%20bed",
					"OTEL_EXPORTER_OTLP_HEADERS=authorization=Bearer%20t0ken"}}
			in := p.start(t, opts)

			// A caller's sampled span: the handler's span is its child.
			a := callTraced(t, in, "/joined?x=1", map[string]string{"traceparent": "00-" + callerTrace + "-" + callerSpan + "-01",
				"tracestate": "vendor=opaque", "x-request-id": "req-joined"})
			if a.status != 200 || a.TraceID != callerTrace || !spanIDForm.MatchString(a.SpanID) || a.SpanID == callerSpan ||
				a.Traceparent != "00-"+callerTrace+"-"+a.SpanID+"-01" {
				t.Fatalf("handler's context: %+v", a)
			}
			s := recv.wait(t, a.SpanID)
			at := attrs(s.Attributes)
			if s.TraceID != callerTrace || s.ParentSpanID != callerSpan || s.Name != "traced" || s.Kind != 2 ||
				s.TraceState != "vendor=opaque" || s.Status.Code != 0 {
				t.Errorf("span: %+v", s)
			}
			for k, want := range map[string]string{"faas.trigger": "stringValue:http", "faas.invocation_id": "stringValue:req-joined",
				"faas.coldstart": "boolValue:true", "http.request.method": "stringValue:GET", "url.path": "stringValue:/joined",
				"http.response.status_code": "intValue:200"} {
				if at[k] != want {
					t.Errorf("span attribute %s = %q, want %q (all: %v)", k, at[k], want, at)
				}
			}
			for k, want := range map[string]string{"service.name": "stringValue:traced", "faas.name": "stringValue:traced",
				"faas.version": "stringValue:traced-00001", "service.namespace": "stringValue:team-a",
				"deployment.environment.name": "stringValue:test bed", "telemetry.sdk.name": "stringValue:sless-runtime"} {
				if s.resource[k] != want {
					t.Errorf("resource attribute %s = %q, want %q (all: %v)", k, s.resource[k], want, s.resource)
				}
			}
			if s.StartTimeUnixNano == "" || s.EndTimeUnixNano < s.StartTimeUnixNano || len(s.EndTimeUnixNano) != len(s.StartTimeUnixNano) {
				t.Errorf("span times %s to %s", s.StartTimeUnixNano, s.EndTimeUnixNano)
			}
			if s.header.Get("Authorization") != "Bearer t0ken" || s.header.Get("Content-Type") != "application/json" {
				t.Errorf("export headers: %v", s.header)
			}
			// Every line of the call carries the span's ids: the handler's and the wrapper's.
			for _, msg := range []string{"in the handler", "request"} {
				found := false
				for _, rec := range logLines(t, in) {
					if rec["msg"] == msg && rec["requestId"] == "req-joined" {
						found = true
						if rec["traceId"] != callerTrace || rec["spanId"] != a.SpanID {
							t.Errorf("log line %q: %v", msg, rec)
						}
					}
				}
				if !found {
					t.Errorf("no log line %q of the call:\n%s", msg, in.stdout)
				}
			}

			// No traceparent, or one that is malformed: a new trace, a root span.
			for _, hdr := range []map[string]string{nil, {"traceparent": "00-" + callerTrace + "-zz-01"},
				{"traceparent": "00-00000000000000000000000000000000-" + callerSpan + "-01"}} {
				a := callTraced(t, in, "/root", hdr)
				if !traceIDForm.MatchString(a.TraceID) || a.TraceID == callerTrace {
					t.Fatalf("traceparent %v: context %+v", hdr, a)
				}
				s := recv.wait(t, a.SpanID)
				if s.TraceID != a.TraceID || s.ParentSpanID != "" || attrs(s.Attributes)["faas.coldstart"] != "boolValue:false" {
					t.Errorf("traceparent %v: span %+v", hdr, s)
				}
			}

			// A caller that did not sample: ids go on, nothing is exported.
			unsampled := "5bf92f3577b34da6a3ce929d0e0e4736"
			a = callTraced(t, in, "/unsampled", map[string]string{"traceparent": "00-" + unsampled + "-" + callerSpan + "-00"})
			if a.TraceID != unsampled || a.Traceparent != "00-"+unsampled+"-"+a.SpanID+"-00" {
				t.Errorf("unsampled context: %+v", a)
			}
			// A failure: the span says so. It ends after the unsampled call's, so
			// once it is in, that one would have been too.
			before := len(recv.spans())
			if a := callTraced(t, in, "/fail?fail=1", nil); a.status != 500 {
				t.Fatalf("fail: status %d", a.status)
			}
			waitFor(t, 20*time.Second, "the failed call's span", func() bool { return len(recv.spans()) > before })
			for _, s := range recv.spans() {
				if s.TraceID == unsampled {
					t.Errorf("an unsampled call was exported: %+v", s)
				}
			}
			failed := recv.spans()[before]
			fa := attrs(failed.Attributes)
			if failed.Status.Code != 2 || !strings.Contains(failed.Status.Message, "asked to fail") ||
				fa["error.type"] != "stringValue:"+fn.errorType || fa["http.response.status_code"] != "intValue:500" {
				t.Errorf("failed call's span: %+v %v", failed, fa)
			}
		})
	}
}

// TestTracesSentAtShutdown: spans still queued when the process is told to
// stop (scale to zero) are sent before it exits.
func TestTracesSentAtShutdown(t *testing.T) {
	requireTools(t, "python3", "node", "go")
	for _, fn := range tracedFunctions {
		t.Run(fn.runtime, func(t *testing.T) {
			t.Parallel()
			p := prepare(t, fn.runtime, fn.entrypoint, fn.files)
			recv := newOTLPReceiver(t)
			in := p.start(t, runtimes.LocalOptions{FunctionName: "traced",
				Env: []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=" + recv.url + "/v1/traces", "OTEL_BSP_SCHEDULE_DELAY=600000"}})
			a := callTraced(t, in, "/", nil)
			if code := in.stop(t, 15*time.Second); code != 0 {
				t.Fatalf("exit code %d", code)
			}
			if _, ok := recv.find(a.SpanID); !ok || a.SpanID == "" {
				t.Fatalf("span %q not sent before the exit; got %+v\n%s", a.SpanID, recv.spans(), in.stdout)
			}
		})
	}
}

// TestTracesOff: without an endpoint (or with one the runtime cannot
// speak) there is no span, no ids in the context and none on log lines.
func TestTracesOff(t *testing.T) {
	requireTools(t, "python3", "node", "go")
	for _, fn := range tracedFunctions {
		t.Run(fn.runtime, func(t *testing.T) {
			t.Parallel()
			p := prepare(t, fn.runtime, fn.entrypoint, fn.files)
			recv := newOTLPReceiver(t)
			for _, env := range [][]string{
				nil,
				{"OTEL_EXPORTER_OTLP_ENDPOINT=" + recv.url, "OTEL_SDK_DISABLED=true"},
				{"OTEL_EXPORTER_OTLP_ENDPOINT=" + recv.url, "OTEL_TRACES_EXPORTER=none"},
				{"OTEL_EXPORTER_OTLP_ENDPOINT=" + recv.url, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"},
			} {
				in := p.start(t, runtimes.LocalOptions{FunctionName: "traced", Env: append(env, "OTEL_BSP_SCHEDULE_DELAY=10")})
				a := callTraced(t, in, "/", map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
					"x-request-id": "req-off"})
				if a.status != 200 || a.TraceID != "" || a.SpanID != "" || a.Traceparent != "" {
					t.Errorf("%v: context %+v", env, a)
				}
				in.stop(t, 15*time.Second)
				for _, rec := range logLines(t, in) {
					if _, ok := rec["traceId"]; ok {
						t.Errorf("%v: log line with a trace id: %v", env, rec)
					}
				}
				if strings.Contains(strings.Join(env, " "), "grpc") && !strings.Contains(in.stdout.String(), "traces are off") {
					t.Errorf("grpc: no warning that traces are off:\n%s", in.stdout)
				}
			}
			if got := recv.spans(); len(got) != 0 {
				t.Errorf("spans exported with tracing off: %+v", got)
			}
		})
	}
}

// TestServiceTraces: a service's app is served under a span per request,
// named for its method, the caller's child.
func TestServiceTraces(t *testing.T) {
	requireTools(t, "python3", "node", "go")
	cases := []struct{ name, runtime, entrypoint, testdata string }{
		{"python3.12-wsgi", runtimes.Python312, "web.app", "service/python3.12"},
		{"python3.12-asgi", runtimes.Python312, "web.app", "service/python3.12-asgi"},
		{runtimes.NodeJS22, runtimes.NodeJS22, "web.server", "service/nodejs22"},
		{runtimes.Go124, runtimes.Go124, "web.Handler", "service/go1.24"},
	}
	const callerTrace, callerSpan = "6bf92f3577b34da6a3ce929d0e0e4736", "10f067aa0ba902b7"
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := prepareService(t, tc.runtime, tc.entrypoint, testdataFiles(t, tc.testdata))
			recv := newOTLPReceiver(t)
			in := p.start(t, runtimes.LocalOptions{FunctionName: "web",
				Env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + recv.url, "OTEL_BSP_SCHEDULE_DELAY=50"}})
			req, _ := http.NewRequest("POST", in.base+"/notes/7?x=1", strings.NewReader("hi"))
			req.Header.Set("traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			waitFor(t, 20*time.Second, "the request's span", func() bool { return len(recv.spans()) > 0 })
			s := recv.spans()[0]
			at := attrs(s.Attributes)
			if s.TraceID != callerTrace || s.ParentSpanID != callerSpan || s.Name != "POST" || s.Kind != 2 ||
				at["url.path"] != "stringValue:/notes/7" || at["http.response.status_code"] != "intValue:200" ||
				s.resource["service.name"] != "stringValue:web" {
				t.Errorf("span %+v %v %v", s, at, s.resource)
			}
			if tc.name == "python3.12-asgi" {
				// The ASGI server's own request line carries the span's ids.
				found := false
				for _, rec := range logLines(t, in) {
					if rec["msg"] == "request" {
						found = rec["traceId"] == callerTrace && rec["spanId"] == s.SpanID
					}
				}
				if !found {
					t.Errorf("no request line with the span's ids:\n%s", in.stdout)
				}
			}
		})
	}
}
