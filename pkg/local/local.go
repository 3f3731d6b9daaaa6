package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sless-dev/sless/pkg/api"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/auth"
	"github.com/sless-dev/sless/pkg/frontdoor"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/async"
	"github.com/sless-dev/sless/pkg/invoke/callback"
	"github.com/sless-dev/sless/pkg/limits"
	"github.com/sless-dev/sless/pkg/local/apiserver"
	"github.com/sless-dev/sless/pkg/local/asynccalls"
	"github.com/sless-dev/sless/pkg/local/blobs"
	"github.com/sless-dev/sless/pkg/local/build"
	"github.com/sless-dev/sless/pkg/local/proc"
	"github.com/sless-dev/sless/pkg/local/runs"
	"github.com/sless-dev/sless/pkg/local/serving"
	"github.com/sless-dev/sless/pkg/reconciler/function"
	"github.com/sless-dev/sless/pkg/secrets/sealed"
	"github.com/sless-dev/sless/pkg/sourcegc"
	"github.com/sless-dev/sless/runtimes"
)

// DefaultLogMaxFiles is how many files of a function's log are kept,
// the current one included, unless Options say otherwise.
const DefaultLogMaxFiles = serving.DefaultLogMaxFiles

// Bucket is what spec.source.archive.bucket says in local mode, where blobs
// live in a directory.
const Bucket = "local"

// DefaultAddr and DefaultDataDir are where sless dev serves and keeps its
// data unless told otherwise; sless login --dev looks there too.
const (
	DefaultAddr    = "127.0.0.1:8080"
	DefaultDataDir = ".data"
)

// TokenFile is where sless dev writes the token it makes in dataDir.
func TokenFile(dataDir string) string { return filepath.Join(dataDir, "dev-token") }

// Options configures local mode (`sless dev`). Zero durations and sizes are
// refused by New where a zero would mean nothing sensible.
type Options struct {
	// DataDir keeps the object store, blobs, builds, logs and the token; it
	// is made when missing.
	DataDir string
	// Token is the static bearer token (at least 16 characters); "" reads
	// the one in <DataDir>/dev-token, or makes one and writes it there.
	Token string
	// IdleTimeout stops a function's process after this long without a
	// call (scale to zero).
	IdleTimeout time.Duration
	// FunctionDomain serves each function at {name}.{namespace}.<domain>;
	// "" serves functions at /fn/ only.
	FunctionDomain string
	// BodyIdleTimeout bounds how long a call's body may send nothing;
	// IdleConnTimeout how long a keep-alive connection may wait.
	BodyIdleTimeout, IdleConnTimeout time.Duration
	// DatabaseURL keeps invocation records in PostgreSQL, spooled in
	// <DataDir>/invocation-spool.db up to SpoolMaxBytes while it is down;
	// without it they stay in the data directory, at most RecordsMaxBytes
	// (0: no bound). RecordsMaxAge deletes older ones (0 keeps them).
	DatabaseURL                    string
	RecordsMaxAge                  time.Duration
	RecordsMaxBytes, SpoolMaxBytes int64
	// LogMaxBytes and LogMaxFiles bound each function's rotated log.
	LogMaxBytes int64
	LogMaxFiles int
	// Echo receives the functions' output as it is written; nil does not echo.
	Echo io.Writer
	// Tools are the python3, node and go that run and build functions.
	Tools runtimes.LocalOptions
	// SourceGCGrace and SourceGCInterval sweep blobs no Function needs
	// (interval 0: no sweeps).
	SourceGCGrace, SourceGCInterval time.Duration
	// AMQPURL is the broker queue triggers consume from; "": not consumed.
	AMQPURL string
	// NATSURL is the server nats triggers consume from; "": not consumed.
	NATSURL string
	// KafkaBrokers are the seed brokers kafka triggers consume from;
	// none: not consumed.
	KafkaBrokers []string
	// MQTTURL is the broker mqtt triggers consume from (tcp://, ssl://,
	// ws://, wss://, with user:password@ if it needs them); "": not consumed.
	MQTTURL string
	// Console serves the web console at /console/.
	Console bool
	// NoCgroups makes no cgroups for the functions' processes even where
	// sless dev may: memory limits fall back to RLIMIT_DATA, CPU and the
	// process count go unenforced (a warning at start says so).
	NoCgroups bool
	// Resources are the site's resource defaults, which fill what a spec
	// names nowhere, and its maximums, past which the API refuses a spec
	// (local mode has no namespaces' own).
	Resources limits.Site
	// AsyncRetention is how long a finished asynchronous call stays
	// readable; 0 takes DefaultAsyncRetention.
	AsyncRetention time.Duration
	// AsyncBackoff, when set, is the wait before retry n of an
	// asynchronous call (tests); default 1 s doubling.
	AsyncBackoff func(n int) time.Duration
	// CallbackPolicy says which hosts the results of asynchronous calls
	// may be posted to; nil: public addresses only.
	CallbackPolicy *callback.Policy
	// Logger receives local mode's events; Out its banner (os.Stderr when nil).
	Logger *slog.Logger
	// TracerProvider, when set, makes spans of calls, deliveries, attempts
	// and builds (docs/observability.md); nil makes none.
	TracerProvider trace.TracerProvider
	Out            io.Writer
}

// Dev is local mode, checked and ready to Run.
type Dev struct {
	opts      Options
	tokenHint string
}

// New checks opts, makes the data directory and settles the token.
func New(opts Options) (*Dev, error) {
	switch {
	case opts.IdleTimeout <= 0:
		return nil, errors.New("--idle-timeout must be positive")
	case opts.RecordsMaxAge < 0:
		return nil, errors.New("--records-max-age must not be negative")
	case opts.IdleConnTimeout <= 0:
		return nil, errors.New("--idle-conn-timeout must be positive")
	case opts.BodyIdleTimeout <= 0:
		return nil, errors.New("--body-idle-timeout must be positive")
	case opts.LogMaxFiles < 1:
		return nil, errors.New("--log-max-files must be at least 1")
	case opts.SourceGCGrace <= 0 || opts.SourceGCInterval < 0:
		return nil, errors.New("--source-gc-grace must be positive and --source-gc-interval not negative")
	}
	if err := os.MkdirAll(opts.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	data, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, err
	}
	opts.DataDir = data
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Out == nil {
		opts.Out = os.Stderr
	}
	d := &Dev{opts: opts, tokenHint: "the one given with --dev-token or SLESS_DEV_TOKEN"}
	if d.opts.Token == "" {
		tokenFile := TokenFile(data)
		if d.opts.Token, err = devToken(tokenFile); err != nil {
			return nil, err
		}
		d.tokenHint = "in " + tokenFile
	}
	if len(d.opts.Token) < 16 {
		return nil, errors.New("--dev-token must be at least 16 characters")
	}
	return d, nil
}

// Run serves local mode on ln until ctx is done: every function's status.url
// carries ln's address, so the caller listens first (port 0 picks one).
func (d *Dev) Run(ctx context.Context, ln net.Listener) error {
	p := &platform{opts: d.opts, baseURL: "http://" + ln.Addr().String()}
	defer p.close()
	if err := p.openObjects(); err != nil {
		return err
	}
	if err := p.startSupervisor(); err != nil {
		return err
	}
	if err := p.startServing(ctx); err != nil {
		return err
	}
	door, err := p.frontDoor(ctx, d.opts.Token, d.tokenHint)
	if err != nil {
		return err
	}
	p.startRuns(door.Recorder())
	if err := p.startSourceGC(ctx, door); err != nil {
		return err
	}
	stopLoops, err := p.runLoops(ctx)
	if err != nil {
		return err
	}
	defer stopLoops()
	p.banner()
	context.AfterFunc(ctx, func() { fmt.Fprintln(d.opts.Out, "sless dev: stopping") })
	// Errors of the shutdown itself are not the user's: the calls still
	// in progress after its grace were cut.
	if err := door.Serve(ctx, ln); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// platform is local mode's parts while Run runs; close stops them last
// first.
type platform struct {
	opts    Options
	baseURL string
	closers frontdoor.Closers

	store   *apiserver.Store
	secrets *sealed.Store
	sealer  *sealed.Sealer
	blobs   *blobs.Store
	builder *build.Builder
	procs   *proc.Supervisor
	fns     *servingKind
	svcs    *servingKind
	runs    *runs.Runs
	loops   map[string]*apiserver.Loop
}

func (p *platform) onClose(f func()) { p.closers.Add(f) }

func (p *platform) close() { p.closers.Close() }

// startSupervisor stops what an earlier sless dev of this data directory
// left running (it was killed) and sets up the containment of this run's
// processes. The store's lock, taken first, says no other sless dev uses
// the directory.
func (p *platform) startSupervisor() error {
	procs, err := proc.NewSupervisor(filepath.Join(p.opts.DataDir, "run"), proc.SupervisorOptions{NoCgroups: p.opts.NoCgroups})
	if err != nil {
		return fmt.Errorf("process supervisor: %w", err)
	}
	p.procs = procs
	// Closed after the servers and builder (closers run last first), once
	// no process is left.
	p.onClose(func() {
		if err := procs.Close(); err != nil {
			p.opts.Logger.Warn("cgroups left for the next start to remove", "error", err)
		}
	})
	if n := procs.Reaped(); n > 0 {
		fmt.Fprintf(p.opts.Out, "sless dev: stopped %d process(es) an earlier sless dev of %s left running\n", n, p.opts.DataDir)
	}
	if w := procs.Warning(); w != "" {
		fmt.Fprintf(p.opts.Out, "sless dev: warning: %s\n", w)
		p.opts.Logger.Warn("limits not enforced", "detail", w)
	}
	return nil
}

// openObjects opens the object store, the secrets sealed in it and the
// blob directory.
func (p *platform) openObjects() error {
	scheme := runtime.NewScheme()
	if err := slessv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		return err
	}
	store, err := apiserver.Open(filepath.Join(p.opts.DataDir, "sless.db"), scheme)
	if err != nil {
		return err
	}
	p.store = store
	p.onClose(func() { _ = store.Close() })
	// Secrets are kept in the same store with their values sealed under a
	// key of the data directory; everything reads them through p.secrets.
	if p.sealer, err = sealed.LoadKey(filepath.Join(p.opts.DataDir, "secrets.key")); err != nil {
		return err
	}
	p.secrets = &sealed.Store{Objects: store, Sealer: p.sealer}
	p.blobs, err = blobs.New(filepath.Join(p.opts.DataDir, "blobs"))
	return err
}

// frontDoor opens where records go and makes the API, the invoke proxy and
// the console over the local parts.
func (p *platform) frontDoor(ctx context.Context, token, tokenHint string) (*frontdoor.Door, error) {
	recs, err := p.records(ctx)
	if err != nil {
		return nil, err
	}
	asyncCalls, err := p.asyncCalls()
	if err != nil {
		return nil, err
	}
	verifier, err := auth.New(ctx, auth.Config{
		DevToken:     token,
		DevIdentity:  auth.Identity{Subject: "dev", Namespace: "default", Admin: true},
		DevTokenHint: tokenHint,
	})
	if err != nil {
		return nil, err
	}
	door, err := frontdoor.New(ctx, frontdoor.Options{
		API: api.Options{
			Objects:   p.store,
			Secrets:   p.secrets,
			Auth:      verifier,
			Blobs:     p.blobs,
			Bucket:    Bucket,
			Logs:      &serving.Logs{LogDir: filepath.Join(p.opts.DataDir, "logs"), Builder: p.builder},
			Revisions: revisions{fns: p.fns.server, svcs: p.svcs.server},
			Maximums:  limits.Static(p.opts.Resources),
			// Refused on write, not only when a revision would start.
			Unsupported: serving.Unsupported,
		},
		Auth: verifier,
		Proxy: invoke.Options{
			Resolver:        p.fns.resolver,
			Services:        p.svcs.resolver,
			Domain:          p.opts.FunctionDomain,
			BodyIdleTimeout: p.opts.BodyIdleTimeout,
		},
		Records:         recs,
		Async:           asyncCalls,
		APIBaseURL:      p.baseURL,
		IdleConnTimeout: p.opts.IdleConnTimeout,
		Console:         p.opts.Console,
		Logger:          p.opts.Logger,
		TracerProvider:  p.opts.TracerProvider,
	})
	if err != nil {
		return nil, err
	}
	p.onClose(door.Close)
	return door, nil
}

// records says where invocation records go: PostgreSQL when given, else
// the store's own records in the data directory.
func (p *platform) records(ctx context.Context) (frontdoor.Records, error) {
	if p.opts.DatabaseURL != "" {
		return frontdoor.Records{
			DatabaseURL:   p.opts.DatabaseURL,
			MaxAge:        p.opts.RecordsMaxAge,
			SpoolPath:     filepath.Join(p.opts.DataDir, "invocation-spool.db"),
			SpoolMaxBytes: p.opts.SpoolMaxBytes,
		}, nil
	}
	recs, err := p.store.Records()
	if err != nil {
		return frontdoor.Records{}, err
	}
	if err := recs.SetMaxSize(ctx, p.opts.RecordsMaxBytes); err != nil {
		return frontdoor.Records{}, err
	}
	if p.opts.RecordsMaxAge > 0 {
		go invoke.RunRetention(ctx, recs, p.opts.RecordsMaxAge, time.Hour, 10000, func(_ int64, err error) {
			if err != nil {
				p.opts.Logger.Warn("invocation retention", "error", err)
			}
		})
	}
	return frontdoor.Records{Sink: recs, History: recs, Stats: recs}, nil
}

// asyncCalls keeps calls made with Prefer: respond-async in the data
// directory, each function limited by its spec.async.
func (p *platform) asyncCalls() (*frontdoor.Async, error) {
	st, err := asynccalls.Open(filepath.Join(p.opts.DataDir, "async-calls.db"))
	if err != nil {
		return nil, err
	}
	// Closed after the front door, whose runner writes to it, and after
	// the sweep.
	p.onClose(func() { _ = st.Close() })
	p.onClose(sweepAsyncCalls(st, p.opts.AsyncRetention, p.opts.Logger))
	// The same file keeps the namespaces' callback signing keys.
	return &frontdoor.Async{Store: st, Keys: st, CallbackPolicy: p.opts.CallbackPolicy, Backoff: p.opts.AsyncBackoff,
		Policy: func(ctx context.Context, ns, name string) (async.Policy, error) {
			fn := &slessv1alpha1.Function{}
			if err := p.store.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, fn); err != nil {
				return async.Policy{}, err
			}
			return async.PolicyOf(fn), nil
		}}, nil
}

// DefaultAsyncRetention keeps finished asynchronous calls a week.
const DefaultAsyncRetention = 7 * 24 * time.Hour

// sweepAsyncCalls deletes, at start and hourly, the asynchronous calls
// that ended more than retention ago and expired Idempotency-Keys, so the
// file does not grow for ever; it returns what stops it.
func sweepAsyncCalls(st *asynccalls.Store, retention time.Duration, log *slog.Logger) func() {
	if retention <= 0 {
		retention = DefaultAsyncRetention
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Hour)
		defer t.Stop()
		for {
			now := time.Now()
			if n, err := st.Prune(ctx, now.Add(-retention), now.Add(-async.IdempotencyWindow)); err != nil {
				log.Warn("sweep asynchronous calls", "error", err)
			} else if n > 0 {
				log.Info("asynchronous calls swept", "count", n, "retention", retention)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { stop(); <-done }
}

// startSourceGC sweeps the blob directory as the controller sweeps S3,
// stopped before the store it reads is closed.
func (p *platform) startSourceGC(ctx context.Context, door *frontdoor.Door) error {
	if p.opts.SourceGCInterval <= 0 {
		return nil
	}
	metrics, err := sourcegc.NewMetrics(door.Registry())
	if err != nil {
		return err
	}
	gc, err := sourcegc.New(sourcegc.Options{Store: p.blobs, Objects: p.store, Grace: p.opts.SourceGCGrace,
		Interval: p.opts.SourceGCInterval, Metrics: metrics, Logger: p.opts.Logger})
	if err != nil {
		return err
	}
	gcCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = gc.Start(gcCtx) }()
	p.onClose(func() { stop(); <-done })
	return nil
}

// banner tells the user where things are.
func (p *platform) banner() {
	out, o := p.opts.Out, p.opts
	urls := function.Config{PublicBaseURL: p.baseURL, FunctionDomain: o.FunctionDomain}
	fmt.Fprintf(out, "sless dev: serving on %s\n", p.baseURL)
	if o.FunctionDomain != "" {
		fmt.Fprintf(out, "sless dev: functions at %s\n", urls.InvokeURL("{namespace}", "{name}"))
	}
	fmt.Fprintf(out, "sless dev: data in %s; token in %s\n", o.DataDir, TokenFile(o.DataDir))
	if o.Console {
		fmt.Fprintf(out, "sless dev: web console at %s/console/ (sign in with the token)\n", p.baseURL)
	}
	fmt.Fprintf(out, "sless dev: services at %s\n", function.Config{PublicBaseURL: p.baseURL}.ServiceURL("{namespace}", "{name}"))
	fmt.Fprintf(out, "sless dev: functions (and services with minScale 0) stop after %s idle\n", o.IdleTimeout)
}

// devToken reads the token kept in path, or makes one and keeps it there,
// so scripts and a restarted sless dev agree on it.
func devToken(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil {
		if t := strings.TrimSpace(string(b)); len(t) >= 16 {
			return t, nil
		}
	}
	var rnd [24]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", err
	}
	t := "sless-dev-" + hex.EncodeToString(rnd[:])
	if err := os.WriteFile(path, []byte(t+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write dev token: %w", err)
	}
	return t, nil
}
