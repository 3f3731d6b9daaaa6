package queue_test

import (
	"context"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/queue"
	"github.com/sless-dev/sless/pkg/queue/queuetest"
	"github.com/sless-dev/sless/test/testbed"
)

func awaitState(t *testing.T, c *queue.Consumer, limit time.Duration, what string, ok func(queue.State) bool) queue.State {
	t.Helper()
	return queuetest.AwaitState(t, c, limit, what, ok)
}

// start runs c until the test ends; wait returns what Run returned.
func start(t *testing.T, c *queue.Consumer) (cancel context.CancelFunc, wait func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var err error
	go func() { err = c.Run(ctx); close(done) }()
	wait = func() error { <-done; return err }
	t.Cleanup(func() { cancel(); <-done })
	return cancel, wait
}

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// A consumer says whether it consumes and, when it does not, why: the state
// a readiness probe and sless dev's trigger status read. Before, nothing
// but the log said that a consumer never reached its broker.
func TestStateSaysWhyNotConsuming(t *testing.T) {
	b := newBroker(t)
	good, err := url.Parse(b.url)
	if err != nil {
		t.Fatal(err)
	}
	wrongPassword := *good
	wrongPassword.User = url.UserPassword(good.User.Username(), "not-the-password")
	nothingThere := *good
	nothingThere.Host = closedPort(t)
	fn := newFunction(t, nil)
	for _, tc := range []struct {
		name string
		url  string
		// stopped: no retry can help, Run returns the error.
		stopped bool
		errHas  []string
	}{
		{name: "nothing listens", url: nothingThere.String(), errHas: []string{"connect to the broker at " + nothingThere.Host, "connection refused"}},
		{name: "wrong password", url: wrongPassword.String(), stopped: true, errHas: []string{"connect to the broker at " + good.Host, "403"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := queue.Config{URL: tc.url, ReconnectDelay: 50 * time.Millisecond,
				Invoker: &queue.Invoker{URL: fn.URL, Timeout: 5 * time.Second}}
			b.queueFor(&cfg)
			c, err := queue.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if s, _ := c.State(); s.Ready() || s.Err != nil || s.Stopped {
				t.Errorf("before Run: %+v, want not consuming, no error yet", s)
			}
			_, wait := start(t, c)
			s := awaitState(t, c, 20*time.Second, "an error", func(s queue.State) bool { return s.Err != nil })
			if s.Ready() || s.Stopped != tc.stopped {
				t.Errorf("state %+v, want not consuming, stopped %v", s, tc.stopped)
			}
			for _, want := range tc.errHas {
				if !strings.Contains(s.Err.Error(), want) {
					t.Errorf("error %q lacks %q", s.Err, want)
				}
			}
			if strings.Contains(s.Err.Error(), "not-the-password") {
				t.Errorf("the error shows the password: %q", s.Err)
			}
			if tc.stopped {
				if err := wait(); err == nil {
					t.Error("Run returned nil after an error no retry mends")
				}
			}
		})
	}
}

// The state follows the broker: consuming once connected, not consuming
// with the connection's error while the broker is unreachable, and
// consuming again when it is back; after Run, stopped without an error.
func TestStateFollowsTheBroker(t *testing.T) {
	b := newBroker(t)
	fn := newFunction(t, nil)
	relay, relayURL := testbed.NewRelay(t, b.url)
	cfg := queue.Config{URL: relayURL, ReconnectDelay: 50 * time.Millisecond,
		Invoker: &queue.Invoker{URL: fn.URL, Timeout: 5 * time.Second}}
	b.queueFor(&cfg)
	c, err := queue.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cancel, wait := start(t, c)
	awaitState(t, c, 20*time.Second, "consuming", queue.State.Ready)

	relay.Cut(true)
	s := awaitState(t, c, 20*time.Second, "the outage seen", func(s queue.State) bool { return !s.Ready() && s.Err != nil })
	if s.Stopped {
		t.Errorf("stopped by an outage: %+v", s)
	}
	// While the broker stays away the consumer keeps trying and says why.
	awaitState(t, c, 20*time.Second, "a refused reconnect", func(s queue.State) bool {
		return s.Err != nil && strings.Contains(s.Err.Error(), "connect to the broker")
	})

	relay.Up()
	if s := awaitState(t, c, 20*time.Second, "consuming again", queue.State.Ready); s.Err != nil {
		t.Errorf("consuming with an error: %+v", s)
	}
	b.publish(cfg.Queue, "after", `{}`)
	eventually(t, 20*time.Second, "a message after the outage", func() (bool, string) { return fn.Count("after") == 1, "" })

	cancel()
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	if s, _ := c.State(); !s.Stopped || s.Ready() || s.Err != nil {
		t.Errorf("after Run: %+v, want stopped without an error", s)
	}
}
