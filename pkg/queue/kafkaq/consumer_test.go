package kafkaq_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/sless-dev/sless/pkg/queue"
	"github.com/sless-dev/sless/pkg/queue/kafkaq"
	"github.com/sless-dev/sless/pkg/queue/kafkaq/kafkatest"
	"github.com/sless-dev/sless/pkg/queue/queuetest"
)

// config is a consumer of topic orders in group workers, calling fn.
func config(c *kafkatest.Cluster, fn *queuetest.Function) kafkaq.Config {
	return kafkaq.Config{Brokers: []string{c.Addr}, Topic: "orders", Group: "workers", DeadLetterTopic: "orders.dlq",
		Delivery: queue.Delivery{Prefetch: 20, Concurrency: 4, MaxRetries: 2, Backoff: 50 * time.Millisecond,
			ReconnectDelay: 50 * time.Millisecond, Invoker: fn.Invoker()}}
}

// start runs a consumer until the test ends; stop ends it and returns
// what Run returned.
func start(t *testing.T, cfg kafkaq.Config) (c *kafkaq.Consumer, stop func() error) {
	t.Helper()
	c, err := kafkaq.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, queuetest.Start(t, c)
}

func awaitState(t *testing.T, c queue.Source, what string, ok func(queue.State) bool) queue.State {
	t.Helper()
	return queuetest.AwaitState(t, c, 30*time.Second, what, ok)
}

func TestDeliversEachRecordAndCommits(t *testing.T) {
	k := kafkatest.Start(t)
	k.Topic("orders", 3)
	fn := queuetest.NewFunction(t, nil)
	c, _ := start(t, config(k, fn))
	awaitState(t, c, "consuming", queue.State.Ready)
	kafkatest.Produce(t, k.Client(), "orders", "o", 30)
	queuetest.Eventually(t, "every record called", func() (bool, string) {
		ids, calls := fn.Distinct()
		return ids == 30, fmt.Sprintf("%d ids, %d calls", ids, calls)
	})
	kafkatest.AwaitCommitted(t, k, "workers", "orders")
	if ids, calls := fn.Distinct(); calls != ids {
		t.Errorf("%d calls of %d records", calls, ids)
	}
	// Every call says where its record came from.
	fn.Mu.Lock()
	defer fn.Mu.Unlock()
	for id, h := range fn.Headers {
		want := "orders-" + h.Get(kafkaq.PartitionHeader) + "-" + h.Get(kafkaq.OffsetHeader)
		if id != want || h.Get(kafkaq.TopicHeader) != "orders" || !strings.HasPrefix(h.Get(kafkaq.KeyHeader), "o-") ||
			h.Get(queue.AttemptHeader) != "1" || h.Get(queue.TriggerHeader) != "kafka" || h.Get("Content-Type") != "application/json" ||
			h.Get(kafkaq.TimestampHeader) == "" {
			t.Errorf("call %s with headers %v", id, h)
		}
	}
}

// A record whose calls keep failing is tried maxRetries+1 times, then
// produced to the dead-letter topic with why; its partition's offset is
// committed past it then, and the others are called once.
func TestRetriesThenDeadLetters(t *testing.T) {
	k := kafkatest.Start(t)
	k.Topic("orders", 2)
	fn := queuetest.NewFunction(t, func(_ string, _ int, body string) int {
		if body == `{"n":3}` {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	cfg := config(k, fn)
	c, _ := start(t, cfg)
	awaitState(t, c, "consuming", queue.State.Ready)
	kafkatest.Produce(t, k.Client(), "orders", "o", 10)
	dead := kafkatest.Records(t, k, "orders.dlq", 1)
	if len(dead) != 1 || string(dead[0].Value) != `{"n":3}` || string(dead[0].Key) != "o-3" {
		t.Fatalf("dead letters %v", dead)
	}
	h := map[string]string{}
	for _, rh := range dead[0].Headers {
		h[rh.Key] = string(rh.Value)
	}
	id := "orders-" + h[kafkaq.OriginalPartitionHeader] + "-" + h[kafkaq.OriginalOffsetHeader]
	if h[queue.RetriesHeader] != "2" || h[queue.LastStatusHeader] != "500" || !strings.Contains(h[queue.LastErrorHeader], "500") ||
		h[kafkaq.OriginalTopicHeader] != "orders" || h[queue.DeadAtHeader] == "" || h["content-type"] != "application/json" {
		t.Errorf("dead letter headers %v", h)
	}
	if n := fn.Count(id); n != 3 {
		t.Errorf("the poison record %s was called %d times, want 3 (2 retries)", id, n)
	}
	calls := fn.Calls[id]
	if gap := calls[2].Sub(calls[1]); gap < 2*cfg.Backoff {
		t.Errorf("the second retry came %v after the first, want at least %v (doubled backoff)", gap, 2*cfg.Backoff)
	}
	kafkatest.AwaitCommitted(t, k, "workers", "orders")
	if ids, calls := fn.Distinct(); ids != 10 || calls != 12 {
		t.Errorf("%d records, %d calls; want 10 records, 12 calls", ids, calls)
	}
}

// A record being retried holds its partition's commit back: a restart
// then delivers it again rather than skip it, with the records after it.
func TestRetryHoldsBackTheCommit(t *testing.T) {
	k := kafkatest.Start(t)
	k.Topic("orders", 1)
	fn := queuetest.NewFunction(t, func(_ string, attempt int, body string) int {
		if body == `{"n":0}` && attempt == 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	cfg := config(k, fn)
	cfg.Backoff = time.Hour
	c, stop := start(t, cfg)
	awaitState(t, c, "consuming", queue.State.Ready)
	kafkatest.Produce(t, k.Client(), "orders", "o", 5)
	queuetest.Eventually(t, "the other records called", func() (bool, string) { ids, _ := fn.Distinct(); return ids == 5, "" })
	cl := k.Client()
	if got := kafkatest.Committed(t, cl, "workers", "orders"); got[0] > 0 {
		t.Fatalf("committed %v while record 0 waits for its retry", got)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// The first record's retry comes from the next consumer, at once.
	c2, _ := start(t, config(k, fn))
	awaitState(t, c2, "consuming again", queue.State.Ready)
	kafkatest.AwaitCommitted(t, k, "workers", "orders")
	if n := fn.Count("orders-0-0"); n != 2 {
		t.Errorf("record 0 called %d times, want 2", n)
	}
}

func TestStateSaysWhyNotConsuming(t *testing.T) {
	fn := queuetest.NewFunction(t, nil)
	t.Run("unknown topic, then made", func(t *testing.T) {
		k := kafkatest.Start(t)
		c, _ := start(t, config(k, fn))
		s := awaitState(t, c, "the missing topic reported", func(s queue.State) bool { return s.Err != nil })
		if !strings.Contains(s.Err.Error(), "topic orders does not exist on the brokers at "+k.Addr) || s.Stopped {
			t.Errorf("state %+v", s)
		}
		k.Topic("orders", 1)
		awaitState(t, c, "consuming the new topic", queue.State.Ready)
	})
	t.Run("no broker", func(t *testing.T) {
		k := kafkatest.Start(t)
		k.Stop()
		c, _ := start(t, config(k, fn))
		s := awaitState(t, c, "the unreachable broker reported", func(s queue.State) bool { return s.Err != nil })
		if !strings.Contains(s.Err.Error(), "reach the brokers at "+k.Addr) || s.Ready() {
			t.Errorf("state %+v", s)
		}
	})
	t.Run("wrong password", func(t *testing.T) {
		// kfake drops the connection where Kafka answers
		// SASL_AUTHENTICATION_FAILED (which ends the consumer: see
		// TestAuthRefusalsArePermanent): the consumer is not ready, and
		// says it cannot reach the brokers.
		k := kafkatest.Start(t, kfake.EnableSASL(), kfake.Superuser(kafkaq.SASLScramSHA256, "sless", "right"))
		cfg := config(k, fn)
		cfg.SASLMechanism, cfg.Auth = kafkaq.SASLScramSHA256, queue.Auth{Username: "sless", Password: "wrong"}
		c, _ := start(t, cfg)
		s := awaitState(t, c, "the refusal", func(s queue.State) bool { return s.Err != nil })
		if s.Ready() || !strings.Contains(s.Err.Error(), "reach the brokers at "+k.Addr) {
			t.Errorf("state %+v", s)
		}
	})
	t.Run("right password", func(t *testing.T) {
		for _, mech := range []string{kafkaq.SASLPlain, kafkaq.SASLScramSHA512} {
			k := kafkatest.Start(t, kfake.EnableSASL(), kfake.Superuser(mech, "sless", "right"))
			cfg := config(k, fn)
			cfg.SASLMechanism, cfg.Auth = mech, queue.Auth{Username: "sless", Password: "right"}
			c, _ := start(t, cfg)
			s := awaitState(t, c, mech+" refusing the missing topic", func(s queue.State) bool { return s.Err != nil })
			if !strings.Contains(s.Err.Error(), "does not exist") {
				t.Errorf("%s: state %+v, want past authentication to the missing topic", mech, s)
			}
		}
	})
}

func TestConfigRefusals(t *testing.T) {
	fn := queuetest.NewFunction(t, nil)
	for _, tc := range []struct {
		name   string
		change func(*kafkaq.Config)
		want   string
	}{
		{"no brokers", func(c *kafkaq.Config) { c.Brokers = nil }, "the seed brokers are required"},
		{"broker without port", func(c *kafkaq.Config) { c.Brokers = []string{"kafka"} }, `broker "kafka" is not host:port`},
		{"broker URL", func(c *kafkaq.Config) { c.Brokers = []string{"kafka://k:9092"} }, "is not host:port"},
		{"broker port out of range", func(c *kafkaq.Config) { c.Brokers = []string{"k:70000"} }, `broker "k:70000" is not host:port`},
		{"no topic", func(c *kafkaq.Config) { c.Topic = "" }, "topic: Required value"},
		{"topic with a slash", func(c *kafkaq.Config) { c.Topic = "a/b" }, "topic must be letters, digits"},
		{"no group", func(c *kafkaq.Config) { c.Group = "" }, "the consumer group and the dead-letter topic are required"},
		{"dead letters to the topic", func(c *kafkaq.Config) { c.DeadLetterTopic = c.Topic }, "deadLetterTopic must differ from topic"},
		{"no invoker", func(c *kafkaq.Config) { c.Invoker = nil }, "the function's invoker is required"},
		{"negative retries", func(c *kafkaq.Config) { c.MaxRetries = -1 }, "max retries must not be negative"},
		{"unknown mechanism", func(c *kafkaq.Config) {
			c.SASLMechanism, c.Auth = "GSSAPI", queue.Auth{Username: "u", Password: "secret"}
		}, `SASL mechanism "GSSAPI" is not one of PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512`},
		{"mechanism without password", func(c *kafkaq.Config) {
			c.SASLMechanism, c.Auth = kafkaq.SASLPlain, queue.Auth{Username: "u"}
		}, "SASL mechanism PLAIN needs a username and a password"},
		{"password without mechanism", func(c *kafkaq.Config) { c.Auth = queue.Auth{Username: "u", Password: "secret"} }, "need a SASL mechanism"},
		{"half a client certificate", func(c *kafkaq.Config) { c.Auth.Cert = []byte("x") }, "needs both tls.crt and tls.key"},
		{"bad CA", func(c *kafkaq.Config) { c.Auth.CA = []byte("not pem") }, "ca.crt holds no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := kafkaq.Config{Brokers: []string{"127.0.0.1:9092"}, Topic: "orders", Group: "g", DeadLetterTopic: "orders.dlq",
				Delivery: queue.Delivery{Invoker: fn.Invoker()}}
			tc.change(&cfg)
			_, err := kafkaq.New(cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
}

func TestParseBrokers(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "k-0:9092", want: "k-0:9092"},
		{in: " a:1, b:2 ,", want: "a:1,b:2"},
		{in: "[::1]:9092", want: "[::1]:9092"},
		{in: "", err: "no broker given"},
		{in: " , ", err: "no broker given"},
		{in: "a:1,b", err: `broker "b" is not host:port`},
		{in: ":9092", err: `broker ":9092" is not host:port`},
		{in: "a:0", err: `broker "a:0" is not host:port`},
		{in: "a:x", err: `broker "a:x" is not host:port`},
	} {
		got, err := kafkaq.ParseBrokers(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseBrokers(%q) = %v, %v; want error %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || strings.Join(got, ",") != tc.want {
			t.Errorf("ParseBrokers(%q) = %v, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}

// Neither the broker going away mid-stream nor the consumer being stopped
// and started again loses a record; duplicates come only from records
// past the last commit at the time.
func TestBrokerRestartAndConsumerRestartLoseNothing(t *testing.T) {
	k := kafkatest.Start(t)
	k.Topic("orders", 4)
	fn := queuetest.NewFunction(t, nil)
	fn.SetDelay(2 * time.Millisecond)
	cfg := config(k, fn)
	c, stop := start(t, cfg)
	awaitState(t, c, "consuming", queue.State.Ready)
	const n = 1000
	kafkatest.Produce(t, k.Client(), "orders", "m", n)
	queuetest.Eventually(t, "a third called", func() (bool, string) { ids, _ := fn.Distinct(); return ids > n/3, "" })
	k.Stop()
	awaitState(t, c, "the outage seen", func(s queue.State) bool { return !s.Ready() && s.Err != nil })
	k.Restart()
	queuetest.Eventually(t, "two thirds called", func() (bool, string) { ids, _ := fn.Distinct(); return ids > 2*n/3, "" })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	c2, _ := start(t, cfg)
	awaitState(t, c2, "the new consumer consuming", queue.State.Ready)
	queuetest.Eventually(t, "every record called", func() (bool, string) {
		ids, calls := fn.Distinct()
		return ids == n, fmt.Sprintf("%d of %d ids, %d calls", ids, n, calls)
	})
	kafkatest.AwaitCommitted(t, k, "workers", "orders")
	_, calls := fn.Distinct()
	t.Logf("%d records, %d calls (%d duplicates across the restarts)", n, calls, calls-n)
}

// A stopped consumer lets its calls in flight finish and commits them;
// the records it held but had not called go to the next consumer: each is
// called, and none twice.
func TestStopFinishesCallsInFlight(t *testing.T) {
	k := kafkatest.Start(t)
	k.Topic("orders", 1)
	fn := queuetest.NewFunction(t, nil)
	fn.SetDelay(300 * time.Millisecond)
	cfg := config(k, fn)
	cfg.Concurrency = 2
	c, stop := start(t, cfg)
	awaitState(t, c, "consuming", queue.State.Ready)
	kafkatest.Produce(t, k.Client(), "orders", "m", 10)
	queuetest.Eventually(t, "calls in flight", func() (bool, string) { _, calls := fn.Distinct(); return calls >= 2, "" })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	fn.SetDelay(0)
	c2, _ := start(t, cfg)
	awaitState(t, c2, "the next consumer consuming", queue.State.Ready)
	queuetest.Eventually(t, "every record called", func() (bool, string) {
		ids, calls := fn.Distinct()
		return ids == 10, fmt.Sprintf("%d ids, %d calls", ids, calls)
	})
	kafkatest.AwaitCommitted(t, k, "workers", "orders")
	if ids, calls := fn.Distinct(); calls != ids {
		t.Errorf("%d calls of %d records: a call in flight at the stop was not committed", calls, ids)
		fn.Mu.Lock()
		for id, c := range fn.Calls {
			if len(c) > 1 {
				t.Logf("%s called at %v", id, c)
			}
		}
		fn.Mu.Unlock()
	}
}

// A record waiting for its retry lets its partition go on only so far:
// with twice prefetch records of that partition held past its commit
// point, fetching the partition pauses, so a restart delivers again at
// most about that many (and a poll's worth more).
func TestRetryPausesItsPartition(t *testing.T) {
	k := kafkatest.Start(t)
	k.Topic("orders", 1)
	fn := queuetest.NewFunction(t, func(_ string, attempt int, body string) int {
		if body == `{"n":0}` && attempt == 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	cfg := config(k, fn)
	cfg.Prefetch, cfg.Backoff = 5, time.Hour
	c, stop := start(t, cfg)
	awaitState(t, c, "consuming", queue.State.Ready)
	kafkatest.Produce(t, k.Client(), "orders", "o", 100)
	queuetest.Eventually(t, "the partition paused", func() (bool, string) { ids, _ := fn.Distinct(); return ids >= 2*cfg.Prefetch, "" })
	// Nothing to await: the point is that no more calls come.
	time.Sleep(500 * time.Millisecond)
	held, _ := fn.Distinct()
	if held > 3*cfg.Prefetch {
		t.Fatalf("%d records called while record 0 waits for its retry, want at most %d", held, 3*cfg.Prefetch)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	c2, _ := start(t, config(k, fn))
	awaitState(t, c2, "consuming again", queue.State.Ready)
	queuetest.Eventually(t, "every record called", func() (bool, string) {
		ids, calls := fn.Distinct()
		return ids == 100, fmt.Sprintf("%d ids, %d calls", ids, calls)
	})
	kafkatest.AwaitCommitted(t, k, "workers", "orders")
	if _, calls := fn.Distinct(); calls-100 > held {
		t.Errorf("%d duplicates, more than the %d records held at the restart", calls-100, held)
	}
	t.Logf("%d records called while record 0 waited; %d calls in all", held, func() int { _, c := fn.Distinct(); return c }())
}
