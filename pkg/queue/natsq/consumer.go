// Package natsq is the consumer behind nats triggers: it takes the
// messages of a NATS JetStream stream through a durable pull consumer and
// calls the trigger's function through the invoke proxy with each one.
//
// Delivery is at least once, with JetStream keeping the count: a message is
// acknowledged only after the function answered 2xx; a failed call is
// negatively acknowledged with the retry's delay (nak), and JetStream
// delivers it again then. The durable consumer's MaxDeliver is maxRetries+1,
// so after the last failure JetStream gives up on the message and says so
// in a MAX_DELIVERIES advisory; the consumer listens for those and copies
// the message from the stream to the dead-letter subject. A consumer that
// dies holding messages leaves them unacknowledged, and JetStream delivers
// them again after AckWait.
package natsq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/net/http/httpguts"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/queue"
)

// SubjectHeader tells the function which subject its message was published to.
const SubjectHeader = "X-Queue-Subject"

// Config is one consumer's configuration.
type Config struct {
	// URL of the server(s), nats:// or tls://, comma-separated.
	URL  string
	Auth queue.Auth
	// Stream to consume; it must exist.
	Stream string
	// Subject filters the stream's messages (wildcards allowed).
	Subject string
	// Durable names the JetStream consumer, created or updated at each connect.
	Durable string
	// DeadLetterSubject receives the messages whose retries ran out.
	DeadLetterSubject string
	// AckWait is how long JetStream waits for a message's acknowledgement
	// before it delivers it again: longer than a call may take.
	AckWait time.Duration
	// Delivery's Prefetch is how many unacknowledged messages the consumer
	// holds (the JetStream consumer's MaxAckPending); JetStream delivers a
	// failed message again, MaxRetries times, before it is dead-lettered.
	queue.Delivery
}

func (c *Config) defaults() error {
	errs := queue.CheckURLs(c.URL, "nats://host:4222", "nats", "tls", "ws", "wss")
	spec := &slessv1alpha1.NATSSpec{ConnectionSecret: "x", Stream: c.Stream, Subject: c.Subject, Durable: c.Durable, DeadLetterSubject: c.DeadLetterSubject}
	for _, fe := range slessv1alpha1.ValidateNATS(spec) {
		errs = append(errs, errors.New(fe.Error()))
	}
	if c.Durable == "" || c.DeadLetterSubject == "" {
		errs = append(errs, errors.New("the durable consumer and the dead-letter subject are required"))
	}
	errs = append(errs, c.Delivery.Check()...)
	if len(errs) > 0 {
		return fmt.Errorf("nats: %w", errors.Join(errs...))
	}
	if _, err := c.Auth.TLSConfig(); err != nil {
		return fmt.Errorf("nats: %w", err)
	}
	c.Delivery.Fill()
	if c.AckWait <= 0 {
		c.AckWait = 2 * time.Minute
	}
	return nil
}

// RetryDelay is the wait before retry n (1-based).
func (c *Config) RetryDelay(n int) time.Duration {
	return queue.Backoff(c.Backoff, c.MaxBackoff, n)
}

// Consumer consumes one stream's subject for one function.
type Consumer struct {
	cfg    Config
	state  *queue.Tracker
	tracer queue.Tracer
	// why keeps the outcome of each message's last failed call, by stream
	// sequence, for the headers of its dead-lettered copy.
	whyMu sync.Mutex
	why   map[uint64]queue.Outcome
}

var _ queue.Source = (*Consumer)(nil)

// New checks cfg and makes a Consumer.
func New(cfg Config) (*Consumer, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	return &Consumer{cfg: cfg, state: queue.NewTracker(), why: map[uint64]queue.Outcome{},
		tracer: queue.NewTracer(cfg.TracerProvider, "nats")}, nil
}

// State implements queue.Source.
func (c *Consumer) State() (queue.State, <-chan struct{}) { return c.state.Get() }

// What implements queue.Source.
func (c *Consumer) What() string { return slessv1alpha1.NATSSource(c.cfg.Subject, c.cfg.Stream) }

// Run consumes until ctx ends, reconnecting when the server goes away. On
// ctx's end it stops taking messages, hands the ones fetched but not yet
// called back (nak), lets the calls in flight finish and settles them.
func (c *Consumer) Run(ctx context.Context) error {
	return queue.Sessions(ctx, c.state, c.cfg.ReconnectDelay, c.cfg.Logger, c.What(), c.session)
}

func (c *Consumer) connect() (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name("sless consume " + c.cfg.Durable),
		nats.Timeout(10 * time.Second),
		// Within a session the client reconnects by itself and the pull
		// consumer carries on; the state says when it is away.
		nats.MaxReconnects(-1),
		nats.ReconnectWait(c.cfg.ReconnectDelay),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			// Closing the connection ourselves (a session ending on its own
			// error) is no outage: Sessions records why it ended.
			if err == nil || nc.IsClosed() {
				return
			}
			c.state.Set(false, fmt.Errorf("connection to the server lost: %w", err), false)
		}),
		nats.ReconnectHandler(func(*nats.Conn) { c.state.Set(true, nil, false) }),
	}
	a := c.cfg.Auth
	if a.Username != "" || a.Password != "" {
		opts = append(opts, nats.UserInfo(a.Username, a.Password))
	}
	if a.Token != "" {
		opts = append(opts, nats.Token(a.Token))
	}
	if tc, _ := a.TLSConfig(); tc != nil {
		opts = append(opts, nats.Secure(tc))
	}
	nc, err := nats.Connect(c.cfg.URL, opts...)
	if err != nil {
		err = fmt.Errorf("connect to the server at %s: %w", queue.RedactURL(c.cfg.URL), err)
		if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthRevoked) {
			return nil, queue.Permanent(fmt.Errorf("nats: %w", err))
		}
		return nil, err
	}
	return nc, nil
}

// session is one connection's life: look up the stream, create or update
// the durable consumer, listen for its dead letters, and consume until the
// connection closes, the consumer is deleted, or ctx ends.
func (c *Consumer) session(ctx context.Context) (consumed bool, err error) {
	nc, err := c.connect()
	if err != nil {
		return false, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return false, err
	}
	setup, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	stream, err := js.Stream(setup, c.cfg.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		// Not permanent: the stream may be made after the trigger.
		return false, fmt.Errorf("stream %s does not exist on the server", c.cfg.Stream)
	}
	if err != nil {
		return false, fmt.Errorf("look up stream %s: %w", c.cfg.Stream, err)
	}
	if err := c.deadLetterStream(setup, js); err != nil {
		return false, err
	}
	cons, err := stream.CreateOrUpdateConsumer(setup, jetstream.ConsumerConfig{
		Durable:       c.cfg.Durable,
		FilterSubject: c.cfg.Subject,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       c.cfg.AckWait,
		MaxDeliver:    c.cfg.MaxRetries + 1,
		MaxAckPending: c.cfg.Prefetch,
		Description:   "sless trigger consumer",
	})
	if err != nil {
		err = fmt.Errorf("create or update the durable consumer %s on stream %s: %w", c.cfg.Durable, c.cfg.Stream, err)
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.Code == http.StatusBadRequest {
			// A setting JetStream will not change on an existing consumer
			// (its deliver policy, say): the same refusal on every retry.
			return false, queue.Permanent(fmt.Errorf("nats: %w; delete the consumer or name another durable", err))
		}
		return false, err
	}
	// Dead letters are copied by whichever replica gets the advisory: a
	// queue group, so one copy per message however many consume.
	adv, err := nc.QueueSubscribe(maxDeliveriesAdvisory+c.cfg.Stream+"."+c.cfg.Durable,
		"sless-dlq-"+c.cfg.Durable, func(m *nats.Msg) { c.deadLetter(ctx, js, stream, m.Data) })
	if err != nil {
		return false, fmt.Errorf("subscribe to the dead-letter advisories: %w", err)
	}
	defer adv.Unsubscribe() //nolint:errcheck // the connection closes anyway

	// Calls in flight are not cancelled by ctx (a shutdown lets them
	// finish, within the termination grace the Deployment allows).
	work := context.WithoutCancel(ctx)
	slots := make(chan struct{}, c.cfg.Concurrency)
	var wg sync.WaitGroup
	ended := make(chan error, 1)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		if ctx.Err() != nil {
			// Shutting down: a message fetched but not yet called goes
			// back for the next consumer at once, not after AckWait.
			c.settle(m.Nak(), m.Subject())
			return
		}
		// Blocks the delivery until a call ends: at most Concurrency calls
		// run, and the rest wait fetched, up to Prefetch.
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			c.handle(work, m)
		}()
	}, jetstream.PullMaxMessages(c.cfg.Prefetch), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) {
			select {
			case ended <- fmt.Errorf("the durable consumer %s was deleted", c.cfg.Durable):
			default:
			}
		}
	}))
	if err != nil {
		return false, fmt.Errorf("consume %s: %w", c.What(), err)
	}
	c.cfg.Logger.Info("nats: consuming", "stream", c.cfg.Stream, "subject", c.cfg.Subject, "durable", c.cfg.Durable,
		"prefetch", c.cfg.Prefetch, "concurrency", c.cfg.Concurrency)
	c.state.Set(true, nil, false)
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	var result error
	select {
	case <-ctx.Done():
		// Not ready from here: the calls in flight finish, but no new
		// message is taken; what was fetched is handed back above.
		c.state.Set(false, nil, true)
		cc.Drain()
		<-cc.Closed()
	case result = <-ended:
		cc.Stop()
	case <-closed:
		result = errors.New("connection to the server closed")
	}
	wg.Wait()
	// Acks and naks are published without waiting; closing the connection
	// with them still buffered would drop them (and the messages would
	// come again after AckWait).
	_ = nc.FlushTimeout(5 * time.Second)
	return true, result
}

// deadLetterStream makes sure a stream captures the dead-letter subject,
// creating DLQ_<stream>_<durable> for it if none does: a copy published
// where no stream listens would be gone.
func (c *Consumer) deadLetterStream(ctx context.Context, js jetstream.JetStream) error {
	name, err := js.StreamNameBySubject(ctx, c.cfg.DeadLetterSubject)
	if err == nil {
		if name == c.cfg.Stream && slessv1alpha1.NATSSubjectMatches(c.cfg.Subject, c.cfg.DeadLetterSubject) {
			return queue.Permanent(fmt.Errorf("nats: the dead-letter subject %s is consumed by this trigger", c.cfg.DeadLetterSubject))
		}
		return nil
	}
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("look up the stream of the dead-letter subject %s: %w", c.cfg.DeadLetterSubject, err)
	}
	dlq := "DLQ_" + c.cfg.Stream + "_" + c.cfg.Durable
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: dlq, Subjects: []string{c.cfg.DeadLetterSubject}, Storage: jetstream.FileStorage,
		Description: "dead letters of the sless trigger consumer " + c.cfg.Durable,
	}); err != nil {
		return fmt.Errorf("create stream %s for the dead-letter subject %s: %w", dlq, c.cfg.DeadLetterSubject, err)
	}
	return nil
}

// handle delivers one message and settles it.
func (c *Consumer) handle(ctx context.Context, m jetstream.Msg) {
	md, err := m.Metadata()
	if err != nil {
		// Not a JetStream delivery: nothing to settle.
		c.cfg.Logger.Error("nats: a message without JetStream metadata", "subject", m.Subject(), "error", err)
		return
	}
	attempt := int(md.NumDelivered)
	id := m.Headers().Get(nats.MsgIdHdr)
	if id == "" {
		id = md.Stream + "-" + strconv.FormatUint(md.Sequence.Stream, 10)
	}
	h := http.Header{}
	h.Set(queue.MessageIDHeader, queue.HeaderValue(id))
	h.Set(queue.AttemptHeader, strconv.Itoa(attempt))
	h.Set(SubjectHeader, queue.HeaderValue(m.Subject()))
	if ce := m.Headers().Get("Content-Encoding"); ce != "" && httpguts.ValidHeaderFieldValue(ce) {
		h.Set("Content-Encoding", ce)
	}
	ct := m.Headers().Get("Content-Type")
	if !httpguts.ValidHeaderFieldValue(ct) {
		ct = ""
	}
	ctx, span := c.tracer.Start(ctx, m.Subject(), queue.MapCarrier(m.Headers()), id, attempt)
	out := c.cfg.Invoker.Invoke(ctx, queue.Call{Trigger: string(slessv1alpha1.TriggerTypeNATS), Body: m.Data(), ContentType: ct,
		RequestID: queue.HeaderValue(id), Header: h})
	queue.End(span, out)
	seq := md.Sequence.Stream
	if out.OK() {
		c.forget(seq)
		c.settle(m.Ack(), id)
		return
	}
	log := c.cfg.Logger.With("stream", c.cfg.Stream, "messageId", id, "attempt", attempt, "outcome", out.String())
	c.whyMu.Lock()
	c.why[seq] = out
	c.whyMu.Unlock()
	if attempt <= c.cfg.MaxRetries {
		d := c.RetryDelay(attempt)
		log.Info("nats: call failed, message will be retried", "delay", d)
		c.settle(m.NakWithDelay(d), id)
		return
	}
	// The last delivery JetStream makes: the nak makes it give up and
	// send the advisory that dead-letters the message.
	log.Warn("nats: retries exhausted, message will be dead-lettered", "to", c.cfg.DeadLetterSubject)
	c.settle(m.Nak(), id)
}

// RetryDelay is the wait before retry n (1-based).
func (c *Consumer) RetryDelay(n int) time.Duration { return c.cfg.RetryDelay(n) }

func (c *Consumer) forget(seq uint64) {
	c.whyMu.Lock()
	delete(c.why, seq)
	c.whyMu.Unlock()
}

func (c *Consumer) settle(err error, id string) {
	if err != nil {
		// The connection is gone: JetStream delivers the message again.
		c.cfg.Logger.Warn("nats: could not settle a message; the server will deliver it again", "messageId", id, "error", err)
	}
}

// maxDeliveriesAdvisory is the subject prefix of JetStream's advisories
// that a message was delivered MaxDeliver times; stream and consumer follow.
const maxDeliveriesAdvisory = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES."

// advisory is the part of JetStream's MAX_DELIVERIES advisory
// (io.nats.jetstream.advisory.v1.max_deliver) the consumer reads.
type advisory struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// Headers a dead-lettered copy carries besides queue's retry headers.
const (
	OriginalSubjectHeader  = "x-sless-original-subject"
	OriginalSequenceHeader = "x-sless-original-sequence"
)

// deadLetter copies the message an advisory names to the dead-letter
// subject, with the retry count and why the last call failed, and waits
// for the stream that captures it to confirm.
func (c *Consumer) deadLetter(ctx context.Context, js jetstream.JetStream, stream jetstream.Stream, data []byte) {
	var a advisory
	if err := json.Unmarshal(data, &a); err != nil || a.StreamSeq == 0 {
		c.cfg.Logger.Error("nats: an unreadable max-deliveries advisory", "error", err)
		return
	}
	log := c.cfg.Logger.With("stream", a.Stream, "sequence", a.StreamSeq, "to", c.cfg.DeadLetterSubject)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	raw, err := stream.GetMsg(ctx, a.StreamSeq)
	if err != nil {
		// Removed meanwhile (a limit, an age, a purge): nothing to copy.
		log.Error("nats: could not read the message to dead-letter it", "error", err)
		return
	}
	m := nats.NewMsg(c.cfg.DeadLetterSubject)
	m.Data = raw.Data
	for k, vs := range raw.Header {
		for _, v := range vs {
			m.Header.Add(k, v)
		}
	}
	m.Header.Set(queue.RetriesHeader, strconv.FormatUint(a.Deliveries-1, 10))
	m.Header.Set(queue.DeadAtHeader, time.Now().UTC().Format(time.RFC3339Nano))
	m.Header.Set(OriginalSubjectHeader, raw.Subject)
	m.Header.Set(OriginalSequenceHeader, strconv.FormatUint(a.StreamSeq, 10))
	c.whyMu.Lock()
	out, known := c.why[a.StreamSeq]
	delete(c.why, a.StreamSeq)
	c.whyMu.Unlock()
	if known {
		m.Header.Set(queue.LastStatusHeader, strconv.Itoa(out.Status))
		m.Header.Set(queue.LastErrorHeader, strings.ToValidUTF8(strings.ReplaceAll(strings.ReplaceAll(out.Why(), "\r", " "), "\n", " "), "?"))
	}
	for try := 1; ; try++ {
		_, err := js.PublishMsg(ctx, m)
		if err == nil {
			log.Warn("nats: message dead-lettered", "deliveries", a.Deliveries)
			return
		}
		if ctx.Err() != nil {
			log.Error("nats: could not dead-letter the message; it stays in the stream", "error", err)
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(try) * 500 * time.Millisecond):
		}
	}
}
