package localdev_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sless-dev/sless/test/testbed"
)

// tracedCase is a function that prints a line and answers with its
// context's trace id, in one runtime.
type tracedCase struct {
	runtime, name string
	files         map[string]string
	entrypoint    string
}

var tracedCases = []tracedCase{
	{"python3.12", "traced-py", map[string]string{"main.py": `
def handler(event, context):
    print("handling " + context.request_id)
    return {"traceId": context.trace_id, "spanId": context.span_id}
`}, "main.handler"},
	{"nodejs22", "traced-node", map[string]string{"index.js": `
exports.handler = async (event, context) => {
  console.log('handling ' + context.requestId);
  return { traceId: context.traceId, spanId: context.spanId };
};
`}, "index.handler"},
}

// TestTracesReachJaeger runs sless dev with the standard OTLP variables
// pointing at a real Jaeger and calls a Python and a Node.js function, cold
// and warm, with and without a caller's traceparent. Each call's trace,
// read back from Jaeger's query API, holds the function's span under the
// caller's (through sless's own spans, where it makes them), one trace id
// throughout, and the function's log line of the call carries that id.
func TestTracesReachJaeger(t *testing.T) {
	jaeger := testbed.StartJaeger(t)
	// Long enough that the warm calls, checked one after another on a busy
	// machine, find the process still up.
	const idle = 20 * time.Second
	d := startDevEnv(t, t.TempDir(), idle, []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + jaeger.OTLPEndpoint,
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_BSP_SCHEDULE_DELAY=100",
		"OTEL_SERVICE_NAME=sless-dev-e2e",
	})
	for _, tc := range tracedCases {
		body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"name": tc.name},
			"spec": map[string]any{"runtime": tc.runtime, "entrypoint": tc.entrypoint,
				"source": map[string]any{"inline": map[string]any{"files": tc.files}}}})
		if code, b := d.do("POST", "/v1/namespaces/e2e/functions", "application/json", body); code != 201 {
			t.Fatalf("create %s: %d %s", tc.name, code, b)
		}
	}
	for _, tc := range tracedCases {
		t.Run(tc.runtime, func(t *testing.T) {
			d.t = t
			defer func() { d.t = t }()
			d.awaitReady("e2e", tc.name, 5*time.Minute)
			// The first call starts the function's process: wait for none to run.
			deadline := time.Now().Add(idle + time.Minute)
			for len(d.childrenServing(tc.name)) > 0 {
				if time.Now().After(deadline) {
					t.Fatalf("%s did not scale to zero within %v", tc.name, idle+time.Minute)
				}
				time.Sleep(100 * time.Millisecond)
			}
			for i, call := range []struct {
				what   string
				caller string // the caller's span id; "" for no traceparent
				cold   bool
			}{
				{"cold, the caller's child", "00f067aa0ba90201", true},
				{"warm, the caller's child", "00f067aa0ba90202", false},
				{"warm, no traceparent", "", false},
			} {
				t.Run(call.what, func(t *testing.T) {
					d.t = t
					callerTrace := fmt.Sprintf("4bf92f3577b34da6a3ce929d0e0e47%02d", i)
					if tc.runtime == "nodejs22" {
						callerTrace = fmt.Sprintf("5bf92f3577b34da6a3ce929d0e0e47%02d", i)
					}
					requestID := fmt.Sprintf("trace-e2e-%s-%d", tc.name, i)
					req, _ := http.NewRequest("POST", d.base+"/fn/e2e/"+tc.name, strings.NewReader(`{}`))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Authorization", "Bearer "+d.token)
					req.Header.Set("X-Request-Id", requestID)
					if call.caller != "" {
						req.Header.Set("traceparent", "00-"+callerTrace+"-"+call.caller+"-01")
					}
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					var got struct{ TraceID, SpanID string }
					if resp.StatusCode != 200 || json.Unmarshal(b, &got) != nil || got.SpanID == "" {
						t.Fatalf("invoke: %d %s", resp.StatusCode, b)
					}
					if call.caller != "" && got.TraceID != callerTrace {
						t.Fatalf("the handler is in trace %s, the caller's is %s", got.TraceID, callerTrace)
					}
					// Each process sends its spans in batches of its own: wait for the
					// whole chain from the handler up to be in.
					tr := jaeger.AwaitTrace(t, got.TraceID, 30*time.Second, func(tr testbed.JaegerTrace) bool {
						return chainComplete(tr, got.SpanID, call.caller)
					})
					handler, _ := tr.Span(got.SpanID)
					checkHandlerSpan(t, tr, handler, tc.name, requestID, call.cold)
					checkChain(t, tr, handler, call.caller, call.cold)

					// The call's log line carries the trace: sless logs --invocation joins them.
					code, logs := d.do("GET", "/v1/namespaces/e2e/functions/"+tc.name+"/logs?invocation="+requestID, "", nil)
					if code != 200 {
						t.Fatalf("logs: %d %s", code, logs)
					}
					if !logLineWith(string(logs), "handling "+requestID, got.TraceID, got.SpanID) {
						t.Errorf("no log line of the call with traceId %s and spanId %s:\n%s", got.TraceID, got.SpanID, logs)
					}
				})
			}
		})
	}
}

// childrenServing are sless dev's processes serving function name.
func (d *dev) childrenServing(name string) []int {
	var out []int
	for _, pid := range d.children() {
		env, _ := readProcEnv(pid)
		if strings.Contains(env, "\x00SLESS_FUNCTION_NAME="+name+"\x00") {
			out = append(out, pid)
		}
	}
	return out
}

// checkHandlerSpan: the function's own span, named and attributed as
// docs/observability.md says.
func checkHandlerSpan(t *testing.T, tr testbed.JaegerTrace, s testbed.JaegerSpan, fn, requestID string, cold bool) {
	t.Helper()
	if tr.Service(s) != fn || s.OperationName != fn || s.Tag("span.kind") != "server" ||
		s.Tag("faas.invocation_id") != requestID || s.Tag("faas.coldstart") != fmt.Sprint(cold) ||
		s.Tag("http.response.status_code") != "200" {
		t.Errorf("the handler's span: service %q %+v", tr.Service(s), s)
	}
}

// checkChain walks from the handler's span up to the caller's (or to the
// trace's root when the call had no traceparent): each parent is a span of
// the same trace, and the chain ends where the call began: the tree of
// docs/observability.md, caller → sless's SERVER span → its CLIENT span to
// the function → the handler's span, with the wait for a cold start a
// child of the SERVER span on the cold call only.
func checkChain(t *testing.T, tr testbed.JaegerTrace, handler testbed.JaegerSpan, caller string, cold bool) {
	t.Helper()
	var chain []testbed.JaegerSpan // above the handler, nearest first
	s := handler
	for {
		if s.TraceID != handler.TraceID {
			t.Fatalf("span %s is in trace %s, the handler's is %s", s.SpanID, s.TraceID, handler.TraceID)
		}
		parent := s.Parent()
		if parent == caller {
			break
		}
		if parent == "" {
			t.Fatalf("the chain %s ends at a root; want the caller's span %s above it", names(tr, chain), caller)
		}
		next, ok := tr.Span(parent)
		if !ok || len(chain) > 10 {
			t.Fatalf("the chain %s reaches span %s, which the trace does not hold (want the caller's %q)", names(tr, chain), parent, caller)
		}
		chain = append(chain, next)
		s = next
	}
	t.Logf("from the handler up: %s", names(tr, append([]testbed.JaegerSpan{handler}, chain...)))
	if len(chain) != 2 || chain[0].Tag("span.kind") != "client" || chain[1].Tag("span.kind") != "server" {
		t.Fatalf("between the caller and the handler: %s; want sless's SERVER span, then its CLIENT span", names(tr, chain))
	}
	server := chain[1]
	waits := 0
	for _, sp := range tr.Spans {
		if sp.Parent() == server.SpanID && strings.Contains(sp.OperationName, "cold") {
			waits++
		}
	}
	if cold && waits != 1 || !cold && waits != 0 {
		t.Errorf("%d cold-start spans under sless's span on a call that was cold: %v", waits, cold)
	}
}

// chainComplete tells whether the trace holds span id and every parent
// above it up to caller.
func chainComplete(tr testbed.JaegerTrace, id, caller string) bool {
	for hops := 0; hops < 12; hops++ {
		s, ok := tr.Span(id)
		if !ok {
			return false
		}
		if id = s.Parent(); id == caller {
			return true
		}
	}
	return false
}

func names(tr testbed.JaegerTrace, spans []testbed.JaegerSpan) string {
	var out []string
	for _, s := range spans {
		out = append(out, fmt.Sprintf("%s/%s(%s)", tr.Service(s), s.OperationName, s.Tag("span.kind")))
	}
	return "[" + strings.Join(out, " ← ") + "]"
}

// logLineWith tells whether a JSON log line has msg and the trace's ids.
func logLineWith(logs, msg, traceID, spanID string) bool {
	for _, line := range strings.Split(logs, "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		if rec["msg"] == msg && rec["traceId"] == traceID && rec["spanId"] == spanID {
			return true
		}
	}
	return false
}

// readProcEnv is a process's environment as /proc holds it, NUL-separated,
// with a NUL at each end so that every entry is between two.
func readProcEnv(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	return "\x00" + string(b) + "\x00", err
}
