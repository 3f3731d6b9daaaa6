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
	"github.com/sless-dev/sless/pkg/queue/natsq"
)

func init() {
	register("consume", "deliver the messages of a RabbitMQ queue or a NATS JetStream stream to a function (a trigger's consumer)", runConsume)
}

// consumeOptions is what `sless consume` runs with.
type consumeOptions struct {
	// broker is amqp (queue) or nats (nats), whose configuration is used.
	broker string
	queue  queue.Config
	nats   natsq.Config
	// healthAddr is where readiness and liveness are served; "" serves none.
	healthAddr string
}

// parseConsume reads the flags and environment of `sless consume`. The
// broker URL (with its password) and the credential come from the
// environment: SLESS_AMQP_URL (or SLESS_BROKER_URL and its SLESS_BROKER_*
// companions for --broker=nats) and SLESS_TOKEN.
func parseConsume(args []string, getenv func(string) string) (consumeOptions, error) {
	fs := newFlags("consume", "sless consume --url URL --queue Q --timeout D [flags]\n"+
		"sless consume --broker=nats --url URL --stream S --subject S --durable D --dead-letter-subject S --timeout D [flags]\n\n"+
		"Deliver the messages of a RabbitMQ queue or a NATS JetStream stream to a function (a trigger's consumer).\n"+
		"The broker URL comes from $"+kube.EnvAMQPURL+" (amqp) or $"+kube.EnvBrokerURL+" (nats), the credential from $"+kube.EnvToken+".")
	broker := fs.String("broker", "amqp", "amqp (RabbitMQ) or nats (JetStream)")
	fnURL := fs.String("url", "", "the function's invoke URL, {proxy}/fn/{namespace}/{name}")
	q := fs.String("queue", "", "queue to consume (amqp)")
	dlq := fs.String("dead-letter-queue", "", "queue for messages whose retries ran out (amqp; default <queue>.dlq)")
	stream := fs.String("stream", "", "JetStream stream to consume (nats)")
	subject := fs.String("subject", "", "subject filter of the stream's messages (nats)")
	durable := fs.String("durable", "", "name of the durable JetStream consumer (nats)")
	dls := fs.String("dead-letter-subject", "", "subject for messages whose retries ran out (nats)")
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
	token := getenv(kube.EnvToken)
	if token == "" {
		errs = append(errs, errors.New("$"+kube.EnvToken+" (the trigger's credential) is required"))
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
	invoker := &queue.Invoker{URL: *fnURL, Token: token, Timeout: *timeout}
	o := consumeOptions{broker: *broker, healthAddr: *health}
	switch *broker {
	case "amqp":
		amqpURL := getenv(kube.EnvAMQPURL)
		if amqpURL == "" {
			errs = append(errs, errors.New("$"+kube.EnvAMQPURL+" (the broker's amqp:// URL) is required"))
		}
		if *q == "" {
			errs = append(errs, errors.New("--queue is required"))
		}
		o.queue = queue.Config{
			URL: amqpURL, Queue: *q, DeadLetterQueue: *dlq, Prefetch: *prefetch, Concurrency: *concurrency,
			MaxRetries: *retries, Backoff: *backoff, MaxBackoff: *maxBackoff, Invoker: invoker,
		}
	case "nats":
		natsURL := getenv(kube.EnvBrokerURL)
		if natsURL == "" {
			errs = append(errs, errors.New("$"+kube.EnvBrokerURL+" (the server's nats:// URL) is required"))
		}
		for _, f := range []struct{ name, value string }{{"stream", *stream}, {"subject", *subject}, {"durable", *durable}, {"dead-letter-subject", *dls}} {
			if f.value == "" {
				errs = append(errs, fmt.Errorf("--%s is required with --broker=nats", f.name))
			}
		}
		o.nats = natsq.Config{
			URL: natsURL, Auth: brokerAuth(getenv), Stream: *stream, Subject: *subject, Durable: *durable, DeadLetterSubject: *dls,
			Prefetch: *prefetch, Concurrency: *concurrency, MaxRetries: *retries, Backoff: *backoff, MaxBackoff: *maxBackoff,
			// JetStream delivers a message again if no acknowledgement
			// came within AckWait: longer than the longest call.
			AckWait: *timeout + ackWaitMargin, Invoker: invoker,
		}
	default:
		errs = append(errs, fmt.Errorf("--broker must be amqp or nats, got %q", *broker))
	}
	if len(errs) > 0 {
		return consumeOptions{}, errors.Join(errs...)
	}
	return o, nil
}

// source makes the consumer the options describe, logging to log.
func (o consumeOptions) source(log *slog.Logger) (queue.Source, error) {
	if o.broker == "nats" {
		o.nats.Logger = log
		return natsq.New(o.nats)
	}
	o.queue.Logger = log
	return queue.New(o.queue)
}

// ackWaitMargin is added to the call's timeout for JetStream's AckWait, so
// that a call that takes all its time is settled before a redelivery.
const ackWaitMargin = 30 * time.Second

// brokerAuth reads the optional credentials of the connection Secret.
func brokerAuth(getenv func(string) string) queue.Auth {
	return queue.Auth{
		Username: getenv(kube.EnvBrokerUsername), Password: getenv(kube.EnvBrokerPassword), Token: getenv(kube.EnvBrokerToken),
		CA: []byte(getenv(kube.EnvBrokerCA)), Cert: []byte(getenv(kube.EnvBrokerCert)), Key: []byte(getenv(kube.EnvBrokerKey)),
	}
}

// runConsume consumes until SIGTERM, then finishes the calls in flight.
func runConsume(ctx context.Context, args []string) error {
	o, err := parseConsume(args, os.Getenv)
	if err != nil {
		return err
	}
	c, err := o.source(slog.New(slog.NewJSONHandler(os.Stderr, nil)))
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
	return queue.RunWithHealth(ctx, c, ln, kube.ConsumerReadyPath, kube.ConsumerLivePath)
}
