package testbed

import (
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// The throwaway node is what tests get where no broker runs; this starts
// one even where one does, so the path is always exercised.
func TestStartRabbitMQ(t *testing.T) {
	began := time.Now()
	r, err := StartRabbitMQ()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node %s answered after %v", r.Node, time.Since(began).Round(time.Millisecond))
	defer func() {
		stopped := time.Now()
		r.Stop()
		t.Logf("stopped in %v", time.Since(stopped).Round(time.Millisecond))
	}()
	conn, err := amqp.Dial(r.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q := UniqueName("probe")
	if _, err := ch.QueueDeclare(q, false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Publish("", q, false, false, amqp.Publishing{Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	var got amqp.Delivery
	for i := 0; i < 100; i++ {
		d, ok, err := ch.Get(q, true)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			got = d
			break
		}
	}
	if string(got.Body) != "x" {
		t.Fatalf("got %q from the throwaway node", got.Body)
	}
}
