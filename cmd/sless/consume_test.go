package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/sless-dev/sless/pkg/adapter/kube"
	"github.com/sless-dev/sless/test/testbed"
)

// sless consume serves the readiness its Deployment's probe reads: ready
// only once connected to the broker and consuming, not ready with the
// connection's error while the broker cannot be reached, and live in both
// cases. Before, it served nothing, and its Deployment counted a consumer
// with a wrong broker URL as available.
func TestConsumeServesReadiness(t *testing.T) {
	good := testbed.AMQPURL(t)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nothingThere := closed.Addr().String()
	closed.Close()
	u, err := url.Parse(good)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = nothingThere
	for _, tc := range []struct {
		name      string
		broker    string
		ready     int
		readyBody string
	}{
		{name: "broker reachable", broker: good, ready: http.StatusOK, readyBody: "consuming queue"},
		{name: "nothing at the URL", broker: u.String(), ready: http.StatusServiceUnavailable, readyBody: "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := testbed.UniqueName("consume-health")
			testbed.DeleteQueues(t, good, q, q+".dlq", q+".retry.1000ms")
			port, err := testbed.FreePort()
			if err != nil {
				t.Fatal(err)
			}
			addr := "127.0.0.1:" + strconv.Itoa(port)
			t.Setenv(kube.EnvAMQPURL, tc.broker)
			t.Setenv(kube.EnvToken, "tok")
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				done <- runConsume(ctx, []string{"--url=http://127.0.0.1:1/fn/ns/f", "--queue=" + q, "--max-retries=1",
					"--timeout=5s", "--health-addr=" + addr})
			}()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("sless consume: %v", err)
				}
			}()
			get := func(path string) (int, string) {
				resp, err := http.Get("http://" + addr + path)
				if err != nil {
					return 0, err.Error()
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}
			deadline := time.Now().Add(20 * time.Second)
			for {
				code, body := get(kube.ConsumerReadyPath)
				if code == tc.ready && strings.Contains(body, tc.readyBody) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: %d %q, want %d with %q", kube.ConsumerReadyPath, code, body, tc.ready, tc.readyBody)
				}
				time.Sleep(25 * time.Millisecond)
			}
			if code, body := get(kube.ConsumerLivePath); code != http.StatusOK {
				t.Errorf("%s: %d %q, want 200 whether or not the broker answers", kube.ConsumerLivePath, code, body)
			}
			if tc.ready == http.StatusOK {
				// Ready means consuming: the broker has the consumer.
				conn, err := amqp.Dial(good)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				ch, err := conn.Channel()
				if err != nil {
					t.Fatal(err)
				}
				if qi, err := ch.QueueDeclarePassive(q, true, false, false, false, nil); err != nil || qi.Consumers != 1 {
					t.Errorf("queue %s: %+v, %v; want one consumer", q, qi, err)
				}
			}
		})
	}
}
