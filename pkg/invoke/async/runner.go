package async

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/callback"
	"github.com/sless-dev/sless/pkg/problems"
	"github.com/sless-dev/sless/pkg/tracing"
)

// Policy is a function's spec.async with its defaults.
type Policy struct {
	Concurrency int
	MaxRetries  int
	MaxEventAge time.Duration
	// Timeout is the function's timeout: an attempt ends within it.
	Timeout time.Duration
	// OnSuccess and OnFailure receive the results of calls that name no
	// X-Callback-Url.
	OnSuccess, OnFailure string
}

// DefaultPolicy is the Policy of a function that sets none (or is gone):
// spec.async's defaults.
var DefaultPolicy = Policy{Concurrency: slessv1alpha1.DefaultAsyncConcurrency, MaxRetries: slessv1alpha1.DefaultAsyncMaxRetries,
	MaxEventAge: slessv1alpha1.DefaultAsyncMaxEventAgeSeconds * time.Second, Timeout: slessv1alpha1.MaxTimeoutSeconds * time.Second}

// PolicyOf is fn's spec.async with its defaults, and its timeout.
func PolicyOf(fn *slessv1alpha1.Function) Policy {
	c, r, age := fn.AsyncPolicy()
	pol := Policy{Concurrency: c, MaxRetries: r, MaxEventAge: age, Timeout: slessv1alpha1.DefaultTimeoutSeconds * time.Second}
	if t := fn.Spec.TimeoutSeconds; t != nil && *t > 0 {
		pol.Timeout = time.Duration(*t) * time.Second
	}
	if a := fn.Spec.Async; a != nil {
		pol.OnSuccess, pol.OnFailure = a.OnSuccess, a.OnFailure
	}
	return pol
}

// DefaultCallbackAttempts bounds the deliveries of a result.
const DefaultCallbackAttempts = 5

// notReadyWait bounds the wait before trying a function that was not
// serving yet again.
const notReadyWait = 5 * time.Second

// Runner accepts asynchronous calls into its Store and runs them. It is the
// invoke.Async of a proxy; set Run (the proxy's RunAsync) before Start.
type Runner struct {
	Store Store
	// Run makes one attempt of a call, answering w.
	Run func(ctx context.Context, w http.ResponseWriter, s *invoke.Submission)
	// Policy reads a function's spec.async; nil or an error: DefaultPolicy.
	Policy func(ctx context.Context, ns, name string) (Policy, error)
	// Backoff is the wait before retry n (1, 2, …). Default: 1 s doubling
	// up to 5 minutes, with a fifth of jitter.
	Backoff          func(n int) time.Duration
	MaxResponseBytes int
	Logger           *slog.Logger
	// Registerer, when set, takes the runner's series (see metrics.go).
	Registerer prometheus.Registerer
	// Callbacks posts results within its policy, signed with the Keys of
	// the call's namespace; without both, no result is posted and an
	// X-Callback-Url is refused.
	Callbacks *callback.Sender
	Keys      Keys
	// CallbackAttempts bounds the deliveries of one result (0:
	// DefaultCallbackAttempts); they are spaced by Backoff.
	CallbackAttempts int
	// Queue, when set, makes the Runner one of several sharing the Store
	// (replicas of sless api; the Store must keep Claims): accepted calls
	// are queued there and any replica takes their steps. Unset, this
	// Runner alone runs the Store's calls, scheduling them in memory.
	Queue Queue
	// SweepEvery is how often a shared Runner queues again the calls
	// whose refs were lost (0: DefaultSweepEvery).
	SweepEvery time.Duration
	// TracerProvider, when set, makes a span of each attempt; nil none.
	TracerProvider trace.TracerProvider

	tracer  trace.Tracer
	ctx     context.Context
	cancel  context.CancelFunc
	running sync.WaitGroup
	mu      sync.Mutex
	gates   map[string]*gate
	changed chan struct{}
	// pending holds the acceptance time of every call not yet final.
	pending map[*Job]time.Time
	metrics *metrics
	claims  Claims
}

// Start runs the calls the Store kept unfinished (a restart: those that
// were running run again, since their end was never recorded) and takes
// new ones until Close.
func (r *Runner) Start(ctx context.Context) error {
	if r.Run == nil || r.Store == nil {
		return errors.New("async: Runner needs Store and Run")
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	if r.MaxResponseBytes <= 0 {
		r.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if r.Backoff == nil {
		r.Backoff = defaultBackoff
	}
	if r.CallbackAttempts <= 0 {
		r.CallbackAttempts = DefaultCallbackAttempts
	}
	r.tracer = tracing.Tracer(r.TracerProvider)
	r.ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	r.gates = map[string]*gate{}
	r.changed = make(chan struct{})
	r.pending = map[*Job]time.Time{}
	var err error
	if r.metrics, err = newMetrics(r.Registerer, r.pendingStats); err != nil {
		return err
	}
	if r.Queue != nil {
		return r.startShared()
	}
	jobs, err := r.Store.Unfinished(ctx)
	if err != nil {
		return fmt.Errorf("async: read unfinished calls: %w", err)
	}
	for i := range jobs {
		j := jobs[i]
		if j.State.Done() {
			// Final, its result not yet posted.
			r.running.Add(1)
			go func() {
				defer r.running.Done()
				r.deliver(&j)
			}()
			continue
		}
		if j.State == StateRunning {
			j.State = StateQueued
		}
		r.drive(&j)
	}
	if len(jobs) > 0 {
		r.Logger.Info("asynchronous calls resumed", "count", len(jobs))
	}
	return nil
}

// Close stops taking attempts and waits for those under way to end (they
// are cut: their calls stay running and run again after a restart).
func (r *Runner) Close() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.running.Wait()
}

// Accept keeps s queued and schedules it.
func (r *Runner) Accept(ctx context.Context, s invoke.Submission) (invoke.Accepted, error) {
	if r.ctx == nil || r.ctx.Err() != nil {
		return invoke.Accepted{}, errors.New("async: the runner is not running")
	}
	j := &Job{Submission: s, State: StateQueued}
	id, replayed, err := r.Store.Create(ctx, j, IdempotencyWindow)
	if err != nil {
		return invoke.Accepted{}, err
	}
	if replayed {
		return invoke.Accepted{RequestID: id, Replayed: true}, nil
	}
	if r.Queue == nil {
		r.drive(j)
	} else if err := r.Queue.Enqueue(ctx, RefOf(j), time.Time{}); err != nil {
		// Not queued, so not promised: the call goes, or it would run
		// after its caller heard it would not.
		if aerr := r.claims.Abandon(context.WithoutCancel(ctx), RefOf(j)); aerr != nil {
			r.Logger.Warn("cannot forget an asynchronous call that was not queued", "call", RefOf(j).String(), "error", aerr)
		}
		return invoke.Accepted{}, fmt.Errorf("queue the call: %w", err)
	}
	r.metrics.accepted.Inc()
	return invoke.Accepted{RequestID: id}, nil
}

// CheckCallbackURL says whether the runner would post a result to raw: a
// URL whose host its policy admits.
func (r *Runner) CheckCallbackURL(raw string) error {
	if r.Callbacks == nil || r.Keys == nil {
		return invoke.ErrNoCallbacks
	}
	return r.Callbacks.Policy.CheckURL(raw)
}

// Changed is closed at the next change of any call's state this Runner
// makes; a shared Runner's is also closed after a short while, since other
// replicas change calls too.
func (r *Runner) Changed() <-chan struct{} {
	r.mu.Lock()
	ch := r.changed
	r.mu.Unlock()
	if r.Queue == nil {
		return ch
	}
	out := make(chan struct{})
	go func() {
		t := time.NewTimer(pollEvery)
		defer t.Stop()
		select {
		case <-ch:
		case <-t.C:
		}
		close(out)
	}()
	return out
}

func (r *Runner) notify() {
	r.mu.Lock()
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

func (r *Runner) drive(j *Job) {
	r.mu.Lock()
	r.pending[j] = j.AcceptedAt
	r.mu.Unlock()
	r.running.Add(1)
	go func() {
		defer r.running.Done()
		r.loop(j)
		r.mu.Lock()
		delete(r.pending, j) // a shutdown ended it unfinished
		r.mu.Unlock()
		if j.State.Done() {
			r.deliver(j)
		}
	}()
}

// pendingStats is how many calls are not final and the age of the oldest.
func (r *Runner) pendingStats() (int, time.Duration) {
	if r.claims != nil {
		ctx, cancel := context.WithTimeout(r.ctx, 2*time.Second)
		defer cancel()
		n, oldest, err := r.claims.Pending(ctx)
		if err != nil || n == 0 {
			return 0, 0
		}
		return n, time.Since(oldest)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var oldest time.Time
	for _, at := range r.pending {
		if oldest.IsZero() || at.Before(oldest) {
			oldest = at
		}
	}
	if oldest.IsZero() {
		return 0, 0
	}
	return len(r.pending), time.Since(oldest)
}

// waitUntil waits for t, false when ctx ends first.
func waitUntil(ctx context.Context, t time.Time) bool {
	wait := time.Until(t)
	if wait <= 0 {
		return true
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// loop runs j until it reaches a final state or the runner stops.
func (r *Runner) loop(j *Job) {
	ctx := r.ctx
	g := r.gate(j.Namespace + "/" + j.Function)
	for {
		if !waitUntil(ctx, j.NextAttemptAt) {
			return
		}
		pol := r.policy(j.Namespace, j.Function)
		if r.expire(j, pol) {
			return
		}
		if !g.acquire(ctx, pol.Concurrency) {
			return
		}
		done := r.step(ctx, j, pol)
		g.release()
		if done || ctx.Err() != nil {
			return
		}
	}
}

// expire dead-letters j when it waited past its function's
// maxEventAgeSeconds, and says whether it did.
func (r *Runner) expire(j *Job, pol Policy) bool {
	if time.Since(j.AcceptedAt) <= pol.MaxEventAge {
		return false
	}
	msg := fmt.Sprintf("not run within maxEventAgeSeconds (%s after acceptance)", pol.MaxEventAge)
	if j.LastError != "" {
		msg += "; last error: " + j.LastError
	}
	j.LastError = msg
	r.finish(j, StateDeadLettered)
	return true
}

// step makes one attempt of j and records what came of it: a final state
// (true), or queued for a retry at j.NextAttemptAt. An attempt cut by a
// shutdown records nothing more: the call stays running and runs again.
func (r *Runner) step(ctx context.Context, j *Job, pol Policy) bool {
	j.State, j.StartedAt, j.NextAttemptAt = StateRunning, time.Now(), time.Time{}
	j.Attempts++
	r.save(j)
	actx, span := r.startAttempt(ctx, j)
	resp, errText := r.attempt(actx, j)
	endAttempt(span, resp, errText)
	r.metrics.attempts.Inc()
	if ctx.Err() != nil {
		return false
	}
	j.Response = resp
	switch {
	case resp.Status < 400:
		j.LastError = ""
		r.finish(j, StateSucceeded)
		return true
	case resp.Status < 500:
		j.LastError = errText
		r.finish(j, StateFailed)
		return true
	}
	j.LastError = errText
	// A function not serving yet (sless dev restarting, a revision
	// rolling out) is waited for within maxEventAge, not failed, and
	// looked at again soon.
	var wait time.Duration
	if reason := resp.Header.Get(invoke.ErrorHeader); reason == invoke.ReasonNotReady || reason == invoke.ReasonUnavailable {
		wait = min(r.Backoff(j.Attempts), notReadyWait)
	} else {
		j.Failures++
		wait = r.Backoff(j.Failures)
	}
	if j.Failures > pol.MaxRetries {
		r.finish(j, StateDeadLettered)
		return true
	}
	j.State, j.NextAttemptAt = StateQueued, time.Now().Add(wait)
	r.save(j)
	return false
}

func (r *Runner) policy(ns, name string) Policy {
	if r.Policy == nil {
		return DefaultPolicy
	}
	p, err := r.Policy(r.ctx, ns, name)
	if err != nil {
		return DefaultPolicy
	}
	if p.Concurrency < 1 {
		p.Concurrency = 1
	}
	return p
}

func (r *Runner) finish(j *Job, s State) {
	r.metrics.finished.WithLabelValues(string(s)).Inc()
	// Before the save wakes those waiting on the record.
	r.mu.Lock()
	delete(r.pending, j)
	r.mu.Unlock()
	j.State, j.FinishedAt = s, time.Now()
	// Where the result goes is settled with the final state, so a restart
	// before it is posted posts it still.
	if u := r.callbackURL(j); u != "" {
		j.Callback = &Callback{URL: u, State: CallbackPending}
	}
	r.save(j)
}

// callbackURL is where j's result goes: the call's X-Callback-Url, else
// the function's onSuccess or onFailure; "" for nowhere.
func (r *Runner) callbackURL(j *Job) string {
	if r.Callbacks == nil || r.Keys == nil {
		return ""
	}
	if j.CallbackURL != "" {
		return j.CallbackURL
	}
	pol := r.policy(j.Namespace, j.Function)
	if j.State == StateSucceeded {
		return pol.OnSuccess
	}
	return pol.OnFailure
}

// save records j's state. A failure is logged and the call goes on: its
// last saved state is at worst behind, and a restart runs it again.
func (r *Runner) save(j *Job) {
	if err := r.Store.Update(context.WithoutCancel(r.ctx), j); err != nil {
		r.Logger.Warn("cannot save an asynchronous call's state", "namespace", j.Namespace, "function", j.Function,
			"requestId", j.RequestID, "state", j.State, "error", err)
	}
	r.notify()
}

// attempt runs j once and says what it answered and, for a failure, why.
func (r *Runner) attempt(ctx context.Context, j *Job) (*Response, string) {
	w := &capture{header: http.Header{}, max: r.MaxResponseBytes}
	r.Run(ctx, w, &j.Submission)
	if w.status == 0 {
		w.status = http.StatusOK
	}
	resp := &Response{Status: w.status, Header: w.header, Body: w.body.Bytes(), Bytes: w.n, Truncated: w.n > int64(w.body.Len())}
	if resp.Status < 400 {
		return resp, ""
	}
	return resp, failure(resp)
}

// failure says why an answer failed: the platform's problem when sless
// answered, else the function's status and the start of its body.
func failure(resp *Response) string {
	if reason := resp.Header.Get(invoke.ErrorHeader); reason != "" {
		var p problems.Details
		if json.Unmarshal(resp.Body, &p) == nil && p.Detail != "" {
			return fmt.Sprintf("%d %s: %s", resp.Status, reason, p.Detail)
		}
		return fmt.Sprintf("%d %s", resp.Status, reason)
	}
	body := strings.ToValidUTF8(string(resp.Body[:min(len(resp.Body), 256)]), "")
	return strings.TrimSpace(fmt.Sprintf("the function answered %d %s", resp.Status, body))
}

func defaultBackoff(n int) time.Duration {
	d := time.Second << min(n-1, 10)
	d = min(d, 5*time.Minute)
	return d - time.Duration(rand.Int64N(int64(d)/5+1))
}

func (r *Runner) gate(key string) *gate {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.gates[key]
	if g == nil {
		g = &gate{wake: make(chan struct{})}
		r.gates[key] = g
	}
	return g
}

// gate bounds how many calls of one function run at once; the bound is
// read at each acquire, so a changed spec.async.concurrency applies to the
// next attempt.
type gate struct {
	mu      sync.Mutex
	running int
	wake    chan struct{}
}

func (g *gate) acquire(ctx context.Context, limit int) bool {
	for {
		g.mu.Lock()
		if g.running < limit {
			g.running++
			g.mu.Unlock()
			return true
		}
		wake := g.wake
		g.mu.Unlock()
		select {
		case <-ctx.Done():
			return false
		case <-wake:
		}
	}
}

func (g *gate) release() {
	g.mu.Lock()
	g.running--
	close(g.wake)
	g.wake = make(chan struct{})
	g.mu.Unlock()
}

// capture is the ResponseWriter of an attempt: it keeps the head and the
// first max bytes of the body and counts the rest.
type capture struct {
	header http.Header
	status int
	body   bytes.Buffer
	n      int64
	max    int
}

func (c *capture) Header() http.Header { return c.header }

func (c *capture) WriteHeader(code int) {
	if c.status == 0 && code >= 200 {
		c.status = code
	}
}

func (c *capture) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	c.n += int64(len(b))
	if room := c.max - c.body.Len(); room > 0 {
		c.body.Write(b[:min(room, len(b))])
	}
	return len(b), nil
}
