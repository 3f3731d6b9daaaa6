package queue_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/sless-dev/sless/pkg/queue"
	"github.com/sless-dev/sless/pkg/queue/queuetest"
	"github.com/sless-dev/sless/test/testbed"
)

// BenchmarkConsumer measures messages per second through sless's consumer
// (manual acks, retry bookkeeping, the invoke client) against a baseline
// measured in the same run on the same broker and function: a bare amqp091
// consumer with the same prefetch and concurrency that POSTs each body and
// acknowledges it. The ratio is what the consumer's guarantees cost.
func BenchmarkConsumer(b *testing.B) {
	const messages, prefetch, concurrency = 4000, 32, 8
	u := testbed.AMQPURL(b)
	var delivered atomic.Int64
	fn := queuetest.Sink(b, &delivered)
	conn, err := amqp.Dial(u)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	pub, err := conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	if err := pub.Confirm(false); err != nil {
		b.Fatal(err)
	}
	fill := func(q string) {
		if _, err := pub.QueueDeclare(q, true, false, false, false, nil); err != nil {
			b.Fatal(err)
		}
		var last *amqp.DeferredConfirmation
		for i := 0; i < messages; i++ {
			last, err = pub.PublishWithDeferredConfirmWithContext(context.Background(), "", q, false, false, amqp.Publishing{
				MessageId: strconv.Itoa(i), ContentType: "application/json", DeliveryMode: amqp.Persistent, Body: []byte(`{"n": ` + strconv.Itoa(i) + `}`),
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		if !last.Wait() {
			b.Fatal("nack")
		}
	}

	// The baseline's HTTP client pools connections as the consumer's does,
	// so the comparison is of the consumers, not of connection reuse.
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}
	var baseline, sless time.Duration
	runBaseline := func() {
		// Baseline: the least a consumer must do.
		q := testbed.UniqueName("bench-base")
		testbed.DeleteQueues(b, u, q)
		fill(q)
		delivered.Store(0)
		ch, err := conn.Channel()
		if err != nil {
			b.Fatal(err)
		}
		if err := ch.Qos(prefetch, 0, false); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		ds, err := ch.Consume(q, "", false, false, false, false, nil)
		if err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		for w := 0; w < concurrency; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for d := range ds {
					resp, err := client.Post(fn.URL, d.ContentType, bytes.NewReader(d.Body))
					if err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
					_ = d.Ack(false)
				}
			}()
		}
		baseline += queuetest.DrainTime(b, &delivered, messages, start)
		_ = ch.Close()
		wg.Wait()
	}
	runSless := func() {
		// sless's consumer.
		q := testbed.UniqueName("bench-sless")
		cfg := queue.Config{URL: u, Queue: q, Prefetch: prefetch, Concurrency: concurrency, MaxRetries: 3,
			Invoker: &queue.Invoker{URL: fn.URL, Token: "t", Timeout: 10 * time.Second}}
		testbed.DeleteQueues(b, u, q, q+".dlq", cfg.RetryQueue(1), cfg.RetryQueue(2), cfg.RetryQueue(3))
		fill(q)
		delivered.Store(0)
		c, err := queue.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		sless += queuetest.TimeSource(b, c, &delivered, messages)
	}
	queuetest.Alternate(b.N, runBaseline, runSless)
	n := float64(b.N * messages)
	b.ReportMetric(n/baseline.Seconds(), "baseline-msgs/s")
	b.ReportMetric(n/sless.Seconds(), "sless-msgs/s")
	b.ReportMetric(baseline.Seconds()/sless.Seconds(), "ratio")
}
