package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"reflect"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	networkingv1alpha1 "knative.dev/networking/pkg/apis/networking/v1alpha1"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"

	"github.com/sless-dev/sless/pkg/adapter/s3"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/reconciler/function"
	"github.com/sless-dev/sless/pkg/reconciler/function/resources"
	"github.com/sless-dev/sless/pkg/reconciler/ingress"
	ingressresources "github.com/sless-dev/sless/pkg/reconciler/ingress/resources"
	"github.com/sless-dev/sless/pkg/reconciler/service"
	"github.com/sless-dev/sless/pkg/sourcegc"
)

func init() {
	register("controller", "run the reconcilers against a Kubernetes cluster (Tekton builds, Knative serves)", runController)
}

// ControllerPlugin lets another reconciler join `sless controller` from a
// file of its own (cmd/sless/controller_<name>.go) without editing this one:
// it registers its flags on fs and returns what the manager needs.
type ControllerPlugin func(fs *flag.FlagSet) ControllerSetup

// ControllerSetup is one reconciler's part of the manager.
type ControllerSetup struct {
	// CacheByObject narrows the manager's cache for the kinds it watches
	// (e.g. only labelled Pods or Secrets).
	CacheByObject map[client.Object]cache.ByObject
	// Setup registers the reconciler once the manager exists.
	Setup func(ctx context.Context, mgr ctrl.Manager) error
	// Env pairs the plugin's non-string flags with the SLESS_* variables
	// that set them (flag, variable, flag, variable, ...): see bindEnv.
	Env []string
}

var controllerPlugins []ControllerPlugin

// controllerFlags is the controller's configuration; every flag has an
// SLESS_* environment variable as its default (see docs/install.md).
type controllerFlags struct {
	metricsAddr, probeAddr         string
	pprofAddr                      string
	leaderElect                    bool
	leaderNamespace                string
	concurrency                    int
	qps                            float64
	burst                          int
	publicBaseURL                  string
	fnDomain                       string
	s3Endpoint, s3Bucket, s3Region string
	s3PathStyle                    bool
	buildS3Endpoint                string
	res                            resources.Config
	builderArgs                    string
	sourceGCGrace                  time.Duration
	sourceGCInterval               time.Duration
	apiService                     string
}

func (c *controllerFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.metricsAddr, "metrics-bind-address", envOr("SLESS_METRICS_ADDR", ":9090"), "address of the Prometheus /metrics endpoint (0 to disable)")
	fs.StringVar(&c.probeAddr, "health-probe-bind-address", envOr("SLESS_PROBE_ADDR", ":8081"), "address of /healthz and /readyz")
	fs.StringVar(&c.pprofAddr, "pprof-bind-address", os.Getenv("SLESS_PPROF_ADDR"), "address of Go's /debug/pprof/ profiles (empty: off; it exposes the process's memory, keep it private)")
	fs.BoolVar(&c.leaderElect, "leader-elect", true, "run one active controller among replicas (Lease sless-controller)")
	fs.StringVar(&c.leaderNamespace, "leader-election-namespace", envOr("SLESS_LEADER_NAMESPACE", os.Getenv("POD_NAMESPACE")), "namespace of the leader Lease (the pod's own in a cluster)")
	// A reconcile mostly waits on the apiserver and S3: at 4 at once, a
	// batch of Functions queued behind them (bench/controller).
	fs.IntVar(&c.concurrency, "concurrency", 16, "Functions reconciled at once")
	// Each kind's client has a limiter of its own, and a Function costs
	// its kind about eight writes; the apiserver's own fairness (429s)
	// protects it, so the client's limit is set not to be the bottleneck.
	fs.Float64Var(&c.qps, "kube-api-qps", 200, "requests per second to the apiserver, per resource kind (client-side limit)")
	fs.IntVar(&c.burst, "kube-api-burst", 400, "burst above --kube-api-qps")
	fs.StringVar(&c.publicBaseURL, "public-base-url", envOr("SLESS_PUBLIC_BASE_URL", "http://localhost:8080"), "where callers reach the invoke proxy; status.url is <this>/fn/<ns>/<name>, or the function's host under --fn-domain with this URL's scheme and port")
	fs.StringVar(&c.fnDomain, "fn-domain", os.Getenv("SLESS_FN_DOMAIN"), "the domain sless api serves function hosts under (its --fn-domain): status.url is then {scheme}://{name}.{namespace}.<domain>")

	fs.StringVar(&c.s3Endpoint, "s3-endpoint", os.Getenv("SLESS_S3_ENDPOINT"), "S3 endpoint URL (http:// or https://) as the controller reaches it; required")
	fs.StringVar(&c.s3Bucket, "s3-bucket", envOr("SLESS_S3_BUCKET", "sless"), "bucket for source archives and build contexts (credentials from SLESS_S3_ACCESS_KEY and SLESS_S3_SECRET_KEY)")
	fs.StringVar(&c.s3Region, "s3-region", envOr("SLESS_S3_REGION", resources.DefaultS3Region), "S3 region")
	fs.BoolVar(&c.s3PathStyle, "s3-path-style", true, "address buckets by path (MinIO, Ceph, versitygw)")
	fs.StringVar(&c.buildS3Endpoint, "build-s3-endpoint", os.Getenv("SLESS_BUILD_S3_ENDPOINT"), "S3 endpoint URL as build pods reach it (default: --s3-endpoint)")
	fs.DurationVar(&c.sourceGCGrace, "source-gc-grace", sourcegc.DefaultGrace, "keep source archives and build contexts no Function needs this long before deleting them (must outlast an upload's wait for the create that names it)")
	fs.DurationVar(&c.sourceGCInterval, "source-gc-interval", sourcegc.DefaultInterval, "time between sweeps for source objects no Function needs (0: no sweeps)")
	fs.StringVar(&c.res.S3Secret, "build-s3-secret", envOr("SLESS_BUILD_S3_SECRET", "sless-s3"), "Secret in each function namespace with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY for builds (empty: none)")

	fs.StringVar(&c.res.Registry, "registry", os.Getenv("SLESS_REGISTRY"), "repository prefix images are pushed to, e.g. registry.example.com/sless; required")
	fs.StringVar(&c.res.RegistrySecret, "registry-secret", envOr("SLESS_REGISTRY_SECRET", "sless-registry"), "kubernetes.io/dockerconfigjson Secret in each function namespace with push rights (empty: none)")
	fs.StringVar(&c.res.BuilderImage, "builder-image", envOr("SLESS_BUILDER_IMAGE", resources.DefaultBuilderImage), "image that builds and pushes; takes kaniko's flags")
	fs.StringVar(&c.res.BuilderCommand, "builder-command", envOr("SLESS_BUILDER_COMMAND", resources.DefaultBuilderCommand), "the builder image's executable (Tekton needs it to run the step without asking the registry)")
	fs.StringVar(&c.builderArgs, "builder-args", os.Getenv("SLESS_BUILDER_ARGS"), "extra builder flags, comma-separated (e.g. --insecure,--cache=true)")
	fs.StringVar(&c.res.HelperImage, "helper-image", envOr("SLESS_HELPER_IMAGE", resources.DefaultHelperImage), "image with a POSIX shell for the build's result step")
	fs.StringVar(&c.res.BuildServiceAccount, "build-service-account", os.Getenv("SLESS_BUILD_SERVICE_ACCOUNT"), "service account of build pods (default: the namespace's default)")
	fs.StringVar(&c.res.IngressClass, "ingress-class", os.Getenv("SLESS_INGRESS_CLASS"), "Knative networking class of the Services sless makes: "+ingressresources.ClassName+" has sless api route them (give it the same flag) and this controller report their Ingresses; another names Kourier, Istio or Contour; empty leaves it to Knative's config-network")
	fs.StringVar(&c.apiService, "api-service", envOr("SLESS_API_SERVICE", "sless-system/sless-api"), "sless api's Service as namespace/name: the load balancer Ingresses of sless's class report, whose ready endpoints (port http) are probed")
	fs.StringVar(&c.res.ServiceAccount, "function-service-account", os.Getenv("SLESS_FUNCTION_SERVICE_ACCOUNT"), "service account of function pods (default: the namespace's default)")
}

func (c *controllerFlags) validate() error {
	var errs []error
	if c.s3Endpoint == "" {
		errs = append(errs, errors.New("--s3-endpoint (SLESS_S3_ENDPOINT) is required"))
	}
	if c.res.Registry == "" {
		errs = append(errs, errors.New("--registry (SLESS_REGISTRY) is required"))
	}
	if c.qps <= 0 || c.burst < 1 {
		errs = append(errs, fmt.Errorf("--kube-api-qps and --kube-api-burst must be positive, got %v and %d", c.qps, c.burst))
	}
	if c.sourceGCGrace <= 0 || c.sourceGCInterval < 0 {
		errs = append(errs, fmt.Errorf("--source-gc-grace must be positive and --source-gc-interval not negative, got %v and %v", c.sourceGCGrace, c.sourceGCInterval))
	}
	if c.concurrency < 1 {
		errs = append(errs, fmt.Errorf("--concurrency must be at least 1, got %d", c.concurrency))
	}
	if !strings.HasPrefix(c.publicBaseURL, "http://") && !strings.HasPrefix(c.publicBaseURL, "https://") {
		errs = append(errs, fmt.Errorf("--public-base-url %q must be an http:// or https:// URL", c.publicBaseURL))
	}
	if ns, name, ok := strings.Cut(c.apiService, "/"); !ok || ns == "" || name == "" {
		errs = append(errs, fmt.Errorf("--api-service %q must be namespace/name", c.apiService))
	}
	if c.fnDomain != "" {
		if err := invoke.CheckDomain(c.fnDomain); err != nil {
			errs = append(errs, fmt.Errorf("--fn-domain: %w", err))
		}
	}
	return errors.Join(errs...)
}

func runController(ctx context.Context, args []string) error {
	fs := newFlags("controller", "sless controller [flags]\n\nRun the reconcilers of Functions, Triggers and FunctionJobs.")
	var c controllerFlags
	c.register(fs)
	var plugins []ControllerSetup
	for _, p := range controllerPlugins {
		plugins = append(plugins, p(fs))
	}
	env := []string{"leader-elect", "SLESS_LEADER_ELECT", "concurrency", "SLESS_CONCURRENCY",
		"kube-api-qps", "SLESS_KUBE_API_QPS", "kube-api-burst", "SLESS_KUBE_API_BURST", "s3-path-style", "SLESS_S3_PATH_STYLE",
		"source-gc-grace", "SLESS_SOURCE_GC_GRACE", "source-gc-interval", "SLESS_SOURCE_GC_INTERVAL"}
	for _, p := range plugins {
		env = append(env, p.Env...)
	}
	if err := bindEnv(fs, env...); err != nil {
		return err
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := c.validate(); err != nil {
		return err
	}
	if c.buildS3Endpoint == "" {
		c.buildS3Endpoint = c.s3Endpoint
	}
	c.res.S3Endpoint, c.res.S3Region = c.buildS3Endpoint, c.s3Region
	for _, a := range strings.Split(c.builderArgs, ",") {
		if a = strings.TrimSpace(a); a != "" {
			c.res.BuilderArgs = append(c.res.BuilderArgs, a)
		}
	}
	ctrl.SetLogger(zap.New())

	store, err := s3.New(s3.Config{Endpoint: c.s3Endpoint, Region: c.s3Region, Bucket: c.s3Bucket,
		AccessKey: os.Getenv("SLESS_S3_ACCESS_KEY"), SecretKey: os.Getenv("SLESS_S3_SECRET_KEY"), PathStyle: c.s3PathStyle})
	if err != nil {
		return err
	}
	bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = store.EnsureBucket(bctx)
	cancel()
	if err != nil {
		return fmt.Errorf("S3 bucket %s at %s: %w", c.s3Bucket, c.s3Endpoint, err)
	}

	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, slessv1alpha1.AddToScheme, servingv1.AddToScheme, tektonv1.AddToScheme, networkingv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	caches := append([]map[client.Object]cache.ByObject{function.CacheByObject()}, pluginCaches(plugins)...)
	ingCfg := c.ingressConfig()
	if c.res.IngressClass == ingressresources.ClassName {
		caches = append(caches, ingCfg.CacheByObject())
	}
	byObject, err := mergeCacheByObject(caches...)
	if err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = float32(c.qps), c.burst
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: c.metricsAddr},
		HealthProbeBindAddress:  c.probeAddr,
		PprofBindAddress:        c.pprofAddr,
		LeaderElection:          c.leaderElect,
		LeaderElectionID:        "sless-controller",
		LeaderElectionNamespace: c.leaderNamespace,
		// A new leader takes over at once when the old one stops cleanly.
		LeaderElectionReleaseOnCancel: true,
		Cache:                         cache.Options{ByObject: byObject},
	})
	if err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("informers", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return errors.New("informer caches not synced")
		}
		return nil
	}); err != nil {
		return err
	}
	fnOpts := function.Options{
		Config:                  function.Config{PublicBaseURL: c.publicBaseURL, FunctionDomain: c.fnDomain},
		Resources:               c.res,
		Store:                   store,
		MaxConcurrentReconciles: c.concurrency,
	}
	if err := function.SetupWithManager(mgr, fnOpts); err != nil {
		return err
	}
	if err := service.SetupWithManager(mgr, fnOpts); err != nil {
		return err
	}
	if c.res.IngressClass == ingressresources.ClassName {
		if err := ingress.SetupWithManager(mgr, ingCfg); err != nil {
			return err
		}
	}
	if c.sourceGCInterval > 0 {
		if err := addSourceGC(mgr, store, c.sourceGCGrace, c.sourceGCInterval); err != nil {
			return err
		}
	}
	for _, p := range plugins {
		if p.Setup != nil {
			if err := p.Setup(ctx, mgr); err != nil {
				return err
			}
		}
	}
	return mgr.Start(ctx)
}

// ingressConfig is what the reconciler of sless's networking class needs:
// sless api's Service, which Ingresses report as their load balancer and
// whose replicas Knative's prober asks.
func (c *controllerFlags) ingressConfig() ingress.Config {
	ns, name, _ := strings.Cut(c.apiService, "/")
	lb := name + "." + ns + ".svc.cluster.local"
	return ingress.Config{Class: ingressresources.ClassName, PublicLoadBalancer: lb, PrivateLoadBalancer: lb,
		Service: types.NamespacedName{Namespace: ns, Name: name}, Port: "http"}
}

// addSourceGC runs the sweep for source objects no Function needs on the
// leader. It reads Functions from the apiserver, not the cache: a create
// naming an upload must not be missed for a cache that lags.
func addSourceGC(mgr ctrl.Manager, store *s3.Client, grace, interval time.Duration) error {
	metrics, err := sourcegc.NewMetrics(ctrlmetrics.Registry)
	if err != nil {
		return err
	}
	gc, err := sourcegc.New(sourcegc.Options{
		Store: store, Objects: mgr.GetAPIReader(), Grace: grace, Interval: interval,
		Metrics: metrics, Logger: slog.New(slog.NewJSONHandler(os.Stderr, nil)),
	})
	if err != nil {
		return err
	}
	return mgr.Add(gc)
}

func pluginCaches(plugins []ControllerSetup) []map[client.Object]cache.ByObject {
	out := make([]map[client.Object]cache.ByObject, 0, len(plugins))
	for _, p := range plugins {
		out = append(out, p.CacheByObject)
	}
	return out
}

// mergeCacheByObject joins the reconcilers' cache narrowings. Two for the
// same kind (the Function and Trigger controllers both watch Secrets) must
// agree: a cache holds one selection per kind.
func mergeCacheByObject(parts ...map[client.Object]cache.ByObject) (map[client.Object]cache.ByObject, error) {
	out := map[client.Object]cache.ByObject{}
	seen := map[reflect.Type]cache.ByObject{}
	for _, part := range parts {
		for o, b := range part {
			t := reflect.TypeOf(o)
			if prev, ok := seen[t]; ok {
				if fmt.Sprint(prev.Label) != fmt.Sprint(b.Label) || fmt.Sprint(prev.Field) != fmt.Sprint(b.Field) {
					return nil, fmt.Errorf("two reconcilers narrow the cache of %s differently: %v and %v", t, prev.Label, b.Label)
				}
				continue
			}
			seen[t] = b
			out[o] = b
		}
	}
	return out, nil
}
