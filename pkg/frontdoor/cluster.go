package frontdoor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	networkingv1alpha1 "knative.dev/networking/pkg/apis/networking/v1alpha1"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/adapter/knative"
	"github.com/sless-dev/sless/pkg/adapter/kube"
	"github.com/sless-dev/sless/pkg/adapter/postgres"
	"github.com/sless-dev/sless/pkg/adapter/s3"
	"github.com/sless-dev/sless/pkg/api"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/auth"
	"github.com/sless-dev/sless/pkg/auth/triggertoken"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/async"
	"github.com/sless-dev/sless/pkg/invoke/callback"
	invokekube "github.com/sless-dev/sless/pkg/invoke/kube"
	"github.com/sless-dev/sless/pkg/limits"
	"github.com/sless-dev/sless/pkg/queue/asyncq"
)

// Cluster says what stands behind the front door on a Kubernetes cluster
// (`sless api`): the apiserver (from the kubeconfig or the pod's account),
// an S3 bucket and PostgreSQL.
type Cluster struct {
	// S3 holds source archives and build contexts; the bucket is made
	// when missing.
	S3   s3.Config
	Auth auth.Config
	// API holds the REST API's limits and waits; the cluster fills in what
	// it reads and writes (objects, Secrets, blobs, tenants, logs, Ready).
	API api.Options
	// TenantPrefixes are the namespaces a namespace claim may name besides
	// those sless made; ProvisionNamespaces makes a tenant's namespace on
	// its first write.
	TenantPrefixes      []string
	ProvisionNamespaces bool
	// Limits are the site's resource maximums, which the API holds writes
	// to with each namespace's own, as the controller's admission policy.
	Limits limits.Site
	// IngressClass routes the hosts of Knative Ingresses of this class.
	IngressClass    string
	FunctionDomain  string
	BodyIdleTimeout time.Duration
	Records         Records
	IdleConnTimeout time.Duration
	Console         bool
	// Async, with an AMQPURL, keeps calls made with Prefer: respond-async
	// in PostgreSQL (Records.DatabaseURL) and RabbitMQ, shared by every
	// replica; without, such calls run at once.
	Async ClusterAsync
	// TracerProvider, when set, traces calls (see Options.TracerProvider).
	TracerProvider trace.TracerProvider
	Logger         *slog.Logger
}

// ClusterAsync says where sless api's replicas keep asynchronous calls.
type ClusterAsync struct {
	// AMQPURL is the RabbitMQ broker that carries them; Queue its main
	// queue (asyncq.DefaultQueue when empty).
	AMQPURL, Queue string
	// CallbackPolicy says which hosts results may be posted to (nil:
	// public addresses only).
	CallbackPolicy *callback.Policy
}

// NewCluster makes the front door over the cluster. Close it after Serve.
func NewCluster(ctx context.Context, c Cluster) (*Door, error) {
	verifier, err := auth.New(ctx, c.Auth)
	if err != nil {
		return nil, err
	}
	blobs, err := openBlobs(ctx, c.S3)
	if err != nil {
		return nil, err
	}
	// Reads are uncached. A cache would save the apiserver little here and
	// would break read-your-writes (a GET right after a POST must find the
	// object; Terraform does exactly that).
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, err
	}
	scheme, err := clusterScheme()
	if err != nil {
		return nil, err
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	// Pod logs are a stream, which the controller-runtime client does not
	// read: client-go's core client does.
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	resolver, err := invokekube.Start(ctx, cfg, scheme, invokekube.Options{WatchRevisions: true, IngressClass: c.IngressClass, Logger: c.Logger})
	if err != nil {
		return nil, err
	}
	tenants := &kube.Tenants{Client: cl, Prefixes: c.TenantPrefixes}
	a := c.API
	a.Objects, a.Live, a.Secrets, a.TenantNamespaces, a.Auth = cl, cl, cl, tenants, verifier
	a.Blobs, a.Bucket, a.Logs = blobs, c.S3.Bucket, &kube.Logs{Pods: core}
	a.Revisions = &knative.Server{Client: cl, APIReader: cl}
	a.Maximums = &kube.Maximums{Reader: cl, Site: c.Limits}
	if c.ProvisionNamespaces {
		a.Tenants = tenants
	}
	a.Ready = func(ctx context.Context) error {
		if !resolver.Synced() {
			return errors.New("function cache not synced")
		}
		_, err := blobs.Exists(ctx, ".readyz")
		return err
	}
	calls, closers, err := clusterAsync(ctx, c, blobs, cl)
	if err != nil {
		return nil, err
	}
	d, err := New(ctx, Options{
		API: a, Auth: verifier, Async: calls,
		Proxy:   invoke.Options{Resolver: resolver, Services: resolver.Services(), Domain: c.FunctionDomain, BodyIdleTimeout: c.BodyIdleTimeout, Routes: resolver.Routes()},
		Records: c.Records, IdleConnTimeout: c.IdleConnTimeout, Console: c.Console, Logger: c.Logger,
		TracerProvider: c.TracerProvider,
		// Cron and queue trigger credentials (docs/triggers.md).
		Calls: func(proxy *invoke.Proxy) http.Handler {
			return TriggerCalls(proxy, c.Auth.HS256Secret, c.Auth.Issuer, c.Auth.Audiences, cl)
		},
	})
	if err != nil {
		closers.Close()
		return nil, err
	}
	d.closers = closers
	return d, nil
}

// clusterAsync opens what the replicas' asynchronous calls use: their
// table in PostgreSQL (response bodies past its inline size in the bucket),
// the RabbitMQ queue and the namespaces' signing keys in Secrets. Nil when
// no broker is configured.
func clusterAsync(ctx context.Context, c Cluster, blobs *s3.Client, cl client.Client) (*Async, Closers, error) {
	var closers Closers
	if c.Async.AMQPURL == "" {
		return nil, closers, nil
	}
	if c.Records.DatabaseURL == "" {
		return nil, closers, errors.New("asynchronous calls (SLESS_ASYNC_AMQP_URL) need PostgreSQL: set -database-url")
	}
	q, err := asyncq.New(asyncq.Config{URL: c.Async.AMQPURL, Queue: c.Async.Queue, Logger: c.Logger})
	if err != nil {
		return nil, closers, err
	}
	closers.Add(q.Close)
	// Its own pool: records' writes never wait behind the calls' claims.
	pg, err := postgres.Start(ctx, c.Records.DatabaseURL, 0, c.Logger)
	if err != nil {
		closers.Close()
		return nil, nil, err
	}
	closers.Add(pg.Close)
	return &Async{Store: pg.AsyncCalls(blobs), Queue: q, Keys: &kube.CallbackKeys{Client: cl}, CallbackPolicy: c.Async.CallbackPolicy,
		Policy: func(ctx context.Context, ns, name string) (async.Policy, error) {
			fn := &slessv1alpha1.Function{}
			if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, fn); err != nil {
				return async.Policy{}, err
			}
			return async.PolicyOf(fn), nil
		}}, closers, nil
}

// TriggerCalls puts TriggerCallHandler in front of the invoke proxy, so the
// calls of cron runs and queue consumers (bearer: the trigger's credential,
// X-Sless-Trigger: its type) are accepted and recorded with their trigger.
// Without an HS256 secret no trigger credential can exist, and the proxy
// serves alone. The controller signs with the first of audiences.
func TriggerCalls(proxy TriggerInvoker, secret []byte, issuer string, audiences []string, triggers client.Reader) http.Handler {
	if len(secret) == 0 {
		return proxy
	}
	aud := ""
	if len(audiences) > 0 {
		aud = audiences[0]
	}
	return &TriggerCallHandler{Proxy: proxy, Tokens: &triggertoken.HS256{Secret: secret, Issuer: issuer, Audience: aud}, Triggers: triggers}
}

// openBlobs connects to the S3 bucket, making it when missing.
func openBlobs(ctx context.Context, cfg s3.Config) (*s3.Client, error) {
	if cfg.Endpoint == "" {
		return nil, errors.New("-s3-endpoint (or SLESS_S3_ENDPOINT) is required")
	}
	blobs, err := s3.New(cfg)
	if err != nil {
		return nil, err
	}
	bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := blobs.EnsureBucket(bctx); err != nil {
		return nil, fmt.Errorf("bucket %s: %w", cfg.Bucket, err)
	}
	return blobs, nil
}

// clusterScheme knows what sless api reads and writes: Namespaces, sless's
// resources, Knative Revisions (the invoke proxy's cold-start signal) and
// Ingresses.
func clusterScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, slessv1alpha1.AddToScheme, servingv1.AddToScheme, networkingv1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}
