package main

import (
	"context"
	"fmt"
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
	"github.com/sless-dev/sless/pkg/queue"
	"github.com/sless-dev/sless/pkg/queue/kafkaq"
	"github.com/sless-dev/sless/pkg/queue/kafkaq/kafkatest"
	"github.com/sless-dev/sless/pkg/queue/queuetest"
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

// sless consume --broker=kafka, as its Deployment runs it: not ready
// while the topic is missing, saying so; ready once it is made; each
// record then reaches the function through the proxy's URL with the
// trigger's credential and headers, and is committed.
func TestConsumeKafkaServesReadinessAndDelivers(t *testing.T) {
	k := kafkatest.Start(t)
	fn := queuetest.NewFunction(t, nil)
	addr := "127.0.0.1:" + strconv.Itoa(queuetest.FreePort(t))
	t.Setenv(kube.EnvKafkaBrokers, k.Addr)
	t.Setenv(kube.EnvToken, "tok")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runConsume(ctx, []string{"--broker=kafka", "--url=" + fn.URL + "/fn/ns/f", "--topic=orders", "--group=sless.ns.orders",
			"--dead-letter-topic=orders.dlq", "--timeout=5s", "--health-addr=" + addr})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("sless consume: %v", err)
		}
	}()
	ready := func(code int, has string) {
		t.Helper()
		queuetest.Eventually(t, kube.ConsumerReadyPath+" "+strconv.Itoa(code), func() (bool, string) {
			resp, err := http.Get("http://" + addr + kube.ConsumerReadyPath)
			if err != nil {
				return false, err.Error()
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode == code && strings.Contains(string(b), has), fmt.Sprintf("%d %q", resp.StatusCode, b)
		})
	}
	ready(http.StatusServiceUnavailable, "topic orders does not exist on the brokers at "+k.Addr)
	k.Topic("orders", 2)
	ready(http.StatusOK, "consuming topic orders")
	kafkatest.Produce(t, k.Client(), "orders", "o", 10)
	queuetest.Eventually(t, "every record called", func() (bool, string) {
		ids, calls := fn.Distinct()
		return ids == 10, fmt.Sprintf("%d ids, %d calls", ids, calls)
	})
	kafkatest.AwaitCommitted(t, k, "sless.ns.orders", "orders")
	h := fn.Header("orders-0-0")
	if h == nil {
		h = fn.Header("orders-1-0")
	}
	if h.Get("Authorization") != "Bearer tok" || h.Get(queue.TriggerHeader) != "kafka" || h.Get(kafkaq.OffsetHeader) != "0" {
		t.Errorf("call headers %v", h)
	}
}

func TestConsumerTracingEnv(t *testing.T) {
	got := consumerTracingEnv([]string{"PATH=/bin", "OTEL_TRACES_SAMPLER=always_on", "OTEL_SERVICE_NAME=ctl",
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://c:4318", "SLESS_OTEL=x", "OTEL_RESOURCE_ATTRIBUTES=a=b"})
	want := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://c:4318", "OTEL_RESOURCE_ATTRIBUTES=a=b", "OTEL_TRACES_SAMPLER=always_on"}
	var names []string
	for _, e := range got {
		names = append(names, e.Name+"="+e.Value)
	}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("consumer env %v, want %v (sorted, no service name, OTEL_* only)", names, want)
	}
}
