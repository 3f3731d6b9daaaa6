package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/callback"
	"github.com/sless-dev/sless/pkg/local"
	"github.com/sless-dev/sless/pkg/logs"
	"github.com/sless-dev/sless/pkg/queue/kafkaq"
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

// runDev runs local mode (pkg/local) on the address the flags name.
func runDev(ctx context.Context, args []string) error {
	opts, addr, err := parseDev(args)
	if err != nil {
		return err
	}
	tr, err := startTracing(ctx, "sless-dev", opts.Logger)
	if err != nil {
		return err
	}
	defer stopTracing(tr, opts.Logger)
	opts.TracerProvider = tr.Provider()
	dev, err := local.New(opts)
	if err != nil {
		return err
	}
	// Listen first: with port 0 the URL is known only now, and status.url
	// of every function carries it.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	defer ln.Close()
	return dev.Run(ctx, ln)
}

// parseDev turns sless dev's flags into local mode's options and the
// address to serve on; local.New checks what the options say together.
func parseDev(args []string) (local.Options, string, error) {
	fs := newFlags("dev", "sless dev [flags]\n\nRun the REST API, the invoke path, the builder and the functions on this machine, no Kubernetes.\nThe token is written to <data-dir>/dev-token: sless login --dev --data-dir <data-dir>")
	addr := fs.String("addr", envOr("SLESS_ADDR", local.DefaultAddr), "address of the REST API and the invoke path (host:port; port 0 picks a free one)")
	dataDir := fs.String("data-dir", envOr("SLESS_DATA_DIR", local.DefaultDataDir), "directory for the object store, blobs, builds and logs")
	idle := fs.Duration("idle-timeout", 60*time.Second, "stop a function's process after this long without a call (scale to zero)")
	databaseURL := fs.String("database-url", os.Getenv("SLESS_DATABASE_URL"), "PostgreSQL URL for invocation records (default: kept in the data directory)")
	token := fs.String("dev-token", os.Getenv("SLESS_DEV_TOKEN"), "static bearer token (at least 16 characters); default: a random one, written to <data-dir>/dev-token")
	maxAge := fs.Duration("records-max-age", 7*24*time.Hour, "delete invocation records older than this (0 keeps them all)")
	maxSize := fs.String("records-max-size", "1Gi", "without --database-url: most bytes the invocation records take in the data directory, the oldest deleted first (0: no bound)")
	spoolMax := fs.String("spool-max-size", "1Gi", "with --database-url: most bytes of records kept in <data-dir>/invocation-spool.db while PostgreSQL is down or slow; past it new records are dropped")
	quiet := fs.Bool("quiet", false, "do not echo the functions' output")
	withConsole := fs.Bool("console", true, "serve the web console at /console/")
	cgroups := fs.Bool("cgroups", true, "run each function process in a cgroup of its own (where sless dev may make them) that enforces memoryMB, cpu and a process count; false: memory falls back to RLIMIT_DATA, the rest is not enforced")
	logFormat := fs.String("log-format", logs.FormatAuto, "how sless dev writes its events and echoes the functions' output: pretty (short lines for a person), text or json (slog's, for machines); auto: pretty on a terminal, else text")
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
	natsURL := fs.String("nats-url", os.Getenv("SLESS_NATS_URL"), "NATS URL (nats://[user:password@]host:4222) that nats triggers consume from; without one they are not consumed")
	kafkaBrokers := fs.String("kafka-brokers", os.Getenv("SLESS_KAFKA_BROKERS"), "Kafka seed brokers (host:port, comma-separated) that kafka triggers consume from; without them they are not consumed")
	mqttURL := fs.String("mqtt-url", os.Getenv("SLESS_MQTT_URL"), "MQTT broker URL (tcp://[user:password@]host:1883, ssl://…) that mqtt triggers consume from; without one they are not consumed")
	callbackAllow := fs.String("callback-allow", os.Getenv("SLESS_CALLBACK_ALLOW"), "comma-separated CIDRs, addresses and host names the results of asynchronous calls may be posted to although they are loopback, private or cluster-internal (e.g. 127.0.0.1,10.0.0.0/8,hooks.internal)")
	var rf resourceFlags
	rf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return local.Options{}, "", err
	}
	if fs.NArg() > 0 {
		return local.Options{}, "", fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if *fnDomain != "" {
		if err := invoke.CheckDomain(*fnDomain); err != nil {
			return local.Options{}, "", fmt.Errorf("--fn-domain: %w", err)
		}
	}
	opts := local.Options{
		DataDir: *dataDir, Token: *token, IdleTimeout: *idle, FunctionDomain: *fnDomain,
		BodyIdleTimeout: *bodyIdle, IdleConnTimeout: *connIdle,
		DatabaseURL: *databaseURL, RecordsMaxAge: *maxAge, LogMaxFiles: *logMaxFiles,
		Tools:         runtimes.LocalOptions{Python: *python, Node: *node, Go: *goTool},
		SourceGCGrace: *gcGrace, SourceGCInterval: *gcInterval,
		AMQPURL: *amqpURL, NATSURL: *natsURL, MQTTURL: *mqttURL, Console: *withConsole, Out: os.Stderr, NoCgroups: !*cgroups,
	}
	var err error
	if *kafkaBrokers != "" {
		if opts.KafkaBrokers, err = kafkaq.ParseBrokers(*kafkaBrokers); err != nil {
			return local.Options{}, "", fmt.Errorf("--kafka-brokers: %w", err)
		}
	}
	if opts.Resources, err = rf.site(); err != nil {
		return local.Options{}, "", err
	}
	if opts.CallbackPolicy, err = callback.ParseAllowList(strings.Split(*callbackAllow, ",")); err != nil {
		return local.Options{}, "", fmt.Errorf("--callback-allow: %w", err)
	}
	if opts.LogMaxBytes, err = byteSize("--log-max-size", *logMaxSize, 1<<10, false); err != nil {
		return local.Options{}, "", err
	}
	if opts.RecordsMaxBytes, err = byteSize("--records-max-size", *maxSize, 1<<20, true); err != nil {
		return local.Options{}, "", err
	}
	if opts.SpoolMaxBytes, err = byteSize("--spool-max-size", *spoolMax, 1<<20, false); err != nil {
		return local.Options{}, "", err
	}
	var echo io.Writer
	if opts.Logger, echo, err = logs.Terminal(*logFormat, os.Stderr); err != nil {
		return local.Options{}, "", err
	}
	if !*quiet {
		opts.Echo = echo
	}
	return opts, *addr, nil
}
