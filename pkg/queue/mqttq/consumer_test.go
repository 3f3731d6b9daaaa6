package mqttq_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/queue"
	"github.com/sless-dev/sless/pkg/queue/mqttq"
	"github.com/sless-dev/sless/pkg/queue/mqttq/mqtttest"
	"github.com/sless-dev/sless/pkg/queue/queuetest"
	"github.com/sless-dev/sless/test/testbed"
)

// config is a consumer of sensors/+/temp on url, calling fn.
func config(url string, fn *queuetest.Function) mqttq.Config {
	return mqttq.Config{URL: url, ClientID: "sless-test-worker", Topic: "sensors/+/temp", DeadLetterTopic: "dead/sensors",
		Delivery: queue.Delivery{Prefetch: 10, Concurrency: 4, MaxRetries: 2, Backoff: 50 * time.Millisecond,
			ReconnectDelay: 50 * time.Millisecond, Invoker: fn.Invoker()}}
}

func start(t *testing.T, cfg mqttq.Config) (c *mqttq.Consumer, stop func() error) {
	t.Helper()
	c, err := mqttq.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, queuetest.Start(t, c)
}

func awaitState(t *testing.T, c queue.Source, what string, ok func(queue.State) bool) queue.State {
	t.Helper()
	return queuetest.AwaitState(t, c, 30*time.Second, what, ok)
}

// payloads are prefix-0 … prefix-(n-1).
func payloads(prefix string, n int) []string {
	p := make([]string, n)
	for i := range p {
		p[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return p
}

func id(topic, payload string) string { return mqttq.MessageID(topic, []byte(payload)) }

// Every message is called once and acknowledged; the function learns the
// message id, attempt and topic, and no more calls run at once than
// Concurrency says.
func TestDeliversEachMessageAndAcks(t *testing.T) {
	b := mqtttest.StartMosquitto(t)
	fn := queuetest.NewFunction(t, nil)
	fn.SetDelay(5 * time.Millisecond)
	c, stop := start(t, config(b.URL, fn))
	awaitState(t, c, "consuming", queue.State.Ready)
	pub := mqtttest.Connect(t, b.URL, "", "")
	pub.Publish("sensors/kitchen/temp", payloads("m", 200)...)
	pub.Publish("sensors/kitchen/humidity", "not matched")
	queuetest.Eventually(t, "200 calls", func() (bool, string) {
		ids, calls := fn.Distinct()
		return ids == 200, fmt.Sprintf("%d ids, %d calls", ids, calls)
	})
	h := fn.Header(id("sensors/kitchen/temp", "m-7"))
	if h.Get(queue.AttemptHeader) != "1" || h.Get(mqttq.TopicHeader) != "sensors/kitchen/temp" || h.Get(queue.TriggerHeader) != "mqtt" ||
		h.Get(queue.RequestIDHeader) != id("sensors/kitchen/temp", "m-7") {
		t.Errorf("headers of m-7: %v", h)
	}
	fn.Mu.Lock()
	peak := fn.Peak
	fn.Mu.Unlock()
	if peak > 4 || peak < 2 {
		t.Errorf("%d calls ran at once, want at most concurrency 4 (and more than one)", peak)
	}
	// Acknowledged: the session holds nothing to send again.
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	c2, _ := start(t, config(b.URL, fn))
	awaitState(t, c2, "consuming again", queue.State.Ready)
	pub.Publish("sensors/hall/temp", "after")
	queuetest.Eventually(t, "the next message", func() (bool, string) { return fn.Count(id("sensors/hall/temp", "after")) == 1, "" })
	// Paho queues DISCONNECT ahead of PUBACKs it has not written: the last
	// few acknowledgements may miss the stop (docs/triggers.md); the rest
	// must have reached the broker.
	if ids, calls := fn.Distinct(); calls-ids > 4 {
		t.Errorf("%d calls of %d messages: succeeded messages delivered again beyond the last few acknowledgements", calls, ids)
	}
}

// A failed call is made again after the backoff; after MaxRetries retries
// the message goes to the dead-letter topic, with why, and is acknowledged.
func TestRetriesThenDeadLetters(t *testing.T) {
	b := mqtttest.StartMosquitto(t)
	fn := queuetest.NewFunction(t, func(_ string, attempt int, body string) int {
		switch {
		case strings.HasPrefix(body, "poison"):
			return http.StatusInternalServerError
		case strings.HasPrefix(body, "flaky") && attempt == 1:
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	sub := mqtttest.Connect(t, b.URL, "", "")
	dead := sub.Subscribe("dead/#")
	c, _ := start(t, config(b.URL, fn))
	awaitState(t, c, "consuming", queue.State.Ready)
	pub := mqtttest.Connect(t, b.URL, "", "")
	pub.Publish("sensors/a/temp", "poison", "flaky", "fine")
	m := mqtttest.Await(t, dead, 30*time.Second)
	var dl mqttq.DeadLetter
	if err := json.Unmarshal(m.Payload(), &dl); err != nil {
		t.Fatalf("dead letter %q: %v", m.Payload(), err)
	}
	if m.Topic() != "dead/sensors" || dl.Topic != "sensors/a/temp" || string(dl.Payload) != "poison" || dl.Retries != 2 ||
		dl.LastStatus != 500 || !strings.Contains(dl.LastError, `"status": 500`) || dl.MessageID != id("sensors/a/temp", "poison") || dl.DeadAt.IsZero() {
		t.Errorf("dead letter on %s: %+v", m.Topic(), dl)
	}
	poison := id("sensors/a/temp", "poison")
	if got := fn.Count(poison); got != 3 {
		t.Errorf("poison called %d times, want 1 + 2 retries", got)
	}
	queuetest.Eventually(t, "flaky retried and fine called", func() (bool, string) {
		return fn.Count(id("sensors/a/temp", "flaky")) == 2 && fn.Count(id("sensors/a/temp", "fine")) == 1, ""
	})
	fn.Mu.Lock()
	at := append([]time.Time(nil), fn.Calls[poison]...)
	fn.Mu.Unlock()
	if len(at) == 3 && (at[1].Sub(at[0]) < 50*time.Millisecond || at[2].Sub(at[1]) < 100*time.Millisecond) {
		t.Errorf("retries came after %v and %v, want the backoff of 50ms doubling", at[1].Sub(at[0]), at[2].Sub(at[1]))
	}
	if h := fn.Header(poison); h.Get(queue.AttemptHeader) != "3" {
		t.Errorf("last attempt header %q, want 3", h.Get(queue.AttemptHeader))
	}
	select {
	case m := <-dead:
		t.Errorf("a second dead letter: %s", m.Payload())
	case <-time.After(300 * time.Millisecond):
	}
}

// A consumer says why it does not consume; what no retry mends stops it.
func TestStateSaysWhyNotConsuming(t *testing.T) {
	b := mqtttest.StartMosquitto(t, mqtttest.WithUser("u", "p"))
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
		change  func(*mqttq.Config)
		stopped bool
		errHas  string
	}{
		{"nothing listens", func(c *mqttq.Config) { c.URL = "tcp://" + closed }, false, "connect to the broker at tcp://" + closed},
		{"wrong password", func(c *mqttq.Config) { c.Auth.Password = "wrong" }, true, "not Authorized"},
		{"no user", func(c *mqttq.Config) { c.Auth = queue.Auth{} }, true, "not Authorized"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config(b.URL, fn)
			cfg.Auth = good
			tc.change(&cfg)
			c, stop := start(t, cfg)
			s := awaitState(t, c, "an error", func(s queue.State) bool { return s.Err != nil })
			if !strings.Contains(s.Err.Error(), tc.errHas) || s.Stopped != tc.stopped || s.Ready() {
				t.Errorf("state %+v, want an error with %q, stopped %v", s, tc.errHas, tc.stopped)
			}
			if !strings.Contains(s.Reason(c.What()), "topic sensors/+/temp") && !tc.stopped {
				t.Errorf("reason %q", s.Reason(c.What()))
			}
			if err := stop(); (err != nil) != tc.stopped {
				t.Errorf("Run returned %v", err)
			}
		})
	}
	// The broker coming later is consumed from without a restart.
	cfg := config(b.URL, fn)
	cfg.Auth = good
	b.Stop()
	c, _ := start(t, cfg)
	awaitState(t, c, "the outage reported", func(s queue.State) bool { return s.Err != nil })
	b.Restart()
	awaitState(t, c, "consuming once the broker is back", queue.State.Ready)
}

func TestConfigRefusals(t *testing.T) {
	fn := queuetest.NewFunction(t, nil)
	for _, tc := range []struct {
		name   string
		change func(*mqttq.Config)
		want   string
	}{
		{"no URL", func(c *mqttq.Config) { c.URL = "" }, "the server URL is required"},
		{"not a URL", func(c *mqttq.Config) { c.URL = "localhost" }, `"localhost" is not a URL like tcp://host:1883`},
		{"amqp URL", func(c *mqttq.Config) { c.URL = "amqp://u:secret@h:5672" }, "scheme must be tcp, mqtt, ssl, tls, mqtts, tcps, ws or wss"},
		{"password not shown", func(c *mqttq.Config) { c.URL = "amqp://u:secret@h:5672" }, `"amqp://h:5672"`},
		{"no topic", func(c *mqttq.Config) { c.Topic = "" }, "topic: Required value"},
		{"# not last", func(c *mqttq.Config) { c.Topic = "a/#/b" }, "# only as the whole last level"},
		{"shared filter", func(c *mqttq.Config) { c.Topic = "$share/g/a" }, "set shareGroup"},
		{"group with /", func(c *mqttq.Config) { c.ShareGroup = "a/b" }, "shareGroup must not contain /"},
		{"client id with a space", func(c *mqttq.Config) { c.ClientID = "a b" }, "clientID must be letters"},
		{"wildcard dead letters", func(c *mqttq.Config) { c.DeadLetterTopic = "dead/+" }, "without wildcards"},
		{"dead letters consumed again", func(c *mqttq.Config) { c.DeadLetterTopic = "sensors/dead/temp" }, "must not match topic"},
		{"no client id", func(c *mqttq.Config) { c.ClientID = "" }, "the client id and the dead-letter topic are required"},
		{"no invoker", func(c *mqttq.Config) { c.Invoker = nil }, "the function's invoker is required"},
		{"negative retries", func(c *mqttq.Config) { c.MaxRetries = -1 }, "max retries must not be negative"},
		{"half a client certificate", func(c *mqttq.Config) { c.Auth.Cert = []byte("x") }, "needs both tls.crt and tls.key"},
		{"bad CA", func(c *mqttq.Config) { c.Auth.CA = []byte("not pem") }, "ca.crt holds no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config("tcp://127.0.0.1:1883", fn)
			tc.change(&cfg)
			_, err := mqttq.New(cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
}

// Neither the broker going away mid-stream nor the consumer being stopped
// and started again loses a message: the persistent session keeps what
// came meanwhile and sends again what was not acknowledged. Duplicates
// come only from messages in flight at the time.
func TestBrokerRestartAndConsumerRestartLoseNothing(t *testing.T) {
	b := mqtttest.StartMosquitto(t)
	fn := queuetest.NewFunction(t, nil)
	fn.SetDelay(2 * time.Millisecond)
	cfg := config(b.URL, fn)
	c, stop := start(t, cfg)
	awaitState(t, c, "consuming", queue.State.Ready)
	const n = 1000
	pub := mqtttest.Connect(t, b.URL, "", "")
	pub.Publish("sensors/x/temp", payloads("m", n)...)
	queuetest.Eventually(t, "a third called", func() (bool, string) { ids, _ := fn.Distinct(); return ids > n/3, "" })
	b.Stop()
	awaitState(t, c, "the outage seen", func(s queue.State) bool { return !s.Ready() && s.Err != nil })
	b.Restart()
	awaitState(t, c, "consuming again", queue.State.Ready)
	queuetest.Eventually(t, "two thirds called", func() (bool, string) { ids, _ := fn.Distinct(); return ids > 2*n/3, "" })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	c2, _ := start(t, cfg)
	awaitState(t, c2, "the new consumer consuming", queue.State.Ready)
	queuetest.Eventually(t, "every message called", func() (bool, string) {
		ids, calls := fn.Distinct()
		return ids == n, fmt.Sprintf("%d of %d ids, %d calls", ids, n, calls)
	})
	_, calls := fn.Distinct()
	t.Logf("%d messages, %d calls (%d duplicates across the restarts)", n, calls, calls-n)
}

// A stopped consumer lets its calls in flight finish and acknowledges
// them; what it held but did not call stays in the session, and the next
// consumer calls each of the rest, none twice.
func TestStopFinishesCallsInFlight(t *testing.T) {
	b := mqtttest.StartMosquitto(t)
	fn := queuetest.NewFunction(t, nil)
	fn.SetDelay(300 * time.Millisecond)
	cfg := config(b.URL, fn)
	cfg.Concurrency = 2
	c, stop := start(t, cfg)
	awaitState(t, c, "consuming", queue.State.Ready)
	mqtttest.Connect(t, b.URL, "", "").Publish("sensors/x/temp", payloads("m", 10)...)
	queuetest.Eventually(t, "calls in flight", func() (bool, string) { _, calls := fn.Distinct(); return calls >= 2, "" })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	fn.SetDelay(0)
	c2, _ := start(t, cfg)
	awaitState(t, c2, "the next consumer consuming", queue.State.Ready)
	queuetest.Eventually(t, "every message called", func() (bool, string) {
		ids, calls := fn.Distinct()
		return ids == 10, fmt.Sprintf("%d ids, %d calls", ids, calls)
	})
	if ids, calls := fn.Distinct(); calls != ids {
		t.Errorf("%d calls of %d messages: a call in flight at the stop was not acknowledged", calls, ids)
	}
}

// Two consumers in one share group split the messages between them, each
// message to one of them.
func TestShareGroupSplitsTheLoad(t *testing.T) {
	b := mqtttest.StartMosquitto(t)
	fn := queuetest.NewFunction(t, nil)
	var cs []*mqttq.Consumer
	var callers []*countingCaller
	for i := range 2 {
		cfg := config(b.URL, fn)
		cc := &countingCaller{Caller: fn.Invoker()}
		cfg.ShareGroup, cfg.ClientID, cfg.Invoker = "workers", fmt.Sprintf("sless-test-worker-%d", i), cc
		c, _ := start(t, cfg)
		awaitState(t, c, "consuming", queue.State.Ready)
		cs, callers = append(cs, c), append(callers, cc)
	}
	const n = 200
	mqtttest.Connect(t, b.URL, "", "").Publish("sensors/x/temp", payloads("m", n)...)
	queuetest.Eventually(t, "every message called", func() (bool, string) {
		ids, calls := fn.Distinct()
		return ids == n, fmt.Sprintf("%d ids, %d calls", ids, calls)
	})
	if ids, calls := fn.Distinct(); calls != ids {
		t.Errorf("%d calls of %d messages: the group delivered a message to both", calls, ids)
	}
	for i, cc := range callers {
		if got := cc.count(); got < n/4 {
			t.Errorf("consumer %d called %d of %d messages, want a share of them", i, got, n)
		}
	}
	if got := cs[0].What(); got != "topic sensors/+/temp in share group workers" {
		t.Errorf("What = %q", got)
	}
}

// countingCaller counts the calls one consumer makes.
type countingCaller struct {
	queue.Caller
	mu sync.Mutex
	n  int
}

func (c *countingCaller) Invoke(ctx context.Context, call queue.Call) queue.Outcome {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return c.Caller.Invoke(ctx, call)
}

func (c *countingCaller) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// A consumer killed mid-stream (its connection cut without DISCONNECT, the
// acknowledgements of its calls in flight never sent) loses nothing: the
// broker keeps what it held in the session, and the next consumer with
// the client id gets it again.
func TestKilledConsumerLosesNothing(t *testing.T) {
	b := mqtttest.StartMosquitto(t)
	fn := queuetest.NewFunction(t, nil)
	fn.SetDelay(20 * time.Millisecond)
	relay := newRelay(t, strings.TrimPrefix(b.URL, "tcp://"))
	cfg := config("tcp://"+relay.addr, fn)
	c, stop := start(t, cfg)
	awaitState(t, c, "consuming", queue.State.Ready)
	const n = 300
	mqtttest.Connect(t, b.URL, "", "").Publish("sensors/x/temp", payloads("m", n)...)
	queuetest.Eventually(t, "a third called", func() (bool, string) { ids, _ := fn.Distinct(); return ids > n/3, "" })
	// The kill: the connection goes at once, then the process.
	relay.cut()
	_ = stop()
	fn.SetDelay(0)
	cfg.URL = b.URL
	c2, _ := start(t, cfg)
	awaitState(t, c2, "the next consumer consuming", queue.State.Ready)
	queuetest.Eventually(t, "every message called", func() (bool, string) {
		ids, calls := fn.Distinct()
		return ids == n, fmt.Sprintf("%d of %d ids, %d calls", ids, n, calls)
	})
	_, calls := fn.Distinct()
	t.Logf("%d messages, %d calls (%d called again after the kill)", n, calls, calls-n)
}

// relay forwards TCP connections to a broker until cut, which closes them
// all at once and refuses new ones: what the broker sees of a killed client.
type relay struct {
	addr  string
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newRelay(t *testing.T, target string) *relay {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{addr: ln.Addr().String(), ln: ln}
	t.Cleanup(r.cut)
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			r.mu.Lock()
			r.conns = append(r.conns, in, out)
			r.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
	return r
}

func (r *relay) cut() {
	r.ln.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a reset, as a dead process's socket
		}
		c.Close()
	}
	r.conns = nil
}

// Over TLS the consumer trusts the CA of its connection Secret's ca.crt;
// without it the system's roots refuse the broker's certificate, and the
// state says so while the consumer keeps trying.
func TestTLSWithTheSecretsCA(t *testing.T) {
	ca, cert, key, err := testbed.LoopbackServingPEM()
	if err != nil {
		t.Fatal(err)
	}
	b := mqtttest.StartMosquitto(t, mqtttest.WithTLS(cert, key))
	fn := queuetest.NewFunction(t, nil)
	cfg := config(b.URL, fn)
	cfg.Auth.CA = ca
	c, _ := start(t, cfg)
	awaitState(t, c, "consuming over TLS", queue.State.Ready)

	cfg.Auth.CA, cfg.ClientID = nil, "sless-test-untrusting"
	c2, _ := start(t, cfg)
	s := awaitState(t, c2, "the certificate refused", func(s queue.State) bool { return s.Err != nil })
	if s.Stopped || !strings.Contains(s.Err.Error(), "certificate") {
		t.Errorf("state %+v, want a certificate error while it keeps trying", s)
	}
}
