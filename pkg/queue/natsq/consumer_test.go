package natsq_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sless-dev/sless/pkg/queue"
	"github.com/sless-dev/sless/pkg/queue/natsq"
	"github.com/sless-dev/sless/pkg/queue/natsq/natstest"
	"github.com/sless-dev/sless/pkg/queue/queuetest"
)

// config is a consumer of stream ORDERS, subject orders.>, calling fn.
func config(srv *natstest.Server, fn *queuetest.Function) natsq.Config {
	return natsq.Config{URL: srv.URL, Stream: "ORDERS", Subject: "orders.>", Durable: "worker", DeadLetterSubject: "dlq.orders",
		AckWait: 10 * time.Second, Delivery: queue.Delivery{Prefetch: 10, Concurrency: 4, MaxRetries: 2,
			Backoff: 50 * time.Millisecond, ReconnectDelay: 50 * time.Millisecond, Invoker: fn.Invoker()}}
}

// start runs a consumer until the test ends; stop ends it and returns
// what Run returned.
func start(t *testing.T, cfg natsq.Config) (c *natsq.Consumer, stop func() error) {
	t.Helper()
	c, err := natsq.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, queuetest.Start(t, c)
}

func awaitState(t *testing.T, c queue.Source, what string, ok func(queue.State) bool) queue.State {
	t.Helper()
	return queuetest.AwaitState(t, c, 20*time.Second, what, ok)
}

var eventually = queuetest.Eventually

func consumerInfo(t *testing.T, js jetstream.JetStream, stream, durable string) *jetstream.ConsumerInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := js.Consumer(ctx, stream, durable)
	if err != nil {
		t.Fatal(err)
	}
	ci, err := info.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return ci
}

// Every message is called once and acknowledged; the function learns the
// message id, attempt and subject, and no more calls run at once than
// Concurrency says.
func TestDeliversEachMessageAndAcks(t *testing.T) {
	srv := natstest.Start(t)
	srv.Stream("ORDERS", "orders.>")
	_, js := srv.JetStream()
	fn := queuetest.NewFunction(t, nil)
	fn.SetDelay(5 * time.Millisecond)
	c, _ := start(t, config(srv, fn))
	awaitState(t, c, "consuming", queue.State.Ready)
	natstest.Publish(t, js, "orders.eu", "m", 200)
	eventually(t, "200 calls", func() (bool, string) {
		ids, calls := fn.Distinct()
		return ids == 200, fmt.Sprintf("%d ids, %d calls", ids, calls)
	})
	eventually(t, "every message acknowledged", func() (bool, string) {
		ci := consumerInfo(t, js, "ORDERS", "worker")
		return ci.NumAckPending == 0 && ci.NumPending == 0, fmt.Sprintf("%+v", ci)
	})
	if ids, calls := fn.Distinct(); calls != ids {
		t.Errorf("%d calls of %d messages: a message that succeeded was delivered again", calls, ids)
	}
	h := fn.Header("m-7")
	if h.Get(queue.AttemptHeader) != "1" || h.Get(natsq.SubjectHeader) != "orders.eu" || h.Get(queue.TriggerHeader) != "nats" || h.Get(queue.RequestIDHeader) != "m-7" {
		t.Errorf("headers of m-7: %v", h)
	}
	fn.Mu.Lock()
	peak := fn.Peak
	fn.Mu.Unlock()
	if peak > 4 || peak < 2 {
		t.Errorf("%d calls ran at once, want at most concurrency 4 (and more than one)", peak)
	}
	ci := consumerInfo(t, js, "ORDERS", "worker")
	if ci.Config.MaxDeliver != 3 || ci.Config.MaxAckPending != 10 || ci.Config.FilterSubject != "orders.>" || ci.Config.AckPolicy != jetstream.AckExplicitPolicy {
		t.Errorf("durable consumer config %+v", ci.Config)
	}
}

// A failed call is delivered again after the backoff; after MaxRetries
// retries JetStream gives up, and its advisory makes the consumer copy the
// message to the dead-letter subject, with why.
func TestRetriesThenDeadLetters(t *testing.T) {
	srv := natstest.Start(t)
	srv.Stream("ORDERS", "orders.>")
	_, js := srv.JetStream()
	fn := queuetest.NewFunction(t, func(id string, attempt int, _ string) int {
		switch {
		case strings.HasPrefix(id, "poison"):
			return http.StatusInternalServerError
		case strings.HasPrefix(id, "flaky") && attempt == 1:
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	c, _ := start(t, config(srv, fn))
	awaitState(t, c, "consuming", queue.State.Ready)
	natstest.Publish(t, js, "orders.eu", "poison", 1)
	natstest.Publish(t, js, "orders.us", "flaky", 1)
	natstest.Publish(t, js, "orders.us", "fine", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dlq, err := js.Stream(ctx, "DLQ_ORDERS_worker")
	if err != nil {
		t.Fatalf("the consumer made no stream for its dead letters: %v", err)
	}
	eventually(t, "the poison message dead-lettered", func() (bool, string) {
		info, err := dlq.Info(ctx)
		if err != nil {
			return false, err.Error()
		}
		return info.State.Msgs == 1, fmt.Sprintf("%d dead letters, %d calls of poison", info.State.Msgs, fn.Count("poison-0"))
	})
	if got := fn.Count("poison-0"); got != 3 {
		t.Errorf("poison called %d times, want 1 + 2 retries", got)
	}
	if got := fn.Count("flaky-0"); got != 2 {
		t.Errorf("flaky called %d times, want 2", got)
	}
	if got := fn.Count("fine-0"); got != 1 {
		t.Errorf("fine called %d times, want 1", got)
	}
	fn.Mu.Lock()
	at := append([]time.Time(nil), fn.Calls["poison-0"]...)
	fn.Mu.Unlock()
	if len(at) == 3 && (at[1].Sub(at[0]) < 50*time.Millisecond || at[2].Sub(at[1]) < 100*time.Millisecond) {
		t.Errorf("retries came after %v and %v, want the backoff of 50ms doubling", at[1].Sub(at[0]), at[2].Sub(at[1]))
	}
	if h := fn.Header("poison-0"); h.Get(queue.AttemptHeader) != "3" {
		t.Errorf("last attempt header %q, want 3", h.Get(queue.AttemptHeader))
	}
	m, err := dlq.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "dlq.orders" || string(m.Data) != `{"n":0}` || m.Header.Get(queue.RetriesHeader) != "2" || m.Header.Get(queue.LastStatusHeader) != "500" ||
		m.Header.Get(natsq.OriginalSubjectHeader) != "orders.eu" || m.Header.Get("Nats-Msg-Id") != "poison-0" || m.Header.Get(queue.DeadAtHeader) == "" {
		t.Errorf("dead letter %s %q %v", m.Subject, m.Data, m.Header)
	}
}

// A consumer says why it does not consume; what no retry mends stops it.
func TestStateSaysWhyNotConsuming(t *testing.T) {
	srv := natstest.Start(t, natstest.WithUser("u", "p"))
	srv.Stream("ORDERS", "orders.>")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	fn := queuetest.NewFunction(t, nil)
	good := queue.Auth{Username: "u", Password: "p"}
	for _, tc := range []struct {
		name    string
		change  func(*natsq.Config)
		stopped bool
		errHas  string
	}{
		{"nothing listens", func(c *natsq.Config) { c.URL = "nats://" + closed }, false, "connect to the server at nats://" + closed},
		{"wrong password", func(c *natsq.Config) { c.Auth.Password = "wrong" }, true, "Authorization Violation"},
		{"unknown stream", func(c *natsq.Config) { c.Stream = "NOPE" }, false, "stream NOPE does not exist on the server"},
		{"dead letters consumed again", func(c *natsq.Config) { c.DeadLetterSubject = "orders.dlq" }, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config(srv, fn)
			cfg.Auth = good
			tc.change(&cfg)
			if tc.errHas == "" {
				if _, err := natsq.New(cfg); err == nil || !strings.Contains(err.Error(), "deadLetterSubject must not match subject") {
					t.Fatalf("New: %v", err)
				}
				return
			}
			c, stop := start(t, cfg)
			s := awaitState(t, c, "an error", func(s queue.State) bool { return s.Err != nil })
			if !strings.Contains(s.Err.Error(), tc.errHas) || s.Stopped != tc.stopped || s.Ready() {
				t.Errorf("state %+v, want an error with %q, stopped %v", s, tc.errHas, tc.stopped)
			}
			if !strings.Contains(s.Reason(c.What()), "subject orders.> of stream") && !tc.stopped {
				t.Errorf("reason %q", s.Reason(c.What()))
			}
			if err := stop(); (err != nil) != tc.stopped {
				t.Errorf("Run returned %v", err)
			}
		})
	}
	// The stream made later is consumed without a restart.
	cfg := config(srv, fn)
	cfg.Auth, cfg.Stream, cfg.Subject = good, "LATER", "later.*"
	c, _ := start(t, cfg)
	awaitState(t, c, "the missing stream reported", func(s queue.State) bool { return s.Err != nil })
	srv.Stream("LATER", "later.*")
	awaitState(t, c, "consuming the new stream", queue.State.Ready)
}

func TestConfigRefusals(t *testing.T) {
	fn := queuetest.NewFunction(t, nil)
	for _, tc := range []struct {
		name   string
		change func(*natsq.Config)
		want   string
	}{
		{"no URL", func(c *natsq.Config) { c.URL = "" }, "the server URL is required"},
		{"not a URL", func(c *natsq.Config) { c.URL = "localhost" }, `"localhost" is not a URL`},
		{"amqp URL", func(c *natsq.Config) { c.URL = "amqp://u:secret@h:5672" }, "scheme must be nats, tls, ws or wss"},
		{"password not shown", func(c *natsq.Config) { c.URL = "amqp://u:secret@h:5672" }, `"amqp://h:5672"`},
		{"no stream", func(c *natsq.Config) { c.Stream = "" }, "stream: Required value"},
		{"stream with a dot", func(c *natsq.Config) { c.Stream = "a.b" }, "stream must be a NATS name"},
		{"bad subject", func(c *natsq.Config) { c.Subject = "orders.>.x" }, "> only as whole tokens, > only last"},
		{"empty token", func(c *natsq.Config) { c.Subject = "orders..x" }, "subject must be tokens"},
		{"wildcard dead letters", func(c *natsq.Config) { c.DeadLetterSubject = "dlq.*" }, "without whitespace or wildcards"},
		{"no durable", func(c *natsq.Config) { c.Durable = "" }, "the durable consumer and the dead-letter subject are required"},
		{"no invoker", func(c *natsq.Config) { c.Invoker = nil }, "the function's invoker is required"},
		{"negative retries", func(c *natsq.Config) { c.MaxRetries = -1 }, "max retries must not be negative"},
		{"half a client certificate", func(c *natsq.Config) { c.Auth.Cert = []byte("x") }, "needs both tls.crt and tls.key"},
		{"bad CA", func(c *natsq.Config) { c.Auth.CA = []byte("not pem") }, "ca.crt holds no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := natsq.Config{URL: "nats://127.0.0.1:4222", Stream: "ORDERS", Subject: "orders.>", Durable: "w", DeadLetterSubject: "dlq.orders",
				Delivery: queue.Delivery{Invoker: fn.Invoker()}}
			tc.change(&cfg)
			_, err := natsq.New(cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
}

// Neither the server going away mid-stream nor the consumer being stopped
// and started again loses a message; duplicates come only from messages
// in flight at the time.
func TestServerRestartAndConsumerRestartLoseNothing(t *testing.T) {
	srv := natstest.Start(t)
	srv.Stream("ORDERS", "orders.>")
	_, js := srv.JetStream()
	fn := queuetest.NewFunction(t, nil)
	fn.SetDelay(2 * time.Millisecond)
	cfg := config(srv, fn)
	cfg.AckWait = 2 * time.Second
	c, stop := start(t, cfg)
	awaitState(t, c, "consuming", queue.State.Ready)
	const n = 1000
	natstest.Publish(t, js, "orders.eu", "m", n)
	eventually(t, "a third called", func() (bool, string) { ids, _ := fn.Distinct(); return ids > n/3, "" })
	srv.Stop()
	awaitState(t, c, "the outage seen", func(s queue.State) bool { return !s.Ready() && s.Err != nil })
	srv.Restart()
	awaitState(t, c, "consuming again", queue.State.Ready)
	eventually(t, "two thirds called", func() (bool, string) { ids, _ := fn.Distinct(); return ids > 2*n/3, "" })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	c2, _ := start(t, cfg)
	awaitState(t, c2, "the new consumer consuming", queue.State.Ready)
	eventually(t, "every message called", func() (bool, string) {
		ids, calls := fn.Distinct()
		return ids == n, fmt.Sprintf("%d of %d ids, %d calls", ids, n, calls)
	})
	eventually(t, "every message acknowledged", func() (bool, string) {
		ci := consumerInfo(t, js, "ORDERS", "worker")
		return ci.NumAckPending == 0 && ci.NumPending == 0, fmt.Sprintf("pending %d, ack pending %d", ci.NumPending, ci.NumAckPending)
	})
	_, calls := fn.Distinct()
	t.Logf("%d messages, %d calls (%d duplicates across the restarts)", n, calls, calls-n)
}

// A stopped consumer lets its calls in flight finish and acknowledges
// them, and hands the messages it fetched but did not call back at once:
// the next consumer calls each of the rest, and none twice.
func TestStopFinishesCallsInFlight(t *testing.T) {
	srv := natstest.Start(t)
	srv.Stream("ORDERS", "orders.>")
	_, js := srv.JetStream()
	fn := queuetest.NewFunction(t, nil)
	fn.SetDelay(300 * time.Millisecond)
	cfg := config(srv, fn)
	cfg.Concurrency = 2
	// Longer than the test waits: a message that only AckWait would bring
	// back fails it.
	cfg.AckWait = time.Minute
	c, stop := start(t, cfg)
	awaitState(t, c, "consuming", queue.State.Ready)
	natstest.Publish(t, js, "orders.eu", "m", 10)
	eventually(t, "calls in flight", func() (bool, string) { _, calls := fn.Distinct(); return calls >= 2, "" })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	fn.SetDelay(0)
	c2, _ := start(t, cfg)
	awaitState(t, c2, "the next consumer consuming", queue.State.Ready)
	eventually(t, "every message called", func() (bool, string) {
		ids, calls := fn.Distinct()
		return ids == 10, fmt.Sprintf("%d ids, %d calls", ids, calls)
	})
	if ids, calls := fn.Distinct(); calls != ids {
		t.Errorf("%d calls of %d messages: a call in flight at the stop was not acknowledged", calls, ids)
	}
}
