package mqttq_test

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/sless-dev/sless/pkg/queue"
	"github.com/sless-dev/sless/pkg/queue/mqttq"
	"github.com/sless-dev/sless/pkg/queue/mqttq/mqtttest"
	"github.com/sless-dev/sless/pkg/queue/queuetest"
)

// BenchmarkConsumer measures messages per second through sless's consumer
// (manual acks after each call, retry bookkeeping, the invoke client, a
// function that answers at once) against two baselines measured in the
// same run on the same Mosquitto, each a bare paho client of the same
// persistent-session kind: the broker's own publish→consume rate (it
// acknowledges each message as it arrives; "ratio"), and a bare consumer
// that POSTs each message to the same function with the same concurrency
// before acknowledging it ("ratio-vs-bare-post": what sless's consumer
// adds to the call itself). Each drains a session filled beforehand.
func BenchmarkConsumer(b *testing.B) {
	const messages, prefetch, concurrency = 4000, 32, 8
	broker := mqtttest.StartMosquitto(b)
	var delivered atomic.Int64
	fn := queuetest.Sink(b, &delivered)
	pub := mqtttest.Connect(b, broker.URL, "", "")
	payloads := make([]string, messages)
	for i := range payloads {
		payloads[i] = `{"n": ` + strconv.Itoa(i) + `}`
	}
	runs := 0
	// fill makes a session for a new client id and queues the messages in it.
	fill := func() (clientID, topic string) {
		runs++
		clientID, topic = "bench-"+strconv.Itoa(runs), "bench/"+strconv.Itoa(runs)
		mqtttest.Prime(b, broker.URL, clientID, topic)
		pub.Publish(topic, payloads...)
		delivered.Store(0)
		return clientID, topic
	}
	// bare drains a session with a plain paho client; handle takes each
	// message and must acknowledge it.
	bare := func(handle mqtt.MessageHandler) time.Duration {
		clientID, topic := fill()
		o := mqtt.NewClientOptions().AddBroker(broker.URL).SetClientID(clientID).SetCleanSession(false).
			SetOrderMatters(false).SetAutoAckDisabled(true).SetDefaultPublishHandler(handle)
		c := mqtt.NewClient(o)
		start := time.Now()
		if tok := c.Connect(); !tok.WaitTimeout(20*time.Second) || tok.Error() != nil {
			b.Fatal(tok.Error())
		}
		if tok := c.Subscribe(topic, 1, nil); !tok.WaitTimeout(20*time.Second) || tok.Error() != nil {
			b.Fatal(tok.Error())
		}
		took := queuetest.DrainTime(b, &delivered, messages, start)
		c.Disconnect(250)
		return took
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}
	slots := make(chan struct{}, concurrency)
	var baseline, barePost, sless time.Duration
	runBaseline := func() {
		baseline += bare(func(_ mqtt.Client, m mqtt.Message) { m.Ack(); delivered.Add(1) })
		barePost += bare(func(_ mqtt.Client, m mqtt.Message) {
			slots <- struct{}{}
			defer func() { <-slots }()
			resp, err := client.Post(fn.URL, "application/octet-stream", bytes.NewReader(m.Payload()))
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			m.Ack()
		})
	}
	runSless := func() {
		clientID, topic := fill()
		c, err := mqttq.New(mqttq.Config{URL: broker.URL, ClientID: clientID, Topic: topic, DeadLetterTopic: "dead/" + topic,
			Delivery: queue.Delivery{Prefetch: prefetch, Concurrency: concurrency, MaxRetries: 3,
				Invoker: &queue.Invoker{URL: fn.URL, Token: "t", Timeout: 10 * time.Second}}})
		if err != nil {
			b.Fatal(err)
		}
		sless += queuetest.TimeSource(b, c, &delivered, messages)
	}
	queuetest.Alternate(b.N, runBaseline, runSless)
	n := float64(b.N * messages)
	b.ReportMetric(n/baseline.Seconds(), "broker-msgs/s")
	b.ReportMetric(n/barePost.Seconds(), "bare-post-msgs/s")
	b.ReportMetric(n/sless.Seconds(), "sless-msgs/s")
	b.ReportMetric(baseline.Seconds()/sless.Seconds(), "ratio")
	b.ReportMetric(barePost.Seconds()/sless.Seconds(), "ratio-vs-bare-post")
}
