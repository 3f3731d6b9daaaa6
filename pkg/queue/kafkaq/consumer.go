// Package kafkaq is the consumer behind kafka triggers: it reads a Kafka
// topic as a member of a consumer group and calls the trigger's function
// through the invoke proxy with each record.
//
// Delivery is at least once. Kafka keeps one committed offset per
// partition, so a record's offset is committed only when it and every
// record before it in its partition are done: answered 2xx, or produced
// to the dead-letter topic after maxRetries failed retries (each after a
// doubling delay, waited in the consumer). A consumer that dies, or loses
// a partition to another member, leaves the records past the committed
// offset to the partition's next owner, which delivers them again.
package kafkaq

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"golang.org/x/net/http/httpguts"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/queue"
)

// Headers that tell the function where its record came from.
const (
	TopicHeader     = "X-Kafka-Topic"
	PartitionHeader = "X-Kafka-Partition"
	OffsetHeader    = "X-Kafka-Offset"
	// KeyHeader is the record's key, Go-quoted when it is no valid header
	// value (queue.HeaderValue); absent when the record has none.
	KeyHeader       = "X-Kafka-Key"
	TimestampHeader = "X-Kafka-Timestamp"
)

// Headers a dead-lettered record carries besides queue's retry headers.
const (
	OriginalTopicHeader     = "x-sless-original-topic"
	OriginalPartitionHeader = "x-sless-original-partition"
	OriginalOffsetHeader    = "x-sless-original-offset"
)

// Consumer consumes one topic for one function.
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
	return &Consumer{cfg: cfg, state: queue.NewTracker(), tracer: queue.NewTracer(cfg.TracerProvider, "kafka")}, nil
}

// State implements queue.Source.
func (c *Consumer) State() (queue.State, <-chan struct{}) { return c.state.Get() }

// What implements queue.Source.
func (c *Consumer) What() string { return slessv1alpha1.KafkaSource(c.cfg.Topic) }

// RetryDelay is the wait before retry n (1-based).
func (c *Consumer) RetryDelay(n int) time.Duration { return c.cfg.RetryDelay(n) }

// Run consumes until ctx ends, reconnecting when the brokers go away. On
// ctx's end it takes no more records, lets the calls in flight finish,
// commits what is done and leaves the group.
func (c *Consumer) Run(ctx context.Context) error {
	return queue.Sessions(ctx, c.state, c.cfg.ReconnectDelay, c.cfg.Logger, c.What(), c.session)
}

// authErrors are refusals no reconnect mends.
var authErrors = []error{kerr.SaslAuthenticationFailed, kerr.IllegalSaslState, kerr.UnsupportedSaslMechanism,
	kerr.TopicAuthorizationFailed, kerr.GroupAuthorizationFailed, kerr.ClusterAuthorizationFailed}

func permanentIf(err error) error {
	for _, a := range authErrors {
		if errors.Is(err, a) {
			return queue.Permanent(fmt.Errorf("kafka: %w", err))
		}
	}
	return err
}

// check makes sure the topic exists and the dead-letter topic does or is
// made, through the admin client adm.
func (c *Consumer) check(ctx context.Context, adm *kadm.Client) error {
	brokers := strings.Join(c.cfg.Brokers, ",")
	topics, err := adm.ListTopics(ctx, c.cfg.Topic, c.cfg.DeadLetterTopic)
	if err != nil {
		return permanentIf(fmt.Errorf("reach the brokers at %s: %w", brokers, err))
	}
	if td, ok := topics[c.cfg.Topic]; !ok || td.Err != nil {
		if ok && !errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
			return permanentIf(fmt.Errorf("look up topic %s: %w", c.cfg.Topic, td.Err))
		}
		// Not permanent: the topic may be made after the trigger.
		return fmt.Errorf("topic %s does not exist on the brokers at %s", c.cfg.Topic, brokers)
	}
	if td, ok := topics[c.cfg.DeadLetterTopic]; ok && td.Err == nil {
		return nil
	}
	// A record produced where no topic is would wait for one, holding
	// back its partition's commits: make it now.
	res, err := adm.CreateTopic(ctx, -1, -1, nil, c.cfg.DeadLetterTopic)
	if err == nil {
		err = res.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return permanentIf(fmt.Errorf("create the dead-letter topic %s: %w", c.cfg.DeadLetterTopic, err))
	}
	return nil
}

// session is one group membership: check the topics, join the group and
// consume until ctx ends or the group refuses us.
func (c *Consumer) session(ctx context.Context) (consumed bool, err error) {
	// The producer (dead letters) and admin client is apart from the
	// group's, so that checking the topics joins no group.
	link, err := kgo.NewClient(c.cfg.clientOptions()...)
	if err != nil {
		return false, queue.Permanent(fmt.Errorf("kafka: %w", err))
	}
	defer link.Close()
	setup, cancel := context.WithTimeout(ctx, 15*time.Second)
	err = c.check(setup, kadm.NewClient(link))
	cancel()
	if err != nil {
		return false, err
	}
	s := &session{c: c, link: link, parts: map[int32]*partition{}, tokens: make(chan struct{}, c.cfg.Prefetch),
		work: make(chan *job, c.cfg.Prefetch), retry: make(chan *job, c.cfg.Prefetch), quit: make(chan struct{}), kick: make(chan struct{}, 1)}
	opts := append(c.cfg.clientOptions(),
		kgo.ConsumerGroup(c.cfg.Group),
		kgo.ConsumeTopics(c.cfg.Topic),
		kgo.DisableAutoCommit(),
		// A group new to the topic reads it from its start: records made
		// before the consumer first joined are not skipped.
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// A partition resumed after a pause joins the next fetch, after
		// the one in flight, which waits this long when nothing comes.
		kgo.FetchMaxWait(time.Second),
		kgo.OnPartitionsAssigned(s.assigned),
		kgo.OnPartitionsRevoked(s.revoked),
		kgo.OnPartitionsLost(s.lost),
		kgo.WithHooks(s),
	)
	group, err := kgo.NewClient(opts...)
	if err != nil {
		return false, queue.Permanent(fmt.Errorf("kafka: %w", err))
	}
	s.group = group
	c.cfg.Logger.Info("kafka: consuming", "topic", c.cfg.Topic, "group", c.cfg.Group,
		"prefetch", c.cfg.Prefetch, "concurrency", c.cfg.Concurrency)
	s.live.Store(true)
	c.state.Set(true, nil, false)
	result := s.consume(ctx)
	s.live.Store(false)
	if ctx.Err() != nil {
		c.state.Set(false, nil, true)
	}
	s.stop()
	return true, result
}

// session is one group membership's records and partitions.
type session struct {
	c           *Consumer
	link, group *kgo.Client
	// tokens bounds the records held unfinished (Prefetch).
	tokens chan struct{}
	// Concurrency workers take the records from work in offset order,
	// and those whose retry is due from retry first; quit ends them.
	work, retry chan *job
	quit        chan struct{}
	workers     sync.WaitGroup
	// kick asks the committer to commit what is due.
	kick chan struct{}
	// live: the session consumes, so a broker connection coming or going
	// is news for the state.
	live atomic.Bool

	mu    sync.Mutex
	parts map[int32]*partition
}

// partition is one assigned partition's records in this session.
type partition struct {
	id   int32
	offs *offsets
	// gone ends its records' waits (for a worker, a retry's delay, a
	// dead letter's produce) when the partition is revoked, lost or the
	// session stops; calls counts the calls in flight.
	gone   context.Context
	cancel context.CancelFunc
	calls  sync.WaitGroup
	// paused: fetching it waits until fewer of its records are held
	// past its commit point (see hold).
	paused bool
}

// job is one record on its way to the function.
type job struct {
	p       *partition
	h       *held
	r       *kgo.Record
	attempt int
}

// consume polls records while tokens allow and queues them for the
// workers, in order: on a stop, the records done are then mostly a run
// from the last commit, and what a stop leaves uncalled is not called
// twice.
func (s *session) consume(ctx context.Context) error {
	cfg := &s.c.cfg
	go s.committer(ctx)
	for range cfg.Concurrency {
		s.workers.Go(s.worker)
	}
	for {
		// Wait for one free token, then take what else is free.
		select {
		case s.tokens <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		n := 1
	more:
		for n < cfg.Prefetch {
			select {
			case s.tokens <- struct{}{}:
				n++
			default:
				break more
			}
		}
		fetches := s.group.PollRecords(ctx, n)
		if fetches.IsClientClosed() || ctx.Err() != nil {
			s.release(n)
			return nil
		}
		var fatal error
		fetches.EachError(func(topic string, p int32, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			err = permanentIf(fmt.Errorf("fetch %s[%d]: %w", topic, p, err))
			if _, ok := errors.AsType[*queue.PermanentError](err); ok {
				fatal = err
				return
			}
			s.c.state.Set(false, err, false)
			cfg.Logger.Warn("kafka: fetch failed", "topic", topic, "partition", p, "error", err)
		})
		if fatal != nil {
			s.release(n)
			return fatal
		}
		recs := fetches.Records()
		for _, r := range recs {
			s.mu.Lock()
			p := s.parts[r.Partition]
			var h *held
			pause := false
			if p != nil {
				h = p.offs.add(r)
				pause = s.pause(p)
			}
			s.mu.Unlock()
			if pause {
				s.group.PauseFetchPartitions(map[string][]int32{cfg.Topic: {p.id}})
			}
			if p == nil {
				// Polled before its partition was revoked: its next
				// owner reads it again.
				s.release(1)
				continue
			}
			// Never blocks: no more jobs than tokens.
			s.work <- &job{p: p, h: h, r: r, attempt: 1}
		}
		s.release(n - len(recs))
		if len(recs) > 0 {
			s.c.state.Set(true, nil, false)
		}
	}
}

func (s *session) release(n int) {
	for range n {
		<-s.tokens
	}
}

// worker calls the function with the records of work and retry, due
// retries first, until quit.
func (s *session) worker() {
	for {
		var j *job
		select {
		case j = <-s.retry:
		default:
			select {
			case j = <-s.retry:
			case j = <-s.work:
			case <-s.quit:
				return
			}
		}
		s.deliver(j)
	}
}

// deliver makes attempt j.attempt of j's record: on a 2xx, or once its
// retries ran out and it is dead-lettered, the record is finished;
// otherwise it goes back to retry after the backoff. A partition gone
// meanwhile ends it uncalled: its next owner has the record.
func (s *session) deliver(j *job) {
	cfg := &s.c.cfg
	p, r := j.p, j.r
	s.mu.Lock()
	if p.gone.Err() != nil {
		s.mu.Unlock()
		s.release(1)
		return
	}
	p.calls.Add(1)
	j.h.retrying = false
	s.mu.Unlock()
	ctx, span := s.c.tracer.Start(context.Background(), r.Topic, recordCarrier{r}, recordID(r), j.attempt,
		semconv.MessagingConsumerGroupName(cfg.Group), semconv.MessagingDestinationPartitionID(strconv.Itoa(int(r.Partition))))
	out := cfg.Invoker.Invoke(ctx, call(r, j.attempt))
	queue.End(span, out)
	if out.OK() {
		s.finish(p, j.h)
		p.calls.Done()
		s.release(1)
		return
	}
	log := cfg.Logger.With("topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "attempt", j.attempt, "outcome", out.String())
	if j.attempt > cfg.MaxRetries {
		// Counted as a call in flight, so that a revoke waits for the
		// dead letter before it commits.
		if err := s.deadLetter(p.gone, r, j.attempt-1, out); err == nil {
			log.Warn("kafka: retries exhausted, record dead-lettered", "to", cfg.DeadLetterTopic)
			s.finish(p, j.h)
		} else {
			log.Error("kafka: could not dead-letter the record; it will be delivered again", "error", err)
		}
		p.calls.Done()
		s.release(1)
		return
	}
	s.mu.Lock()
	j.h.retrying = true
	pause := s.pause(p)
	s.mu.Unlock()
	if pause {
		s.group.PauseFetchPartitions(map[string][]int32{cfg.Topic: {p.id}})
	}
	p.calls.Done()
	d := cfg.RetryDelay(j.attempt)
	log.Info("kafka: call failed, record will be retried", "delay", d)
	j.attempt++
	go func() {
		// The record keeps its token while it waits, not a worker.
		t := time.NewTimer(d)
		select {
		case <-t.C:
			s.retry <- j
		case <-p.gone.Done():
			t.Stop()
			s.release(1)
		}
	}()
}

// call is the function's call for attempt n of r.
// recordID names a record by where it is: topic-partition-offset.
func recordID(r *kgo.Record) string {
	return r.Topic + "-" + strconv.Itoa(int(r.Partition)) + "-" + strconv.FormatInt(r.Offset, 10)
}

func call(r *kgo.Record, attempt int) queue.Call {
	id := recordID(r)
	h := http.Header{}
	h.Set(queue.MessageIDHeader, queue.HeaderValue(id))
	h.Set(queue.AttemptHeader, strconv.Itoa(attempt))
	h.Set(TopicHeader, queue.HeaderValue(r.Topic))
	h.Set(PartitionHeader, strconv.Itoa(int(r.Partition)))
	h.Set(OffsetHeader, strconv.FormatInt(r.Offset, 10))
	if r.Key != nil {
		h.Set(KeyHeader, queue.HeaderValue(string(r.Key)))
	}
	if !r.Timestamp.IsZero() {
		h.Set(TimestampHeader, r.Timestamp.UTC().Format(time.RFC3339Nano))
	}
	var ct string
	for _, rh := range r.Headers {
		v := string(rh.Value)
		if !httpguts.ValidHeaderFieldValue(v) {
			continue
		}
		switch {
		case strings.EqualFold(rh.Key, "Content-Type"):
			ct = v
		case strings.EqualFold(rh.Key, "Content-Encoding"):
			h.Set("Content-Encoding", v)
		}
	}
	return queue.Call{Trigger: string(slessv1alpha1.TriggerTypeKafka), Body: r.Value, ContentType: ct, RequestID: queue.HeaderValue(id), Header: h}
}

// pause and resume say whether p's fetching should pause or resume now,
// and record it. While a record waits for its retry its partition's
// later records go on, but they cannot be committed past it, and a
// restart delivers them again: with twice Prefetch held behind such a
// record, the partition pauses (the client fetches it again from its
// first record not polled) until the record is done or Prefetch are
// held. A record that is merely slow pauses nothing. s.mu is held.
func (s *session) pause(p *partition) bool {
	if p.paused || !p.offs.stuck(2*s.c.cfg.Prefetch) {
		return false
	}
	p.paused = true
	return true
}

func (s *session) resume(p *partition) bool {
	if !p.paused || p.offs.stuck(s.c.cfg.Prefetch+1) {
		return false
	}
	p.paused = false
	return true
}

// finish marks h done and wakes the committer if its partition's mark moved.
func (s *session) finish(p *partition, h *held) {
	s.mu.Lock()
	moved := p.offs.finish(h)
	resume := moved && s.resume(p)
	s.mu.Unlock()
	if resume {
		s.group.ResumeFetchPartitions(map[string][]int32{s.c.cfg.Topic: {p.id}})
	}
	if moved {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// deadLetter produces a copy of r to the dead-letter topic, with the
// retries it had and why its last call failed, and waits for the brokers
// to take it.
func (s *session) deadLetter(ctx context.Context, r *kgo.Record, retries int, out queue.Outcome) error {
	dl := &kgo.Record{Topic: s.c.cfg.DeadLetterTopic, Key: r.Key, Value: r.Value}
	dl.Headers = append(dl.Headers, r.Headers...)
	for _, kv := range [][2]string{
		{queue.RetriesHeader, strconv.Itoa(retries)},
		{queue.DeadAtHeader, time.Now().UTC().Format(time.RFC3339Nano)},
		{queue.LastStatusHeader, strconv.Itoa(out.Status)},
		{queue.LastErrorHeader, out.Why()},
		{OriginalTopicHeader, r.Topic},
		{OriginalPartitionHeader, strconv.Itoa(int(r.Partition))},
		{OriginalOffsetHeader, strconv.FormatInt(r.Offset, 10)},
	} {
		dl.Headers = append(dl.Headers, kgo.RecordHeader{Key: kv[0], Value: []byte(kv[1])})
	}
	return s.link.ProduceSync(ctx, dl).FirstErr()
}

// commitEvery spaces the commits of a busy consumer: one round trip to
// the group's coordinator covers what finished meanwhile. A restart
// delivers again at most what finished in that time.
const commitEvery = 200 * time.Millisecond

// committer commits the partitions' marks when one moved, at most every
// commitEvery.
func (s *session) committer(ctx context.Context) {
	for {
		select {
		case <-s.kick:
		case <-ctx.Done():
			return
		}
		s.commit(ctx, nil)
		t := time.NewTimer(commitEvery)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// commit commits the due marks of the partitions in only (all when nil),
// synchronously: a commit a rebalance cancelled would leave the records
// to be delivered again.
func (s *session) commit(ctx context.Context, only map[int32]*partition) {
	s.mu.Lock()
	if only == nil {
		only = s.parts
	}
	due := map[int32]kgo.EpochOffset{}
	for id, p := range only {
		if eo, ok := p.offs.due(); ok {
			due[id] = eo
		}
	}
	s.mu.Unlock()
	if len(due) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	var failed error
	s.group.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{s.c.cfg.Topic: due},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				failed, due = err, nil
				return
			}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if perr := kerr.ErrorForCode(p.ErrorCode); perr != nil {
						failed = perr
						delete(due, p.Partition)
					}
				}
			}
		})
	if failed != nil {
		s.c.cfg.Logger.Warn("kafka: commit failed; the records past the last commit will be delivered again", "error", failed)
	}
	s.mu.Lock()
	for id, eo := range due {
		if p := only[id]; p != nil {
			p.offs.committed = max(p.offs.committed, eo.Offset)
		}
	}
	s.mu.Unlock()
}

// assigned starts tracking the partitions the group gave us.
func (s *session) assigned(_ context.Context, cl *kgo.Client, got map[string][]int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := got[s.c.cfg.Topic]
	for _, id := range ids {
		gone, cancel := context.WithCancel(context.Background())
		s.parts[id] = &partition{id: id, offs: newOffsets(), gone: gone, cancel: cancel}
	}
	// A partition paused when it was ours before starts afresh.
	cl.ResumeFetchPartitions(map[string][]int32{s.c.cfg.Topic: ids})
}

// revoked lets the calls in flight of the partitions taken from us
// finish and commits them; the records still waiting (for a slot or a
// retry) go to the partitions' next owner.
func (s *session) revoked(ctx context.Context, _ *kgo.Client, lost map[string][]int32) {
	ps := s.drop(lost[s.c.cfg.Topic])
	for _, p := range ps {
		p.calls.Wait()
	}
	s.commit(ctx, ps)
}

// lost forgets partitions the group took without a rebalance: a commit
// would be refused.
func (s *session) lost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	s.drop(lost[s.c.cfg.Topic])
}

// drop stops tracking the partitions ids, ending their records' waits.
func (s *session) drop(ids []int32) map[int32]*partition {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := map[int32]*partition{}
	for _, id := range ids {
		if p := s.parts[id]; p != nil {
			p.cancel()
			ps[id] = p
			delete(s.parts, id)
		}
	}
	return ps
}

// stop ends the session: the calls in flight finish, what is done is
// committed, and the group is left so that its partitions move at once.
func (s *session) stop() {
	s.mu.Lock()
	ids := make([]int32, 0, len(s.parts))
	for id := range s.parts {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	s.revoked(context.Background(), s.group, map[string][]int32{s.c.cfg.Topic: ids})
	close(s.quit)
	s.workers.Wait()
	// Not waiting past a bound: brokers that are away would hold the
	// leave, and the session timeout frees the partitions anyway.
	leave, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = s.group.LeaveGroupContext(leave)
	s.group.Close()
}

// OnBrokerConnect follows the brokers' reachability while consuming, for
// the state: the client reconnects by itself.
func (s *session) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if !s.live.Load() {
		return
	}
	if err != nil {
		addr := net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port)))
		s.c.state.Set(false, fmt.Errorf("connection to broker %s lost: %w", addr, err), false)
		return
	}
	s.c.state.Set(true, nil, false)
}

var _ kgo.HookBrokerConnect = (*session)(nil)
