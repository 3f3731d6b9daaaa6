// Package tracing sets up OpenTelemetry tracing for a sless process from the
// standard OTEL_* environment variables, and holds the propagator and the
// attribute keys every span sless makes shares. Tracing is off unless an
// OTLP endpoint is set; off, there is no exporter and no tracer at all, so
// the instrumented code skips its spans.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// Scope is the instrumentation scope of every span sless makes.
const Scope = "github.com/sless-dev/sless"

// Propagator reads and writes W3C Trace Context (traceparent, tracestate)
// and W3C Baggage. Instrumented code uses it rather than the global one, so
// that what sless propagates does not depend on what a library set.
var Propagator propagation.TextMapPropagator = propagation.NewCompositeTextMapPropagator(
	propagation.TraceContext{}, propagation.Baggage{})

// Protocols of the OTLP trace exporter (OTEL_EXPORTER_OTLP_PROTOCOL).
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// Config is tracing's configuration, read from the environment by
// ConfigFromEnv.
type Config struct {
	// Enabled is false when no endpoint is set, OTEL_SDK_DISABLED is true
	// or OTEL_TRACES_EXPORTER is none.
	Enabled bool
	// Protocol is ProtocolHTTP or ProtocolGRPC.
	Protocol string
	// Endpoint is the endpoint variable that enabled tracing, for logs.
	Endpoint string
	// Sampler decides which traces are kept; nil: parentbased_always_on.
	Sampler sdktrace.Sampler
	// SamplerName is the sampler's description, for logs.
	SamplerName string
}

// ConfigFromEnv reads the standard variables through getenv (os.Getenv in
// a program). A variable set to a value sless cannot use is an error that
// names it: a mistyped sampler would otherwise trace everything or nothing
// without a word.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	var c Config
	disabled := strings.TrimSpace(getenv("OTEL_SDK_DISABLED"))
	if disabled != "" {
		off, err := strconv.ParseBool(disabled)
		if err != nil {
			return c, fmt.Errorf("OTEL_SDK_DISABLED=%q: want true or false", disabled)
		}
		if off {
			return c, nil
		}
	}
	switch exp := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))); exp {
	case "", "otlp":
	case "none":
		return c, nil
	default:
		return c, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: sless exports traces with otlp only (or none)", exp)
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			continue
		}
		if err := checkEndpoint(v); err != nil {
			return c, fmt.Errorf("%s=%q: %w", name, v, err)
		}
		if c.Endpoint == "" {
			c.Endpoint = v
		}
	}
	c.Protocol = ProtocolHTTP
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			continue
		}
		if v != ProtocolHTTP && v != ProtocolGRPC {
			return c, fmt.Errorf("%s=%q: want %s or %s (the Go SDK has no http/json exporter)", name, v, ProtocolHTTP, ProtocolGRPC)
		}
		c.Protocol = v
		break
	}
	if err := checkResourceAttributes(getenv("OTEL_RESOURCE_ATTRIBUTES")); err != nil {
		return c, err
	}
	var err error
	if c.Sampler, c.SamplerName, err = samplerFromEnv(getenv); err != nil {
		return c, err
	}
	c.Enabled = c.Endpoint != ""
	return c, nil
}

// checkEndpoint refuses what the exporters would take apart wrongly or
// ignore: an endpoint is an http or https URL with a host.
func checkEndpoint(v string) error {
	u, err := url.Parse(v)
	if err != nil {
		return fmt.Errorf("not a URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return errors.New("want an http:// or https:// URL, such as http://localhost:4318")
	}
	if u.Host == "" {
		return errors.New("the URL names no host")
	}
	return nil
}

// checkResourceAttributes refuses what the SDK would drop with a log line
// only: OTEL_RESOURCE_ATTRIBUTES is key=value pairs, comma-separated, the
// values percent-encoded.
func checkResourceAttributes(v string) error {
	if strings.TrimSpace(v) == "" {
		return nil
	}
	for _, pair := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(pair, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES=%q: %q is not key=value", v, strings.TrimSpace(pair))
		}
		if _, err := url.PathUnescape(strings.TrimSpace(val)); err != nil {
			return fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES=%q: the value of %s: %w", v, strings.TrimSpace(k), err)
		}
	}
	return nil
}

// samplerFromEnv reads OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG as
// the specification defines them; the SDK's own reading falls back to the
// default on a bad value, which sless refuses instead.
func samplerFromEnv(getenv func(string) string) (sdktrace.Sampler, string, error) {
	name := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER")))
	arg := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG"))
	ratio := func() (float64, error) {
		if arg == "" {
			return 1, nil
		}
		v, err := strconv.ParseFloat(arg, 64)
		if err != nil || v < 0 || v > 1 {
			return 0, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%q: want a ratio from 0 to 1 for %s", arg, name)
		}
		return v, nil
	}
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), "parentbased_always_on", nil
	case "always_on":
		return sdktrace.AlwaysSample(), name, nil
	case "always_off":
		return sdktrace.NeverSample(), name, nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), name, nil
	case "traceidratio":
		r, err := ratio()
		return sdktrace.TraceIDRatioBased(r), name + "=" + strconv.FormatFloat(r, 'g', -1, 64), err
	case "parentbased_traceidratio":
		r, err := ratio()
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), name + "=" + strconv.FormatFloat(r, 'g', -1, 64), err
	default:
		return nil, "", fmt.Errorf("OTEL_TRACES_SAMPLER=%q: want always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio", name)
	}
}

// Tracing is a process's tracer provider, or nothing when tracing is off.
type Tracing struct {
	provider *sdktrace.TracerProvider
	config   Config
}

// Options say who is tracing.
type Options struct {
	// Service is the default service.name (sless-api, sless-controller,
	// ...); OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override it.
	Service string
	// Version is service.version.
	Version string
}

// Setup reads the configuration and, when tracing is on, makes the OTLP
// exporter, a batching tracer provider and installs both as OpenTelemetry's
// globals (for the libraries sless uses). Shut it down on exit to flush.
func Setup(ctx context.Context, o Options) (*Tracing, error) {
	cfg, err := ConfigFromEnv(os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	t := &Tracing{config: cfg}
	if !cfg.Enabled {
		return t, nil
	}
	res, err := newResource(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	// The exporters read the endpoint, headers, timeout, compression and
	// certificates from the same variables.
	var exp sdktrace.SpanExporter
	if cfg.Protocol == ProtocolGRPC {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	t.provider = NewProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res), sdktrace.WithSampler(cfg.Sampler))
	otel.SetTracerProvider(t.provider)
	otel.SetTextMapPropagator(Propagator)
	return t, nil
}

// NewProvider is the SDK's tracer provider with opts; tests give it an
// in-memory exporter.
func NewProvider(opts ...sdktrace.TracerProviderOption) *sdktrace.TracerProvider {
	return sdktrace.NewTracerProvider(opts...)
}

func newResource(ctx context.Context, o Options) (*resource.Resource, error) {
	var base []attribute.KeyValue
	if o.Service != "" {
		base = append(base, semconv.ServiceName(o.Service))
	}
	if o.Version != "" {
		base = append(base, semconv.ServiceVersion(o.Version))
	}
	// WithFromEnv last, so that the operator's variables win over sless's
	// defaults.
	return resource.New(ctx, resource.WithTelemetrySDK(), resource.WithAttributes(base...), resource.WithFromEnv())
}

// Enabled reports whether spans are exported.
func (t *Tracing) Enabled() bool { return t != nil && t.provider != nil }

// Provider is the tracer provider, nil when tracing is off: instrumented
// code takes nil to mean "make no spans".
func (t *Tracing) Provider() trace.TracerProvider {
	if !t.Enabled() {
		return nil
	}
	return t.provider
}

// Describe says in one line where spans go, for the startup log.
func (t *Tracing) Describe() string {
	if !t.Enabled() {
		return "off (set OTEL_EXPORTER_OTLP_ENDPOINT to export spans)"
	}
	return fmt.Sprintf("OTLP %s to %s, sampler %s", t.config.Protocol, t.config.Endpoint, t.config.SamplerName)
}

// Shutdown exports the spans still batched and stops the exporter, within
// ctx or 5 seconds, whichever ends first.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := t.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: flushing spans: %w", err)
	}
	return nil
}

// Tracer is the tracer of tp under sless's scope, or nil when tp is nil.
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(Scope)
}
