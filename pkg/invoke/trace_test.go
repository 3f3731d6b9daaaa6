package invoke_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/tracing"
)

// tracedProxy is a proxy whose spans land in the returned exporter, served
// on a loopback server, with its metrics in reg.
func tracedProxy(t *testing.T, ts *targets, opts invoke.Options) (*tracetest.InMemoryExporter, string, *prometheus.Registry) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := tracing.NewProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	reg := prometheus.NewRegistry()
	m, err := invoke.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	opts.Resolver, opts.Services, opts.Metrics, opts.TracerProvider = ts, ts, m, tp
	if opts.Authenticator == nil {
		opts.Authenticator = tokens
	}
	p, err := invoke.NewProxy(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return exp, srv.URL, reg
}

// spanNamed is the one span of exp called name.
func spanNamed(t *testing.T, exp *tracetest.InMemoryExporter, name string) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans named %q, want 1; spans: %v", len(found), name, spanNames(exp))
	}
	return found[0]
}

func spanNames(exp *tracetest.InMemoryExporter) []string {
	var names []string
	for _, s := range exp.GetSpans() {
		names = append(names, s.Name+"("+s.SpanKind.String()+")")
	}
	return names
}

func attrsOf(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

// wantAttrs fails unless s has each attribute of want, with its value.
func wantAttrs(t *testing.T, s tracetest.SpanStub, want ...attribute.KeyValue) {
	t.Helper()
	got := attrsOf(s)
	for _, kv := range want {
		v, ok := got[kv.Key]
		if !ok {
			t.Errorf("span %q has no %s; has %v", s.Name, kv.Key, s.Attributes)
			continue
		}
		if v.Emit() != kv.Value.Emit() {
			t.Errorf("span %q: %s = %s, want %s", s.Name, kv.Key, v.Emit(), kv.Value.Emit())
		}
	}
}

// awaitSpans waits until exp holds n spans: the server span ends when the
// handler returns, which may be just after the client read the answer.
func awaitSpans(t *testing.T, exp *tracetest.InMemoryExporter, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for len(exp.GetSpans()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d spans after 5s, want %d: %v", len(exp.GetSpans()), n, spanNames(exp))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestProxySpans(t *testing.T) {
	ts := &targets{}
	gotParent := make(chan string, 4)
	addr := function(t, func(w http.ResponseWriter, r *http.Request) {
		gotParent <- r.Header.Get("Traceparent")
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(201)
		_, _ = io.WriteString(w, "hello")
	})
	ts.set("team", "hello", invoke.Target{Ready: true, Public: true, Address: addr, Revision: "hello-00001"})
	var cold bool
	ts.set("team", "sleepy", invoke.Target{Public: true, Revision: "sleepy-00002",
		Activate: func(context.Context) (invoke.Activation, error) {
			time.Sleep(20 * time.Millisecond) // a process starting
			c := !cold
			cold = true
			return invoke.Activation{Address: addr, Cold: c}, nil
		}})
	ts.set("team", "broken", invoke.Target{Public: true, Activate: func(context.Context) (invoke.Activation, error) {
		return invoke.Activation{}, errors.New("exit status 1")
	}})

	const caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	callerTrace, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	callerSpan, _ := trace.SpanIDFromHex("00f067aa0ba902b7")

	t.Run("continues the caller's traceparent", func(t *testing.T) {
		exp, base, _ := tracedProxy(t, ts, invoke.Options{})
		resp := do(t, "POST", base+"/fn/team/hello/x?y=1", "ping", "Traceparent", caller, "Tracestate", "vendor=1", "User-Agent", "probe/1")
		resp.Body.Close()
		if resp.StatusCode != 201 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		awaitSpans(t, exp, 2)
		server := spanNamed(t, exp, "POST /fn/{namespace}/{name}")
		client := spanNamed(t, exp, "POST")
		if server.SpanKind != trace.SpanKindServer || client.SpanKind != trace.SpanKindClient {
			t.Fatalf("kinds %v %v, want server and client", server.SpanKind, client.SpanKind)
		}
		if server.SpanContext.TraceID() != callerTrace || server.Parent.SpanID() != callerSpan || !server.Parent.IsRemote() {
			t.Fatalf("server span in trace %s under %s, want the caller's %s under %s",
				server.SpanContext.TraceID(), server.Parent.SpanID(), callerTrace, callerSpan)
		}
		if server.SpanContext.TraceState().Get("vendor") != "1" {
			t.Fatalf("tracestate %q, want the caller's vendor=1", server.SpanContext.TraceState().String())
		}
		if client.Parent.SpanID() != server.SpanContext.SpanID() || client.SpanContext.TraceID() != callerTrace {
			t.Fatalf("client span's parent %s, want the server span %s", client.Parent.SpanID(), server.SpanContext.SpanID())
		}
		// The function's traceparent names the CLIENT span, not the caller's.
		want := "00-" + callerTrace.String() + "-" + client.SpanContext.SpanID().String() + "-01"
		if got := <-gotParent; got != want {
			t.Fatalf("function got traceparent %q, want %q", got, want)
		}
		wantAttrs(t, server,
			attribute.String("http.request.method", "POST"),
			attribute.String("http.route", "/fn/{namespace}/{name}"),
			attribute.String("url.path", "/fn/team/hello/x"),
			attribute.String("url.scheme", "http"),
			attribute.String("user_agent.original", "probe/1"),
			attribute.String("client.address", "127.0.0.1"),
			attribute.Int("http.response.status_code", 201),
			attribute.Int("http.request.body.size", 4),
			attribute.Int("http.response.body.size", 5),
			tracing.Namespace.String("team"),
			tracing.Function.String("hello"),
			tracing.Revision.String("hello-00001"),
			tracing.Trigger.String(invoke.TriggerHTTP),
			tracing.ColdStart.Bool(false),
			tracing.Status.Int(201),
			tracing.Source.String(invoke.SourceFunction),
			tracing.RequestID.String(resp.Header.Get(invoke.RequestIDHeader)),
		)
		wantAttrs(t, client,
			attribute.String("server.address", "127.0.0.1"),
			attribute.Int("http.response.status_code", 201),
		)
		if server.Status.Code == codes.Error || client.Status.Code == codes.Error {
			t.Fatalf("statuses %v %v, want unset", server.Status, client.Status)
		}
	})

	t.Run("starts a trace without traceparent; a cold start has its span", func(t *testing.T) {
		exp, base, reg := tracedProxy(t, ts, invoke.Options{})
		for i := range 2 {
			resp := do(t, "GET", base+"/fn/team/sleepy", "")
			resp.Body.Close()
			if resp.StatusCode != 201 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			<-gotParent
			awaitSpans(t, exp, 3+2*i)
		}
		spans := exp.GetSpans()
		var servers []tracetest.SpanStub
		for _, s := range spans {
			if s.SpanKind == trace.SpanKindServer {
				servers = append(servers, s)
			}
		}
		if len(servers) != 2 || servers[0].Parent.IsValid() || servers[0].SpanContext.TraceID() == servers[1].SpanContext.TraceID() {
			t.Fatalf("server spans %v, want two roots of two traces", servers)
		}
		coldSpan := spanNamed(t, exp, invoke.SpanColdStart) // the second call was warm: one only
		if coldSpan.Parent.SpanID() != servers[0].SpanContext.SpanID() {
			t.Fatalf("cold start span's parent %s, want the first server span", coldSpan.Parent.SpanID())
		}
		if d := coldSpan.EndTime.Sub(coldSpan.StartTime); d < 20*time.Millisecond {
			t.Fatalf("cold start span lasted %v, less than the activation", d)
		}
		wantAttrs(t, servers[0], tracing.ColdStart.Bool(true), tracing.Revision.String("sleepy-00002"))
		wantAttrs(t, servers[1], tracing.ColdStart.Bool(false))

		// The duration histogram's exemplars name the traces (OpenMetrics);
		// a bucket keeps its latest, both calls took about as long.
		req := httptest.NewRequest("GET", "/metrics", nil)
		req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
		rec := httptest.NewRecorder()
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true}).ServeHTTP(rec, req)
		if last := servers[1].SpanContext.TraceID().String(); !strings.Contains(rec.Body.String(), `trace_id="`+last+`"`) {
			t.Fatalf("no exemplar of the last call's trace %s in\n%s", last, rec.Body.String())
		}
	})

	t.Run("sless's refusals and failures", func(t *testing.T) {
		exp, base, _ := tracedProxy(t, ts, invoke.Options{})
		resp := do(t, "GET", base+"/fn/team/broken", "", "Traceparent", caller)
		resp.Body.Close()
		if resp.StatusCode != 503 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		awaitSpans(t, exp, 2)
		server := spanNamed(t, exp, "GET /fn/{namespace}/{name}")
		coldSpan := spanNamed(t, exp, invoke.SpanColdStart)
		if server.Status.Code != codes.Error || coldSpan.Status.Code != codes.Error || !strings.Contains(coldSpan.Status.Description, "exit status 1") {
			t.Fatalf("statuses %v and %v, want errors", server.Status, coldSpan.Status)
		}
		wantAttrs(t, server, tracing.Source.String(invoke.SourcePlatform), tracing.ErrorReason.String(invoke.ReasonActivateFailed),
			attribute.String("error.type", invoke.ReasonActivateFailed), attribute.Int("http.response.status_code", 503))

		exp.Reset()
		resp = do(t, "GET", base+"/fn/team/nobody", "")
		resp.Body.Close()
		awaitSpans(t, exp, 1)
		server = spanNamed(t, exp, "GET /fn/{namespace}/{name}")
		// A caller's 4xx is no error of the server's.
		if server.Status.Code == codes.Error || len(exp.GetSpans()) != 1 {
			t.Fatalf("status %v, spans %v: want one span, no error", server.Status, spanNames(exp))
		}
		wantAttrs(t, server, attribute.Int("http.response.status_code", 401), tracing.Source.String(invoke.SourcePlatform))
	})

	t.Run("a trigger's call continues the consumer's span", func(t *testing.T) {
		exp := tracetest.NewInMemoryExporter()
		p, err := invoke.NewProxy(invoke.Options{Resolver: ts, TracerProvider: tracing.NewProvider(sdktrace.WithSyncer(exp))})
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest("POST", "/", strings.NewReader("{}"))
		req.Header.Set("Traceparent", caller) // the delivery's span, as sless consume sends it
		rec := httptest.NewRecorder()
		p.Invoke(rec, req, "team", "hello", "queue")
		<-gotParent
		if rec.Code != 201 {
			t.Fatalf("status %d", rec.Code)
		}
		s := spanNamed(t, exp, "POST /fn/{namespace}/{name}")
		if s.SpanKind != trace.SpanKindServer || s.Parent.SpanID() != callerSpan || s.SpanContext.TraceID() != callerTrace {
			t.Fatalf("kind %v parent %v, want a server span under the delivery's", s.SpanKind, s.Parent)
		}
		wantAttrs(t, s, tracing.Trigger.String("queue"))
	})

	t.Run("sampled out: no span, the context still goes on", func(t *testing.T) {
		exp := tracetest.NewInMemoryExporter()
		p, err := invoke.NewProxy(invoke.Options{Resolver: ts,
			TracerProvider: tracing.NewProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.NeverSample()))})
		if err != nil {
			t.Fatal(err)
		}
		p.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/fn/team/hello", nil))
		got := <-gotParent
		sc, err := propagatedContext(got)
		if err != nil || !sc.IsValid() || sc.IsSampled() {
			t.Fatalf("function got traceparent %q (%v), want a valid one, not sampled", got, err)
		}
		if n := len(exp.GetSpans()); n != 0 {
			t.Fatalf("%d spans exported, want none", n)
		}
	})

	t.Run("an asynchronous attempt's call is under the attempt's span", func(t *testing.T) {
		exp := tracetest.NewInMemoryExporter()
		p, err := invoke.NewProxy(invoke.Options{Resolver: ts, TracerProvider: tracing.NewProvider(sdktrace.WithSyncer(exp))})
		if err != nil {
			t.Fatal(err)
		}
		parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: callerTrace, SpanID: callerSpan, TraceFlags: trace.FlagsSampled})
		ctx := trace.ContextWithSpanContext(context.Background(), parent)
		rec := httptest.NewRecorder()
		p.RunAsync(ctx, rec, &invoke.Submission{Namespace: "team", Function: "hello", RequestID: "r1", Method: "POST", Path: "/", Header: http.Header{}})
		<-gotParent
		if rec.Code != 201 {
			t.Fatalf("status %d", rec.Code)
		}
		s := spanNamed(t, exp, invoke.SpanInvoke)
		if s.SpanKind != trace.SpanKindInternal || s.Parent.SpanID() != callerSpan || s.Parent.IsRemote() {
			t.Fatalf("kind %v parent %v, want internal under the attempt's span", s.SpanKind, s.Parent)
		}
		wantAttrs(t, s, tracing.Trigger.String(invoke.TriggerAsync), tracing.RequestID.String("r1"))
	})
}

// Off, the proxy passes the caller's traceparent through untouched.
func TestProxyUntracedPassesTraceparent(t *testing.T) {
	ts := &targets{}
	got := make(chan string, 1)
	ts.set("team", "hello", invoke.Target{Ready: true, Public: true, Address: function(t, func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Traceparent")
	})})
	p, err := invoke.NewProxy(invoke.Options{Resolver: ts})
	if err != nil {
		t.Fatal(err)
	}
	const caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	req := httptest.NewRequest("GET", "/fn/team/hello", nil)
	tracing.Propagator.Inject(context.Background(), propagation.HeaderCarrier(req.Header))
	req.Header.Set("Traceparent", caller)
	p.ServeHTTP(httptest.NewRecorder(), req)
	if g := <-got; g != caller {
		t.Fatalf("traceparent %q, want the caller's %q", g, caller)
	}
}

// propagatedContext reads a traceparent as the function's runtime would.
func propagatedContext(traceparent string) (trace.SpanContext, error) {
	h := http.Header{}
	h.Set("Traceparent", traceparent)
	ctx := tracing.Propagator.Extract(context.Background(), propagation.HeaderCarrier(h))
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return sc, errors.New("not a valid traceparent")
	}
	return sc, nil
}
