// Package mqttq is the consumer behind mqtt triggers: it subscribes to an
// MQTT 3.1.1 topic filter at QoS 1 and calls the trigger's function through
// the invoke proxy with each message.
//
// Delivery is at least once. The consumer keeps a persistent session
// (clean session false) under a stable client id, so the broker queues the
// messages of a consumer that is away and sends again, when it comes back,
// those it did not acknowledge. A message is acknowledged (PUBACK) only
// after the function answered 2xx, or after its copy reached the
// dead-letter topic. MQTT 3.1.1 has no negative acknowledgement and no
// delivery count: the consumer retries a failed call itself, holding the
// message, with a doubling delay, and after maxRetries publishes it to the
// dead-letter topic. A message redelivered after a reconnect starts its
// count again.
package mqttq

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/queue"
)

// TopicHeader tells the function which topic its message was published to.
const TopicHeader = "X-Queue-Topic"

// Config is one consumer's configuration.
type Config struct {
	// URL of the broker(s), tcp://, ssl://, ws:// or wss:// (mqtt://,
	// mqtts://, tls:// alike), comma-separated: paho tries them in turn.
	URL  string
	Auth queue.Auth
	// ClientID names the persistent session; it must be the same at each
	// start, and no other client's.
	ClientID string
	// Topic is the filter to subscribe to (wildcards + and # allowed).
	Topic string
	// ShareGroup, when set, subscribes as $share/<group>/<topic>.
	ShareGroup string
	// DeadLetterTopic receives the messages whose retries ran out.
	DeadLetterTopic string
	// Delivery's Prefetch is how many messages wait in the consumer for a
	// call slot; the broker's own in-flight limit bounds what it sends
	// unacknowledged.
	queue.Delivery
}

// Schemes are the URL schemes paho dials.
var Schemes = []string{"tcp", "mqtt", "ssl", "tls", "mqtts", "tcps", "ws", "wss"}

func (c *Config) defaults() error {
	errs := queue.CheckURLs(c.URL, "tcp://host:1883", Schemes...)
	spec := &slessv1alpha1.MQTTSpec{ConnectionSecret: "x", Topic: c.Topic, ShareGroup: c.ShareGroup, ClientID: c.ClientID, DeadLetterTopic: c.DeadLetterTopic}
	for _, fe := range slessv1alpha1.ValidateMQTT(spec) {
		errs = append(errs, errors.New(fe.Error()))
	}
	if c.ClientID == "" || c.DeadLetterTopic == "" {
		errs = append(errs, errors.New("the client id and the dead-letter topic are required"))
	}
	errs = append(errs, c.Delivery.Check()...)
	if len(errs) > 0 {
		return fmt.Errorf("mqtt: %w", errors.Join(errs...))
	}
	if _, err := c.Auth.TLSConfig(); err != nil {
		return fmt.Errorf("mqtt: %w", err)
	}
	c.Delivery.Fill()
	return nil
}

// Filter is what the consumer subscribes to.
func (c *Config) Filter() string {
	if c.ShareGroup == "" {
		return c.Topic
	}
	return "$share/" + c.ShareGroup + "/" + c.Topic
}

// Consumer consumes one topic filter for one function.
type Consumer struct {
	cfg    Config
	state  *queue.Tracker
	tracer queue.Tracer
}

var _ queue.Source = (*Consumer)(nil)

// New checks cfg and makes a Consumer.
func New(cfg Config) (*Consumer, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	return &Consumer{cfg: cfg, state: queue.NewTracker(), tracer: queue.NewTracer(cfg.TracerProvider, "mqtt")}, nil
}

// State implements queue.Source.
func (c *Consumer) State() (queue.State, <-chan struct{}) { return c.state.Get() }

// What implements queue.Source.
func (c *Consumer) What() string { return slessv1alpha1.MQTTSource(c.cfg.Topic, c.cfg.ShareGroup) }

// Run consumes until ctx ends, reconnecting when the broker goes away. On
// ctx's end it takes no new message, lets the calls in flight finish and
// acknowledges them; what it held but had not called stays unacknowledged
// in the session, for the next start.
func (c *Consumer) Run(ctx context.Context) error {
	return queue.Sessions(ctx, c.state, c.cfg.ReconnectDelay, c.cfg.Logger, c.What(), c.session)
}

// connectTimeout bounds a CONNECT and a SUBSCRIBE.
const connectTimeout = 20 * time.Second

func (c *Consumer) options(handler mqtt.MessageHandler, lost chan<- error) *mqtt.ClientOptions {
	o := mqtt.NewClientOptions()
	for _, u := range strings.Split(c.cfg.URL, ",") {
		o.AddBroker(strings.TrimSpace(u))
	}
	o.SetClientID(c.cfg.ClientID).
		// The session outlives the connection: the broker keeps the
		// subscription, queues what comes meanwhile and sends again what
		// was not acknowledged.
		SetCleanSession(false).
		SetProtocolVersion(4).
		// Sessions reconnects, with a fresh client each time, so the state
		// names every outage.
		SetAutoReconnect(false).
		SetConnectRetry(false).
		SetConnectTimeout(connectTimeout).
		SetKeepAlive(30 * time.Second).
		// Each message reaches handler on a goroutine of its own, so a
		// slow call never holds up paho's reading (and its keepalive).
		SetOrderMatters(false).
		SetAutoAckDisabled(true).
		// A session's queued messages arrive right after CONNACK, before
		// SUBSCRIBE is answered: the default handler takes them too.
		SetDefaultPublishHandler(handler).
		SetConnectionLostHandler(func(_ mqtt.Client, err error) {
			select {
			case lost <- err:
			default:
			}
		})
	if a := c.cfg.Auth; a.Username != "" || a.Password != "" {
		o.SetUsername(a.Username).SetPassword(a.Password)
	}
	if tc, _ := c.cfg.Auth.TLSConfig(); tc != nil {
		o.SetTLSConfig(tc)
	}
	return o
}

// refused says whether a CONNECT error is the broker's refusal, which no
// reconnect mends: bad credentials, not authorised, the client id refused.
func refused(err error) bool {
	return errors.Is(err, packets.ErrorRefusedBadUsernameOrPassword) ||
		errors.Is(err, packets.ErrorRefusedNotAuthorised) ||
		errors.Is(err, packets.ErrorRefusedIDRejected) ||
		errors.Is(err, packets.ErrorRefusedBadProtocolVersion)
}

// session is one connection's life: connect, subscribe, and consume until
// the connection is lost or ctx ends.
func (c *Consumer) session(ctx context.Context) (consumed bool, err error) {
	// held ends with the session: messages waiting for a slot and retries
	// waiting for their delay are left unacknowledged, for the broker to
	// send again on the next connection.
	held, release := context.WithCancel(ctx)
	defer release()
	inbox := make(chan mqtt.Message, c.cfg.Prefetch)
	lost := make(chan error, 1)
	// gone closes when the connection is lost: a PUBACK no longer comes.
	gone := make(chan struct{})
	client := mqtt.NewClient(c.options(func(_ mqtt.Client, m mqtt.Message) {
		select {
		case inbox <- m:
		case <-held.Done():
		}
	}, lost))
	tok := client.Connect()
	if !tok.WaitTimeout(connectTimeout + 5*time.Second) {
		client.Disconnect(0)
		return false, fmt.Errorf("connect to the broker at %s: no CONNACK within %v", queue.RedactURL(c.cfg.URL), connectTimeout)
	}
	if err := tok.Error(); err != nil {
		err = fmt.Errorf("connect to the broker at %s as client %s: %w", queue.RedactURL(c.cfg.URL), c.cfg.ClientID, err)
		if refused(err) {
			return false, queue.Permanent(fmt.Errorf("mqtt: %w", err))
		}
		return false, err
	}
	resumed := tok.(*mqtt.ConnectToken).SessionPresent()
	// Acknowledgements still queued in paho go out before DISCONNECT.
	defer client.Disconnect(1000)

	// Subscribed at each connect, so the subscription is the trigger's
	// even where the broker lost the session.
	filter := c.cfg.Filter()
	st := client.Subscribe(filter, 1, nil)
	if !st.WaitTimeout(connectTimeout) {
		return false, fmt.Errorf("subscribe to %s: no SUBACK within %v", filter, connectTimeout)
	}
	if err := st.Error(); err != nil {
		return false, fmt.Errorf("subscribe to %s: %w", filter, err)
	}
	// One filter, one return code (paho keys it by the filter without
	// its $share/<group>/ prefix).
	granted := byte(0x80)
	for _, code := range st.(*mqtt.SubscribeToken).Result() {
		granted = code
	}
	switch {
	case granted == 0x80:
		// Not permanent: the broker's access rules may change.
		return false, fmt.Errorf("the broker refused the subscription to %s (not authorised, or shared subscriptions unsupported)", filter)
	case granted < 1:
		return false, queue.Permanent(fmt.Errorf("mqtt: the broker granted QoS %d for %s; at-least-once delivery needs QoS 1", granted, filter))
	}

	// Calls in flight are not cancelled by ctx (a shutdown lets them
	// finish, within the termination grace the Deployment allows).
	work := context.WithoutCancel(ctx)
	var wg sync.WaitGroup
	for range c.cfg.Concurrency {
		wg.Go(func() {
			for {
				select {
				case <-held.Done():
					return
				case m := <-inbox:
					if held.Err() != nil {
						return
					}
					c.handle(work, held, gone, client, m, resumed)
				}
			}
		})
	}
	c.cfg.Logger.Info("mqtt: consuming", "filter", filter, "clientId", c.cfg.ClientID, "sessionPresent", resumed,
		"prefetch", c.cfg.Prefetch, "concurrency", c.cfg.Concurrency)
	c.state.Set(true, nil, false)
	var result error
	select {
	case <-ctx.Done():
		// Not ready from here: the calls in flight finish, but no new
		// message is taken.
		c.state.Set(false, nil, true)
	case err := <-lost:
		close(gone)
		result = fmt.Errorf("connection to the broker lost: %w", err)
		c.state.Set(false, result, false)
	}
	release()
	wg.Wait()
	return true, result
}

// MessageID is the id a message is called with. MQTT 3.1.1 messages carry
// none, so it is a digest of topic and payload: the same for each delivery
// of a message, and for equal messages on one topic.
func MessageID(topic string, payload []byte) string {
	h := sha256.New()
	h.Write([]byte(topic))
	h.Write([]byte{0})
	h.Write(payload)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// handle calls the function with m until it answers 2xx or the retries run
// out, then acknowledges m (after dead-lettering it in the second case).
// It returns with m unacknowledged when held ends during a retry's wait,
// or the connection is gone before the dead letter was confirmed.
func (c *Consumer) handle(ctx, held context.Context, gone <-chan struct{}, client mqtt.Client, m mqtt.Message, resumed bool) {
	if resumed && m.Retained() {
		// A retained message sent again because the subscription was
		// renewed: it was delivered when the session first subscribed.
		m.Ack()
		return
	}
	id := MessageID(m.Topic(), m.Payload())
	var out queue.Outcome
	for attempt := 1; ; attempt++ {
		h := http.Header{}
		h.Set(queue.MessageIDHeader, id)
		h.Set(queue.AttemptHeader, strconv.Itoa(attempt))
		h.Set(TopicHeader, queue.HeaderValue(m.Topic()))
		// MQTT 3.1.1 messages have no headers: each delivery starts a trace.
		sctx, span := c.tracer.Start(ctx, m.Topic(), nil, id, attempt)
		out = c.cfg.Invoker.Invoke(sctx, queue.Call{Trigger: string(slessv1alpha1.TriggerTypeMQTT), Body: m.Payload(), RequestID: id, Header: h})
		queue.End(span, out)
		if out.OK() {
			m.Ack()
			return
		}
		log := c.cfg.Logger.With("topic", m.Topic(), "messageId", id, "attempt", attempt, "outcome", out.String())
		if attempt > c.cfg.MaxRetries {
			log.Warn("mqtt: retries exhausted, message will be dead-lettered", "to", c.cfg.DeadLetterTopic)
			break
		}
		d := c.cfg.RetryDelay(attempt)
		log.Info("mqtt: call failed, message will be retried", "delay", d)
		select {
		case <-held.Done():
			return
		case <-time.After(d):
		}
	}
	if err := c.deadLetter(gone, client, m, id, out); err != nil {
		// Unacknowledged: the broker sends it again on the next connection.
		c.cfg.Logger.Error("mqtt: could not dead-letter the message; it stays in the session", "messageId", id, "error", err)
		return
	}
	m.Ack()
}

// RetryDelay is the wait before retry n (1-based).
func (c *Config) RetryDelay(n int) time.Duration {
	return queue.Backoff(c.Backoff, c.MaxBackoff, n)
}

// DeadLetter is what the dead-letter topic receives: MQTT 3.1.1 messages
// have no headers, so the message travels inside, with why it died.
type DeadLetter struct {
	// Topic the message was published to.
	Topic string `json:"topic"`
	// Payload is the message's, base64 in JSON.
	Payload   []byte `json:"payload"`
	MessageID string `json:"messageId"`
	// Retries is how many calls were made after the first.
	Retries int `json:"retries"`
	// LastStatus is the HTTP status of the last call, 0 when none came.
	LastStatus int       `json:"lastStatus"`
	LastError  string    `json:"lastError,omitempty"`
	DeadAt     time.Time `json:"deadAt"`
}

// deadLetter publishes m's dead letter at QoS 1 and waits for the broker's
// PUBACK, also while the consumer stops: the connection stays until then.
func (c *Consumer) deadLetter(gone <-chan struct{}, client mqtt.Client, m mqtt.Message, id string, out queue.Outcome) error {
	body, err := json.Marshal(DeadLetter{
		Topic: m.Topic(), Payload: m.Payload(), MessageID: id, Retries: c.cfg.MaxRetries,
		LastStatus: out.Status, LastError: strings.ToValidUTF8(out.Why(), "?"), DeadAt: time.Now().UTC(),
	})
	if err != nil {
		return err
	}
	tok := client.Publish(c.cfg.DeadLetterTopic, 1, false, body)
	select {
	case <-tok.Done():
		return tok.Error()
	case <-gone:
		return errors.New("the connection was lost before the broker confirmed the dead letter")
	case <-time.After(30 * time.Second):
		return errors.New("no PUBACK for the dead letter within 30 s")
	}
}
