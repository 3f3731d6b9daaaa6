package kafkaq

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/queue"
)

// SASL mechanisms, named as franz-go's sasl packages name them.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// Config is one consumer's configuration.
type Config struct {
	// Brokers are the seed brokers, host:port (ParseBrokers reads a list).
	Brokers []string
	// Auth holds the SASL user and password and the TLS material.
	Auth queue.Auth
	// SASLMechanism is SASLPlain, SASLScramSHA256 or SASLScramSHA512; ""
	// for none.
	SASLMechanism string
	// TLS dials the brokers with TLS; a CA or client certificate in Auth
	// implies it.
	TLS bool
	// Topic to consume; it must exist.
	Topic string
	// Group is the consumer group's id.
	Group string
	// DeadLetterTopic receives the records whose retries ran out; the
	// consumer creates it if it is missing.
	DeadLetterTopic string
	// Delivery's Prefetch is how many records the consumer holds
	// unfinished.
	queue.Delivery
}

// ParseBrokers reads a comma-separated list of host:port seed brokers.
func ParseBrokers(list string) ([]string, error) {
	var out []string
	var errs []error
	for _, b := range strings.Split(list, ",") {
		b = strings.TrimSpace(b)
		if b == "" {
			continue
		}
		host, port, err := net.SplitHostPort(b)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			errs = append(errs, fmt.Errorf("broker %q is not host:port, like kafka-0.kafka:9092", b))
			continue
		}
		out = append(out, b)
	}
	if len(out) == 0 && len(errs) == 0 {
		errs = append(errs, errors.New("no broker given: the seed brokers are host:port separated by commas"))
	}
	return out, errors.Join(errs...)
}

func (c *Config) defaults() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("the seed brokers are required"))
	}
	if _, err := ParseBrokers(strings.Join(c.Brokers, ",")); err != nil && len(c.Brokers) > 0 {
		errs = append(errs, err)
	}
	spec := &slessv1alpha1.KafkaSpec{ConnectionSecret: "x", Topic: c.Topic, Group: c.Group, DeadLetterTopic: c.DeadLetterTopic}
	for _, fe := range slessv1alpha1.ValidateKafka(spec) {
		errs = append(errs, errors.New(fe.Error()))
	}
	if c.Group == "" || c.DeadLetterTopic == "" {
		errs = append(errs, errors.New("the consumer group and the dead-letter topic are required"))
	}
	errs = append(errs, c.Delivery.Check()...)
	if _, err := c.mechanism(); err != nil {
		errs = append(errs, err)
	}
	if _, err := c.Auth.TLSConfig(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("kafka: %w", errors.Join(errs...))
	}
	c.Delivery.Fill()
	return nil
}

// mechanism is the SASL mechanism the configuration asks for, nil for none.
func (c *Config) mechanism() (sasl.Mechanism, error) {
	a := c.Auth
	if c.SASLMechanism == "" {
		if a.Username != "" || a.Password != "" {
			return nil, errors.New("a username and password need a SASL mechanism: " + SASLPlain + ", " + SASLScramSHA256 + " or " + SASLScramSHA512)
		}
		return nil, nil
	}
	if a.Username == "" || a.Password == "" {
		return nil, fmt.Errorf("SASL mechanism %s needs a username and a password", c.SASLMechanism)
	}
	switch strings.ToUpper(c.SASLMechanism) {
	case SASLPlain:
		return plain.Auth{User: a.Username, Pass: a.Password}.AsMechanism(), nil
	case SASLScramSHA256:
		return scram.Auth{User: a.Username, Pass: a.Password}.AsSha256Mechanism(), nil
	case SASLScramSHA512:
		return scram.Auth{User: a.Username, Pass: a.Password}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("SASL mechanism %q is not one of %s, %s or %s", c.SASLMechanism, SASLPlain, SASLScramSHA256, SASLScramSHA512)
}

// clientOptions are what every client of the consumer dials with: the
// brokers, SASL and TLS.
func (c *Config) clientOptions() []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.Brokers...),
		kgo.ClientID("sless-consume"),
		kgo.DialTimeout(10 * time.Second),
	}
	if m, _ := c.mechanism(); m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	tc, _ := c.Auth.TLSConfig()
	if tc == nil && c.TLS {
		tc = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if tc != nil {
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	return opts
}

// RetryDelay is the wait before retry n (1-based).
func (c *Config) RetryDelay(n int) time.Duration {
	return queue.Backoff(c.Backoff, c.MaxBackoff, n)
}
