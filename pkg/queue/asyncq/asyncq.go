// Package asyncq carries the asynchronous calls of sless api's replicas in
// RabbitMQ: an async.Queue. A message is a call's ref (the call is in
// PostgreSQL), persistent in a durable queue, published with a confirm
// before the caller hears 202; every replica consumes the queue, and a
// message is acknowledged only after its step was taken and the next one
// queued, so a replica or broker that dies loses none.
//
// A ref due later waits in a delay queue: a few durable queues with one
// message TTL each that dead-letter into the main queue. A ref goes to the
// longest delay not past its due time and, arriving early, waits again.
package asyncq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/sless-dev/sless/pkg/invoke/async"
	"github.com/sless-dev/sless/pkg/queue"
)

// DefaultQueue is the main queue's name.
const DefaultQueue = "sless.async"

// Delays are the waits of the delay queues.
var Delays = []time.Duration{250 * time.Millisecond, time.Second, 5 * time.Second, 30 * time.Second,
	2 * time.Minute, 10 * time.Minute, time.Hour}

// Config says which broker and queue carry the calls.
type Config struct {
	// URL of the broker, amqp:// or amqps://.
	URL string
	// Queue is the main queue (DefaultQueue when empty); its delay queues
	// are named after it.
	Queue string
	// Prefetch is how many refs a replica holds at once (default 64).
	Prefetch int
	// RetryWait is the wait before a ref whose step failed is handed out
	// again (default 1 s).
	RetryWait time.Duration
	Logger    *slog.Logger
}

// Queue is an async.Queue on RabbitMQ.
type Queue struct {
	cfg   Config
	state *queue.Tracker

	mu   sync.Mutex // one publish at a time on pub
	conn *amqp.Connection
	pub  *amqp.Channel
}

var _ async.Queue = (*Queue)(nil)

// New checks cfg. It does not connect: Enqueue and Consume do.
func New(cfg Config) (*Queue, error) {
	if cfg.URL == "" {
		return nil, errors.New("asyncq: the broker URL is required")
	}
	if _, err := amqp.ParseURI(cfg.URL); err != nil {
		return nil, fmt.Errorf("asyncq: the broker URL is not valid: %w", err)
	}
	if cfg.Queue == "" {
		cfg.Queue = DefaultQueue
	}
	if len(cfg.Queue) > 200 {
		return nil, fmt.Errorf("asyncq: queue name %q is longer than 200 bytes", cfg.Queue)
	}
	if cfg.Prefetch <= 0 {
		cfg.Prefetch = 64
	}
	if cfg.RetryWait <= 0 {
		cfg.RetryWait = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Queue{cfg: cfg, state: queue.NewTracker()}, nil
}

// State is whether the consumer consumes now, and a channel closed at the
// next change.
func (q *Queue) State() (queue.State, <-chan struct{}) { return q.state.Get() }

// DelayQueue is the delay queue of wait d (one of Delays).
func (q *Queue) DelayQueue(d time.Duration) string {
	return q.cfg.Queue + ".delay." + strconv.FormatInt(d.Milliseconds(), 10) + "ms"
}

// delayFor is the delay queue's wait for a ref due in d: the longest not
// past d, or the shortest.
func delayFor(d time.Duration) time.Duration {
	pick := Delays[0]
	for _, w := range Delays {
		if w <= d {
			pick = w
		}
	}
	return pick
}

// Enqueue publishes ref, persistent, to the main queue or, when at is
// later, to a delay queue, and waits for the broker's confirm. A lost
// connection is dialled again once.
func (q *Queue) Enqueue(ctx context.Context, ref async.Ref, at time.Time) error {
	body, err := json.Marshal(ref)
	if err != nil {
		return err
	}
	target := q.cfg.Queue
	if d := time.Until(at); d > 0 {
		target = q.DelayQueue(delayFor(d))
	}
	msg := amqp.Publishing{DeliveryMode: amqp.Persistent, ContentType: "application/json", MessageId: ref.RequestID, Body: body}
	q.mu.Lock()
	defer q.mu.Unlock()
	for try := 0; ; try++ {
		err = q.publish(ctx, target, msg)
		if err == nil || try == 1 || ctx.Err() != nil {
			return err
		}
		q.cfg.Logger.Info("asyncq: publishing again on a new connection", "error", err)
	}
}

// publish sends msg on the publishing channel, made when missing; an error
// drops the connection, so the next publish dials anew.
func (q *Queue) publish(ctx context.Context, target string, msg amqp.Publishing) error {
	if q.pub == nil || q.pub.IsClosed() {
		if q.conn != nil {
			_ = q.conn.Close()
		}
		conn, err := q.dial("sless async publish")
		if err != nil {
			return err
		}
		pub, err := conn.Channel()
		if err == nil {
			err = pub.Confirm(false)
		}
		if err != nil {
			_ = conn.Close()
			return fmt.Errorf("asyncq: publishing channel: %w", err)
		}
		q.conn, q.pub = conn, pub
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	dc, err := q.pub.PublishWithDeferredConfirmWithContext(ctx, "", target, false, false, msg)
	if err == nil {
		var ok bool
		if ok, err = dc.WaitContext(ctx); err == nil && !ok {
			err = errors.New("the broker refused the message (nack)")
		}
	}
	if err != nil {
		_ = q.conn.Close()
		q.conn, q.pub = nil, nil
		return fmt.Errorf("asyncq: publish to %s: %w", target, err)
	}
	return nil
}

// Close closes the publishing connection.
func (q *Queue) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.conn != nil {
		_ = q.conn.Close()
		q.conn, q.pub = nil, nil
	}
}

// dial connects and declares the topology (durable, so declaring again is
// a no-op).
func (q *Queue) dial(name string) (*amqp.Connection, error) {
	conn, err := amqp.DialConfig(q.cfg.URL, amqp.Config{Heartbeat: 10 * time.Second, Properties: amqp.Table{"connection_name": name}})
	if err != nil {
		err = fmt.Errorf("asyncq: connect to the broker: %w", err)
		var ae *amqp.Error
		if errors.As(err, &ae) && ae.Code == amqp.AccessRefused {
			return nil, queue.Permanent(err)
		}
		return nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	defer ch.Close()
	if _, err := ch.QueueDeclare(q.cfg.Queue, true, false, false, false, nil); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("asyncq: declare %s: %w", q.cfg.Queue, err)
	}
	for _, d := range Delays {
		args := amqp.Table{"x-message-ttl": d.Milliseconds(), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": q.cfg.Queue}
		if _, err := ch.QueueDeclare(q.DelayQueue(d), true, false, false, false, args); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("asyncq: declare %s: %w", q.DelayQueue(d), err)
		}
	}
	return conn, nil
}

// Consume hands the main queue's refs to handle, up to Prefetch at once,
// reconnecting when the broker goes, until ctx ends. A ref is acknowledged
// when handle returns nil; otherwise, after RetryWait, it goes back to the
// queue. Refs in hand when ctx ends go back at once.
func (q *Queue) Consume(ctx context.Context, handle func(context.Context, async.Ref) error) error {
	return queue.Sessions(ctx, q.state, 500*time.Millisecond, q.cfg.Logger, "asynchronous calls", func(ctx context.Context) (bool, error) {
		return q.session(ctx, handle)
	})
}

func (q *Queue) session(ctx context.Context, handle func(context.Context, async.Ref) error) (bool, error) {
	conn, err := q.dial("sless async consume")
	if err != nil {
		return false, err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return false, err
	}
	if err := ch.Qos(q.cfg.Prefetch, 0, false); err != nil {
		return false, err
	}
	deliveries, err := ch.Consume(q.cfg.Queue, "", false, false, false, false, nil)
	if err != nil {
		return false, fmt.Errorf("asyncq: consume %s: %w", q.cfg.Queue, err)
	}
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	q.state.Set(true, nil, false)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			q.state.Set(false, nil, true)
			return true, nil
		case e := <-closed:
			if e == nil {
				return true, errors.New("asyncq: connection closed")
			}
			return true, fmt.Errorf("asyncq: connection closed: %w", e)
		case d, ok := <-deliveries:
			if !ok {
				return true, errors.New("asyncq: the broker cancelled the consumer")
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				q.deliver(ctx, d, handle)
			}()
		}
	}
}

// deliver hands d's ref to handle and settles d.
func (q *Queue) deliver(ctx context.Context, d amqp.Delivery, handle func(context.Context, async.Ref) error) {
	var ref async.Ref
	if err := json.Unmarshal(d.Body, &ref); err != nil || ref.Namespace == "" || ref.Function == "" || ref.RequestID == "" {
		q.cfg.Logger.Warn("asyncq: dropping a message that names no call", "messageId", d.MessageId, "error", err)
		_ = d.Ack(false)
		return
	}
	err := handle(ctx, ref)
	if err == nil {
		if aerr := d.Ack(false); aerr != nil {
			q.cfg.Logger.Warn("asyncq: could not acknowledge; the broker will hand the call out again", "call", ref.String(), "error", aerr)
		}
		return
	}
	if ctx.Err() == nil {
		q.cfg.Logger.Warn("asyncq: a step failed; the call goes back to the queue", "call", ref.String(), "error", err, "in", q.cfg.RetryWait)
		t := time.NewTimer(q.cfg.RetryWait)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	_ = d.Nack(false, true)
}
