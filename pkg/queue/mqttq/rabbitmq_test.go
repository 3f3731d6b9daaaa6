package mqttq_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/queue"
	"github.com/sless-dev/sless/pkg/queue/mqttq"
	"github.com/sless-dev/sless/pkg/queue/mqttq/mqtttest"
	"github.com/sless-dev/sless/pkg/queue/queuetest"
	"github.com/sless-dev/sless/test/testbed"
)

// RabbitMQ's MQTT plugin (Debian's RabbitMQ 3.10) as the broker: a node of
// the test's own with rabbitmq_mqtt enabled, guest on loopback.
func TestRabbitMQPlugin(t *testing.T) {
	r, err := testbed.StartRabbitMQWithMQTT()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	guest := queue.Auth{Username: "guest", Password: "guest"}
	fn := queuetest.NewFunction(t, func(_ string, _ int, body string) int {
		if strings.HasPrefix(body, "poison") {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	cfg := config(r.MQTTURL, fn)
	cfg.Auth = guest
	sub := mqtttest.Connect(t, r.MQTTURL, "guest", "guest")
	dead := sub.Subscribe("dead/#")
	pub := mqtttest.Connect(t, r.MQTTURL, "guest", "guest")

	t.Run("delivers, retries and dead-letters", func(t *testing.T) {
		c, stop := start(t, cfg)
		awaitState(t, c, "consuming", queue.State.Ready)
		pub.Publish("sensors/a/temp", append(payloads("m", 100), "poison")...)
		queuetest.Eventually(t, "100 good messages called", func() (bool, string) {
			ids, calls := fn.Distinct()
			return ids == 101, fmt.Sprintf("%d ids, %d calls", ids, calls)
		})
		m := mqtttest.Await(t, dead, 30*time.Second)
		var dl mqttq.DeadLetter
		if err := json.Unmarshal(m.Payload(), &dl); err != nil || string(dl.Payload) != "poison" || dl.LastStatus != 500 {
			t.Errorf("dead letter %s: %v", m.Payload(), err)
		}
		if got := fn.Count(id("sensors/a/temp", "poison")); got != 3 {
			t.Errorf("poison called %d times, want 3", got)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("the session keeps what comes while the consumer is away", func(t *testing.T) {
		pub.Publish("sensors/b/temp", payloads("away", 50)...)
		c, stop := start(t, cfg)
		awaitState(t, c, "consuming", queue.State.Ready)
		queuetest.Eventually(t, "the 50 called", func() (bool, string) {
			n := 0
			for _, p := range payloads("away", 50) {
				n += min(fn.Count(id("sensors/b/temp", p)), 1)
			}
			return n == 50, fmt.Sprintf("%d of 50", n)
		})
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("wrong password", func(t *testing.T) {
		bad := cfg
		bad.Auth.Password = "wrong"
		c, stop := start(t, bad)
		s := awaitState(t, c, "refused", func(s queue.State) bool { return s.Err != nil })
		if !s.Stopped || !strings.Contains(s.Err.Error(), "bad user name or password") {
			t.Errorf("state %+v", s)
		}
		_ = stop()
	})
	// RabbitMQ 3.10 has no shared subscriptions: it grants the $share/
	// filter as a plain one, and no published message matches it.
	t.Run("share group not supported", func(t *testing.T) {
		shared := cfg
		shared.ShareGroup, shared.ClientID = "workers", "sless-test-shared"
		c, stop := start(t, shared)
		awaitState(t, c, "subscribed", queue.State.Ready)
		seen := sub.Subscribe("sensors/c/#")
		pub.Publish("sensors/c/temp", "shared")
		mqtttest.Await(t, seen, 10*time.Second)
		if got := fn.Count(id("sensors/c/temp", "shared")); got != 0 {
			t.Errorf("the shared consumer got the message %d times: RabbitMQ supports $share now; update docs/triggers.md", got)
		}
		_ = stop()
	})
}
