package tracing_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/sless-dev/sless/pkg/tracing"
)

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestConfigFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      []string
		enabled  bool
		protocol string
		sampler  string
	}{
		{"nothing set: off", nil, false, tracing.ProtocolHTTP, "parentbased_always_on"},
		{"an endpoint: on, http", []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318"}, true, tracing.ProtocolHTTP, "parentbased_always_on"},
		{"a traces endpoint, grpc", []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://collector:4317", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}, true, tracing.ProtocolGRPC, "parentbased_always_on"},
		{"the traces protocol wins", []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"}, true, tracing.ProtocolHTTP, "parentbased_always_on"},
		{"disabled", []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318", "OTEL_SDK_DISABLED", "true"}, false, "", ""},
		{"exporter none", []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318", "OTEL_TRACES_EXPORTER", "none"}, false, "", ""},
		{"not disabled", []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318", "OTEL_SDK_DISABLED", "false"}, true, tracing.ProtocolHTTP, "parentbased_always_on"},
		{"ratio", []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318", "OTEL_TRACES_SAMPLER", "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG", "0.25"}, true, tracing.ProtocolHTTP, "parentbased_traceidratio=0.25"},
		{"ratio without arg", []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318", "OTEL_TRACES_SAMPLER", "TraceIdRatio"}, true, tracing.ProtocolHTTP, "traceidratio=1"},
		{"always_off", []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318", "OTEL_TRACES_SAMPLER", "always_off"}, true, tracing.ProtocolHTTP, "always_off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tracing.ConfigFromEnv(env(tc.env...))
			if err != nil {
				t.Fatal(err)
			}
			if c.Enabled != tc.enabled || c.Protocol != tc.protocol || c.SamplerName != tc.sampler {
				t.Fatalf("enabled %v protocol %q sampler %q, want %v %q %q", c.Enabled, c.Protocol, c.SamplerName, tc.enabled, tc.protocol, tc.sampler)
			}
		})
	}
}

func TestConfigFromEnvRefusesBadValues(t *testing.T) {
	on := []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318"}
	for _, tc := range []struct {
		name string
		env  []string
		want string // in the error
	}{
		{"unknown sampler", append(on, "OTEL_TRACES_SAMPLER", "sometimes"), `OTEL_TRACES_SAMPLER="sometimes": want always_on`},
		{"ratio not a number", append(on, "OTEL_TRACES_SAMPLER", "traceidratio", "OTEL_TRACES_SAMPLER_ARG", "half"), `OTEL_TRACES_SAMPLER_ARG="half": want a ratio from 0 to 1`},
		{"ratio above 1", append(on, "OTEL_TRACES_SAMPLER", "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG", "1.5"), `OTEL_TRACES_SAMPLER_ARG="1.5"`},
		{"ratio below 0", append(on, "OTEL_TRACES_SAMPLER", "traceidratio", "OTEL_TRACES_SAMPLER_ARG", "-0.1"), `OTEL_TRACES_SAMPLER_ARG="-0.1"`},
		{"endpoint without scheme", []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4318"}, `OTEL_EXPORTER_OTLP_ENDPOINT="localhost:4318": want an http:// or https:// URL`},
		{"endpoint of another scheme", []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "grpc://c:4317"}, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="grpc://c:4317": want an http://`},
		{"endpoint without host", []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http:///v1/traces"}, "names no host"},
		{"endpoint not a URL", []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:43 18"}, "not a URL"},
		{"http/json", append(on, "OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"), `OTEL_EXPORTER_OTLP_PROTOCOL="http/json": want http/protobuf or grpc`},
		{"unknown protocol", append(on, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "udp"), `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="udp"`},
		{"unknown exporter", append(on, "OTEL_TRACES_EXPORTER", "zipkin"), `OTEL_TRACES_EXPORTER="zipkin": sless exports traces with otlp only`},
		{"disabled not a bool", append(on, "OTEL_SDK_DISABLED", "maybe"), `OTEL_SDK_DISABLED="maybe": want true or false`},
		{"resource attribute without value", append(on, "OTEL_RESOURCE_ATTRIBUTES", "team=a,oops"), `"oops" is not key=value`},
		{"resource attribute badly escaped", append(on, "OTEL_RESOURCE_ATTRIBUTES", "team=%zz"), `the value of team: invalid URL escape`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tracing.ConfigFromEnv(env(tc.env...))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// Setup refuses a bad variable at startup, and off makes no provider.
func TestSetup(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	tr, err := tracing.Setup(context.Background(), tracing.Options{Service: "sless-test"})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Enabled() || tr.Provider() != nil || !strings.HasPrefix(tr.Describe(), "off") {
		t.Fatalf("enabled %v provider %v %q, want off", tr.Enabled(), tr.Provider(), tr.Describe())
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_TRACES_SAMPLER", "always")
	if _, err := tracing.Setup(context.Background(), tracing.Options{}); err == nil || !strings.HasPrefix(err.Error(), "tracing: OTEL_TRACES_SAMPLER") {
		t.Fatalf("error %v, want the sampler named", err)
	}
	t.Setenv("OTEL_TRACES_SAMPLER", "")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "team=%zz")
	if _, err := tracing.Setup(context.Background(), tracing.Options{}); err == nil || !strings.Contains(err.Error(), "OTEL_RESOURCE_ATTRIBUTES") {
		t.Fatalf("error %v, want the resource attributes named", err)
	}
}

// The OTLP/HTTP exporter posts the spans to the endpoint, with the
// service's resource, and Shutdown flushes what is batched.
func TestSetupExportsOverOTLPHTTP(t *testing.T) {
	got := make(chan *collectortrace.ExportTraceServiceRequest, 4)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("posted to %s as %q", r.URL.Path, r.Header.Get("Content-Type"))
		}
		body, _ := io.ReadAll(r.Body)
		var req collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			t.Errorf("not an OTLP request: %v", err)
		}
		got <- &req
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	defer recv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.URL)
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=test")
	tr, err := tracing.Setup(context.Background(), tracing.Options{Service: "sless-test", Version: "v9"})
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Enabled() || !strings.Contains(tr.Describe(), recv.URL) {
		t.Fatalf("enabled %v, %q", tr.Enabled(), tr.Describe())
	}
	_, span := tracing.Tracer(tr.Provider()).Start(context.Background(), "probe")
	span.End()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case req := <-got:
		rs := req.ResourceSpans
		if len(rs) != 1 || len(rs[0].ScopeSpans) != 1 || len(rs[0].ScopeSpans[0].Spans) != 1 || rs[0].ScopeSpans[0].Spans[0].Name != "probe" {
			t.Fatalf("exported %v, want the span probe", rs)
		}
		attrs := map[string]string{}
		for _, kv := range rs[0].Resource.Attributes {
			attrs[kv.Key] = kv.Value.GetStringValue()
		}
		if attrs["service.name"] != "sless-test" || attrs["service.version"] != "v9" || attrs["deployment.environment.name"] != "test" {
			t.Fatalf("resource %v", attrs)
		}
		if s := rs[0].ScopeSpans[0].Scope.Name; s != tracing.Scope {
			t.Fatalf("scope %q", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nothing posted to the receiver within 10s of Shutdown")
	}
}

// OTEL_SERVICE_NAME overrides the command's own service name.
func TestServiceNameFromEnv(t *testing.T) {
	got := make(chan string, 1)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req collectortrace.ExportTraceServiceRequest
		_ = proto.Unmarshal(body, &req)
		for _, rs := range req.ResourceSpans {
			for _, kv := range rs.Resource.Attributes {
				if kv.Key == "service.name" {
					got <- kv.Value.GetStringValue()
				}
			}
		}
	}))
	defer recv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", recv.URL+"/v1/traces")
	t.Setenv("OTEL_SERVICE_NAME", "edge-sless")
	tr, err := tracing.Setup(context.Background(), tracing.Options{Service: "sless-api"})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tracing.Tracer(tr.Provider()).Start(context.Background(), "probe")
	span.End()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if name := <-got; name != "edge-sless" {
		t.Fatalf("service.name %q, want OTEL_SERVICE_NAME's", name)
	}
}
