// Package reconciler runs sless's reconcilers on a cluster (`sless
// controller`): one controller-runtime manager with the Function,
// SlessService, Trigger, FunctionJob and IoTDevice reconcilers, the Ingress reconciler
// of sless's own networking class, and the sweep for source objects no
// Function needs. The reconcilers themselves live in the folders below.
package reconciler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"reflect"
	"time"

	"go.opentelemetry.io/otel/trace"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	networkingv1alpha1 "knative.dev/networking/pkg/apis/networking/v1alpha1"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"

	"github.com/sless-dev/sless/pkg/adapter/kube"
	"github.com/sless-dev/sless/pkg/adapter/resources"
	"github.com/sless-dev/sless/pkg/adapter/s3"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/devices"
	"github.com/sless-dev/sless/pkg/limits"
	"github.com/sless-dev/sless/pkg/reconciler/device"
	"github.com/sless-dev/sless/pkg/reconciler/function"
	"github.com/sless-dev/sless/pkg/reconciler/ingress"
	ingressresources "github.com/sless-dev/sless/pkg/reconciler/ingress/resources"
	"github.com/sless-dev/sless/pkg/reconciler/sandbox"
	"github.com/sless-dev/sless/pkg/reconciler/service"
)

// Options configure the controller; `sless controller` fills them from its
// flags (docs/install.md lists them).
type Options struct {
	MetricsAddr, ProbeAddr, PprofAddr string
	// LeaderElect runs one active controller among replicas, holding the
	// Lease sless-controller in LeaderNamespace.
	LeaderElect     bool
	LeaderNamespace string
	// Concurrency is how many Functions are reconciled at once.
	Concurrency int
	// QPS and Burst limit the client's requests to the apiserver, per kind.
	QPS   float64
	Burst int
	// PublicBaseURL and FunctionDomain make a Function's status.url.
	PublicBaseURL, FunctionDomain string
	// S3 is where source archives and build contexts are kept, as the
	// controller reaches it.
	S3 s3.Config
	// Resources configure the builds and the Knative Services.
	Resources resources.Config
	// SourceGCGrace and SourceGCInterval configure the source sweep; an
	// interval of 0 sweeps never.
	SourceGCGrace, SourceGCInterval time.Duration
	// APIService is sless api's Service: the private load balancer the
	// Ingresses of sless's networking class report, its cluster-local
	// door. APIPublicService is its public door's, the public one.
	APIService, APIPublicService types.NamespacedName
	// Triggers configure the Trigger and FunctionJob reconcilers.
	Triggers TriggerOptions
	// DeviceBroker closes IoT devices' connections when they are disabled,
	// deleted or given a new password; nil closes none.
	DeviceBroker devices.Broker
	// Limits are the site's resource maximums, which the admission policy
	// the controller keeps (limits.Policy) enforces; its defaults go in
	// Resources.DefaultResources.
	Limits limits.Site
	// TracerProvider, when set, traces builds (docs/observability.md).
	TracerProvider trace.TracerProvider
	// Sandbox configures the NetworkPolicies and Pod Security labels the
	// controller keeps in workloads' namespaces; its APIService is
	// APIService.
	Sandbox sandbox.Config
	// SiteConfig is the ConfigMap whose resource maximums the controller
	// follows while it runs.
	SiteConfig SiteConfig
}

// Run runs the controller until ctx is done.
func Run(ctx context.Context, o Options) error {
	ctrl.SetLogger(zap.New())
	store, err := s3.New(o.S3)
	if err != nil {
		return err
	}
	bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = store.EnsureBucket(bctx)
	cancel()
	if err != nil {
		return fmt.Errorf("S3 bucket %s at %s: %w", o.S3.Bucket, o.S3.Endpoint, err)
	}
	mgr, err := o.newManager()
	if err != nil {
		return err
	}
	direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return err
	}
	if err := ensurePolicy(ctx, direct, o.Limits); err != nil {
		return err
	}
	fnOpts := function.Options{
		Config:                  function.Config{PublicBaseURL: o.PublicBaseURL, FunctionDomain: o.FunctionDomain},
		Resources:               o.Resources,
		Store:                   store,
		MaxConcurrentReconciles: o.Concurrency,
		TracerProvider:          o.TracerProvider,
	}
	if err := function.SetupWithManager(mgr, fnOpts); err != nil {
		return err
	}
	if err := service.SetupWithManager(mgr, fnOpts); err != nil {
		return err
	}
	sb := o.Sandbox
	sb.APIService = o.APIService
	if err := sandbox.SetupWithManager(mgr, sb); err != nil {
		return err
	}
	if o.ownIngressClass() {
		if err := ingress.SetupWithManager(mgr, o.ingressConfig()); err != nil {
			return err
		}
	}
	if o.SourceGCInterval > 0 {
		if err := addSourceGC(mgr, store, o.SourceGCGrace, o.SourceGCInterval); err != nil {
			return err
		}
	}
	if err := device.SetupWithManager(mgr, o.DeviceBroker); err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if err := setupSiteWatcher(mgr, o.SiteConfig, log); err != nil {
		return err
	}
	if err := o.Triggers.SetupWithManager(ctx, mgr, o.PublicBaseURL, log); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// newManager makes the manager with the schemes, cache narrowings, probes
// and leader election the reconcilers need.
func (o Options) newManager() (ctrl.Manager, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, slessv1alpha1.AddToScheme, servingv1.AddToScheme, tektonv1.AddToScheme, networkingv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	caches := []map[client.Object]cache.ByObject{function.CacheByObject(), TriggerCaches(), sandbox.CacheByObject(), o.SiteConfig.cacheByObject()}
	if o.ownIngressClass() {
		caches = append(caches, o.ingressConfig().CacheByObject())
	}
	byObject, err := mergeCacheByObject(caches...)
	if err != nil {
		return nil, err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = float32(o.QPS), o.Burst
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:  o.ProbeAddr,
		PprofBindAddress:        o.PprofAddr,
		LeaderElection:          o.LeaderElect,
		LeaderElectionID:        "sless-controller",
		LeaderElectionNamespace: o.LeaderNamespace,
		// A new leader takes over at once when the old one stops cleanly.
		LeaderElectionReleaseOnCancel: true,
		Cache:                         cache.Options{ByObject: byObject},
	})
	if err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("informers", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return errors.New("informer caches not synced")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return mgr, nil
}

// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings,verbs=get;create;update

// ensurePolicy writes the admission policy of the site's maximums and its
// binding, before the manager starts (every replica writes the same, so
// leadership does not matter) and when the site's ConfigMap changes.
func ensurePolicy(ctx context.Context, c client.Client, site limits.Site) error {
	p, b := limits.Policy(site)
	err := kube.Ensure(ctx, c, p, &admissionregistrationv1.ValidatingAdmissionPolicy{},
		func(o *admissionregistrationv1.ValidatingAdmissionPolicy) *admissionregistrationv1.ValidatingAdmissionPolicySpec {
			return &o.Spec
		})
	if err == nil {
		err = kube.Ensure(ctx, c, b, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{},
			func(o *admissionregistrationv1.ValidatingAdmissionPolicyBinding) *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec {
				return &o.Spec
			})
	}
	if err != nil {
		return fmt.Errorf("the admission policy of resource maximums (%s): %w", limits.PolicyName, err)
	}
	return nil
}

// ownIngressClass says whether the Services sless makes are routed by
// sless api, so that this controller reconciles their Ingresses.
func (o Options) ownIngressClass() bool {
	return o.Resources.IngressClass == ingressresources.ClassName
}

// ingressConfig is what the reconciler of sless's networking class needs:
// sless api's Services, which Ingresses report as their load balancers,
// and the one whose replicas Knative's prober asks (the cluster-local
// door, which serves every rule).
func (o Options) ingressConfig() ingress.Config {
	public := o.APIPublicService
	if public.Name == "" {
		public = o.APIService
	}
	return ingress.Config{Class: ingressresources.ClassName,
		PublicLoadBalancer: ingressresources.ServiceHost(public), PrivateLoadBalancer: ingressresources.ServiceHost(o.APIService),
		Service: o.APIService, Port: "http"}
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
