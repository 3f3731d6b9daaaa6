package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sless-dev/sless/pkg/adapter/s3"
	"github.com/sless-dev/sless/pkg/api"
	"github.com/sless-dev/sless/pkg/auth"
	"github.com/sless-dev/sless/pkg/devices/rabbitmq"
	"github.com/sless-dev/sless/pkg/frontdoor"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/callback"
	"github.com/sless-dev/sless/pkg/limits"
	"github.com/sless-dev/sless/pkg/queue/asyncq"
	ingressresources "github.com/sless-dev/sless/pkg/reconciler/ingress/resources"
	"github.com/sless-dev/sless/pkg/source"
)

func init() { register("api", "the REST API and the invoke proxy, on a cluster", runAPI) }

// apiConfig is sless api's flags, read and checked.
type apiConfig struct {
	listen           string
	publicListen     string
	brokerAuthListen string
	brokerAuthToken  string
	s3Endpoint       string
	s3Bucket         string
	s3Region         string
	s3PathStyle      bool
	secretFile       string
	jwksFile         string
	jwksURL          string
	issuer           string
	audience         string
	nsClaim          string
	adminClaim       string
	nsPrefix         string
	tenantPrefixFlag string
	devTokenFile     string
	maxArchive       int64
	maxUncompressed  int64
	maxEntries       int
	deleteWait       time.Duration
	maxUploads       int
	uploadQueueWait  time.Duration
	maxTenantUploads int
	uploadMinRate    int64
	uploadRateWindow time.Duration
	bodyIdle         time.Duration
	fnDomain         string
	connIdle         time.Duration
	databaseURL      string
	provision        bool
	maxAge           time.Duration
	spoolPath        string
	spoolMax         string
	ingressClass     string
	withConsole      bool
	asyncQueue       string
	callbackAllow    string
	// asyncAMQPURL comes from SLESS_ASYNC_AMQP_URL only: it carries a password.
	asyncAMQPURL   string
	callbackPolicy *callback.Policy

	resourceFlags
	spoolBytes     int64
	limits         limits.Site
	tenantPrefixes []string
	audiences      []string
}

// runAPI serves the REST API over the cluster's apiserver and S3, and the
// invoke proxy at /fn/, behind the front door. Secrets come from files or
// the environment, never from flags, so they are not visible in the
// process list.
func runAPI(ctx context.Context, args []string) error {
	c, err := parseAPI(args)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	// The caches' own lines, in the same JSON; unset, controller-runtime
	// prints a stack trace to say so.
	ctrllog.SetLogger(logr.FromSlogHandler(log.Handler()))
	acfg, err := c.authConfig(log)
	if err != nil {
		return err
	}
	tr, err := startTracing(ctx, "sless-api", log)
	if err != nil {
		return err
	}
	defer stopTracing(tr, log)
	door, err := frontdoor.NewCluster(ctx, frontdoor.Cluster{
		S3: s3.Config{Endpoint: c.s3Endpoint, Region: c.s3Region, Bucket: c.s3Bucket,
			AccessKey: os.Getenv("SLESS_S3_ACCESS_KEY"), SecretKey: os.Getenv("SLESS_S3_SECRET_KEY"), PathStyle: c.s3PathStyle},
		Auth: acfg,
		API: api.Options{
			Limits:     source.Limits{MaxCompressed: c.maxArchive, MaxUncompressed: c.maxUncompressed, MaxEntries: c.maxEntries},
			DeleteWait: c.deleteWait,
			MaxUploads: c.maxUploads, UploadQueueWait: c.uploadQueueWait, BodyIdleTimeout: c.bodyIdle,
			MaxUploadsPerTenant: c.maxTenantUploads, UploadMinRate: c.uploadMinRate, UploadRateWindow: c.uploadRateWindow,
		},
		TenantPrefixes: c.tenantPrefixes, ProvisionNamespaces: c.provision, IngressClass: c.ingressClass, Limits: c.limits,
		FunctionDomain: c.fnDomain, BodyIdleTimeout: c.bodyIdle,
		Records:         frontdoor.Records{DatabaseURL: c.databaseURL, MaxAge: c.maxAge, SpoolPath: c.spoolPath, SpoolMaxBytes: c.spoolBytes},
		IdleConnTimeout: c.connIdle, Console: c.withConsole, Logger: log,
		Async:          frontdoor.ClusterAsync{AMQPURL: c.asyncAMQPURL, Queue: c.asyncQueue, CallbackPolicy: c.callbackPolicy},
		TracerProvider: tr.Provider(),
	})
	if err != nil {
		return err
	}
	defer door.Close()
	ln, err := net.Listen("tcp", c.listen)
	if err != nil {
		return err
	}
	// The public door is optional; both are opened before either serves.
	var pub net.Listener
	if c.publicListen != "" {
		if pub, err = net.Listen("tcp", c.publicListen); err != nil {
			ln.Close()
			return err
		}
	}
	attrs := []any{"address", ln.Addr().String(), "bucket", c.s3Bucket, "functionDomain", c.fnDomain}
	if pub != nil {
		attrs = append(attrs, "publicAddress", pub.Addr().String())
	}
	if c.brokerAuthListen != "" {
		stop, err := serveDeviceAuth(ctx, door, c.brokerAuthListen, c.brokerAuthToken, log)
		if err != nil {
			ln.Close()
			if pub != nil {
				pub.Close()
			}
			return err
		}
		defer stop()
		attrs = append(attrs, "brokerAuthAddress", c.brokerAuthListen)
	}
	log.Info("sless api serving", attrs...)
	return door.ServeDoors(ctx, ln, pub)
}

// serveDeviceAuth serves the broker's device auth endpoints on addr until
// stop is called.
func serveDeviceAuth(ctx context.Context, door *frontdoor.Door, addr, token string, log *slog.Logger) (stop func(), err error) {
	h, err := door.DeviceAuth(rabbitmq.AuthConfig{Token: token, Log: log})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-broker-auth-listen: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	go func() {
		if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
			log.Error("broker auth endpoints stopped", "err", err)
		}
	}()
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}, nil
}

// parseAPI reads sless api's flags and checks them.
func parseAPI(args []string) (*apiConfig, error) {
	c := &apiConfig{}
	fs := newFlags("api", "sless api [flags]\n\nServe the REST API and the invoke proxy against a Kubernetes cluster.")
	fs.StringVar(&c.listen, "listen", ":8080", "address to serve on: the cluster-local door, which serves every Knative Ingress rule of -ingress-class")
	fs.StringVar(&c.brokerAuthListen, "broker-auth-listen", os.Getenv("SLESS_BROKER_AUTH_LISTEN"), "address of the endpoints RabbitMQ's HTTP auth backend asks about IoT devices ("+frontdoor.DeviceAuthPrefix+"/user, /vhost, /resource, /topic; docs/devices.md), with the token of SLESS_BROKER_AUTH_TOKEN (from the environment only) as basic-auth password; keep it reachable by the broker alone (empty: off)")
	fs.StringVar(&c.publicListen, "public-listen", "", "address of the public door, for callers from outside the cluster: the same API and proxy, but of Knative Ingresses only the rules of visibility ExternalIP (empty: no public door; -listen serves everyone)")
	fs.StringVar(&c.s3Endpoint, "s3-endpoint", os.Getenv("SLESS_S3_ENDPOINT"), "S3 endpoint URL (http:// or https://)")
	fs.StringVar(&c.s3Bucket, "s3-bucket", envOr("SLESS_S3_BUCKET", "sless"), "bucket for source archives and build contexts")
	fs.StringVar(&c.s3Region, "s3-region", envOr("SLESS_S3_REGION", "us-east-1"), "S3 region")
	fs.BoolVar(&c.s3PathStyle, "s3-path-style", true, "address buckets by path (MinIO, Ceph, versitygw) (SLESS_S3_PATH_STYLE)")
	fs.StringVar(&c.secretFile, "jwt-secret-file", "", "file holding the HS256 secret (at least 32 bytes)")
	fs.StringVar(&c.jwksFile, "jwks-file", "", "JWK Set file with RS256/ES256 public keys (re-read when it changes)")
	fs.StringVar(&c.jwksURL, "jwks-url", "", "JWK Set URL with RS256/ES256 public keys (refreshed)")
	fs.StringVar(&c.issuer, "jwt-issuer", "", "required iss claim")
	fs.StringVar(&c.audience, "jwt-audience", "", "accepted aud values, comma-separated")
	fs.StringVar(&c.nsClaim, "namespace-claim", auth.DefaultNamespaceClaim, "claim naming the tenant namespace")
	fs.StringVar(&c.adminClaim, "admin-claim", auth.DefaultAdminClaim, "boolean claim that makes the caller an admin")
	fs.StringVar(&c.nsPrefix, "namespace-prefix", auth.DefaultNamespacePrefix, "prefix of namespaces derived from subjects")
	fs.StringVar(&c.tenantPrefixFlag, "tenant-namespace-prefixes", "", "comma-separated prefixes of the namespaces a namespace claim may name, besides -namespace-prefix and those sless made (SLESS_TENANT_NAMESPACE_PREFIXES)")
	fs.StringVar(&c.devTokenFile, "dev-token-file", "", "file holding a static admin token for local use (off unless set)")
	fs.Int64Var(&c.maxArchive, "max-archive-bytes", source.DefaultLimits.MaxCompressed, "largest accepted zip")
	fs.Int64Var(&c.maxUncompressed, "max-uncompressed-bytes", source.DefaultLimits.MaxUncompressed, "largest total of a zip's inflated files")
	fs.IntVar(&c.maxEntries, "max-archive-entries", source.DefaultLimits.MaxEntries, "most entries in a zip")
	fs.DurationVar(&c.deleteWait, "delete-wait", api.DefaultDeleteWait, "how long a create waits for a same-named object to finish deleting")
	fs.IntVar(&c.maxUploads, "max-uploads", api.DefaultMaxUploads, "source uploads in progress at once (each holds its zip and unpacked files in memory)")
	fs.DurationVar(&c.uploadQueueWait, "upload-queue-wait", api.DefaultUploadQueueWait, "how long an upload waits for a free slot before it is refused with 503")
	fs.IntVar(&c.maxTenantUploads, "max-uploads-per-tenant", 0, "of -max-uploads, how many one namespace's uploads may hold at once (past it: 429); 0 is half, rounded up")
	fs.Int64Var(&c.uploadMinRate, "upload-min-rate", api.DefaultUploadMinRate, "bytes/s an upload holding a slot must send, averaged over -upload-rate-window, or be cut off with 408; 0 turns it off")
	fs.DurationVar(&c.uploadRateWindow, "upload-rate-window", api.DefaultUploadRateWindow, "the window -upload-min-rate is averaged over, and how long after taking its slot an upload is first judged")
	fs.DurationVar(&c.bodyIdle, "body-idle-timeout", api.DefaultBodyIdleTimeout, "how long a request body, of an upload or a function call, may send nothing before the request is answered 408 (an upload gives back its slot)")
	fs.StringVar(&c.fnDomain, "fn-domain", os.Getenv("SLESS_FN_DOMAIN"), "serve each function at its own host, {name}.{namespace}.<domain> (a wildcard DNS name pointing here); /fn/ then serves API clients only (SLESS_FN_DOMAIN)")
	fs.DurationVar(&c.connIdle, "idle-conn-timeout", 2*time.Minute, "how long a keep-alive connection may wait for its next request before it is closed")
	fs.StringVar(&c.databaseURL, "database-url", os.Getenv("SLESS_DATABASE_URL"), "PostgreSQL URL for invocation records (none: not recorded)")
	fs.BoolVar(&c.provision, "provision-namespaces", true, "create a tenant's namespace on its first write")
	fs.DurationVar(&c.maxAge, "records-max-age", 30*24*time.Hour, "delete invocation records older than this (0 keeps them all)")
	fs.StringVar(&c.spoolPath, "spool-path", os.Getenv("SLESS_SPOOL_PATH"), "file that keeps invocation records while PostgreSQL is down or slow, e.g. on an emptyDir volume (none: they wait in memory, up to 100000, then are dropped)")
	fs.StringVar(&c.spoolMax, "spool-max-size", "1Gi", "most bytes of records the spool holds; past it new records are dropped")
	fs.StringVar(&c.ingressClass, "ingress-class", os.Getenv("SLESS_INGRESS_CLASS"), "route the hosts of Knative Ingresses of this networking class (the controller's --ingress-class when it is sless's, "+ingressresources.ClassName+"); empty: none")
	fs.BoolVar(&c.withConsole, "console", true, "serve the web console at /console/")
	fs.StringVar(&c.asyncQueue, "async-queue", envOr("SLESS_ASYNC_QUEUE", asyncq.DefaultQueue), "RabbitMQ queue that carries asynchronous calls (Prefer: respond-async) between the replicas, with SLESS_ASYNC_AMQP_URL (the broker's URL, from the environment only) and -database-url")
	fs.StringVar(&c.callbackAllow, "callback-allow", os.Getenv("SLESS_CALLBACK_ALLOW"), "comma-separated CIDRs, addresses and host names the results of asynchronous calls may be posted to although they are loopback, private or cluster-internal (e.g. 10.0.0.0/8,hooks.internal)")
	c.registerMax(fs)
	if err := bindEnv(fs, "s3-path-style", "SLESS_S3_PATH_STYLE", "tenant-namespace-prefixes", "SLESS_TENANT_NAMESPACE_PREFIXES"); err != nil {
		return nil, err
	}
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	return c, c.check()
}

// check refuses flags that say nothing sensible and reads the sizes and
// lists among them.
func (c *apiConfig) check() error {
	var err error
	switch {
	case c.maxAge < 0:
		return fmt.Errorf("-records-max-age must not be negative")
	case c.maxUploads < 1:
		return fmt.Errorf("-max-uploads must be at least 1")
	case c.uploadQueueWait <= 0:
		return fmt.Errorf("-upload-queue-wait must be positive")
	case c.maxTenantUploads < 0 || c.maxTenantUploads > c.maxUploads:
		return fmt.Errorf("-max-uploads-per-tenant must be between 0 (half of -max-uploads) and -max-uploads")
	case c.uploadMinRate < 0:
		return fmt.Errorf("-upload-min-rate must not be negative (0 turns it off)")
	case c.uploadRateWindow <= 0:
		return fmt.Errorf("-upload-rate-window must be positive")
	case c.connIdle <= 0:
		return fmt.Errorf("-idle-conn-timeout must be positive")
	case c.bodyIdle <= 0:
		return fmt.Errorf("-body-idle-timeout must be positive")
	case c.publicListen != "" && c.publicListen == c.listen:
		return fmt.Errorf("-public-listen must be another address than -listen: the doors serve different callers")
	case c.brokerAuthListen != "" && (c.brokerAuthListen == c.listen || c.brokerAuthListen == c.publicListen):
		return fmt.Errorf("-broker-auth-listen must be an address of its own, which only the broker reaches")
	}
	c.brokerAuthToken = os.Getenv("SLESS_BROKER_AUTH_TOKEN")
	if c.brokerAuthListen != "" && len(c.brokerAuthToken) < 16 {
		return fmt.Errorf("-broker-auth-listen needs SLESS_BROKER_AUTH_TOKEN, at least 16 characters, which the broker sends as the basic-auth password of its auth URLs")
	}
	if c.spoolBytes, err = byteSize("-spool-max-size", c.spoolMax, 1<<20, false); err != nil {
		return err
	}
	c.asyncAMQPURL = os.Getenv("SLESS_ASYNC_AMQP_URL")
	if c.asyncAMQPURL != "" && c.databaseURL == "" {
		return fmt.Errorf("SLESS_ASYNC_AMQP_URL needs -database-url: asynchronous calls are kept in PostgreSQL")
	}
	if c.callbackPolicy, err = callback.ParseAllowList(strings.Split(c.callbackAllow, ",")); err != nil {
		return fmt.Errorf("-callback-allow: %w", err)
	}
	if c.uploadMinRate == 0 {
		c.uploadMinRate = -1 // api.Options: a negative rate judges none, 0 is the default
	}
	if c.fnDomain != "" {
		if err := invoke.CheckDomain(c.fnDomain); err != nil {
			return fmt.Errorf("-fn-domain: %w", err)
		}
	}
	more, err := parseList("-tenant-namespace-prefixes", "prefix", c.tenantPrefixFlag)
	if err != nil {
		return err
	}
	if c.tenantPrefixes, err = auth.TenantPrefixes(c.nsPrefix, more); err != nil {
		return err
	}
	if c.limits, err = c.site(); err != nil {
		return err
	}
	if c.audiences, err = parseList("-jwt-audience", "audience", c.audience); err != nil {
		return err
	}
	if (c.jwksFile != "" || c.jwksURL != "") && len(c.audiences) == 0 {
		// Unlike an HS256 secret of sless's own, a key set is an identity
		// provider's, which signs tokens for every service it serves: without
		// an audience, each of them would be a sless token too.
		return errors.New("-jwks-file and -jwks-url need -jwt-audience: without it, a token the identity provider issued for any other service would be accepted")
	}
	return nil
}

// authConfig says how callers are verified, reading the secrets the flags
// name.
func (c *apiConfig) authConfig(log *slog.Logger) (auth.Config, error) {
	acfg := auth.Config{Issuer: c.issuer, JWKSFile: c.jwksFile, JWKSURL: c.jwksURL, Audiences: c.audiences,
		NamespaceClaim: c.nsClaim, AdminClaim: c.adminClaim, NamespacePrefix: c.nsPrefix, Leeway: 30 * time.Second}
	if c.secretFile != "" {
		b, err := os.ReadFile(c.secretFile)
		if err != nil {
			return auth.Config{}, fmt.Errorf("jwt secret: %w", err)
		}
		acfg.HS256Secret = []byte(strings.TrimSpace(string(b)))
	}
	if c.devTokenFile != "" {
		b, err := os.ReadFile(c.devTokenFile)
		if err != nil {
			return auth.Config{}, fmt.Errorf("dev token: %w", err)
		}
		acfg.DevToken = strings.TrimSpace(string(b))
		acfg.DevIdentity = auth.Identity{Subject: "dev", Namespace: "default", Admin: true}
		acfg.DevTokenHint = "in " + c.devTokenFile
		log.Warn("the dev token is enabled: it acts as an admin in every namespace")
	}
	return acfg, nil
}

// parseList reads a comma-separated flag, each item trimmed, since
// "sless, other" means two items, not "sless" and " other".
func parseList(flag, what, v string) ([]string, error) {
	var out []string
	for _, a := range strings.Split(v, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	if strings.TrimSpace(v) != "" && len(out) == 0 {
		return nil, fmt.Errorf("%s %q names no %s", flag, v, what)
	}
	return out, nil
}
