package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/reconciler"
	"github.com/sless-dev/sless/test/testbed"
)

// TestControllerCommand runs `sless controller` as wired for a cluster
// against the test apiserver, S3 server and simulators: it takes the leader
// Lease, becomes ready, brings a Function to Ready and exports reconcile and
// build metrics, and stops cleanly on cancel.
func TestControllerCommand(t *testing.T) {
	k := testbed.SharedKube(t)
	s3srv := testbed.SharedS3(t)
	testbed.SharedTekton(t)
	testbed.SharedKnative(t)
	bucket := s3srv.Bucket(t)
	t.Setenv("KUBECONFIG", k.Kubeconfig)
	t.Setenv("SLESS_S3_ACCESS_KEY", s3srv.AccessKey)
	t.Setenv("SLESS_S3_SECRET_KEY", s3srv.SecretKey)
	leaseNS := k.Namespace(t)
	ports := make([]int, 2)
	for i := range ports {
		p, err := testbed.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = p
	}
	metrics := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	probes := "http://127.0.0.1:" + strconv.Itoa(ports[1])

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- runController(ctx, []string{
			"-metrics-bind-address", "127.0.0.1:" + strconv.Itoa(ports[0]),
			"-health-probe-bind-address", "127.0.0.1:" + strconv.Itoa(ports[1]),
			"-leader-election-namespace", leaseNS,
			"-s3-endpoint", "http://" + s3srv.Endpoint, "-s3-bucket", bucket,
			"-registry", "registry.test.local/sless", "-public-base-url", "https://fn.test.local",
			"-database-url", testbed.DatabaseURL(t),
		})
	}()
	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	await := func(what string, cond func() (bool, string)) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			ok, last := cond()
			if ok {
				return
			}
			select {
			case err := <-done:
				t.Fatalf("sless controller exited while waiting for %s: %v", what, err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; last: %s", what, last)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	await("readyz", func() (bool, string) { code, body := get(probes + "/readyz"); return code == 200, body })
	if code, _ := get(probes + "/healthz"); code != 200 {
		t.Errorf("healthz %d", code)
	}
	await("the leader Lease", func() (bool, string) {
		l := &coordinationv1.Lease{}
		err := k.Client.Get(ctx, types.NamespacedName{Namespace: leaseNS, Name: "sless-controller"}, l)
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", "no lease"
	})

	ns := k.Namespace(t)
	fn := &slessv1alpha1.Function{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cmd"},
		Spec: slessv1alpha1.FunctionSpec{
			WorkloadSpec: slessv1alpha1.WorkloadSpec{
				Runtime:    "nodejs22",
				Entrypoint: "index.handler",
				Source: slessv1alpha1.FunctionSource{Inline: &slessv1alpha1.InlineSource{Files: map[string]string{
					"index.js": "exports.handler = async () => 'hi';\n"}}},
			},
		},
	}
	if err := k.Client.Create(ctx, fn); err != nil {
		t.Fatal(err)
	}
	await("Function Ready", func() (bool, string) {
		got := &slessv1alpha1.Function{}
		if err := k.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "cmd"}, got); err != nil {
			return false, err.Error()
		}
		return got.IsReady() && got.Status.URL == "https://fn.test.local/fn/"+ns+"/cmd", string(got.Status.Phase)
	})
	await("metrics", func() (bool, string) {
		code, body := get(metrics + "/metrics")
		return code == 200 &&
			strings.Contains(body, `controller_runtime_reconcile_total{controller="function",result="success"}`) &&
			strings.Contains(body, `controller_runtime_reconcile_errors_total{controller="function"}`) &&
			strings.Contains(body, `sless_function_build_duration_seconds_count{result="succeeded"}`) &&
			// The leader swept for source objects no Function needs.
			strings.Contains(body, `sless_source_gc_sweeps_total{result="ok"} 1`) &&
			strings.Contains(body, "\nsless_source_gc_deleted_objects_total 0\n"), body
	})
	// With a database the FunctionJob recorder's series are there, and no
	// proxy series (the controller proxies no calls).
	if _, body := get(metrics + "/metrics"); !strings.Contains(body, "\nsless_invocation_queue_depth 0\n") ||
		!strings.Contains(body, `sless_invocation_records_dropped_total{reason="queue_full"} 0`) ||
		strings.Contains(body, "sless_invoke_requests_total") {
		t.Errorf("controller metrics: want the recorder's series and no proxy series:\n%s", body)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("sless controller: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("sless controller did not stop")
	}
}

func TestControllerFlagsRefused(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
		env  []string // name, value
	}{
		{"no S3 endpoint", []string{"-registry", "r"}, "--s3-endpoint (SLESS_S3_ENDPOINT) is required", nil},
		{"no registry", []string{"-s3-endpoint", "http://s3"}, "--registry (SLESS_REGISTRY) is required", nil},
		{"zero concurrency", []string{"-s3-endpoint", "http://s3", "-registry", "r", "-concurrency", "0"}, "--concurrency must be at least 1", nil},
		{"public URL without scheme", []string{"-s3-endpoint", "http://s3", "-registry", "r", "-public-base-url", "fn.example.com"}, "must be an http:// or https:// URL", nil},
		{"bad S3 endpoint", []string{"-s3-endpoint", "s3.example.com", "-registry", "r"}, "must be an http:// or https:// URL", nil},
		{"function domain a URL", []string{"-s3-endpoint", "http://s3", "-registry", "r", "-fn-domain", "https://fn.example.com"}, "--fn-domain: the function domain \"https://fn.example.com\" is a URL", nil},
		{"function domain from the environment", []string{"-s3-endpoint", "http://s3", "-registry", "r"}, "--fn-domain: the function domain \"fn_x.example.com\" has \"fn_x\"", []string{"SLESS_FN_DOMAIN", "fn_x.example.com"}},
		{"API Service without a namespace", []string{"-s3-endpoint", "http://s3", "-registry", "r", "-api-service", "sless-api"}, `--api-service "sless-api" must be namespace/name`, nil},
		{"public API Service without a namespace", []string{"-s3-endpoint", "http://s3", "-registry", "r", "-api-public-service", "sless-api-public"}, `--api-public-service "sless-api-public" must be namespace/name`, nil},
		{"public API Service without a name", []string{"-s3-endpoint", "http://s3", "-registry", "r"}, `--api-public-service "sless-system/" must be namespace/name`, []string{"SLESS_API_PUBLIC_SERVICE", "sless-system/"}},
		{"zero QPS", []string{"-s3-endpoint", "http://s3", "-registry", "r", "-kube-api-qps", "0"}, "--kube-api-qps and --kube-api-burst must be positive", nil},
		{"zero source gc grace", []string{"-s3-endpoint", "http://s3", "-registry", "r", "-source-gc-grace", "0s"}, "--source-gc-grace must be positive", nil},
		{"negative source gc interval", []string{"-s3-endpoint", "http://s3", "-registry", "r", "-source-gc-interval", "-1m"}, "--source-gc-interval not negative", nil},
		{"source gc grace not a duration", nil, `SLESS_SOURCE_GC_GRACE="1d"`, []string{"SLESS_SOURCE_GC_GRACE", "1d"}},
		{"unknown flag", []string{"-no-such-flag"}, "flag provided but not defined", nil},
		{"path style not a boolean", nil, `SLESS_S3_PATH_STYLE="yes"`, []string{"SLESS_S3_PATH_STYLE", "yes"}},
		{"concurrency not a number", nil, `SLESS_CONCURRENCY="four"`, []string{"SLESS_CONCURRENCY", "four"}},
		{"QPS not a number", nil, `SLESS_KUBE_API_QPS="fast"`, []string{"SLESS_KUBE_API_QPS", "fast"}},
		{"trigger workers not a number", nil, `SLESS_TRIGGER_CONCURRENCY="2.5"`, []string{"SLESS_TRIGGER_CONCURRENCY", "2.5"}},
		{"default limit not a quantity", []string{"-s3-endpoint", "http://s3", "-registry", "r", "-default-limits", "memory=lots"}, `--default-limits (SLESS_DEFAULT_LIMITS): memory=lots: "lots" is not a quantity`, nil},
		{"default request not a pair", []string{"-s3-endpoint", "http://s3", "-registry", "r"}, `--default-requests (SLESS_DEFAULT_REQUESTS): "cpu" is not name=quantity`, []string{"SLESS_DEFAULT_REQUESTS", "cpu"}},
		{"default memory limit too small", []string{"-s3-endpoint", "http://s3", "-registry", "r", "-default-limits", "memory=32Mi"}, "a memory limit must be at least 64Mi", nil},
		{"default request over its limit", []string{"-s3-endpoint", "http://s3", "-registry", "r", "-default-requests", "cpu=2", "-default-limits", "cpu=1"}, "a request must not exceed its limit (1)", nil},
		{"zero maximum", []string{"-s3-endpoint", "http://s3", "-registry", "r"}, "--max-resources (SLESS_MAX_RESOURCES): memory=0 must be above zero", []string{"SLESS_MAX_RESOURCES", "memory=0"}},
		{"maximum of no resource", []string{"-s3-endpoint", "http://s3", "-registry", "r", "-max-resources", "gpu=1"}, `--max-resources (SLESS_MAX_RESOURCES): limits[gpu]: Invalid value: "gpu": resource names are cpu, memory`, nil},
		{"default over the maximum", []string{"-s3-endpoint", "http://s3", "-registry", "r", "-default-limits", "memory=4Gi", "-max-resources", "memory=2Gi"}, "--default-limits (SLESS_DEFAULT_LIMITS): memory=4Gi is over --max-resources (SLESS_MAX_RESOURCES)'s 2Gi", nil},
		{"OTLP endpoint without a scheme", []string{"-s3-endpoint", "http://s3", "-registry", "r", "-function-otlp-endpoint", "otel-collector:4318"}, `--function-otlp-endpoint "otel-collector:4318" must be an http:// or https:// URL with a host`, nil},
		{"OTLP endpoint gRPC from the environment", []string{"-s3-endpoint", "http://s3", "-registry", "r"}, `--function-otlp-endpoint "grpc://otel:4317" must be an http:// or https:// URL`, []string{"SLESS_FUNCTION_OTLP_ENDPOINT", "grpc://otel:4317"}},
		{"OTLP endpoint without a host", []string{"-s3-endpoint", "http://s3", "-registry", "r", "-function-otlp-endpoint", "http:///v1"}, `--function-otlp-endpoint "http:///v1" must be an http:// or https:// URL with a host`, nil},
		{"default egress unknown", []string{"-s3-endpoint", "http://s3", "-registry", "r", "-default-egress", "listed"}, `--default-egress (SLESS_DEFAULT_EGRESS) "listed" must be all or none`, nil},
		{"build egress not a range", []string{"-s3-endpoint", "http://s3", "-registry", "r"}, `--build-egress (SLESS_BUILD_EGRESS): "registry.local:5000": want CIDR, CIDR:PORT or :PORT`, []string{"SLESS_BUILD_EGRESS", ":443,registry.local:5000"}},
		{"build egress port", []string{"-s3-endpoint", "http://s3", "-registry", "r", "-build-egress", ":99999"}, `--build-egress (SLESS_BUILD_EGRESS): ":99999": the port must be a number from 1 to 65535`, nil},
		{"runtime class not a name", []string{"-s3-endpoint", "http://s3", "-registry", "r", "-default-runtime-class", "gVisor"}, `--default-runtime-class (SLESS_DEFAULT_RUNTIME_CLASS) "gVisor" is not a RuntimeClass name`, nil},
		{"site config without a namespace", []string{"-s3-endpoint", "http://s3", "-registry", "r", "-site-config", "sless-config"}, `--site-config "sless-config" must be namespace/name`, nil},
		{"network policies not a boolean", nil, `SLESS_NETWORK_POLICIES="on"`, []string{"SLESS_NETWORK_POLICIES", "on"}},
		{"env value refused by the checks", []string{"-s3-endpoint", "http://s3", "-registry", "r"}, "--concurrency must be at least 1", []string{"SLESS_CONCURRENCY", "0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("SLESS_S3_ENDPOINT", "")
			t.Setenv("SLESS_REGISTRY", "")
			for i := 0; i+1 < len(tc.env); i += 2 {
				t.Setenv(tc.env[i], tc.env[i+1])
			}
			err := runController(context.Background(), tc.args)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// The resource settings reach the Knative Services' defaults and the
// admission policy.
func TestControllerResourceSettings(t *testing.T) {
	t.Setenv("SLESS_MAX_RESOURCES", "memory=2Gi")
	fs := newFlags("controller", "")
	var c controllerFlags
	c.register(fs)
	if err := parseFlags(fs, []string{"-s3-endpoint", "http://s3", "-registry", "r", "-default-requests", "cpu=100m", "-default-limits", "memory=256Mi"}); err != nil {
		t.Fatal(err)
	}
	o, err := c.options()
	if err != nil {
		t.Fatal(err)
	}
	d := o.Resources.DefaultResources
	if d == nil || d.Requests.Cpu().String() != "100m" || d.Limits.Memory().String() != "256Mi" {
		t.Errorf("default resources %+v, want cpu request 100m and memory limit 256Mi", d)
	}
	if len(o.Limits.Max) != 1 || o.Limits.Max[0].Name != "memory" || o.Limits.Max[0].Value != "2Gi" {
		t.Errorf("maximums %+v, want memory=2Gi from SLESS_MAX_RESOURCES", o.Limits.Max)
	}
}

// The site's OTLP endpoint reaches the builders' configuration, from the
// flag or its variable.
func TestControllerFunctionOTLPEndpoint(t *testing.T) {
	t.Setenv("SLESS_FUNCTION_OTLP_ENDPOINT", "http://otel-collector.observability:4318")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "http://otel-collector.observability:4318"},
		{[]string{"-function-otlp-endpoint", "https://otlp.example.com"}, "https://otlp.example.com"},
	} {
		fs := newFlags("controller", "")
		var c controllerFlags
		c.register(fs)
		if err := parseFlags(fs, append([]string{"-s3-endpoint", "http://s3", "-registry", "r"}, tc.args...)); err != nil {
			t.Fatal(err)
		}
		o, err := c.options()
		if err != nil {
			t.Fatal(err)
		}
		if o.Resources.OTLPEndpoint != tc.want {
			t.Errorf("%v: OTLPEndpoint %q, want %q", tc.args, o.Resources.OTLPEndpoint, tc.want)
		}
	}
}

// The sandbox settings: build egress derived from the registry and S3
// unless named, the default egress and runtime class passed through.
func TestControllerSandboxSettings(t *testing.T) {
	parse := func(args ...string) reconciler.Options {
		t.Helper()
		fs := newFlags("controller", "")
		var c controllerFlags
		c.register(fs)
		if err := parseFlags(fs, append([]string{"-s3-endpoint", "http://minio.minio.svc:9000", "-registry", "10.0.0.5:5000/sless"}, args...)); err != nil {
			t.Fatal(err)
		}
		o, err := c.options()
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	o := parse()
	if !o.Sandbox.NetworkPolicies || !o.Sandbox.PodSecurity || o.Sandbox.DefaultEgress != "all" || o.Resources.DefaultRuntimeClass != "" {
		t.Errorf("defaults %+v, runtime class %q: want policies and labels on, egress all, no runtime class", o.Sandbox, o.Resources.DefaultRuntimeClass)
	}
	if got := fmt.Sprint(o.Sandbox.BuildEgress); got != "[{ [{443 TCP} {5000 TCP} {9000 TCP}]}]" {
		t.Errorf("build egress %s, want TCP 443, the registry's 5000 and S3's 9000", got)
	}
	if o.SiteConfig.ConfigMap.Name != "" {
		t.Errorf("outside a pod the site's ConfigMap is %v, want none", o.SiteConfig.ConfigMap)
	}
	t.Setenv("POD_NAMESPACE", "sless-system")
	if o = parse("-max-resources", "memory=2Gi"); o.SiteConfig.ConfigMap.String() != "sless-system/sless-config" || o.SiteConfig.MaxResources != "memory=2Gi" {
		t.Errorf("in a pod the site config is %+v, want sless-system/sless-config with the started maximums", o.SiteConfig)
	}
	o = parse("-network-policies=false", "-default-egress", "none", "-build-egress", "10.0.0.5/32:5000", "-default-runtime-class", "gvisor")
	if o.Sandbox.NetworkPolicies || o.Sandbox.DefaultEgress != "none" || o.Resources.DefaultRuntimeClass != "gvisor" {
		t.Errorf("settings %+v, runtime class %q: want policies off, egress none, runtime class gvisor", o.Sandbox, o.Resources.DefaultRuntimeClass)
	}
	if got := fmt.Sprint(o.Sandbox.BuildEgress); got != "[{10.0.0.5/32 [{5000 TCP}]}]" {
		t.Errorf("build egress %s, want the one entry named", got)
	}
}
