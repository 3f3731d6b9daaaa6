package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/sless-dev/sless/pkg/adapter/kube"
	"github.com/sless-dev/sless/pkg/adapter/resources"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/devices/rabbitmq"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/limits"
	"github.com/sless-dev/sless/pkg/reconciler"
	ingressresources "github.com/sless-dev/sless/pkg/reconciler/ingress/resources"
	sandboxresources "github.com/sless-dev/sless/pkg/reconciler/sandbox/resources"
	"github.com/sless-dev/sless/pkg/sourcegc"
)

func init() {
	register("controller", "run the reconcilers against a Kubernetes cluster (Tekton builds, Knative serves)", runController)
}

// controllerFlags is the controller's configuration; every flag has an
// SLESS_* environment variable as its default (see docs/install.md).
type controllerFlags struct {
	o                reconciler.Options
	buildS3Endpoint  string
	builderArgs      string
	apiService       string
	apiPublicService string
	// rabbitMQManagement is the management API's URL, through which
	// devices' connections are closed.
	rabbitMQManagement string
	buildEgress        string
	siteConfig         string
	resourceFlags
}

// resourceFlags are the site's resource settings, shared by sless
// controller, sless api and sless dev (docs/install.md).
type resourceFlags struct {
	defaultRequests, defaultLimits, maxResources string
}

func (r *resourceFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&r.defaultRequests, "default-requests", os.Getenv("SLESS_DEFAULT_REQUESTS"), "requests of each resource a Function or SlessService names nowhere, as name=quantity,... (cpu=100m,memory=128Mi)")
	fs.StringVar(&r.defaultLimits, "default-limits", os.Getenv("SLESS_DEFAULT_LIMITS"), "limits of each resource a Function or SlessService names nowhere, as name=quantity,... (memory=256Mi); memory unset anywhere is 128Mi")
	r.registerMax(fs)
}

func (r *resourceFlags) registerMax(fs *flag.FlagSet) {
	fs.StringVar(&r.maxResources, "max-resources", os.Getenv("SLESS_MAX_RESOURCES"), "each namespace's maximum request and limit of a Function or SlessService, as name=quantity,... (memory=2Gi,cpu=2,nvidia.com/gpu=1); a namespace's annotation "+limits.AnnotationMax+" replaces the resources it names")
}

// site checks the settings.
func (r *resourceFlags) site() (limits.Site, error) {
	return limits.ParseSite(limits.Setting{Name: "--default-requests (SLESS_DEFAULT_REQUESTS)", Value: r.defaultRequests},
		limits.Setting{Name: "--default-limits (SLESS_DEFAULT_LIMITS)", Value: r.defaultLimits},
		limits.Setting{Name: "--max-resources (SLESS_MAX_RESOURCES)", Value: r.maxResources})
}

func (c *controllerFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.o.MetricsAddr, "metrics-bind-address", envOr("SLESS_METRICS_ADDR", ":9090"), "address of the Prometheus /metrics endpoint (0 to disable)")
	fs.StringVar(&c.o.ProbeAddr, "health-probe-bind-address", envOr("SLESS_PROBE_ADDR", ":8081"), "address of /healthz and /readyz")
	fs.StringVar(&c.o.PprofAddr, "pprof-bind-address", os.Getenv("SLESS_PPROF_ADDR"), "address of Go's /debug/pprof/ profiles (empty: off; it exposes the process's memory, keep it private)")
	fs.BoolVar(&c.o.LeaderElect, "leader-elect", true, "run one active controller among replicas (Lease sless-controller)")
	fs.StringVar(&c.o.LeaderNamespace, "leader-election-namespace", envOr("SLESS_LEADER_NAMESPACE", os.Getenv("POD_NAMESPACE")), "namespace of the leader Lease (the pod's own in a cluster)")
	// A reconcile mostly waits on the apiserver and S3: at 4 at once, a
	// batch of Functions queued behind them (bench/controller).
	fs.IntVar(&c.o.Concurrency, "concurrency", 16, "Functions reconciled at once")
	// Each kind's client has a limiter of its own, and a Function costs
	// its kind about eight writes; the apiserver's own fairness (429s)
	// protects it, so the client's limit is set not to be the bottleneck.
	fs.Float64Var(&c.o.QPS, "kube-api-qps", 200, "requests per second to the apiserver, per resource kind (client-side limit)")
	fs.IntVar(&c.o.Burst, "kube-api-burst", 400, "burst above --kube-api-qps")
	fs.StringVar(&c.o.PublicBaseURL, "public-base-url", envOr("SLESS_PUBLIC_BASE_URL", "http://localhost:8080"), "where callers reach the invoke proxy; status.url is <this>/fn/<ns>/<name>, or the function's host under --fn-domain with this URL's scheme and port")
	fs.StringVar(&c.o.FunctionDomain, "fn-domain", os.Getenv("SLESS_FN_DOMAIN"), "the domain sless api serves function hosts under (its --fn-domain): status.url is then {scheme}://{name}.{namespace}.<domain>")

	fs.StringVar(&c.o.S3.Endpoint, "s3-endpoint", os.Getenv("SLESS_S3_ENDPOINT"), "S3 endpoint URL (http:// or https://) as the controller reaches it; required")
	fs.StringVar(&c.o.S3.Bucket, "s3-bucket", envOr("SLESS_S3_BUCKET", "sless"), "bucket for source archives and build contexts (credentials from SLESS_S3_ACCESS_KEY and SLESS_S3_SECRET_KEY)")
	fs.StringVar(&c.o.S3.Region, "s3-region", envOr("SLESS_S3_REGION", resources.DefaultS3Region), "S3 region")
	fs.BoolVar(&c.o.S3.PathStyle, "s3-path-style", true, "address buckets by path (MinIO, Ceph, versitygw)")
	fs.StringVar(&c.buildS3Endpoint, "build-s3-endpoint", os.Getenv("SLESS_BUILD_S3_ENDPOINT"), "S3 endpoint URL as build pods reach it (default: --s3-endpoint)")
	fs.DurationVar(&c.o.SourceGCGrace, "source-gc-grace", sourcegc.DefaultGrace, "keep source archives and build contexts no Function needs this long before deleting them (must outlast an upload's wait for the create that names it)")
	fs.DurationVar(&c.o.SourceGCInterval, "source-gc-interval", sourcegc.DefaultInterval, "time between sweeps for source objects no Function needs (0: no sweeps)")
	fs.StringVar(&c.o.Resources.S3Secret, "build-s3-secret", envOr("SLESS_BUILD_S3_SECRET", "sless-s3"), "Secret in each function namespace with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY for builds (empty: none)")

	fs.StringVar(&c.o.Resources.Registry, "registry", os.Getenv("SLESS_REGISTRY"), "repository prefix images are pushed to, e.g. registry.example.com/sless; required")
	fs.StringVar(&c.o.Resources.RegistrySecret, "registry-secret", envOr("SLESS_REGISTRY_SECRET", "sless-registry"), "kubernetes.io/dockerconfigjson Secret in each function namespace with push rights (empty: none)")
	fs.StringVar(&c.o.Resources.BuilderImage, "builder-image", envOr("SLESS_BUILDER_IMAGE", resources.DefaultBuilderImage), "image that builds and pushes; takes kaniko's flags")
	fs.StringVar(&c.o.Resources.BuilderCommand, "builder-command", envOr("SLESS_BUILDER_COMMAND", resources.DefaultBuilderCommand), "the builder image's executable (Tekton needs it to run the step without asking the registry)")
	fs.StringVar(&c.builderArgs, "builder-args", os.Getenv("SLESS_BUILDER_ARGS"), "extra builder flags, comma-separated (e.g. --insecure,--cache=true)")
	fs.StringVar(&c.o.Resources.HelperImage, "helper-image", envOr("SLESS_HELPER_IMAGE", resources.DefaultHelperImage), "image with a POSIX shell for the build's result step")
	fs.StringVar(&c.o.Resources.BuildServiceAccount, "build-service-account", os.Getenv("SLESS_BUILD_SERVICE_ACCOUNT"), "service account of build pods (default: the namespace's default)")
	fs.StringVar(&c.o.Resources.IngressClass, "ingress-class", os.Getenv("SLESS_INGRESS_CLASS"), "Knative networking class of the Services sless makes: "+ingressresources.ClassName+" has sless api route them (give it the same flag) and this controller report their Ingresses; another names Kourier, Istio or Contour; empty leaves it to Knative's config-network")
	fs.StringVar(&c.apiService, "api-service", envOr("SLESS_API_SERVICE", "sless-system/sless-api"), "sless api's Service as namespace/name: the private load balancer Ingresses of sless's class report (its cluster-local door), whose ready endpoints (port http) are probed")
	fs.StringVar(&c.apiPublicService, "api-public-service", envOr("SLESS_API_PUBLIC_SERVICE", "sless-system/sless-api-public"), "the Service of sless api's public door (its -public-listen) as namespace/name: the public load balancer Ingresses of sless's class report (empty: --api-service, for an api with one door)")
	c.resourceFlags.register(fs)
	fs.StringVar(&c.o.Resources.DefaultRuntimeClass, "default-runtime-class", os.Getenv("SLESS_DEFAULT_RUNTIME_CLASS"), "RuntimeClass of every function and service whose spec names none (gVisor's runsc, Kata); Knative's kubernetes.podspec-runtimeclassname feature must be on")
	fs.BoolVar(&c.o.Sandbox.NetworkPolicies, "network-policies", true, "keep NetworkPolicies in workloads' namespaces: only Knative's data plane and sless api reach sless's pods; builds and spec.network limit egress")
	fs.BoolVar(&c.o.Sandbox.PodSecurity, "pod-security", true, "label tenant namespaces for Pod Security Admission (enforce baseline, audit and warn restricted) where unlabelled")
	fs.StringVar(&c.o.Sandbox.DefaultEgress, "default-egress", envOr("SLESS_DEFAULT_EGRESS", slessv1alpha1.EgressAll), "egress of a function or service whose spec.network names none: all or none")
	fs.StringVar(&c.siteConfig, "site-config", envOr("SLESS_SITE_CONFIG", siteConfigDefault()), "the ConfigMap, as namespace/name, whose SLESS_MAX_RESOURCES (and default requests and limits) the controller follows while it runs, rewriting the admission policy on a change (empty: none)")
	fs.StringVar(&c.buildEgress, "build-egress", os.Getenv("SLESS_BUILD_EGRESS"), "where build pods may connect besides DNS, as CIDR, CIDR:PORT or :PORT entries, comma-separated (default: TCP port 443 and the ports of --registry and --build-s3-endpoint, at any address)")
	fs.StringVar(&c.o.Resources.ServiceAccount, "function-service-account", os.Getenv("SLESS_FUNCTION_SERVICE_ACCOUNT"), "service account of function pods (default: the namespace's default)")
	fs.StringVar(&c.o.Resources.OTLPEndpoint, "function-otlp-endpoint", os.Getenv("SLESS_FUNCTION_OTLP_ENDPOINT"), "OTLP/HTTP collector (http:// or https:// base URL) function pods send their spans to, as their OTEL_EXPORTER_OTLP_ENDPOINT; empty: functions export none")

	t := &c.o.Triggers
	fs.StringVar(&t.Image, "sless-image", os.Getenv("SLESS_IMAGE"), "the sless image (pinned by digest) cron runs and queue consumers run; its entrypoint is the sless binary")
	fs.StringVar(&t.InvokeURL, "invoke-url", envOr("SLESS_INVOKE_URL", "http://sless-api.sless-system.svc"), "the invoke proxy's base URL as pods in the cluster reach it")
	fs.StringVar(&t.JWTSecretFile, "jwt-secret-file", os.Getenv("SLESS_JWT_SECRET_FILE"), "file holding the HS256 secret trigger credentials are signed with (the API's --jwt-secret-file)")
	fs.StringVar(&t.Issuer, "jwt-issuer", os.Getenv("SLESS_JWT_ISSUER"), "iss of trigger credentials (what the API requires)")
	fs.StringVar(&t.Audience, "jwt-audience", os.Getenv("SLESS_JWT_AUDIENCE"), "aud of trigger credentials (one of the API's accepted values)")
	fs.IntVar(&t.JobTTLSeconds, "job-ttl-seconds", kube.DefaultTTLSecondsAfterFinished, "how long finished FunctionJob runs keep their Job and Pod")
	fs.StringVar(&t.DatabaseURL, "database-url", os.Getenv("SLESS_DATABASE_URL"), "PostgreSQL URL for invocation records of FunctionJob runs (none: not recorded)")
	fs.IntVar(&t.Concurrency, "trigger-concurrency", 2, "Triggers and FunctionJobs reconciled at once, each")
	fs.StringVar(&c.rabbitMQManagement, "rabbitmq-management-url", os.Getenv("SLESS_RABBITMQ_MANAGEMENT_URL"), "RabbitMQ's management API (http://host:15672), through which IoT devices' connections are closed when they are disabled, deleted or given a new password, as the administrator SLESS_RABBITMQ_MANAGEMENT_USERNAME with SLESS_RABBITMQ_MANAGEMENT_PASSWORD (empty: none are closed; docs/devices.md)")
}

// options checks the flags and turns them into pkg/reconciler's options.
func (c *controllerFlags) options() (reconciler.Options, error) {
	o := c.o
	var errs []error
	if o.S3.Endpoint == "" {
		errs = append(errs, errors.New("--s3-endpoint (SLESS_S3_ENDPOINT) is required"))
	}
	if o.Resources.Registry == "" {
		errs = append(errs, errors.New("--registry (SLESS_REGISTRY) is required"))
	}
	if o.QPS <= 0 || o.Burst < 1 {
		errs = append(errs, fmt.Errorf("--kube-api-qps and --kube-api-burst must be positive, got %v and %d", o.QPS, o.Burst))
	}
	if o.SourceGCGrace <= 0 || o.SourceGCInterval < 0 {
		errs = append(errs, fmt.Errorf("--source-gc-grace must be positive and --source-gc-interval not negative, got %v and %v", o.SourceGCGrace, o.SourceGCInterval))
	}
	if o.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("--concurrency must be at least 1, got %d", o.Concurrency))
	}
	if !strings.HasPrefix(o.PublicBaseURL, "http://") && !strings.HasPrefix(o.PublicBaseURL, "https://") {
		errs = append(errs, fmt.Errorf("--public-base-url %q must be an http:// or https:// URL", o.PublicBaseURL))
	}
	var err error
	if o.APIService, err = namespacedName("--api-service", c.apiService); err != nil {
		errs = append(errs, err)
	}
	o.APIPublicService = o.APIService
	if c.apiPublicService != "" {
		if o.APIPublicService, err = namespacedName("--api-public-service", c.apiPublicService); err != nil {
			errs = append(errs, err)
		}
	}
	if e := o.Resources.OTLPEndpoint; e != "" {
		if u, err := url.Parse(e); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("--function-otlp-endpoint %q must be an http:// or https:// URL with a host, such as http://otel-collector.observability:4318", e))
		}
	}
	if o.FunctionDomain != "" {
		if err := invoke.CheckDomain(o.FunctionDomain); err != nil {
			errs = append(errs, fmt.Errorf("--fn-domain: %w", err))
		}
	}
	if site, err := c.site(); err != nil {
		errs = append(errs, err)
	} else {
		o.Limits, o.Resources.DefaultResources = site, site.Defaults
	}
	o.Resources.S3Endpoint, o.Resources.S3Region = cmp.Or(c.buildS3Endpoint, o.S3.Endpoint), o.S3.Region
	errs = append(errs, c.sandbox(&o)...)
	if c.siteConfig != "" {
		cm, err := namespacedName("--site-config", c.siteConfig)
		if err != nil {
			errs = append(errs, err)
		}
		o.SiteConfig = reconciler.SiteConfig{ConfigMap: cm, DefaultRequests: c.defaultRequests, DefaultLimits: c.defaultLimits, MaxResources: c.maxResources}
	}
	for _, a := range strings.Split(c.builderArgs, ",") {
		if a = strings.TrimSpace(a); a != "" {
			o.Resources.BuilderArgs = append(o.Resources.BuilderArgs, a)
		}
	}
	o.S3.AccessKey, o.S3.SecretKey = os.Getenv("SLESS_S3_ACCESS_KEY"), os.Getenv("SLESS_S3_SECRET_KEY")
	if m := c.rabbitMQManagement; m != "" {
		if u, err := url.Parse(m); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("--rabbitmq-management-url %q must be an http:// or https:// URL", m))
		}
		o.DeviceBroker = &rabbitmq.Management{URL: m,
			Username: os.Getenv("SLESS_RABBITMQ_MANAGEMENT_USERNAME"), Password: os.Getenv("SLESS_RABBITMQ_MANAGEMENT_PASSWORD")}
	}
	return o, errors.Join(errs...)
}

// siteConfigDefault is the ConfigMap config/ installs, in the pod's own
// namespace; none outside a pod.
func siteConfigDefault() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns + "/sless-config"
	}
	return ""
}

// sandbox checks the network and pod security settings.
func (c *controllerFlags) sandbox(o *reconciler.Options) []error {
	var errs []error
	switch o.Sandbox.DefaultEgress {
	case slessv1alpha1.EgressAll, slessv1alpha1.EgressNone:
	default:
		errs = append(errs, fmt.Errorf("--default-egress (SLESS_DEFAULT_EGRESS) %q must be all or none", o.Sandbox.DefaultEgress))
	}
	if rc := o.Resources.DefaultRuntimeClass; rc != "" {
		if msgs := validation.IsDNS1123Subdomain(rc); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--default-runtime-class (SLESS_DEFAULT_RUNTIME_CLASS) %q is not a RuntimeClass name: %s", rc, msgs[0]))
		}
	}
	o.Sandbox.KnativeNamespace = resources.KnativeNamespace
	o.Sandbox.BuildEgress = sandboxresources.BuildEgressFor(o.Resources.Registry, o.Resources.S3Endpoint)
	if c.buildEgress != "" {
		rules, err := sandboxresources.ParseEgress(c.buildEgress)
		if err != nil {
			errs = append(errs, fmt.Errorf("--build-egress (SLESS_BUILD_EGRESS): %w", err))
		}
		o.Sandbox.BuildEgress = rules
	}
	return errs
}

// namespacedName reads a flag of the form namespace/name.
func namespacedName(flag, v string) (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(v, "/")
	if !ok || ns == "" || name == "" {
		return types.NamespacedName{}, fmt.Errorf("%s %q must be namespace/name", flag, v)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

// runController turns the flags into pkg/reconciler's options and runs it.
func runController(ctx context.Context, args []string) error {
	fs := newFlags("controller", "sless controller [flags]\n\nRun the reconcilers of Functions, Triggers and FunctionJobs.")
	var c controllerFlags
	c.register(fs)
	if err := bindEnv(fs, "leader-elect", "SLESS_LEADER_ELECT", "concurrency", "SLESS_CONCURRENCY",
		"kube-api-qps", "SLESS_KUBE_API_QPS", "kube-api-burst", "SLESS_KUBE_API_BURST", "s3-path-style", "SLESS_S3_PATH_STYLE",
		"source-gc-grace", "SLESS_SOURCE_GC_GRACE", "source-gc-interval", "SLESS_SOURCE_GC_INTERVAL",
		"job-ttl-seconds", "SLESS_JOB_TTL_SECONDS", "trigger-concurrency", "SLESS_TRIGGER_CONCURRENCY",
		"network-policies", "SLESS_NETWORK_POLICIES", "pod-security", "SLESS_POD_SECURITY"); err != nil {
		return err
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	o, err := c.options()
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	tr, err := startTracing(ctx, "sless-controller", log)
	if err != nil {
		return err
	}
	defer stopTracing(tr, log)
	o.TracerProvider = tr.Provider()
	o.Triggers.ConsumerEnv = consumerTracingEnv(os.Environ())
	return reconciler.Run(ctx, o)
}
