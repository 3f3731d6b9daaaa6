package runs

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/robfig/cron/v3"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sless-dev/sless/pkg/adapter"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/local/apiserver"
	"github.com/sless-dev/sless/pkg/local/proc"
	"github.com/sless-dev/sless/pkg/local/serving"
	"github.com/sless-dev/sless/pkg/names"
	"github.com/sless-dev/sless/pkg/queue"
	"github.com/sless-dev/sless/pkg/queue/kafkaq"
	"github.com/sless-dev/sless/pkg/queue/mqttq"
	"github.com/sless-dev/sless/pkg/queue/natsq"
	"github.com/sless-dev/sless/pkg/reconciler/job"
	"github.com/sless-dev/sless/pkg/reconciler/trigger"
	"github.com/sless-dev/sless/pkg/tracing"
	"github.com/sless-dev/sless/runtimes"
)

// Runs carries out cron Triggers and FunctionJobs in process, where a cluster
// uses CronJobs and Jobs. A cron run calls the function's serving revision
// (starting it if it is scaled to zero) with the trigger's payload; a job runs
// the function's build in the runtime's job mode (runtimes.LocalJobCommand).
// Both are recorded through the same Recorder as every invoke, with trigger
// "cron" or "job". With a Broker, enabled queue Triggers are consumed in
// process by the same consumer `sless consume` runs on a cluster, calling
// the function directly and recording each delivery with trigger "queue".
type Runs struct {
	store    *apiserver.Store
	server   *serving.Server
	recorder *invoke.Recorder
	now      func() time.Time
	cronWake time.Duration
	// consumerRestart is how long a stopped queue consumer waits to be made again.
	consumerRestart time.Duration
	// Broker is the AMQP URL queue Triggers are consumed from (local mode
	// has no Secrets for their connectionSecret); empty, they are not
	// consumed and say so. Set it before the Trigger loop starts.
	Broker string
	// NATS is the server URL nats Triggers are consumed from, alike.
	NATS string
	// Kafka is the seed brokers kafka Triggers are consumed from, alike.
	Kafka []string
	// MQTT is the broker URL mqtt Triggers are consumed from, alike.
	MQTT   string
	Logger *slog.Logger
	// TracerProvider, when set, makes a span of each queue delivery.
	TracerProvider trace.TracerProvider

	mu     sync.Mutex
	crons  map[types.NamespacedName]*cronEntry
	queues map[types.NamespacedName]*queueEntry
	// draining is, per trigger, the end of a stopped consumer whose calls
	// in flight still go: the trigger's next consumer starts after it, so
	// disabling and enabling again (or a changed trigger) never runs more
	// calls at once than concurrency says.
	draining    map[types.NamespacedName]<-chan struct{}
	jobs        map[types.NamespacedName]*jobRun // the latest run of each FunctionJob
	jobCore     *job.Reconciler
	triggerCore *trigger.Reconciler
	wg          sync.WaitGroup
	done        chan struct{}
}

type queueEntry struct {
	hash     string
	stop     context.CancelFunc
	consumer queue.Source
	// after is the end of the trigger's previous consumer, which this one
	// waits for; nil when there was none.
	after <-chan struct{}
	// started is closed when the consumer runs (after the one before it
	// drained), done when it has stopped and its calls in flight ended.
	started, done chan struct{}
}

type cronEntry struct {
	// uid is the trigger's: one deleted and made again under its name
	// starts from its own creation, not from the runs of the one before.
	uid  types.UID
	hash string
	// stop ends the schedule loop; nil while the trigger is not scheduled
	// (disabled, its function missing) but runs of it are still in flight:
	// the entry stays until they end, so a schedule started again meanwhile
	// counts them (Forbid waits for them, Replace cancels them).
	stop  chan struct{}
	ended chan struct{} // a run ended (buffered: a Forbid-held time may now run)

	mu       sync.Mutex
	last     time.Time // the latest scheduled time run
	seq      uint64
	inFlight map[uint64]context.CancelCauseFunc
}

// busy says whether a run is in progress (for Forbid).
func (e *cronEntry) busy() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.inFlight) > 0
}

func (e *cronEntry) lastRun() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.last
}

// New makes the runner; hand its TriggerReconciler and JobReconciler to
// Loops over the store.
func New(store *apiserver.Store, server *serving.Server, recorder *invoke.Recorder) *Runs {
	r := &Runs{store: store, server: server, recorder: recorder, now: time.Now, cronWake: cronWake, consumerRestart: consumerRestart, Logger: slog.Default(),
		crons: map[types.NamespacedName]*cronEntry{}, queues: map[types.NamespacedName]*queueEntry{},
		draining: map[types.NamespacedName]<-chan struct{}{},
		jobs:     map[types.NamespacedName]*jobRun{}, done: make(chan struct{})}
	r.jobCore = &job.Reconciler{Client: store, Runner: (*localJobs)(r), Recheck: functionRecheck,
		Clock: func() time.Time { return r.now() }}
	r.triggerCore = &trigger.Reconciler{Client: store, Carrier: (*localTriggers)(r), Recheck: functionRecheck, Clock: runsClock{r}}
	if recorder != nil {
		r.jobCore.Recorder = jobRecords{recorder}
	}
	return r
}

// runsClock is the Runs' clock, which tests set.
type runsClock struct{ r *Runs }

func (c runsClock) Now() time.Time                  { return c.r.now() }
func (c runsClock) Since(t time.Time) time.Duration { return c.r.now().Sub(t) }

// jobRecords records finished runs with the invokes.
type jobRecords struct{ r *invoke.Recorder }

func (j jobRecords) RecordRun(run job.Run) {
	j.r.Record(invoke.Record{Namespace: run.Namespace, Function: run.Function, Revision: run.Revision, Trigger: invoke.TriggerJob,
		RequestID: run.RequestID, StartedAt: run.Started, Duration: run.Duration, Status: run.Status, Error: run.Error,
		BytesIn: run.BytesIn, BytesOut: run.BytesOut})
}

// Close stops the schedules and waits for runs in progress.
func (r *Runs) Close() {
	r.mu.Lock()
	select {
	case <-r.done:
	default:
		close(r.done)
	}
	for k, e := range r.crons {
		if e.stop != nil {
			close(e.stop)
		}
		delete(r.crons, k)
	}
	for k, e := range r.queues {
		e.stop()
		delete(r.queues, k)
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// TriggerReconciler keeps one schedule per enabled cron Trigger.
func (r *Runs) TriggerReconciler() reconcile.Reconciler { return r.triggerCore }

// JobReconciler starts a FunctionJob's run when its runID changes.
func (r *Runs) JobReconciler() reconcile.Reconciler { return r.jobCore }

// consumerRestart is how long a consumer that stopped on an error no retry
// mends (access refused) stays stopped before it is made again, as a
// kubelet restarts the crashed consumer of a cluster after 10 s at first.
const consumerRestart = 10 * time.Second

// Consume implements adapter.Consumer: one consumer per enabled queue
// Trigger, made again when what it consumes or calls changes; it consumes
// only once connected to the broker and consuming.
func (l *localTriggers) Consume(_ context.Context, t *slessv1alpha1.Trigger, fn *slessv1alpha1.Function) (adapter.ConsumerState, time.Duration, error) {
	r := (*Runs)(l)
	key := types.NamespacedName{Namespace: t.Namespace, Name: t.Name}
	if !t.IsEnabled() {
		r.stopConsuming(key)
		return adapter.ConsumerState{}, 0, nil
	}
	t = t.DeepCopy()
	t.SetDefaults()
	src, hash, err := r.source(t, fn)
	if errors.Is(err, errNoBroker) {
		r.stopConsuming(key)
		// Say so rather than look Ready: nothing consumes the messages.
		return adapter.ConsumerState{Mark: func(s *slessv1alpha1.TriggerStatus) { s.MarkQueueNotSupported(t.Spec.Type) }}, 0, nil
	}
	logger := r.Logger.With("trigger", key.String())
	r.mu.Lock()
	e := r.queues[key]
	r.mu.Unlock()
	if e != nil && e.hash == hash {
		if s, _ := e.consumer.State(); s.Stopped && s.Err != nil && time.Since(s.Since) >= r.consumerRestart {
			e = nil // made again, as a crashed consumer's pod restarts
		}
	}
	if e == nil || e.hash != hash {
		r.stopConsuming(key)
		if err != nil {
			return adapter.ConsumerState{Mark: func(s *slessv1alpha1.TriggerStatus) { s.MarkInvalidQueue(err) }}, 0, nil
		}
		c := src
		cctx, cancel := context.WithCancel(context.Background())
		e = &queueEntry{hash: hash, stop: cancel, consumer: c, started: make(chan struct{}), done: make(chan struct{})}
		r.mu.Lock()
		select {
		case <-r.done:
			r.mu.Unlock()
			cancel()
			return adapter.ConsumerState{}, 0, nil
		default:
		}
		prev := r.draining[key]
		delete(r.draining, key)
		e.after = prev
		r.queues[key] = e
		r.wg.Add(2)
		r.mu.Unlock()
		go func() {
			defer r.wg.Done()
			defer close(e.done)
			// Waited for also when this consumer is stopped before it
			// started: its end is what the next one waits for.
			if prev != nil {
				<-prev
			}
			if cctx.Err() != nil {
				return
			}
			close(e.started)
			if err := c.Run(cctx); err != nil && cctx.Err() == nil {
				logger.Error("queue consumer stopped", "error", err)
			}
		}()
		go r.followConsumer(cctx, key, e)
	}
	return consumerState(e), 0, nil
}

// errNoBroker: sless dev was given no broker of the trigger's type.
var errNoBroker = errors.New("no broker of this type given")

// source makes the consumer of a consuming trigger (defaulted), and a hash
// of what it consumes and calls: a consumer is made again when it changes.
func (r *Runs) source(t *slessv1alpha1.Trigger, fn *slessv1alpha1.Function) (queue.Source, string, error) {
	key := types.NamespacedName{Namespace: t.Namespace, Name: t.Name}
	d := t.Delivery()
	caller := &localCaller{r: r, namespace: key.Namespace, function: t.Spec.Function}
	logger := r.Logger.With("trigger", key.String())
	switch t.Spec.Type {
	case slessv1alpha1.TriggerTypeKafka:
		return r.kafkaSource(t, d, caller, logger)
	case slessv1alpha1.TriggerTypeNATS:
		if r.NATS == "" {
			return nil, "", errNoBroker
		}
		cfg := natsq.Config{
			URL: r.NATS, Stream: t.Spec.NATS.Stream, Subject: t.Spec.NATS.Subject, Durable: names.NATSDurable(t),
			DeadLetterSubject: names.NATSDeadLetterSubject(t),
			AckWait:           time.Duration(fn.Timeout())*time.Second + ackWaitAllowance,
			Delivery:          r.delivery(d, caller, logger),
		}
		raw, _ := json.Marshal([]any{cfg.Stream, cfg.Subject, cfg.Durable, cfg.DeadLetterSubject, cfg.Prefetch, cfg.Concurrency, cfg.MaxRetries, cfg.Backoff, cfg.AckWait, t.Spec.Function})
		c, err := natsq.New(cfg)
		return c, string(raw), err
	case slessv1alpha1.TriggerTypeMQTT:
		if r.MQTT == "" {
			return nil, "", errNoBroker
		}
		m := t.Spec.MQTT
		cfg := mqttq.Config{
			URL: r.MQTT, Topic: m.Topic, ShareGroup: m.ShareGroup, ClientID: names.MQTTClientID(t), DeadLetterTopic: names.MQTTDeadLetterTopic(t),
			Delivery: r.delivery(d, caller, logger),
		}
		raw, _ := json.Marshal([]any{cfg.Topic, cfg.ShareGroup, cfg.ClientID, cfg.DeadLetterTopic, cfg.Prefetch, cfg.Concurrency, cfg.MaxRetries, cfg.Backoff, t.Spec.Function})
		c, err := mqttq.New(cfg)
		return c, string(raw), err
	}
	if r.Broker == "" {
		return nil, "", errNoBroker
	}
	q := t.Spec.Queue
	cfg := queue.Config{
		URL: r.Broker, Queue: q.Queue, DeadLetterQueue: names.DeadLetterQueue(q),
		Prefetch: int(*d.Prefetch), Concurrency: int(*d.Concurrency), MaxRetries: int(*d.MaxRetries),
		Backoff: time.Duration(*d.BackoffSeconds) * time.Second,
		Invoker: caller, Logger: logger, TracerProvider: r.TracerProvider,
	}
	raw, _ := json.Marshal([]any{cfg.Queue, cfg.DeadLetterQueue, cfg.Prefetch, cfg.Concurrency, cfg.MaxRetries, cfg.Backoff, t.Spec.Function})
	c, err := queue.New(cfg)
	return c, string(raw), err
}

// kafkaSource is source's kafka consumer.
func (r *Runs) kafkaSource(t *slessv1alpha1.Trigger, d *slessv1alpha1.Delivery, caller queue.Caller, logger *slog.Logger) (queue.Source, string, error) {
	if len(r.Kafka) == 0 {
		return nil, "", errNoBroker
	}
	cfg := kafkaq.Config{
		Brokers: r.Kafka, Topic: t.Spec.Kafka.Topic, Group: names.KafkaGroup(t), DeadLetterTopic: names.KafkaDeadLetterTopic(t),
		Delivery: r.delivery(d, caller, logger),
	}
	raw, _ := json.Marshal([]any{cfg.Topic, cfg.Group, cfg.DeadLetterTopic, cfg.Prefetch, cfg.Concurrency, cfg.MaxRetries, cfg.Backoff, t.Spec.Function})
	c, err := kafkaq.New(cfg)
	return c, string(raw), err
}

// delivery is a trigger's spec.delivery (defaults filled) as the
// consumers take it.
func (r *Runs) delivery(d *slessv1alpha1.Delivery, caller queue.Caller, logger *slog.Logger) queue.Delivery {
	return queue.Delivery{Prefetch: int(*d.Prefetch), Concurrency: int(*d.Concurrency), MaxRetries: int(*d.MaxRetries),
		Backoff: time.Duration(*d.BackoffSeconds) * time.Second, Invoker: caller, Logger: logger, TracerProvider: r.TracerProvider}
}

// ackWaitAllowance is added to the function's timeout for how long
// JetStream waits for a message's acknowledgement: a call may wait for a
// cold start first.
const ackWaitAllowance = 90 * time.Second

// consumerState is where the trigger's consumer stands, as on a cluster:
// Unknown while it starts or connects, False with the error that keeps it
// from consuming.
func consumerState(e *queueEntry) adapter.ConsumerState {
	what := e.consumer.What()
	select {
	case <-e.started:
	case <-e.after:
		// Drained; this one starts at once.
	default:
		if e.after != nil {
			return adapter.ConsumerState{Status: metav1.ConditionUnknown,
				Message: "waiting for the calls in flight of the trigger's previous consumer to finish before consuming " + what}
		}
	}
	s, _ := e.consumer.State()
	switch {
	case s.Ready():
		return adapter.ConsumerState{Status: metav1.ConditionTrue}
	case s.Err != nil:
		return adapter.ConsumerState{Status: metav1.ConditionFalse, Message: s.Reason(what)}
	case s.Stopped:
		return adapter.ConsumerState{Status: metav1.ConditionUnknown, Message: "the consumer of " + what + " is stopping"}
	default:
		return adapter.ConsumerState{Status: metav1.ConditionUnknown, Message: s.Reason(what)}
	}
}

// followConsumer writes the trigger's Ready condition at each change of
// its consumer's state (connected, broker lost, back), until the consumer
// is stopped; a reconcile in between writes the same from the same state.
func (r *Runs) followConsumer(ctx context.Context, key types.NamespacedName, e *queueEntry) {
	defer r.wg.Done()
	select {
	case <-e.started:
	case <-ctx.Done():
		return
	}
	for {
		_, changed := e.consumer.State()
		r.mu.Lock()
		current := r.queues[key] == e
		r.mu.Unlock()
		if !current {
			return
		}
		// A conflict is tried again: no reconcile may follow this change
		// (sless dev's loop looks again only every few seconds, a test not at all).
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			t := &slessv1alpha1.Trigger{}
			if err := r.store.Get(ctx, key, t); err != nil || !t.Spec.Type.Consumes() || !t.IsEnabled() {
				return client0(err)
			}
			cs := consumerState(e)
			return r.writeTriggerStatus(ctx, t, func(st *slessv1alpha1.TriggerStatus) { trigger.MarkConsumer(st, t, cs) }, nil, "")
		})
		if err != nil && ctx.Err() == nil {
			r.Logger.Warn("queue trigger status not written", "trigger", key.String(), "error", err)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		case <-r.done:
			return
		}
	}
}

// stopConsuming stops the trigger's consumer. Its calls in flight finish
// and are recorded; the trigger's next consumer starts after them.
func (r *Runs) stopConsuming(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.queues[key]; e != nil {
		e.stop()
		delete(r.queues, key)
		r.draining[key] = e.done
	}
}

// localCaller delivers a message to a function in process, as the invoke
// proxy would, and records the call with the consumer's trigger type.
type localCaller struct {
	r                   *Runs
	namespace, function string
}

func (c *localCaller) Invoke(ctx context.Context, call queue.Call) queue.Outcome {
	if n := len(call.Body); n > invoke.DefaultMaxRequestBytes {
		// On a cluster the consumer's call goes through the proxy, which
		// answers 413: the message is retried and dead-lettered there, and
		// is here alike rather than reaching the function.
		rec := invoke.Record{Namespace: c.namespace, Function: c.function, Trigger: call.Trigger, RequestID: call.RequestID,
			StartedAt: c.r.now(), Status: http.StatusRequestEntityTooLarge, BytesIn: int64(n), Error: "request body too large"}
		c.r.recorder.Record(rec)
		return queue.Outcome{Status: rec.Status, PlatformError: fmt.Sprintf("the message is %d bytes, over the %d a function can be sent", n, invoke.DefaultMaxRequestBytes)}
	}
	timeout := c.r.functionTimeout(ctx, c.namespace, c.function)
	ct := call.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	rec, body := c.r.call(ctx, c.namespace, c.function, callRequest{body: call.Body, contentType: ct, header: call.Header, requestID: call.RequestID}, timeout)
	rec.Trigger = call.Trigger
	c.r.recorder.Record(rec)
	out := queue.Outcome{Status: rec.Status, Body: body}
	if rec.Error != "" {
		out.PlatformError = rec.Error
	}
	return out
}

// functionRecheck is how often a trigger or job looks at its function
// again. The local Loops watch one kind each, so nothing brings a trigger
// back when its Function appears or goes away (a cluster's trigger
// controller watches Functions); looking again does.
const functionRecheck = 2 * time.Second

// localTriggers is Runs as the Trigger reconciler's adapter.Carrier.
type localTriggers Runs

var _ adapter.Carrier = (*localTriggers)(nil)

// Tidy implements adapter.Carrier.
func (l *localTriggers) Tidy(_ context.Context, t *slessv1alpha1.Trigger) error {
	r := (*Runs)(l)
	key := types.NamespacedName{Namespace: t.Namespace, Name: t.Name}
	if !t.Spec.Type.Consumes() {
		r.stopConsuming(key)
	}
	if t.Spec.Type != slessv1alpha1.TriggerTypeCron {
		r.unschedule(key)
	}
	return nil
}

// Pause implements adapter.Carrier.
func (l *localTriggers) Pause(_ context.Context, t *slessv1alpha1.Trigger) error {
	l.Gone(types.NamespacedName{Namespace: t.Namespace, Name: t.Name})
	return nil
}

// Finalize implements adapter.Carrier.
func (l *localTriggers) Finalize(ctx context.Context, t *slessv1alpha1.Trigger) error {
	return l.Pause(ctx, t)
}

// Gone implements adapter.Carrier: the trigger's runs in flight go on and
// are recorded; nothing new starts.
func (l *localTriggers) Gone(key types.NamespacedName) {
	r := (*Runs)(l)
	r.stopConsuming(key)
	r.unschedule(key)
}

// Unsupported implements adapter.Carrier: local mode carries out every type.
func (l *localTriggers) Unsupported(*slessv1alpha1.Trigger) bool { return false }

// URL implements adapter.Carrier: the function's own status.url is the
// invoke path under sless dev's base URL, which is what the trigger makes
// public; it is empty until the function first serves, and the recheck
// fills it.
func (l *localTriggers) URL(_ *slessv1alpha1.Trigger, fn *slessv1alpha1.Function) string {
	return fn.Status.URL
}

// Schedule implements adapter.Scheduler: one schedule loop per enabled
// cron trigger, started again when the trigger changes. Its runs write
// status.lastScheduleTime as they start.
func (l *localTriggers) Schedule(_ context.Context, t *slessv1alpha1.Trigger, _ *slessv1alpha1.Function, sched cron.Schedule) (*metav1.Time, time.Duration, error) {
	r := (*Runs)(l)
	key := types.NamespacedName{Namespace: t.Namespace, Name: t.Name}
	if !t.IsEnabled() {
		r.unschedule(key)
		return t.Status.LastScheduleTime, 0, nil
	}
	raw, _ := json.Marshal([]any{t.Spec.Schedule, t.Spec.TimeZone, t.Spec.Function, t.Spec.Payload, t.EffectiveConcurrencyPolicy(), t.Spec.StartingDeadlineSeconds})
	hash := string(raw)
	r.mu.Lock()
	e := r.crons[key]
	if e == nil || e.uid != t.UID {
		if e != nil && e.stop != nil {
			close(e.stop)
		}
		e = &cronEntry{uid: t.UID, ended: make(chan struct{}, 1), last: t.CreationTimestamp.Time}
		r.crons[key] = e
	}
	if e.stop == nil || e.hash != hash {
		// A changed trigger restarts the loop on the same entry, which
		// keeps the runs in flight (Forbid waits for them, Replace
		// cancels them) and the last time run.
		if e.stop != nil {
			close(e.stop)
		}
		e.mu.Lock()
		if last := t.Status.LastScheduleTime; last != nil && last.After(e.last) {
			e.last = last.Time
		}
		e.mu.Unlock()
		e.hash, e.stop = hash, make(chan struct{})
		r.wg.Add(1)
		go r.schedule(key, t.DeepCopy(), sched, e, e.stop)
	}
	r.mu.Unlock()
	return t.Status.LastScheduleTime, 0, nil
}

// unschedule stops the trigger's schedule. Its runs in flight go on and
// are recorded; their entry stays until they end, so that the trigger
// enabled again in the meantime counts them.
func (r *Runs) unschedule(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.crons[key]
	if e == nil {
		return
	}
	if e.stop != nil {
		close(e.stop)
		e.stop = nil
	}
	if !e.busy() {
		delete(r.crons, key)
	}
}

// runEnded forgets e once its last run in flight ended, if its trigger is
// no longer scheduled.
func (r *Runs) runEnded(key types.NamespacedName, e *cronEntry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.crons[key] == e && e.stop == nil && !e.busy() {
		delete(r.crons, key)
	}
}

// triggerStatus writes the Ready condition as mark says, the next run time
// and the URL, only when they change.
func (r *Runs) triggerStatus(ctx context.Context, t *slessv1alpha1.Trigger, mark func(*slessv1alpha1.TriggerStatus), next *metav1.Time, url string) error {
	err := r.writeTriggerStatus(ctx, t, mark, next, url)
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil // a newer version is queued already
	}
	return err
}

// writeTriggerStatus is triggerStatus that returns a conflict, for writers
// no reconcile follows up on.
func (r *Runs) writeTriggerStatus(ctx context.Context, t *slessv1alpha1.Trigger, mark func(*slessv1alpha1.TriggerStatus), next *metav1.Time, url string) error {
	before := t.Status.DeepCopy()
	t.Status.ObservedGeneration = t.Generation
	t.Status.NextScheduleTime = next
	t.Status.URL = url
	mark(&t.Status)
	if equalJSON(before, &t.Status) {
		return nil
	}
	return r.store.Status().Update(ctx, t)
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// cronWake bounds how long the schedule sleeps at once: a timer runs on the
// monotonic clock, which stands still while a laptop sleeps, so a schedule
// waking only at the timer would run a time it slept through as late as
// the sleep was long, whatever its starting deadline. Looking at the wall
// clock at least this often treats such a time like any other missed one.
const cronWake = 30 * time.Second

// schedule runs the trigger's scheduled times until stopped, by the rules of
// the CronJob controller, so that local and cluster mode agree:
//
//   - A time is run only within startingDeadlineSeconds of it. Times missed
//     while sless dev was stopped, the trigger disabled or its function
//     missing, or the machine asleep, are not run one by one: the latest of
//     them is run once if it is still within the deadline, and the others
//     are skipped.
//   - Times are counted from status.lastScheduleTime (the creation time
//     before the first run), which is written when a run starts, as a
//     CronJob's is when it creates the Job, so a restart never runs a
//     started time again.
//   - Forbid: a time that comes while the previous run still goes waits for
//     it, and runs when it ends if that is still within the deadline.
//     Replace: the previous run is cancelled (its call is recorded as 499,
//     the caller gone, as a deleted Job's is on a cluster). Allow: runs
//     overlap.
func (r *Runs) schedule(key types.NamespacedName, t *slessv1alpha1.Trigger, sched cron.Schedule, e *cronEntry, stop <-chan struct{}) {
	defer r.wg.Done()
	deadline := time.Duration(ptr.Deref(t.Spec.StartingDeadlineSeconds, slessv1alpha1.DefaultStartingDeadlineSeconds)) * time.Second
	policy := t.EffectiveConcurrencyPolicy()
	for {
		select {
		case <-stop:
			return // unscheduled while a run was being started
		default:
		}
		now := r.now()
		if due, ok := latestDue(sched, e.lastRun(), now, deadline); ok {
			// Under Forbid a time that comes during a run is not counted
			// as run: the end of the run wakes this loop, which runs it
			// then if the deadline still allows.
			if policy != slessv1alpha1.ConcurrencyForbid || !e.busy() {
				r.startCronRun(key, t, e, policy, due)
				continue
			}
		}
		next := sched.Next(now)
		if next.IsZero() {
			return // a schedule that never comes (Feb 30)
		}
		wait := next.Sub(now)
		if wait > r.cronWake {
			wait = r.cronWake
		}
		timer := time.NewTimer(wait)
		select {
		case <-stop:
			timer.Stop()
			return
		case <-r.done:
			timer.Stop()
			return
		case <-e.ended:
			timer.Stop()
		case <-timer.C:
		}
	}
}

// latestDue is the latest scheduled time after last and at or before now
// that is still within deadline of now.
func latestDue(sched cron.Schedule, last, now time.Time, deadline time.Duration) (time.Time, bool) {
	from := last
	if earliest := now.Add(-deadline); earliest.After(from) {
		from = earliest.Add(-time.Nanosecond) // Next is strictly after
	}
	var due time.Time
	for t := sched.Next(from); !t.IsZero() && !t.After(now); t = sched.Next(t) {
		due = t
	}
	return due, !due.IsZero()
}

// startCronRun marks at as run, on the entry and as the trigger's
// lastScheduleTime, and starts the call.
func (r *Runs) startCronRun(key types.NamespacedName, t *slessv1alpha1.Trigger, e *cronEntry, policy slessv1alpha1.ConcurrencyPolicy, at time.Time) {
	ctx, cancel := context.WithCancelCause(context.Background())
	e.mu.Lock()
	e.last = at
	if policy == slessv1alpha1.ConcurrencyReplace {
		for _, c := range e.inFlight {
			c(fmt.Errorf("replaced by the run of %s", at.UTC().Format(time.RFC3339)))
		}
	}
	id := e.seq
	e.seq++
	if e.inFlight == nil {
		e.inFlight = map[uint64]context.CancelCauseFunc{}
	}
	e.inFlight[id] = cancel
	e.mu.Unlock()
	// Written before the call, as the CronJob controller writes it when it
	// creates the Job: a restart of sless dev during the call must not run
	// this time again.
	_ = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &slessv1alpha1.Trigger{}
		if err := r.store.Get(ctx, key, cur); err != nil {
			return err
		}
		last := metav1.NewTime(at.UTC())
		cur.Status.LastScheduleTime = &last
		return r.store.Status().Update(ctx, cur)
	})
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer func() {
			cancel(nil)
			e.mu.Lock()
			delete(e.inFlight, id)
			e.mu.Unlock()
			r.runEnded(key, e)
			select {
			case e.ended <- struct{}{}:
			default:
			}
		}()
		r.cronRun(ctx, key, t)
	}()
}

// cronRun calls the function once for a scheduled time and records it.
func (r *Runs) cronRun(ctx context.Context, key types.NamespacedName, t *slessv1alpha1.Trigger) {
	if err := r.store.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: t.Spec.Function}, &slessv1alpha1.Function{}); apierrors.IsNotFound(err) {
		// Deleted since the trigger was last reconciled: skip the run, as a
		// suspended CronJob would. The status written here brings the
		// reconcile that stops the schedule (a conflict means another write
		// already did).
		cur := &slessv1alpha1.Trigger{}
		if r.store.Get(ctx, key, cur) == nil {
			_ = r.triggerStatus(ctx, cur, functionNotFound(cur), nil, "")
		}
		return
	}
	var payload []byte
	if t.Spec.Payload != nil {
		payload = t.Spec.Payload.Raw
	}
	rec := r.invoke(ctx, key.Namespace, t.Spec.Function, payload, r.functionTimeout(ctx, key.Namespace, t.Spec.Function))
	rec.Trigger = invoke.TriggerCron
	r.recorder.Record(rec)
}

// functionTimeout is the function's own timeout, or the default while it
// cannot be read (the call then fails on its own).
func (r *Runs) functionTimeout(ctx context.Context, ns, name string) time.Duration {
	fn := &slessv1alpha1.Function{}
	if err := r.store.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, fn); err != nil {
		return time.Duration(slessv1alpha1.DefaultTimeoutSeconds) * time.Second
	}
	return time.Duration(fn.Timeout()) * time.Second
}

// invoke calls a function's serving revision with a JSON payload as the
// proxy would and returns the record of the call (trigger left to the caller).
func (r *Runs) invoke(ctx context.Context, ns, name string, payload []byte, timeout time.Duration) invoke.Record {
	rec, _ := r.call(ctx, ns, name, callRequest{body: payload, contentType: "application/json"}, timeout)
	return rec
}

// callRequest is what a local call sends.
type callRequest struct {
	body        []byte
	contentType string
	header      http.Header
	requestID   string
}

// call POSTs req to a function's serving revision (starting it if it is
// scaled to zero) and returns the record of the call, with Error set when
// sless rather than the function failed, and the start of the answer.
func (r *Runs) call(ctx context.Context, ns, name string, cr callRequest, timeout time.Duration) (invoke.Record, []byte) {
	id := cr.requestID
	if id == "" {
		id = requestID()
	}
	rec := invoke.Record{Namespace: ns, Function: name, RequestID: id, StartedAt: r.now(), BytesIn: int64(len(cr.body))}
	finish := func(status int, msg string) invoke.Record {
		rec.Duration = r.now().Sub(rec.StartedAt)
		rec.Status, rec.Error = status, msg
		return rec
	}
	actx, cancel := context.WithTimeout(ctx, timeout+60*time.Second)
	defer cancel()
	call, err := r.server.Activate(actx, ns, name)
	if call != nil {
		rec.Revision, rec.ColdStart = call.Revision, call.Cold
	}
	if err != nil {
		if ctx.Err() != nil {
			return finish(invoke.StatusClientClosed, context.Cause(ctx).Error()), nil
		}
		return finish(http.StatusServiceUnavailable, "activate: "+err.Error()), nil
	}
	defer call.Done()
	u := call.URL
	cctx, ccancel := context.WithTimeout(ctx, timeout+5*time.Second)
	defer ccancel()
	req, _ := http.NewRequestWithContext(cctx, http.MethodPost, u.String()+"/", bytes.NewReader(cr.body))
	for k, vs := range cr.header {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", cr.contentType)
	req.Header.Set(invoke.RequestIDHeader, rec.RequestID)
	if trace.SpanContextFromContext(ctx).IsValid() {
		// The delivery's span: the function's joins its trace.
		tracing.Propagator.Inject(ctx, propagation.HeaderCarrier(req.Header))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			// The caller went away (a cron run replaced), as the proxy
			// records a caller that hangs up.
			return finish(invoke.StatusClientClosed, context.Cause(ctx).Error()), nil
		}
		if cctx.Err() != nil {
			return finish(http.StatusGatewayTimeout, "the function did not answer in time"), nil
		}
		return finish(http.StatusBadGateway, err.Error()), nil
	}
	head, _ := io.ReadAll(io.LimitReader(resp.Body, queue.MaxOutcomeBody))
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	rec.BytesOut = int64(len(head)) + n
	return finish(resp.StatusCode, ""), head
}

func requestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return strings.ToUpper(hex.EncodeToString(b[:]))
}

func client0(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// jobRun is one FunctionJob run carried out in process: what ObserveRun
// reports of it, kept after it ends until the next run of its FunctionJob.
type jobRun struct {
	runID int64
	state adapter.RunState
}

// localJobs is Runs as the FunctionJob reconciler's adapter.JobRunner.
type localJobs Runs

var _ adapter.JobRunner = (*localJobs)(nil)

// ObserveRun implements adapter.JobRunner.
func (l *localJobs) ObserveRun(_ context.Context, fj *slessv1alpha1.FunctionJob) (adapter.RunState, bool, error) {
	r := (*Runs)(l)
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.jobs[types.NamespacedName{Namespace: fj.Namespace, Name: fj.Name}]
	if e == nil || e.runID != fj.Spec.RunID {
		return adapter.RunState{}, false, nil
	}
	return e.state, true, nil
}

// LostCause implements adapter.JobRunner: a run this process does not have
// was started by an earlier sless dev, killed or crashed before it could
// write the outcome.
func (l *localJobs) LostCause(*slessv1alpha1.FunctionJob) string {
	return "sless dev stopped while it ran, before its outcome was written"
}

// StartRun implements adapter.JobRunner: it runs the function's serving
// revision in the runtime's job mode, one run of a FunctionJob at a time.
func (l *localJobs) StartRun(_ context.Context, req adapter.RunRequest) (adapter.RunState, error) {
	r := (*Runs)(l)
	fj, fn := req.Job, req.Function
	// Its env and timeout are the serving revision's too, not the spec's,
	// which may be the newer revision's.
	spec, ok := r.server.ServingRun(types.NamespacedName{Namespace: fn.Namespace, Name: fn.Name}, fn.Status.LatestReadyRevision)
	if !ok {
		return adapter.RunState{}, adapter.ErrRevisionNotServing
	}
	key := types.NamespacedName{Namespace: fj.Namespace, Name: fj.Name}
	payload := []byte("null")
	if fj.Spec.Payload != nil && len(fj.Spec.Payload.Raw) > 0 {
		payload = fj.Spec.Payload.Raw
	}
	e := &jobRun{runID: fj.Spec.RunID, state: adapter.RunState{Where: "sless dev's process", Revision: fn.Status.LatestReadyRevision,
		Started: r.now(), Running: true, BytesIn: int64(len(payload))}}
	r.mu.Lock()
	select {
	case <-r.done:
		r.mu.Unlock()
		return adapter.RunState{}, adapter.ErrRunLater // sless dev is stopping: nothing new starts
	default:
	}
	if prev := r.jobs[key]; prev != nil && !prev.state.Done {
		// An earlier run still goes; this one starts when it ends.
		r.mu.Unlock()
		return adapter.RunState{}, adapter.ErrRunLater
	}
	r.jobs[key] = e
	r.wg.Add(1)
	r.mu.Unlock()
	if fn.BuildSpec().HasPlacement() {
		// As its revision was told: on a cluster the Job's pod carries it.
		r.Logger.Warn(serving.PlacementIgnored, "functionjob", key.String(), "function", fn.Name, "revision", e.state.Revision)
	}
	if fn.BuildSpec().LimitsEgress() {
		r.Logger.Warn(serving.EgressIgnored, "functionjob", key.String(), "function", fn.Name, "revision", e.state.Revision)
	}
	timeout := time.Duration(fj.RunTimeout(spec.TimeoutSeconds)) * time.Second
	go r.runJob(key, e, types.NamespacedName{Namespace: fn.Namespace, Name: fn.Name}, req.RequestID, payload, spec, timeout)
	return e.state, nil
}

// runJob runs the function once in job mode and has the reconciler write
// the outcome.
func (r *Runs) runJob(key types.NamespacedName, e *jobRun, fn types.NamespacedName, requestID string, payload []byte, spec serving.JobRun, timeout time.Duration) {
	defer r.wg.Done()
	// The cluster's request id, handed to the handler as its
	// context.requestId too, so its log lines and the record match.
	out, exit, detail, late := r.execJob(fn, spec, e.state.Revision, requestID, payload, timeout)
	r.mu.Lock()
	st := &e.state
	st.Running, st.Done, st.Succeeded, st.Completed = false, true, exit == 0 && !late, r.now()
	code := int32(exit)
	st.ExitCode, st.Termination, st.Detail, st.DeadlineExceeded, st.BytesOut = &code, out, detail, late, int64(len(out))
	r.mu.Unlock()
	// No Job's event brings the reconcile back here: the run asks for it.
	// (Should it conflict, the write it conflicts with brings one.)
	if err := r.jobCore.ReconcileKey(context.Background(), key); err != nil {
		r.Logger.Warn("job outcome not written", "functionjob", key.String(), "error", err)
	}
}

// execJob runs the job-mode wrapper of function fn and returns its
// termination message, its exit code, on failure why in the process's
// words, and whether the run ran out of time.
func (r *Runs) execJob(key types.NamespacedName, spec serving.JobRun, revision, requestID string, payload []byte, timeout time.Duration) (string, int, string, bool) {
	tmp, err := os.MkdirTemp("", "sless-job-")
	if err != nil {
		return "", 1, err.Error(), false
	}
	defer os.RemoveAll(tmp)
	term := filepath.Join(tmp, "termination-log")
	opts := r.server.Tools()
	opts.FunctionName, opts.Namespace, opts.Revision = key.Name, key.Namespace, revision
	opts.TimeoutSeconds = timeout.Seconds()
	opts.Env = append(append([]string(nil), spec.Env...), "SLESS_REQUEST_ID="+requestID)
	cmd, err := runtimes.LocalJobCommand(spec.Dir, opts, payload, term)
	if err != nil {
		return "", 1, err.Error(), false
	}
	logs := &proc.Tail{Max: 4096}
	out, closeOut := r.server.Output(key)
	defer closeOut()
	cmd.Stdout = io.MultiWriter(out, logs)
	cmd.Stderr = cmd.Stdout
	ctx, cancel := context.WithTimeout(context.Background(), timeout+5*time.Second)
	defer cancel()
	go func() {
		select {
		case <-r.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	exit, runErr := r.server.Procs().Run(ctx, cmd, proc.Spec{Name: "job." + key.Namespace + "." + revision,
		Limits: spec.Limits, TempDir: true})
	result := readTermination(term)
	switch {
	case runErr == nil:
		return strings.TrimSpace(string(result)), 0, "", false
	case errors.Is(runErr, context.DeadlineExceeded):
		return strings.TrimSpace(string(result)), 124, "", true
	case errors.Is(runErr, context.Canceled):
		// sless dev is stopping and killed the run with it: not the
		// function's failure, and worded so. The exit code is what a
		// kubelet reports for a killed container; the run fails as a Job
		// whose Pod is evicted does (backoffLimit 0).
		return "", 137, "the run was stopped: sless dev shut down while it ran (a new runID runs it again)", false
	case exit.OOMKilled:
		// A kubelet's words for the container, as the cluster's runner
		// reports them.
		return strings.TrimSpace(string(result)), 137, fmt.Sprintf("the function's container exited with code 137 (OOMKilled): it exceeded its memory limit of %dMi", spec.Limits.MemoryBytes>>20), false
	default:
		code := 1
		if cmd.ProcessState != nil && cmd.ProcessState.ExitCode() > 0 {
			code = cmd.ProcessState.ExitCode()
		}
		// Where a Pod's exit reason would stand, the process's last lines;
		// the reconciler words a termination message the function left as
		// on a cluster.
		msg := fmt.Sprintf("the function exited with code %d", code)
		if tail := proc.LastLines(logs.String(), 5); tail != "" {
			msg += ": " + tail
		}
		return strings.TrimSpace(string(result)), code, msg, false
	}
}

// terminationMessageLimit is what a kubelet keeps of a container's
// termination message (MaxContainerTerminationMessageLength).
const terminationMessageLimit = 4 << 10

// readTermination reads a termination message as a kubelet does, so a job's
// status.output, exit reason and record are what they would be on a
// cluster: the last terminationMessageLimit bytes of the file (the kubelet
// reads it from its end), without a UTF-8 sequence cut at the front, whose
// stray bytes the apiserver would turn into U+FFFD. A missing file is "".
func readTermination(path string) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil
	}
	if fi.Size() > terminationMessageLimit {
		if _, err := f.Seek(-terminationMessageLimit, io.SeekEnd); err != nil {
			return nil
		}
	}
	b, err := io.ReadAll(io.LimitReader(f, terminationMessageLimit))
	if err != nil {
		return nil
	}
	if fi.Size() > terminationMessageLimit {
		for len(b) > 0 && !utf8.RuneStart(b[0]) {
			b = b[1:]
		}
	}
	return b
}

// functionNotFound marks t paused for its missing function.
func functionNotFound(t *slessv1alpha1.Trigger) func(*slessv1alpha1.TriggerStatus) {
	return func(s *slessv1alpha1.TriggerStatus) { s.MarkFunctionNotFound(t.Spec.Function) }
}
