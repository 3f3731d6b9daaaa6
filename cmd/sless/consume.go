package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/sless-dev/sless/pkg/adapter/kube"
	"github.com/sless-dev/sless/pkg/queue"
)

func init() {
	register("consume", "deliver the messages of a RabbitMQ queue to a function (a queue trigger's consumer)", runConsume)
}

// consumeOptions is what `sless consume` runs with.
type consumeOptions struct {
	queue queue.Config
	// healthAddr is where readiness and liveness are served; "" serves none.
	healthAddr string
}

// parseConsume reads the flags and environment of `sless consume`. The
// broker URL (with its password) and the credential come from the
// environment: SLESS_AMQP_URL and SLESS_TOKEN.
func parseConsume(args []string, getenv func(string) string) (consumeOptions, error) {
	fs := newFlags("consume", "sless consume --url URL --queue Q --timeout D [flags]\n\nDeliver the messages of a RabbitMQ queue to a function (a queue trigger's consumer).\nThe broker URL comes from $"+kube.EnvAMQPURL+", the credential from $"+kube.EnvToken+".")
	fnURL := fs.String("url", "", "the function's invoke URL, {proxy}/fn/{namespace}/{name}")
	q := fs.String("queue", "", "queue to consume")
	dlq := fs.String("dead-letter-queue", "", "queue for messages whose retries ran out (default <queue>.dlq)")
	prefetch := fs.Int("prefetch", 10, "unacknowledged messages held at once (1-1000)")
	concurrency := fs.Int("concurrency", 1, "calls at once (1-100)")
	retries := fs.Int("max-retries", 3, "retries before a message is dead-lettered (0-100)")
	backoff := fs.Duration("backoff", time.Second, "first retry delay; doubles each retry")
	maxBackoff := fs.Duration("max-backoff", queue.DefaultMaxBackoff, "longest retry delay")
	timeout := fs.Duration("timeout", 0, "how long one call may take (the function's timeout plus a cold start)")
	health := fs.String("health-addr", "", "address to serve "+kube.ConsumerReadyPath+" (200 while connected and consuming) and "+kube.ConsumerLivePath+" on, e.g. :8080")
	if err := parseFlags(fs, args); err != nil {
		return consumeOptions{}, err
	}
	if fs.NArg() > 0 {
		return consumeOptions{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var errs []error
	if err := checkFunctionURL(*fnURL); err != nil {
		errs = append(errs, err)
	}
	amqpURL := getenv(kube.EnvAMQPURL)
	if amqpURL == "" {
		errs = append(errs, errors.New("$"+kube.EnvAMQPURL+" (the broker's amqp:// URL) is required"))
	}
	token := getenv(kube.EnvToken)
	if token == "" {
		errs = append(errs, errors.New("$"+kube.EnvToken+" (the trigger's credential) is required"))
	}
	if *q == "" {
		errs = append(errs, errors.New("--queue is required"))
	}
	if *prefetch < 1 || *prefetch > 1000 {
		errs = append(errs, fmt.Errorf("--prefetch must be between 1 and 1000, got %d", *prefetch))
	}
	if *concurrency < 1 || *concurrency > 100 {
		errs = append(errs, fmt.Errorf("--concurrency must be between 1 and 100, got %d", *concurrency))
	}
	if *retries < 0 || *retries > 100 {
		errs = append(errs, fmt.Errorf("--max-retries must be between 0 and 100, got %d", *retries))
	}
	if *backoff <= 0 || *maxBackoff < *backoff {
		errs = append(errs, fmt.Errorf("--backoff must be positive and at most --max-backoff, got %v and %v", *backoff, *maxBackoff))
	}
	if *timeout <= 0 {
		errs = append(errs, errors.New("--timeout is required and must be positive, e.g. --timeout=90s"))
	}
	if *health != "" {
		if _, _, err := net.SplitHostPort(*health); err != nil {
			errs = append(errs, fmt.Errorf("--health-addr must be host:port or :port, got %q", *health))
		}
	}
	if len(errs) > 0 {
		return consumeOptions{}, errors.Join(errs...)
	}
	return consumeOptions{healthAddr: *health, queue: queue.Config{
		URL: amqpURL, Queue: *q, DeadLetterQueue: *dlq, Prefetch: *prefetch, Concurrency: *concurrency,
		MaxRetries: *retries, Backoff: *backoff, MaxBackoff: *maxBackoff,
		Invoker: &queue.Invoker{URL: *fnURL, Token: token, Timeout: *timeout},
	}}, nil
}

// runConsume consumes until SIGTERM, then finishes the calls in flight.
func runConsume(ctx context.Context, args []string) error {
	o, err := parseConsume(args, os.Getenv)
	if err != nil {
		return err
	}
	o.queue.Logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	c, err := queue.New(o.queue)
	if err != nil {
		return err
	}
	if o.healthAddr == "" {
		return c.Run(ctx)
	}
	// Bound before consuming starts, so a port already taken fails the
	// start rather than leave a consumer no probe can reach.
	ln, err := net.Listen("tcp", o.healthAddr)
	if err != nil {
		return fmt.Errorf("serve health on %s: %w", o.healthAddr, err)
	}
	return c.RunWithHealth(ctx, ln, kube.ConsumerReadyPath, kube.ConsumerLivePath)
}
