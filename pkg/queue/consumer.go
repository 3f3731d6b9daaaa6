// Package queue is the consumer behind queue triggers: it takes messages
// from a RabbitMQ (AMQP 0-9-1) queue and calls the trigger's function
// through the invoke proxy with each one.
//
// Delivery is at least once. A message is acknowledged only after the
// function answered 2xx, or after a copy of it was safely (publisher
// confirm) in the retry or dead-letter queue. A consumer that dies holding
// messages leaves them unacknowledged, and RabbitMQ delivers them again.
//
// Retries wait in delay queues: one per distinct backoff, each with a
// message TTL and dead-lettering back to the main queue. Every message in
// one delay queue waits the same time, so the queue's head always expires
// first (per-message TTLs in one queue would make a short wait stand behind
// a long one). The retry count travels in the x-sless-retries header.
package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/net/http/httpguts"
)

// Headers the consumer sets on messages it republishes.
const (
	RetriesHeader    = "x-sless-retries"
	LastStatusHeader = "x-sless-last-status"
	LastErrorHeader  = "x-sless-last-error"
	DeadAtHeader     = "x-sless-dead-lettered-at"
)

// DefaultMaxBackoff caps the doubling backoff.
const DefaultMaxBackoff = time.Hour

// Config is one consumer's configuration.
type Config struct {
	// URL of the broker, amqp:// or amqps://.
	URL   string
	Queue string
	// DeadLetterQueue receives messages whose retries ran out; Queue+".dlq" if empty.
	DeadLetterQueue string
	// Prefetch is how many unacknowledged messages the consumer holds.
	Prefetch int
	// Concurrency is how many calls run at once.
	Concurrency int
	// MaxRetries is how often a failed message is tried again before it is
	// dead-lettered; 0 dead-letters on the first failure.
	MaxRetries int
	// Backoff is the first retry's delay; it doubles each retry, up to MaxBackoff.
	Backoff    time.Duration
	MaxBackoff time.Duration
	// Invoker calls the function: an *Invoker through the invoke proxy, or
	// local mode's in-process caller.
	Invoker Caller
	// ReconnectDelay is the first wait before reconnecting to a lost
	// broker; it doubles up to 30 s. Default 500 ms.
	ReconnectDelay time.Duration
	Logger         *slog.Logger
	// TracerProvider, when set, makes a CONSUMER span of each delivery;
	// nil makes none.
	TracerProvider trace.TracerProvider
}

func (c *Config) defaults() error {
	if c.URL == "" {
		return errors.New("queue: the broker URL is required")
	}
	if c.Queue == "" {
		return errors.New("queue: the queue name is required")
	}
	if c.Invoker == nil {
		return errors.New("queue: the function's invoker is required")
	}
	if iv, ok := c.Invoker.(*Invoker); ok && iv.URL == "" {
		return errors.New("queue: the function's invoke URL is required")
	}
	if c.DeadLetterQueue == "" {
		c.DeadLetterQueue = c.Queue + ".dlq"
	}
	if c.DeadLetterQueue == c.Queue {
		return errors.New("queue: the dead-letter queue must differ from the queue")
	}
	if c.Prefetch <= 0 {
		c.Prefetch = 10
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 1
	}
	if c.MaxRetries < 0 {
		return errors.New("queue: max retries must not be negative")
	}
	if c.Backoff <= 0 {
		c.Backoff = time.Second
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = DefaultMaxBackoff
	}
	if c.ReconnectDelay <= 0 {
		c.ReconnectDelay = 500 * time.Millisecond
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	for _, q := range c.queues() {
		if len(q.name) > 255 {
			return fmt.Errorf("queue: queue name %q is longer than 255 bytes", q.name)
		}
	}
	return nil
}

// RetryDelay is the wait before retry n (1-based). Unset Backoff and
// MaxBackoff count as their defaults.
func (c *Config) RetryDelay(n int) time.Duration {
	d, limit := c.Backoff, c.MaxBackoff
	if d <= 0 {
		d = time.Second
	}
	if limit <= 0 {
		limit = DefaultMaxBackoff
	}
	return Backoff(d, limit, n)
}

// RetryQueue is the delay queue of retry n.
func (c *Config) RetryQueue(n int) string {
	return c.Queue + ".retry." + strconv.FormatInt(c.RetryDelay(n).Milliseconds(), 10) + "ms"
}

type queueDecl struct {
	name string
	args amqp.Table
	// users marks a queue the user names and may have made beforehand with
	// arguments of their own (a quorum queue, a length limit): it is used
	// as it is, and declared plain and durable only if missing.
	users bool
}

// queues is the topology besides the main queue: the distinct delay queues
// and the dead-letter queue.
func (c *Config) queues() []queueDecl {
	var out []queueDecl
	seen := map[string]bool{}
	for n := 1; n <= c.MaxRetries; n++ {
		name := c.RetryQueue(n)
		if seen[name] {
			continue
		}
		seen[name] = true
		out = append(out, queueDecl{name: name, args: amqp.Table{
			"x-message-ttl":             c.RetryDelay(n).Milliseconds(),
			"x-dead-letter-exchange":    "",
			"x-dead-letter-routing-key": c.Queue,
		}})
	}
	return append(out, queueDecl{name: c.DeadLetterQueue, users: true})
}

// queue is the declaration of name, one of the queues the consumer moves
// messages to.
func (c *Config) queue(name string) queueDecl {
	for _, q := range c.queues() {
		if q.name == name {
			return q
		}
	}
	return queueDecl{name: name, users: true}
}

// Consumer consumes one queue for one function.
type Consumer struct {
	cfg    Config
	state  *Tracker
	tracer Tracer
}

// New checks cfg and makes a Consumer.
func New(cfg Config) (*Consumer, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	return &Consumer{cfg: cfg, state: NewTracker(), tracer: NewTracer(cfg.TracerProvider, "rabbitmq")}, nil
}

// State is what the consumer does now, and a channel closed at the next
// change of it. Safe to call from any goroutine, before, during and after Run.
func (c *Consumer) State() (State, <-chan struct{}) { return c.state.Get() }

// What implements Source.
func (c *Consumer) What() string { return "queue " + c.cfg.Queue }

// Run consumes until ctx ends, reconnecting when the broker goes away. On
// ctx's end it stops taking messages, returns the prefetched ones not yet
// called to the queue, lets the calls in flight finish and settles them,
// and returns nil.
func (c *Consumer) Run(ctx context.Context) error {
	return Sessions(ctx, c.state, c.cfg.ReconnectDelay, c.cfg.Logger, c.What(), c.session)
}

// link is one connection's channels. Republishing goes through pub one
// message at a time: a copy the broker cannot route (its queue was deleted
// after the consumer declared it) comes back as a basic.return just before
// its confirm, and only with one publish outstanding can the return be
// told apart from another's.
type link struct {
	conn    *amqp.Connection
	pubMu   sync.Mutex
	pub     *amqp.Channel
	returns chan amqp.Return
}

// session is one connection's life: declare, consume, until the connection
// or one of its channels drops, the broker cancels the consumer, or ctx ends.
func (c *Consumer) session(ctx context.Context) (consumed bool, err error) {
	conn, err := amqp.DialConfig(c.cfg.URL, amqp.Config{Heartbeat: 10 * time.Second, Properties: amqp.Table{"connection_name": "sless consume " + c.cfg.Queue}})
	if err != nil {
		err = fmt.Errorf("connect to the broker at %s: %w", brokerAddress(c.cfg.URL), err)
		var ae *amqp.Error
		if errors.As(err, &ae) && ae.Code == amqp.AccessRefused {
			return false, Permanent(fmt.Errorf("queue: %w", err))
		}
		return false, err
	}
	defer conn.Close()
	if err := c.declare(conn); err != nil {
		return false, err
	}
	pub, err := conn.Channel()
	if err != nil {
		return false, err
	}
	if err := pub.Confirm(false); err != nil {
		return false, err
	}
	l := &link{conn: conn, pub: pub, returns: pub.NotifyReturn(make(chan amqp.Return, 1))}
	sub, err := conn.Channel()
	if err != nil {
		return false, err
	}
	if err := sub.Qos(c.cfg.Prefetch, 0, false); err != nil {
		return false, err
	}
	const tag = "sless-consume"
	deliveries, err := sub.Consume(c.cfg.Queue, tag, false, false, false, false, nil)
	if err != nil {
		return false, fmt.Errorf("consume %s: %w", c.cfg.Queue, err)
	}
	connClosed := conn.NotifyClose(make(chan *amqp.Error, 1))
	pubClosed := pub.NotifyClose(make(chan *amqp.Error, 1))
	subClosed := sub.NotifyClose(make(chan *amqp.Error, 1))
	c.cfg.Logger.Info("queue: consuming", "queue", c.cfg.Queue, "prefetch", c.cfg.Prefetch, "concurrency", c.cfg.Concurrency)
	c.state.Set(true, nil, false)

	// Workers take deliveries one at a time; calls in flight are not
	// cancelled by ctx (a shutdown lets them finish, within the
	// termination grace the Deployment allows).
	work := context.WithoutCancel(ctx)
	var wg sync.WaitGroup
	for i := 0; i < c.cfg.Concurrency; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range deliveries {
				if ctx.Err() != nil {
					// Shutting down: a message prefetched but not yet called
					// goes back for the next consumer rather than hold this
					// one past its termination grace.
					c.settle(d.Nack(false, true), d)
					continue
				}
				c.handle(work, l, d)
			}
		}()
	}
	// The delivery channel also closes when the broker cancels the
	// consumer (its queue was deleted): the connection stays up, so
	// nothing else would say that this session consumes no more.
	workersDone := make(chan struct{})
	go func() { wg.Wait(); close(workersDone) }()
	var result error
	select {
	case <-ctx.Done():
		// Not ready from here: the calls in flight finish, but no new
		// message is taken.
		c.state.Set(false, nil, true)
		// Stop the flow; deliveries already prefetched still arrive on the
		// channel and are returned to the queue, then Cancel closes it.
		_ = sub.Cancel(tag, false)
	case e := <-connClosed:
		result = closeError("connection", e)
	case e := <-pubClosed:
		// Without the publishing channel no failed call can be moved to a
		// retry queue; a new session brings a new one.
		result = closeError("publishing channel", e)
	case e := <-subClosed:
		result = closeError("consuming channel", e)
	case <-workersDone:
		result = fmt.Errorf("the broker cancelled the consumer of %s (was the queue deleted?)", c.cfg.Queue)
	}
	if result != nil {
		// Ends the deliveries of a session that is over; the calls in flight
		// finish, and what they cannot settle the broker delivers again.
		_ = conn.Close()
	}
	<-workersDone
	return true, result
}

// brokerAddress is the host and port of an AMQP URL, for messages: never
// the user and password it may carry.
func brokerAddress(raw string) string {
	u, err := amqp.ParseURI(raw)
	if err != nil {
		return "(an invalid URL)"
	}
	return net.JoinHostPort(u.Host, strconv.Itoa(u.Port))
}

func closeError(what string, e *amqp.Error) error {
	if e == nil {
		return fmt.Errorf("%s closed", what)
	}
	return fmt.Errorf("%s closed: %w", what, e)
}

// declare makes the topology. The main and dead-letter queues may exist
// already with arguments of the user's (quorum, TTL, …): they are checked
// passively first and declared durable only if missing.
func (c *Consumer) declare(conn *amqp.Connection) error {
	if err := declareQueue(conn, queueDecl{name: c.cfg.Queue, users: true}); err != nil {
		return err
	}
	for _, q := range c.cfg.queues() {
		if err := declareQueue(conn, q); err != nil {
			return err
		}
	}
	return nil
}

// declareQueue declares q on a channel of its own (a failed declare closes
// its channel).
func declareQueue(conn *amqp.Connection, q queueDecl) error {
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	if q.users {
		_, err := ch.QueueDeclarePassive(q.name, true, false, false, false, nil)
		if err == nil {
			return ch.Close()
		}
		var ae *amqp.Error
		if !errors.As(err, &ae) || ae.Code != amqp.NotFound {
			return fmt.Errorf("queue: look up %s: %w", q.name, err)
		}
		if ch, err = conn.Channel(); err != nil {
			return err
		}
	}
	if _, err := ch.QueueDeclare(q.name, true, false, false, false, q.args); err != nil {
		var ae *amqp.Error
		if errors.As(err, &ae) && ae.Code == amqp.PreconditionFailed {
			return Permanent(fmt.Errorf("queue: %s exists with other arguments than sless declares (%v); delete it or choose another queue name", q.name, err))
		}
		return fmt.Errorf("queue: declare %s: %w", q.name, err)
	}
	return ch.Close()
}

// handle delivers one message and settles it.
func (c *Consumer) handle(ctx context.Context, l *link, d amqp.Delivery) {
	retries := retriesOf(d.Headers)
	reqID := d.MessageId
	if reqID == "" {
		reqID = d.CorrelationId
	}
	h := http.Header{}
	if d.MessageId != "" {
		h.Set(MessageIDHeader, HeaderValue(d.MessageId))
	}
	h.Set(AttemptHeader, strconv.Itoa(retries+1))
	// A content type or encoding that is no header value says nothing an
	// HTTP body could carry: the body goes as bytes of no known type.
	if d.ContentEncoding != "" && httpguts.ValidHeaderFieldValue(d.ContentEncoding) {
		h.Set("Content-Encoding", d.ContentEncoding)
	}
	ct := d.ContentType
	if !httpguts.ValidHeaderFieldValue(ct) {
		ct = ""
	}
	ctx, span := c.tracer.Start(ctx, c.cfg.Queue, AMQPCarrier(d.Headers), d.MessageId, retries+1)
	out := c.cfg.Invoker.Invoke(ctx, Call{Trigger: "queue", Body: d.Body, ContentType: ct, RequestID: HeaderValue(reqID), Header: h})
	End(span, out)
	if out.OK() {
		c.settle(d.Ack(false), d)
		return
	}
	log := c.cfg.Logger.With("queue", c.cfg.Queue, "messageId", d.MessageId, "attempt", retries+1, "outcome", out.String())
	target, next := c.cfg.DeadLetterQueue, retries
	if retries < c.cfg.MaxRetries {
		next = retries + 1
		target = c.cfg.RetryQueue(next)
	}
	msg := republished(d, next, out)
	if target == c.cfg.DeadLetterQueue {
		msg.Headers[DeadAtHeader] = time.Now().UTC().Format(time.RFC3339Nano)
	}
	if err := c.move(ctx, l, target, msg); err != nil {
		// Not safely elsewhere: back to the queue, to be tried again.
		log.Error("queue: could not move the message; returning it to the queue", "to", target, "error", err)
		c.settle(d.Nack(false, true), d)
		return
	}
	if target == c.cfg.DeadLetterQueue {
		log.Warn("queue: retries exhausted, message dead-lettered", "to", target)
	} else {
		log.Info("queue: call failed, message will be retried", "to", target, "delay", c.cfg.RetryDelay(next))
	}
	c.settle(d.Ack(false), d)
}

// move puts msg in queue. A queue deleted since it was declared is
// declared again and the copy published once more: the broker confirms a
// message it could not route, so without this the copy would be gone and
// the original acknowledged.
func (c *Consumer) move(ctx context.Context, l *link, queue string, msg amqp.Publishing) error {
	err := c.publish(ctx, l, queue, msg)
	if !errors.Is(err, errUnroutable) {
		return err
	}
	c.cfg.Logger.Warn("queue: queue missing; declaring it again", "queue", queue)
	if err := declareQueue(l.conn, c.cfg.queue(queue)); err != nil {
		return err
	}
	return c.publish(ctx, l, queue, msg)
}

var errUnroutable = errors.New("the broker could not route the message (no such queue)")

// publish sends msg to queue, mandatory, and waits for the broker's confirm.
func (c *Consumer) publish(ctx context.Context, l *link, queue string, msg amqp.Publishing) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	l.pubMu.Lock()
	defer l.pubMu.Unlock()
	// A return left over from a publish that gave up waiting is not this one's.
	select {
	case <-l.returns:
	default:
	}
	dc, err := l.pub.PublishWithDeferredConfirmWithContext(ctx, "", queue, true, false, msg)
	if err != nil {
		return err
	}
	ok, err := dc.WaitContext(ctx)
	if err != nil {
		return err
	}
	// The broker sends a basic.return before the confirm of the same
	// message, and the library hands it over before it reads the confirm.
	select {
	case <-l.returns:
		return errUnroutable
	default:
	}
	if !ok {
		return errors.New("the broker refused the message (nack)")
	}
	return nil
}

func (c *Consumer) settle(err error, d amqp.Delivery) {
	if err != nil {
		// The channel is gone: the broker redelivers the message.
		c.cfg.Logger.Warn("queue: could not settle a message; the broker will deliver it again", "messageId", d.MessageId, "error", err)
	}
}

// republished copies d for the retry or dead-letter queue, persistent, with
// the retry count and why the last call failed.
func republished(d amqp.Delivery, retries int, out Outcome) amqp.Publishing {
	h := amqp.Table{}
	for k, v := range d.Headers {
		// RabbitMQ's own dead-lettering history grows with every pass
		// through a delay queue; the retry count says what matters.
		if k == "x-death" || k == "x-first-death-exchange" || k == "x-first-death-queue" || k == "x-first-death-reason" ||
			k == "x-last-death-exchange" || k == "x-last-death-queue" || k == "x-last-death-reason" {
			continue
		}
		h[k] = v
	}
	h[RetriesHeader] = int32(retries)
	h[LastStatusHeader] = int32(out.Status)
	h[LastErrorHeader] = out.Why()
	return amqp.Publishing{
		Headers:         h,
		ContentType:     d.ContentType,
		ContentEncoding: d.ContentEncoding,
		DeliveryMode:    amqp.Persistent,
		Priority:        d.Priority,
		CorrelationId:   d.CorrelationId,
		ReplyTo:         d.ReplyTo,
		MessageId:       d.MessageId,
		Timestamp:       d.Timestamp,
		Type:            d.Type,
		UserId:          d.UserId,
		AppId:           d.AppId,
		Body:            d.Body,
	}
}

// retriesOf reads the retry count a message carries: 0 when none, or when
// what it carries is no count the consumer could have written (negative,
// not a number), so a producer's header cannot buy a message more tries.
func retriesOf(h amqp.Table) int {
	return max(0, rawRetries(h))
}

func rawRetries(h amqp.Table) int {
	switch v := h[RetriesHeader].(type) {
	case int32:
		return int(v)
	case int64:
		return int(v)
	case int:
		return v
	case int16:
		return int(v)
	case int8:
		return int(v)
	case uint8:
		return int(v)
	case string:
		n, _ := strconv.Atoi(v)
		return n
	}
	return 0
}
