package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sless-dev/sless/pkg/adapter/kube"
	"github.com/sless-dev/sless/pkg/queue"
	"github.com/sless-dev/sless/pkg/queue/kafkaq"
	"github.com/sless-dev/sless/pkg/queue/mqttq"
	"github.com/sless-dev/sless/pkg/queue/natsq"
)

func init() {
	register("consume", "deliver the messages of a RabbitMQ queue, a NATS JetStream stream, a Kafka topic or an MQTT topic filter to a function (a trigger's consumer)", runConsume)
}

// consumeOptions is what `sless consume` runs with.
type consumeOptions struct {
	// broker is amqp (queue), nats, kafka or mqtt, whose configuration is used.
	broker string
	queue  queue.Config
	nats   natsq.Config
	kafka  kafkaq.Config
	mqtt   mqttq.Config
	// healthAddr is where readiness and liveness are served; "" serves none.
	healthAddr string
}

// delivery is what every broker's consumer is given besides its own flags.
type delivery struct {
	prefetch, concurrency, retries int
	backoff, maxBackoff, timeout   time.Duration
	invoker                        *queue.Invoker
}

// consumer is d as the nats, kafka and mqtt consumers take it.
func (d delivery) consumer() queue.Delivery {
	return queue.Delivery{Prefetch: d.prefetch, Concurrency: d.concurrency, MaxRetries: d.retries,
		Backoff: d.backoff, MaxBackoff: d.maxBackoff, Invoker: d.invoker}
}

// parseConsume reads the flags and environment of `sless consume`. The
// broker's address (with its password) and the credential come from the
// environment: SLESS_AMQP_URL, SLESS_BROKER_URL (nats) or
// SLESS_KAFKA_BROKERS, the SLESS_BROKER_* companions, and SLESS_TOKEN.
func parseConsume(args []string, getenv func(string) string) (consumeOptions, error) {
	fs := newFlags("consume", "sless consume --url URL --queue Q --timeout D [flags]\n"+
		"sless consume --broker=nats --url URL --stream S --subject S --durable D --dead-letter-subject S --timeout D [flags]\n"+
		"sless consume --broker=kafka --url URL --topic T --group G --dead-letter-topic T --timeout D [flags]\n"+
		"sless consume --broker=mqtt --url URL --topic FILTER --client-id ID --dead-letter-topic T --timeout D [flags]\n\n"+
		"Deliver the messages of a RabbitMQ queue, a NATS JetStream stream, a Kafka topic or an MQTT topic filter to a function (a trigger's consumer).\n"+
		"The broker's address comes from $"+kube.EnvAMQPURL+" (amqp), $"+kube.EnvBrokerURL+" (nats, mqtt) or $"+kube.EnvKafkaBrokers+
		" (kafka), the credential from $"+kube.EnvToken+".")
	broker := fs.String("broker", "amqp", "amqp (RabbitMQ), nats (JetStream), kafka or mqtt (MQTT 3.1.1)")
	fnURL := fs.String("url", "", "the function's invoke URL, {proxy}/fn/{namespace}/{name}")
	topics := addTopicFlags(fs)
	amqpF, natsF, kafkaF, mqttF := amqpFlags(fs), natsFlags(fs), kafkaFlags(fs, topics), mqttFlags(fs, topics)
	var d delivery
	fs.IntVar(&d.prefetch, "prefetch", 10, "unacknowledged messages held at once (1-1000)")
	fs.IntVar(&d.concurrency, "concurrency", 1, "calls at once (1-100)")
	fs.IntVar(&d.retries, "max-retries", 3, "retries before a message is dead-lettered (0-100)")
	fs.DurationVar(&d.backoff, "backoff", time.Second, "first retry delay; doubles each retry")
	fs.DurationVar(&d.maxBackoff, "max-backoff", queue.DefaultMaxBackoff, "longest retry delay")
	fs.DurationVar(&d.timeout, "timeout", 0, "how long one call may take (the function's timeout plus a cold start)")
	health := fs.String("health-addr", "", "address to serve "+kube.ConsumerReadyPath+" (200 while connected and consuming) and "+kube.ConsumerLivePath+" on, e.g. :8080")
	if err := parseFlags(fs, args); err != nil {
		return consumeOptions{}, err
	}
	if fs.NArg() > 0 {
		return consumeOptions{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	errs := d.check(*fnURL, *health)
	token := getenv(kube.EnvToken)
	if token == "" {
		errs = append(errs, errors.New("$"+kube.EnvToken+" (the trigger's credential) is required"))
	}
	d.invoker = &queue.Invoker{URL: *fnURL, Token: token, Timeout: d.timeout}
	o := consumeOptions{broker: *broker, healthAddr: *health}
	switch *broker {
	case "amqp":
		errs = append(errs, amqpF(&o, d, getenv)...)
	case "nats":
		errs = append(errs, natsF(&o, d, getenv)...)
	case "kafka":
		errs = append(errs, kafkaF(&o, d, getenv)...)
	case "mqtt":
		errs = append(errs, mqttF(&o, d, getenv)...)
	default:
		errs = append(errs, fmt.Errorf("--broker must be amqp, nats, kafka or mqtt, got %q", *broker))
	}
	if len(errs) > 0 {
		return consumeOptions{}, errors.Join(errs...)
	}
	return o, nil
}

// check refuses delivery settings and addresses out of range.
func (d delivery) check(fnURL, health string) []error {
	var errs []error
	if err := checkFunctionURL(fnURL); err != nil {
		errs = append(errs, err)
	}
	if d.prefetch < 1 || d.prefetch > 1000 {
		errs = append(errs, fmt.Errorf("--prefetch must be between 1 and 1000, got %d", d.prefetch))
	}
	if d.concurrency < 1 || d.concurrency > 100 {
		errs = append(errs, fmt.Errorf("--concurrency must be between 1 and 100, got %d", d.concurrency))
	}
	if d.retries < 0 || d.retries > 100 {
		errs = append(errs, fmt.Errorf("--max-retries must be between 0 and 100, got %d", d.retries))
	}
	if d.backoff <= 0 || d.maxBackoff < d.backoff {
		errs = append(errs, fmt.Errorf("--backoff must be positive and at most --max-backoff, got %v and %v", d.backoff, d.maxBackoff))
	}
	if d.timeout <= 0 {
		errs = append(errs, errors.New("--timeout is required and must be positive, e.g. --timeout=90s"))
	}
	if health != "" {
		if _, _, err := net.SplitHostPort(health); err != nil {
			errs = append(errs, fmt.Errorf("--health-addr must be host:port or :port, got %q", health))
		}
	}
	return errs
}

// brokerOptions fills a broker's configuration into o from its flags (the
// function registering them returns it) and the environment.
type brokerOptions func(o *consumeOptions, d delivery, getenv func(string) string) []error

// required names the flags of broker that are empty.
func required(broker string, flags map[string]string) []error {
	var errs []error
	for _, name := range []string{"queue", "stream", "subject", "durable", "dead-letter-subject", "topic", "group", "client-id", "dead-letter-topic"} {
		if v, ok := flags[name]; ok && v == "" {
			errs = append(errs, fmt.Errorf("--%s is required with --broker=%s", name, broker))
		}
	}
	return errs
}

func amqpFlags(fs *flag.FlagSet) brokerOptions {
	q := fs.String("queue", "", "queue to consume (amqp)")
	dlq := fs.String("dead-letter-queue", "", "queue for messages whose retries ran out (amqp; default <queue>.dlq)")
	return func(o *consumeOptions, d delivery, getenv func(string) string) []error {
		errs := required("amqp", map[string]string{"queue": *q})
		amqpURL := getenv(kube.EnvAMQPURL)
		if amqpURL == "" {
			errs = append(errs, errors.New("$"+kube.EnvAMQPURL+" (the broker's amqp:// URL) is required"))
		}
		o.queue = queue.Config{
			URL: amqpURL, Queue: *q, DeadLetterQueue: *dlq, Prefetch: d.prefetch, Concurrency: d.concurrency,
			MaxRetries: d.retries, Backoff: d.backoff, MaxBackoff: d.maxBackoff, Invoker: d.invoker,
		}
		return errs
	}
}

func natsFlags(fs *flag.FlagSet) brokerOptions {
	stream := fs.String("stream", "", "JetStream stream to consume (nats)")
	subject := fs.String("subject", "", "subject filter of the stream's messages (nats)")
	durable := fs.String("durable", "", "name of the durable JetStream consumer (nats)")
	dls := fs.String("dead-letter-subject", "", "subject for messages whose retries ran out (nats)")
	return func(o *consumeOptions, d delivery, getenv func(string) string) []error {
		errs := required("nats", map[string]string{"stream": *stream, "subject": *subject, "durable": *durable, "dead-letter-subject": *dls})
		natsURL := getenv(kube.EnvBrokerURL)
		if natsURL == "" {
			errs = append(errs, errors.New("$"+kube.EnvBrokerURL+" (the server's nats:// URL) is required"))
		}
		o.nats = natsq.Config{
			URL: natsURL, Auth: brokerAuth(getenv), Stream: *stream, Subject: *subject, Durable: *durable, DeadLetterSubject: *dls,
			// JetStream delivers a message again if no acknowledgement
			// came within AckWait: longer than the longest call.
			AckWait: d.timeout + ackWaitMargin, Delivery: d.consumer(),
		}
		return errs
	}
}

// topicFlags are the flags kafka and mqtt share.
type topicFlags struct{ topic, deadLetter *string }

func addTopicFlags(fs *flag.FlagSet) topicFlags {
	return topicFlags{
		topic:      fs.String("topic", "", "topic to consume (kafka), or topic filter to subscribe to, + and # allowed (mqtt)"),
		deadLetter: fs.String("dead-letter-topic", "", "topic for messages whose retries ran out (kafka, mqtt)"),
	}
}

func kafkaFlags(fs *flag.FlagSet, tf topicFlags) brokerOptions {
	topic, dlt := tf.topic, tf.deadLetter
	group := fs.String("group", "", "consumer group id (kafka)")
	return func(o *consumeOptions, d delivery, getenv func(string) string) []error {
		errs := required("kafka", map[string]string{"topic": *topic, "group": *group, "dead-letter-topic": *dlt})
		brokers, err := kafkaq.ParseBrokers(getenv(kube.EnvKafkaBrokers))
		if err != nil {
			errs = append(errs, fmt.Errorf("$%s (the seed brokers): %w", kube.EnvKafkaBrokers, err))
		}
		tlsOn := strings.TrimSpace(getenv(kube.EnvBrokerTLS))
		switch strings.ToLower(tlsOn) {
		case "", "false", "true":
		default:
			errs = append(errs, fmt.Errorf("$%s (key tls) must be true or false, got %q", kube.EnvBrokerTLS, tlsOn))
		}
		o.kafka = kafkaq.Config{
			Brokers: brokers, Auth: brokerAuth(getenv), SASLMechanism: strings.TrimSpace(getenv(kube.EnvBrokerSASLMechanism)),
			TLS: strings.EqualFold(tlsOn, "true"), Topic: *topic, Group: *group, DeadLetterTopic: *dlt,
			Delivery: d.consumer(),
		}
		return errs
	}
}

func mqttFlags(fs *flag.FlagSet, tf topicFlags) brokerOptions {
	group := fs.String("share-group", "", "subscribe as $share/<group>/<topic> (mqtt)")
	clientID := fs.String("client-id", "", "client id of the persistent session (mqtt)")
	return func(o *consumeOptions, d delivery, getenv func(string) string) []error {
		errs := required("mqtt", map[string]string{"topic": *tf.topic, "client-id": *clientID, "dead-letter-topic": *tf.deadLetter})
		u := getenv(kube.EnvBrokerURL)
		if u == "" {
			errs = append(errs, errors.New("$"+kube.EnvBrokerURL+" (the broker's tcp:// or ssl:// URL) is required"))
		}
		o.mqtt = mqttq.Config{
			URL: u, Auth: brokerAuth(getenv), Topic: *tf.topic, ShareGroup: *group, ClientID: *clientID, DeadLetterTopic: *tf.deadLetter,
			Delivery: d.consumer(),
		}
		return errs
	}
}

// source makes the consumer the options describe, logging to log.
func (o consumeOptions) source(log *slog.Logger, tp trace.TracerProvider) (queue.Source, error) {
	switch o.broker {
	case "nats":
		o.nats.Logger, o.nats.TracerProvider = log, tp
		return natsq.New(o.nats)
	case "kafka":
		o.kafka.Logger, o.kafka.TracerProvider = log, tp
		return kafkaq.New(o.kafka)
	case "mqtt":
		o.mqtt.Logger, o.mqtt.TracerProvider = log, tp
		return mqttq.New(o.mqtt)
	}
	o.queue.Logger, o.queue.TracerProvider = log, tp
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
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	tr, err := startTracing(ctx, "sless-consume", log)
	if err != nil {
		return err
	}
	defer stopTracing(tr, log)
	c, err := o.source(log, tr.Provider())
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
