package kafkaq_test

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

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sless-dev/sless/pkg/queue"
	"github.com/sless-dev/sless/pkg/queue/kafkaq"
	"github.com/sless-dev/sless/pkg/queue/kafkaq/kafkatest"
	"github.com/sless-dev/sless/pkg/queue/queuetest"
)

// BenchmarkConsumer measures records per second through sless's consumer
// (ordered offsets, contiguous commits, retry bookkeeping, the invoke
// client) against a baseline measured in the same run on the same kfake
// broker and function: a bare franz-go group consumer with the same
// concurrency that POSTs each record and commits what it polled once the
// calls are done. The ratio is what the consumer's guarantees cost.
func BenchmarkConsumer(b *testing.B) {
	const records, partitions, prefetch, concurrency = 4000, 4, 32, 8
	k := kafkatest.Start(b)
	var delivered atomic.Int64
	fn := queuetest.Sink(b, &delivered)
	producer := k.Client()
	topics := 0
	fill := func() string {
		topics++
		topic := "bench-" + strconv.Itoa(topics)
		k.Topic(topic, partitions)
		kafkatest.Produce(b, producer, topic, "m", records)
		delivered.Store(0)
		return topic
	}
	// The baseline's HTTP client pools connections as the consumer's does.
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}
	var baseline, sless time.Duration
	runBaseline := func() {
		topic := fill()
		cl := k.Client(kgo.ConsumerGroup("base-"+topic), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		ctx, cancel := context.WithCancel(context.Background())
		start := time.Now()
		done := make(chan struct{})
		go func() {
			defer close(done)
			for ctx.Err() == nil {
				fs := cl.PollRecords(ctx, prefetch)
				recs := fs.Records()
				work := make(chan *kgo.Record)
				var wg sync.WaitGroup
				for range concurrency {
					wg.Go(func() {
						for r := range work {
							resp, err := client.Post(fn.URL, "application/json", bytes.NewReader(r.Value))
							if err == nil {
								_, _ = io.Copy(io.Discard, resp.Body)
								resp.Body.Close()
							}
						}
					})
				}
				for _, r := range recs {
					work <- r
				}
				close(work)
				wg.Wait()
				_ = cl.CommitRecords(ctx, recs...)
			}
		}()
		baseline += queuetest.DrainTime(b, &delivered, records, start)
		cancel()
		<-done
		cl.Close()
	}
	runSless := func() {
		topic := fill()
		c, err := kafkaq.New(kafkaq.Config{Brokers: []string{k.Addr}, Topic: topic, Group: "sless-" + topic, DeadLetterTopic: topic + ".dlq",
			Delivery: queue.Delivery{Prefetch: prefetch, Concurrency: concurrency, MaxRetries: 3,
				Invoker: &queue.Invoker{URL: fn.URL, Token: "t", Timeout: 10 * time.Second}}})
		if err != nil {
			b.Fatal(err)
		}
		sless += queuetest.TimeSource(b, c, &delivered, records)
	}
	queuetest.Alternate(b.N, runBaseline, runSless)
	n := float64(b.N * records)
	b.ReportMetric(n/baseline.Seconds(), "baseline-msgs/s")
	b.ReportMetric(n/sless.Seconds(), "sless-msgs/s")
	b.ReportMetric(baseline.Seconds()/sless.Seconds(), "ratio")
}
