package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/api"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/auth"
	webconsole "github.com/sless-dev/sless/pkg/console"
	"github.com/sless-dev/sless/pkg/framing"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/local"
	"github.com/sless-dev/sless/pkg/reconciler/function"
	"github.com/sless-dev/sless/pkg/reconciler/service"
	"github.com/sless-dev/sless/pkg/secrets"
	"github.com/sless-dev/sless/pkg/secrets/sealed"
	"github.com/sless-dev/sless/pkg/sourcegc"
	"github.com/sless-dev/sless/runtimes"
)

func init() {
	register("dev", "local mode: the REST API, invoke path, builder and functions on this machine, no Kubernetes", runDev)
}

// defaultDevDomain serves functions at {name}.{namespace}.fn.localhost:
// names under localhost need no DNS (RFC 6761 §6.3; curl and browsers
// answer them with loopback themselves).
const defaultDevDomain = "fn.localhost"

// devBucket is what spec.source.archive.bucket says in local mode, where
// blobs live in a directory.
const devBucket = "local"

func runDev(ctx context.Context, args []string) error {
	fs := newFlags("dev", "sless dev [flags]\n\nRun the REST API, the invoke path, the builder and the functions on this machine, no Kubernetes.\nThe token is written to <data-dir>/dev-token: sless login --dev --data-dir <data-dir>")
	addr := fs.String("addr", envOr("SLESS_ADDR", "127.0.0.1:8080"), "address of the REST API and the invoke path (host:port; port 0 picks a free one)")
	dataDir := fs.String("data-dir", envOr("SLESS_DATA_DIR", ".data"), "directory for the object store, blobs, builds and logs")
	idle := fs.Duration("idle-timeout", 60*time.Second, "stop a function's process after this long without a call (scale to zero)")
	databaseURL := fs.String("database-url", os.Getenv("SLESS_DATABASE_URL"), "PostgreSQL URL for invocation records (default: kept in the data directory)")
	token := fs.String("dev-token", os.Getenv("SLESS_DEV_TOKEN"), "static bearer token (at least 16 characters); default: a random one, written to <data-dir>/dev-token")
	maxAge := fs.Duration("records-max-age", 7*24*time.Hour, "delete invocation records older than this (0 keeps them all)")
	maxSize := fs.String("records-max-size", "1Gi", "without --database-url: most bytes the invocation records take in the data directory, the oldest deleted first (0: no bound)")
	spoolMax := fs.String("spool-max-size", "1Gi", "with --database-url: most bytes of records kept in <data-dir>/invocation-spool.db while PostgreSQL is down or slow; past it new records are dropped")
	quiet := fs.Bool("quiet", false, "do not echo the functions' output")
	withConsole := fs.Bool("console", true, "serve the web console at /console/")
	logFormat := fs.String("log-format", logFormatAuto, "how sless dev writes its events and echoes the functions' output: pretty (short lines for a person), text or json (slog's, for machines); auto: pretty on a terminal, else text")
	logMaxSize := fs.String("log-max-size", "10Mi", "rotate a function's log file at this size (a quantity: 512Ki, 10Mi, 1Gi)")
	logMaxFiles := fs.Int("log-max-files", local.DefaultLogMaxFiles, "files of a function's log to keep, the current one included")
	python := fs.String("python", "", "python3 to run Python functions with (default: from PATH)")
	node := fs.String("node", "", "node to run Node.js functions with (default: from PATH)")
	goTool := fs.String("go", "", "go to build Go functions with (default: from PATH)")
	gcGrace := fs.Duration("source-gc-grace", sourcegc.DefaultGrace, "keep uploaded archives and build contexts no Function needs this long before deleting them")
	gcInterval := fs.Duration("source-gc-interval", sourcegc.DefaultInterval, "time between sweeps for blobs no Function needs (0: no sweeps)")
	connIdle := fs.Duration("idle-conn-timeout", 2*time.Minute, "how long a keep-alive connection may wait for its next request before it is closed")
	fnDomain := fs.String("fn-domain", envOr("SLESS_FN_DOMAIN", defaultDevDomain), "serve each function at its own host, {name}.{namespace}.<domain>; curl and browsers resolve *.localhost to this machine without DNS; \"\" serves functions at /fn/ only")
	bodyIdle := fs.Duration("body-idle-timeout", invoke.DefaultBodyIdleTimeout, "how long a request body may send nothing before the request is answered 408")
	amqpURL := fs.String("amqp-url", os.Getenv("SLESS_AMQP_URL"), "RabbitMQ URL (amqp://) that queue triggers consume from; without one they are not consumed")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	switch *logFormat {
	case logFormatAuto, logFormatPretty, logFormatText, logFormatJSON:
	default:
		return fmt.Errorf("--log-format %q: want auto, pretty, text or json", *logFormat)
	}
	if *idle <= 0 {
		return errors.New("--idle-timeout must be positive")
	}
	if *maxAge < 0 {
		return errors.New("--records-max-age must not be negative")
	}
	if *connIdle <= 0 {
		return errors.New("--idle-conn-timeout must be positive")
	}
	if *bodyIdle <= 0 {
		return errors.New("--body-idle-timeout must be positive")
	}
	if *fnDomain != "" {
		if err := invoke.CheckDomain(*fnDomain); err != nil {
			return fmt.Errorf("--fn-domain: %w", err)
		}
	}
	logMaxBytes, err := logSize(*logMaxSize)
	if err != nil {
		return err
	}
	recordsMaxBytes, err := byteSize("--records-max-size", *maxSize, 1<<20, true)
	if err != nil {
		return err
	}
	spoolBytes, err := byteSize("--spool-max-size", *spoolMax, 1<<20, false)
	if err != nil {
		return err
	}
	if *logMaxFiles < 1 {
		return errors.New("--log-max-files must be at least 1")
	}
	if *gcGrace <= 0 || *gcInterval < 0 {
		return errors.New("--source-gc-grace must be positive and --source-gc-interval not negative")
	}
	if err := os.MkdirAll(*dataDir, 0o755); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	data, err := filepath.Abs(*dataDir)
	if err != nil {
		return err
	}
	log, consoleOut, err := devLogger(*logFormat, os.Stderr)
	if err != nil {
		return err
	}

	tokenHint := "the one given with --dev-token or SLESS_DEV_TOKEN"
	if *token == "" {
		tokenFile := filepath.Join(data, "dev-token")
		if *token, err = devToken(tokenFile); err != nil {
			return err
		}
		tokenHint = "in " + tokenFile
	}
	if len(*token) < 16 {
		return errors.New("--dev-token must be at least 16 characters")
	}

	// Listen first: with port 0 the URL is known only now, and status.url
	// of every function carries it.
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *addr, err)
	}
	defer ln.Close()
	baseURL := "http://" + ln.Addr().String()

	scheme := runtime.NewScheme()
	if err := slessv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		return err
	}
	store, err := local.OpenStore(filepath.Join(data, "sless.db"), scheme)
	if err != nil {
		return err
	}
	defer store.Close()
	// Secrets are kept in the same store with their values sealed under a
	// key of the data directory; everything reads them through secretStore.
	sealer, err := sealed.LoadKey(filepath.Join(data, "secrets.key"))
	if err != nil {
		return err
	}
	secretStore := &sealed.Store{Objects: store, Sealer: sealer}
	blobs, err := local.NewBlobs(filepath.Join(data, "blobs"))
	if err != nil {
		return err
	}

	// The reconcile loop is made first so the builder and the server can
	// ask it to look at a function again when a build ends or a revision
	// becomes ready (the watches on PipelineRuns and Knative Services on a
	// cluster).
	var loop, svcLoop *local.Loop
	enqueue := func(ns, name string) {
		if loop != nil {
			loop.Enqueue(ns, name)
		}
	}
	enqueueService := func(ns, name string) {
		if svcLoop != nil {
			svcLoop.Enqueue(ns, name)
		}
	}
	tools := runtimes.LocalOptions{Python: *python, Node: *node, Go: *goTool}
	// A build may be a Function's or a SlessService's (the builder keys
	// builds by digest, not kind): its end looks at both of that name.
	builder, err := local.NewBuilder(filepath.Join(data, "builds"), tools, func(ns, name string) {
		enqueue(ns, name)
		enqueueService(ns, name)
	})
	if err != nil {
		return err
	}
	defer builder.Close()
	builder.Logger = log
	var console io.Writer
	if !*quiet {
		console = consoleOut
	}
	// Functions and SlessServices run on two servers, so that one of each
	// of a name in a namespace keep their revisions, state and logs apart
	// (on a cluster they would contend for one Knative Service).
	newServer := func(kind, sub string, onChange func(ns, name string)) *local.Server {
		return local.NewServer(local.ServerOptions{
			Kind:        kind,
			Dir:         builder.Dir,
			IdleTimeout: *idle,
			Tools:       tools,
			LogDir:      filepath.Join(data, "logs", sub),
			LogMaxBytes: logMaxBytes,
			LogMaxFiles: *logMaxFiles,
			Console:     console,
			ResolveEnv:  envFromStore(secretStore),
			Address:     func(ns, name string) string { return "local://" + path.Join(sub, ns, name) },
			OnChange:    onChange,
			StateDir:    filepath.Join(data, "serving", sub),
			Logger:      log,
			// The state records env values resolved from secrets.
			SealState: func(k types.NamespacedName, plain []byte) []byte {
				return sealer.SealFile(path.Join("serving", sub, k.String()), plain)
			},
			OpenState: func(k types.NamespacedName, b []byte) ([]byte, error) {
				return sealer.OpenFile(path.Join("serving", sub, k.String()), b)
			},
		})
	}
	server := newServer("function", "", enqueue)
	defer server.Close()
	svcServer := newServer("service", local.ServicesDir, enqueueService)
	defer svcServer.Close()
	// The servers serve again the revisions they kept; one of an object no
	// longer stored (deleted while its removal could not be recorded) must
	// not linger.
	for kind, srv := range map[string]*local.Server{slessv1alpha1.KindFunction: server, slessv1alpha1.KindSlessService: svcServer} {
		stored, err := keysOf(ctx, store, kind)
		if err != nil {
			return err
		}
		keep := map[types.NamespacedName]bool{}
		for _, k := range stored {
			keep[k] = true
		}
		for _, k := range srv.Functions() {
			if !keep[k] {
				srv.Remove(k.Namespace, k.Name)
			}
		}
	}

	resolver, err := local.NewResolver(ctx, store, server)
	if err != nil {
		return err
	}
	defer resolver.Close()
	svcResolver, err := local.NewServiceResolver(ctx, store, svcServer)
	if err != nil {
		return err
	}
	defer svcResolver.Close()

	reconciler := &function.Reconciler{
		Client:  store,
		Builder: builder,
		Server:  server,
		Store:   blobs,
		Config:  function.Config{PublicBaseURL: baseURL, FunctionDomain: *fnDomain},
	}
	loop = local.NewLoop("function", store, slessv1alpha1.SchemeGroupVersion.WithKind("Function").GroupKind(), reconciler, log)
	loop.OnDeleted = func(k types.NamespacedName) { server.Remove(k.Namespace, k.Name) }
	// SlessServices take the Function's reconciler, as on a cluster, with
	// the same builder and a server of their own.
	svcReconciler := service.NewReconciler(store, builder, svcServer, blobs, reconciler.Config, nil)
	svcLoop = local.NewLoop("slessservice", store, slessv1alpha1.SchemeGroupVersion.WithKind(slessv1alpha1.KindSlessService).GroupKind(), svcReconciler, log)
	svcLoop.OnDeleted = func(k types.NamespacedName) { svcServer.Remove(k.Namespace, k.Name) }
	// A secret set or rotated reconciles the functions and services whose
	// env refers to it: their next revision runs with the new value.
	defer store.Subscribe(func(ev local.Event) {
		if ev.GVK.Group != "" || ev.GVK.Kind != "Secret" {
			return
		}
		go enqueueReferring(ctx, store, ev.Key, enqueue, enqueueService, log)
	})()

	// Invocation records: PostgreSQL when given, else the data directory.
	var sink invoke.Sink
	var history invoke.History
	var spooler invoke.Spool
	if *databaseURL != "" {
		pg, err := openRecords(ctx, *databaseURL, *maxAge, log)
		if err != nil {
			return err
		}
		defer pg.Close()
		sink, history = pg, pg
		sp, s, err := openSpool(filepath.Join(data, "invocation-spool.db"), spoolBytes, log)
		if err != nil {
			return err
		}
		defer sp.Close() // after the recorder: deferred calls run last first
		spooler = s
	} else {
		recs, err := store.Records()
		if err != nil {
			return err
		}
		if err := recs.SetMaxSize(ctx, recordsMaxBytes); err != nil {
			return err
		}
		sink, history = recs, recs
		if *maxAge > 0 {
			go retainRecords(ctx, recs, *maxAge, log)
		}
	}
	// /metrics shows the API's, the proxy's and the recorder's series, as
	// sless api does.
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	imetrics, err := invoke.NewMetrics(reg)
	if err != nil {
		return err
	}
	if *gcInterval > 0 {
		// The same sweep as the controller's, on the blob directory.
		gcMetrics, err := sourcegc.NewMetrics(reg)
		if err != nil {
			return err
		}
		gc, err := sourcegc.New(sourcegc.Options{Store: blobs, Objects: store, Grace: *gcGrace, Interval: *gcInterval, Metrics: gcMetrics, Logger: log})
		if err != nil {
			return err
		}
		// Stopped before the store it reads is closed.
		gcCtx, stopGC := context.WithCancel(ctx)
		gcDone := make(chan struct{})
		go func() { defer close(gcDone); _ = gc.Start(gcCtx) }()
		defer func() { stopGC(); <-gcDone }()
	}
	recorder := invoke.NewRecorder(sink, invoke.RecorderOptions{Logger: log, Metrics: imetrics, Spool: spooler})
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = recorder.Close(cctx)
	}()

	// Cron and queue triggers and FunctionJobs run in process, recorded
	// like invokes.
	runs := local.NewRuns(store, server, recorder)
	runs.Broker, runs.Logger = *amqpURL, log
	defer runs.Close()
	triggerLoop := local.NewLoop("trigger", store, slessv1alpha1.SchemeGroupVersion.WithKind("Trigger").GroupKind(), runs.TriggerReconciler(), log)
	jobLoop := local.NewLoop("functionjob", store, slessv1alpha1.SchemeGroupVersion.WithKind("FunctionJob").GroupKind(), runs.JobReconciler(), log)

	verifier, err := auth.New(ctx, auth.Config{
		DevToken:     *token,
		DevIdentity:  auth.Identity{Subject: "dev", Namespace: "default", Admin: true},
		DevTokenHint: tokenHint,
	})
	if err != nil {
		return err
	}
	proxy, err := invoke.NewProxy(invoke.Options{
		Resolver:        resolver,
		Services:        svcResolver,
		Authenticator:   proxyAuthenticator(verifier, nil, log),
		Recorder:        recorder,
		Metrics:         imetrics,
		Logger:          log,
		Domain:          *fnDomain,
		BodyIdleTimeout: *bodyIdle,
	})
	if err != nil {
		return err
	}
	list := invoke.ListHandler{History: history, Logger: log, Functions: resolver}
	svcList := invoke.ListHandler{History: history, Logger: log, Functions: svcResolver}
	logSource := &local.Logs{LogDir: filepath.Join(data, "logs"), Builder: builder}
	var con http.Handler
	if *withConsole {
		c, err := webconsole.New(webconsole.Options{Objects: store, Auth: verifier, Blobs: blobs, History: history, Invoke: proxy, Logs: logSource, Logger: log})
		if err != nil {
			return err
		}
		con = c
	}
	apiServer, err := api.New(api.Options{
		Console: con,
		Objects: store,
		Secrets: secretStore,
		Auth:    verifier,
		Blobs:   blobs,
		Bucket:  devBucket,
		Invoke:  proxy,
		Invocations: func(c *gin.Context) {
			list.List(c.Writer, c.Request, c.Param("ns"), c.Param("name"))
		},
		ServiceInvocations: func(c *gin.Context) {
			svcList.ListService(c.Writer, c.Request, c.Param("ns"), c.Param("name"))
		},
		Logs:       logSource,
		Registerer: reg, Gatherer: reg,
		Logger: log,
	})
	if err != nil {
		return err
	}

	loopCtx, stopLoop := context.WithCancel(context.Background())
	loopDone := make(chan struct{})
	var loopsRunning sync.WaitGroup
	for kind, l := range map[string]*local.Loop{"Function": loop, slessv1alpha1.KindSlessService: svcLoop, "Trigger": triggerLoop, "FunctionJob": jobLoop} {
		existing, err := keysOf(ctx, store, kind)
		if err != nil {
			stopLoop()
			return err
		}
		loopsRunning.Add(1)
		go func() {
			defer loopsRunning.Done()
			l.Run(loopCtx, existing, 2)
		}()
	}
	go func() { loopsRunning.Wait(); close(loopDone) }()

	// As sless api: without IdleTimeout (and no ReadTimeout, which would
	// cut long calls) a keep-alive connection would be held for ever.
	srv := &http.Server{Handler: proxy.Hosts(apiServer.Handler()), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: *connIdle}
	serveErr := make(chan error, 1)
	// RFC 9112 §6.1: Content-Length with Transfer-Encoding is refused and the
	// connection closed, or a request could be smuggled behind it.
	go func() { serveErr <- framing.Serve(srv, ln) }()

	fmt.Fprintf(os.Stderr, "sless dev: serving on %s\n", baseURL)
	if *fnDomain != "" {
		fmt.Fprintf(os.Stderr, "sless dev: functions at %s\n", function.Config{PublicBaseURL: baseURL, FunctionDomain: *fnDomain}.InvokeURL("{namespace}", "{name}"))
	}
	fmt.Fprintf(os.Stderr, "sless dev: data in %s; token in %s\n", data, filepath.Join(data, "dev-token"))
	if *withConsole {
		fmt.Fprintf(os.Stderr, "sless dev: web console at %s/console/ (sign in with the token)\n", baseURL)
	}
	fmt.Fprintf(os.Stderr, "sless dev: services at %s\n", function.Config{PublicBaseURL: baseURL}.ServiceURL("{namespace}", "{name}"))
	fmt.Fprintf(os.Stderr, "sless dev: functions (and services with minScale 0) stop after %s idle\n", *idle)

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		stopLoop()
		<-loopDone
		return err
	}
	fmt.Fprintln(os.Stderr, "sless dev: stopping")
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	stopLoop()
	<-loopDone
	return nil
}

// logSize reads --log-max-size: a quantity of bytes, at least 1 KiB so
// that a file holds some lines.
func logSize(v string) (int64, error) {
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return 0, fmt.Errorf("--log-max-size %q: want a size such as 512Ki, 10Mi or 1Gi: %w", v, err)
	}
	n, ok := q.AsInt64()
	if !ok || n < 1<<10 {
		return 0, fmt.Errorf("--log-max-size %q: want a whole number of bytes, at least 1Ki", v)
	}
	return n, nil
}

// retainRecords deletes records older than maxAge, now and every hour.
func retainRecords(ctx context.Context, recs *local.Records, maxAge time.Duration, log *slog.Logger) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		if _, err := recs.DeleteBefore(ctx, time.Now().Add(-maxAge), 10000); err != nil && ctx.Err() == nil {
			log.Warn("invocation retention", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
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

// keysOf lists the stored objects of a kind, so a restart reconciles them all.
func keysOf(ctx context.Context, store *local.Store, kind string) ([]types.NamespacedName, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(slessv1alpha1.SchemeGroupVersion.WithKind(kind + "List"))
	if err := store.List(ctx, list); err != nil {
		return nil, err
	}
	keys := make([]types.NamespacedName, 0, len(list.Items))
	for i := range list.Items {
		keys = append(keys, types.NamespacedName{Namespace: list.Items[i].GetNamespace(), Name: list.Items[i].GetName()})
	}
	return keys, nil
}

// envFromStore resolves secretKeyRef and configMapKeyRef entries from
// Secrets and ConfigMaps kept in the local store.
func envFromStore(store client.Reader) func(ctx context.Context, ns string, src *corev1.EnvVarSource) (string, error) {
	return func(ctx context.Context, ns string, src *corev1.EnvVarSource) (string, error) {
		switch {
		case src.SecretKeyRef != nil:
			s := &corev1.Secret{}
			if err := store.Get(ctx, types.NamespacedName{Namespace: ns, Name: src.SecretKeyRef.Name}, s); err != nil {
				return "", fmt.Errorf("secret %s: %w", src.SecretKeyRef.Name, err)
			}
			if v, ok := s.Data[src.SecretKeyRef.Key]; ok {
				return string(v), nil
			}
			if v, ok := s.StringData[src.SecretKeyRef.Key]; ok {
				return v, nil
			}
			return "", fmt.Errorf("secret %s has no key %s", src.SecretKeyRef.Name, src.SecretKeyRef.Key)
		case src.ConfigMapKeyRef != nil:
			cm := &corev1.ConfigMap{}
			if err := store.Get(ctx, types.NamespacedName{Namespace: ns, Name: src.ConfigMapKeyRef.Name}, cm); err != nil {
				return "", fmt.Errorf("configmap %s: %w", src.ConfigMapKeyRef.Name, err)
			}
			if v, ok := cm.Data[src.ConfigMapKeyRef.Key]; ok {
				return v, nil
			}
			return "", fmt.Errorf("configmap %s has no key %s", src.ConfigMapKeyRef.Name, src.ConfigMapKeyRef.Key)
		}
		return "", errors.New("only secretKeyRef and configMapKeyRef are available in local mode")
	}
}

// enqueueReferring reconciles the functions and services of secret's
// namespace whose env refers to it.
func enqueueReferring(ctx context.Context, store *local.Store, secret types.NamespacedName, enqueueFn, enqueueSvc func(ns, name string), log *slog.Logger) {
	fns := &slessv1alpha1.FunctionList{}
	if err := store.List(ctx, fns, client.InNamespace(secret.Namespace)); err != nil {
		log.Warn("find functions referring to a secret", "namespace", secret.Namespace, "secret", secret.Name, "error", err)
	}
	for _, fn := range fns.Items {
		if slices.Contains(secrets.Referenced(fn.Spec.CoreEnv()), secret.Name) {
			enqueueFn(fn.Namespace, fn.Name)
		}
	}
	svcs := &slessv1alpha1.SlessServiceList{}
	if err := store.List(ctx, svcs, client.InNamespace(secret.Namespace)); err != nil {
		log.Warn("find services referring to a secret", "namespace", secret.Namespace, "secret", secret.Name, "error", err)
	}
	for i := range svcs.Items {
		if slices.Contains(secrets.Referenced(svcs.Items[i].BuildSpec().CoreEnv()), secret.Name) {
			enqueueSvc(svcs.Items[i].Namespace, svcs.Items[i].Name)
		}
	}
}
