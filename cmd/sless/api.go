package main

import (
	"context"
	"errors"
	"fmt"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	networkingv1alpha1 "knative.dev/networking/pkg/apis/networking/v1alpha1"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/adapter/kube"
	"github.com/sless-dev/sless/pkg/adapter/s3"
	"github.com/sless-dev/sless/pkg/api"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/auth"
	"github.com/sless-dev/sless/pkg/console"
	"github.com/sless-dev/sless/pkg/framing"
	"github.com/sless-dev/sless/pkg/invoke"
	invokekube "github.com/sless-dev/sless/pkg/invoke/kube"
	ingressresources "github.com/sless-dev/sless/pkg/reconciler/ingress/resources"
	"github.com/sless-dev/sless/pkg/source"
)

func init() { register("api", "the REST API and the invoke proxy, on a cluster", runAPI) }

// runAPI serves the REST API over the cluster's apiserver and S3, and the
// invoke proxy at /fn/. Secrets come from files or the environment, never
// from flags, so they are not visible in the process list.
func runAPI(ctx context.Context, args []string) error {
	fs := newFlags("api", "sless api [flags]\n\nServe the REST API and the invoke proxy against a Kubernetes cluster.")
	listen := fs.String("listen", ":8080", "address to serve on")
	s3Endpoint := fs.String("s3-endpoint", os.Getenv("SLESS_S3_ENDPOINT"), "S3 endpoint URL (http:// or https://)")
	s3Bucket := fs.String("s3-bucket", envOr("SLESS_S3_BUCKET", "sless"), "bucket for source archives and build contexts")
	s3Region := fs.String("s3-region", envOr("SLESS_S3_REGION", "us-east-1"), "S3 region")
	s3PathStyle := fs.Bool("s3-path-style", true, "address buckets by path (MinIO, Ceph, versitygw) (SLESS_S3_PATH_STYLE)")
	secretFile := fs.String("jwt-secret-file", "", "file holding the HS256 secret (at least 32 bytes)")
	jwksFile := fs.String("jwks-file", "", "JWK Set file with RS256/ES256 public keys (re-read when it changes)")
	jwksURL := fs.String("jwks-url", "", "JWK Set URL with RS256/ES256 public keys (refreshed)")
	issuer := fs.String("jwt-issuer", "", "required iss claim")
	audience := fs.String("jwt-audience", "", "accepted aud values, comma-separated")
	nsClaim := fs.String("namespace-claim", auth.DefaultNamespaceClaim, "claim naming the tenant namespace")
	adminClaim := fs.String("admin-claim", auth.DefaultAdminClaim, "boolean claim that makes the caller an admin")
	nsPrefix := fs.String("namespace-prefix", auth.DefaultNamespacePrefix, "prefix of namespaces derived from subjects")
	tenantPrefixFlag := fs.String("tenant-namespace-prefixes", "", "comma-separated prefixes of the namespaces a namespace claim may name, besides -namespace-prefix and those sless made (SLESS_TENANT_NAMESPACE_PREFIXES)")
	devTokenFile := fs.String("dev-token-file", "", "file holding a static admin token for local use (off unless set)")
	maxArchive := fs.Int64("max-archive-bytes", source.DefaultLimits.MaxCompressed, "largest accepted zip")
	maxUncompressed := fs.Int64("max-uncompressed-bytes", source.DefaultLimits.MaxUncompressed, "largest total of a zip's inflated files")
	maxEntries := fs.Int("max-archive-entries", source.DefaultLimits.MaxEntries, "most entries in a zip")
	deleteWait := fs.Duration("delete-wait", api.DefaultDeleteWait, "how long a create waits for a same-named object to finish deleting")
	maxUploads := fs.Int("max-uploads", api.DefaultMaxUploads, "source uploads in progress at once (each holds its zip and unpacked files in memory)")
	uploadQueueWait := fs.Duration("upload-queue-wait", api.DefaultUploadQueueWait, "how long an upload waits for a free slot before it is refused with 503")
	maxTenantUploads := fs.Int("max-uploads-per-tenant", 0, "of -max-uploads, how many one namespace's uploads may hold at once (past it: 429); 0 is half, rounded up")
	uploadMinRate := fs.Int64("upload-min-rate", api.DefaultUploadMinRate, "bytes/s an upload holding a slot must send, averaged over -upload-rate-window, or be cut off with 408; 0 turns it off")
	uploadRateWindow := fs.Duration("upload-rate-window", api.DefaultUploadRateWindow, "the window -upload-min-rate is averaged over, and how long after taking its slot an upload is first judged")
	bodyIdle := fs.Duration("body-idle-timeout", api.DefaultBodyIdleTimeout, "how long a request body, of an upload or a function call, may send nothing before the request is answered 408 (an upload gives back its slot)")
	fnDomain := fs.String("fn-domain", os.Getenv("SLESS_FN_DOMAIN"), "serve each function at its own host, {name}.{namespace}.<domain> (a wildcard DNS name pointing here); /fn/ then serves API clients only (SLESS_FN_DOMAIN)")
	connIdle := fs.Duration("idle-conn-timeout", 2*time.Minute, "how long a keep-alive connection may wait for its next request before it is closed")
	databaseURL := fs.String("database-url", os.Getenv("SLESS_DATABASE_URL"), "PostgreSQL URL for invocation records (none: not recorded)")
	provision := fs.Bool("provision-namespaces", true, "create a tenant's namespace on its first write")
	maxAge := fs.Duration("records-max-age", 30*24*time.Hour, "delete invocation records older than this (0 keeps them all)")
	spoolPath := fs.String("spool-path", os.Getenv("SLESS_SPOOL_PATH"), "file that keeps invocation records while PostgreSQL is down or slow, e.g. on an emptyDir volume (none: they wait in memory, up to 100000, then are dropped)")
	spoolMax := fs.String("spool-max-size", "1Gi", "most bytes of records the spool holds; past it new records are dropped")
	ingressClass := fs.String("ingress-class", os.Getenv("SLESS_INGRESS_CLASS"), "route the hosts of Knative Ingresses of this networking class (the controller's --ingress-class when it is sless's, "+ingressresources.ClassName+"); empty: none")
	withConsole := fs.Bool("console", true, "serve the web console at /console/")
	if err := bindEnv(fs, "s3-path-style", "SLESS_S3_PATH_STYLE", "tenant-namespace-prefixes", "SLESS_TENANT_NAMESPACE_PREFIXES"); err != nil {
		return err
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *maxAge < 0 {
		return fmt.Errorf("-records-max-age must not be negative")
	}
	spoolBytes, err := byteSize("-spool-max-size", *spoolMax, 1<<20, false)
	if err != nil {
		return err
	}
	if *maxUploads < 1 {
		return fmt.Errorf("-max-uploads must be at least 1")
	}
	if *uploadQueueWait <= 0 {
		return fmt.Errorf("-upload-queue-wait must be positive")
	}
	if *maxTenantUploads < 0 || *maxTenantUploads > *maxUploads {
		return fmt.Errorf("-max-uploads-per-tenant must be between 0 (half of -max-uploads) and -max-uploads")
	}
	if *uploadMinRate < 0 {
		return fmt.Errorf("-upload-min-rate must not be negative (0 turns it off)")
	}
	if *uploadRateWindow <= 0 {
		return fmt.Errorf("-upload-rate-window must be positive")
	}
	if *uploadMinRate == 0 {
		*uploadMinRate = -1 // api.Options: a negative rate judges none, 0 is the default
	}
	if *connIdle <= 0 {
		return fmt.Errorf("-idle-conn-timeout must be positive")
	}
	if *bodyIdle <= 0 {
		return fmt.Errorf("-body-idle-timeout must be positive")
	}
	if *fnDomain != "" {
		if err := invoke.CheckDomain(*fnDomain); err != nil {
			return fmt.Errorf("-fn-domain: %w", err)
		}
	}
	tenantPrefixes, err := parseTenantPrefixes(*nsPrefix, *tenantPrefixFlag)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))

	// Auth.
	acfg := auth.Config{Issuer: *issuer, JWKSFile: *jwksFile, JWKSURL: *jwksURL,
		NamespaceClaim: *nsClaim, AdminClaim: *adminClaim, NamespacePrefix: *nsPrefix, Leeway: 30 * time.Second}
	auds, err := parseAudiences(*audience)
	if err != nil {
		return err
	}
	acfg.Audiences = auds
	if (*jwksFile != "" || *jwksURL != "") && len(auds) == 0 {
		// Unlike an HS256 secret of sless's own, a key set is an identity
		// provider's, which signs tokens for every service it serves: without
		// an audience, each of them would be a sless token too.
		return errors.New("-jwks-file and -jwks-url need -jwt-audience: without it, a token the identity provider issued for any other service would be accepted")
	}
	if *secretFile != "" {
		b, err := os.ReadFile(*secretFile)
		if err != nil {
			return fmt.Errorf("jwt secret: %w", err)
		}
		acfg.HS256Secret = []byte(strings.TrimSpace(string(b)))
	}
	if *devTokenFile != "" {
		b, err := os.ReadFile(*devTokenFile)
		if err != nil {
			return fmt.Errorf("dev token: %w", err)
		}
		acfg.DevToken = strings.TrimSpace(string(b))
		acfg.DevIdentity = auth.Identity{Subject: "dev", Namespace: "default", Admin: true}
		acfg.DevTokenHint = "in " + *devTokenFile
		log.Warn("the dev token is enabled: it acts as an admin in every namespace")
	}
	verifier, err := auth.New(ctx, acfg)
	if err != nil {
		return err
	}

	// Storage.
	if *s3Endpoint == "" {
		return errors.New("-s3-endpoint (or SLESS_S3_ENDPOINT) is required")
	}
	blobs, err := s3.New(s3.Config{Endpoint: *s3Endpoint, Region: *s3Region, Bucket: *s3Bucket,
		AccessKey: os.Getenv("SLESS_S3_ACCESS_KEY"), SecretKey: os.Getenv("SLESS_S3_SECRET_KEY"), PathStyle: *s3PathStyle})
	if err != nil {
		return err
	}
	bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = blobs.EnsureBucket(bctx)
	cancel()
	if err != nil {
		return fmt.Errorf("bucket %s: %w", *s3Bucket, err)
	}

	// Cluster: reads are uncached. A cache would save the apiserver little
	// here and would break read-your-writes (a GET right after a POST must
	// find the object; Terraform does exactly that).
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	scheme, err := apiScheme()
	if err != nil {
		return err
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	tenants := &kube.Tenants{Client: cl, Prefixes: tenantPrefixes}
	// Pod logs are a stream, which the controller-runtime client does not
	// read: client-go's core client does.
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	// Invoke proxy and invocation records.
	resolver, err := invokekube.Start(ctx, cfg, scheme, invokekube.Options{WatchRevisions: true, IngressClass: *ingressClass, Logger: log})
	if err != nil {
		return err
	}
	imetrics, err := invoke.NewMetrics(reg)
	if err != nil {
		return err
	}
	var recorder *invoke.Recorder
	var list, svcList gin.HandlerFunc
	var history invoke.History
	if *databaseURL != "" {
		pg, err := openRecords(ctx, *databaseURL, *maxAge, log)
		if err != nil {
			return err
		}
		defer pg.Close()
		sp, spooler, err := openSpool(*spoolPath, spoolBytes, log)
		if err != nil {
			return err
		}
		if sp != nil {
			defer sp.Close() // after the recorder: deferred calls run last first
		}
		recorder = invoke.NewRecorder(pg, invoke.RecorderOptions{Logger: log, Metrics: imetrics, Spool: spooler})
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = recorder.Close(cctx)
		}()
		history = pg
		h := invoke.ListHandler{History: pg, Logger: log, Functions: resolver}
		list = func(c *gin.Context) { h.List(c.Writer, c.Request, c.Param("ns"), c.Param("name")) }
		sh := invoke.ListHandler{History: pg, Logger: log, Functions: resolver.Services()}
		svcList = func(c *gin.Context) { sh.ListService(c.Writer, c.Request, c.Param("ns"), c.Param("name")) }
	}
	proxy, err := invoke.NewProxy(invoke.Options{
		Resolver:        resolver,
		Services:        resolver.Services(),
		Authenticator:   proxyAuthenticator(verifier, tenants, log),
		Recorder:        recorder,
		Metrics:         imetrics,
		Logger:          log,
		Domain:          *fnDomain,
		BodyIdleTimeout: *bodyIdle,
		Routes:          resolver.Routes(),
	})
	if err != nil {
		return err
	}

	opts := api.Options{
		Objects: cl, Live: cl, Secrets: cl, TenantNamespaces: tenants, Auth: verifier, Blobs: blobs, Bucket: *s3Bucket,
		Limits:     source.Limits{MaxCompressed: *maxArchive, MaxUncompressed: *maxUncompressed, MaxEntries: *maxEntries},
		DeleteWait: *deleteWait,
		MaxUploads: *maxUploads, UploadQueueWait: *uploadQueueWait, BodyIdleTimeout: *bodyIdle,
		MaxUploadsPerTenant: *maxTenantUploads, UploadMinRate: *uploadMinRate, UploadRateWindow: *uploadRateWindow,
		Invoke: proxy, Invocations: list, ServiceInvocations: svcList,
		Logs:       &kube.Logs{Pods: core},
		Registerer: reg, Gatherer: reg, Logger: log,
		Ready: func(ctx context.Context) error {
			if !resolver.Synced() {
				return errors.New("function cache not synced")
			}
			_, err := blobs.Exists(ctx, ".readyz")
			return err
		},
	}
	opts.Invoke = triggerCalls(proxy, acfg.HS256Secret, *issuer, strings.Join(auds, ","), cl) // cron and queue trigger credentials (cmd/sless/invoke.go, docs/triggers.md)
	if *provision {
		opts.Tenants = tenants
	}
	if *withConsole {
		// The console reads what the API reads and calls functions through
		// the same handler, with the caller's own token.
		con, err := console.New(console.Options{
			Objects: cl, Auth: verifier, TenantNamespaces: tenants, Blobs: blobs, Limits: opts.Limits,
			History: history, Invoke: opts.Invoke, Logs: opts.Logs, Logger: log,
		})
		if err != nil {
			return err
		}
		opts.Console = con
	}
	srv, err := api.New(opts)
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	// Without IdleTimeout (and no ReadTimeout, which would cut long calls
	// and uploads), net/http keeps a keep-alive connection that sends no
	// next request for ever: anyone could hold all the file descriptors.
	// Function hosts are served before the API's router sees them.
	hs := &http.Server{Handler: proxy.Ingresses(proxy.Hosts(srv.Handler())), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: *connIdle}
	errc := make(chan error, 1)
	// RFC 9112 §6.1: Content-Length with Transfer-Encoding is refused and the
	// connection closed, or a request could be smuggled behind it.
	go func() { errc <- framing.Serve(hs, ln) }()
	log.Info("sless api serving", "address", ln.Addr().String(), "bucket", *s3Bucket, "functionDomain", *fnDomain)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return hs.Shutdown(sctx)
}

// parseAudiences reads -jwt-audience: comma-separated, each trimmed, since
// "sless, other" means two audiences, not "sless" and " other".
func parseAudiences(flag string) ([]string, error) {
	var out []string
	for _, a := range strings.Split(flag, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	if strings.TrimSpace(flag) != "" && len(out) == 0 {
		return nil, fmt.Errorf("-jwt-audience %q names no audience", flag)
	}
	return out, nil
}

// parseTenantPrefixes reads -tenant-namespace-prefixes and adds the prefix
// of namespaces derived from subjects (with its '-', as auth.NamespaceFor
// writes it). No prefix may take in default or kube-*.
func parseTenantPrefixes(derived, flag string) ([]string, error) {
	if !strings.HasSuffix(derived, "-") {
		derived += "-"
	}
	out := []string{derived}
	for _, p := range strings.Split(flag, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	if strings.TrimSpace(flag) != "" && len(out) == 1 {
		return nil, fmt.Errorf("-tenant-namespace-prefixes %q names no prefix", flag)
	}
	for _, p := range out {
		if msgs := validation.IsDNS1123Label(strings.TrimSuffix(p, "-")); len(msgs) > 0 {
			return nil, fmt.Errorf("tenant namespace prefix %q does not start a namespace name: %s", p, msgs[0])
		}
		if strings.HasPrefix("default", p) || strings.HasPrefix("kube-", p) || strings.HasPrefix(p, "kube-") {
			return nil, fmt.Errorf("tenant namespace prefix %q would make default or kube-* a tenant's namespace", p)
		}
	}
	return out, nil
}

// apiScheme knows what sless api reads and writes: Namespaces, sless's
// resources, and Knative Revisions (the invoke proxy's cold-start signal).
func apiScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, slessv1alpha1.AddToScheme, servingv1.AddToScheme, networkingv1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}
