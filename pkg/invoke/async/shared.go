package async

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Ref names an asynchronous call. A Queue carries refs; the call itself and
// its state are in the Store.
type Ref struct {
	Namespace string `json:"namespace"`
	Function  string `json:"function"`
	RequestID string `json:"requestId"`
}

// RefOf is the ref of j.
func RefOf(j *Job) Ref {
	return Ref{Namespace: j.Namespace, Function: j.Function, RequestID: j.RequestID}
}

func (r Ref) String() string { return r.Namespace + "/" + r.Function + "/" + r.RequestID }

// Queue carries the calls of Runners that share one Store (the replicas of
// sless api): every call not yet done has a ref in it, due at a time,
// until one Runner has taken the call's next step and queued the one after.
type Queue interface {
	// Enqueue keeps ref durably, to be handed out at or after at; it
	// returns once the queue has it.
	Enqueue(ctx context.Context, ref Ref, at time.Time) error
	// Consume hands refs to handle until ctx ends, several at once. A ref
	// whose handle fails, or whose consumer dies holding it, is handed out
	// again.
	Consume(ctx context.Context, handle func(context.Context, Ref) error) error
}

// Claims is what a Store shared by replicas adds, so that one replica at a
// time takes a call's step and a function's concurrency is counted across
// them all.
type Claims interface {
	// Claim takes ref's call for one step until lease runs out: when its
	// step is due (an attempt, or the posting of its result), no unexpired
	// claim holds it, and, for an attempt, fewer than limit calls of its
	// function run under unexpired claims. A claimed attempt is kept
	// running. Otherwise the call is nil, with the wait after which asking
	// again may succeed; 0: the ref is stale (done, gone, or held).
	Claim(ctx context.Context, ref Ref, limit int, lease time.Duration) (*Job, time.Duration, error)
	// Release ends the claim on ref.
	Release(ctx context.Context, ref Ref) error
	// Due lists up to limit calls whose step fell due before t and that no
	// unexpired claim holds and no earlier Due listed since t: the refs a
	// replica lost (it died between saving a step and queueing the next).
	Due(ctx context.Context, before time.Time, limit int) ([]Ref, error)
	// Abandon deletes a call kept by Create whose ref could not be
	// queued, and its Idempotency-Key, so that its refusal holds.
	Abandon(ctx context.Context, ref Ref) error
	// Pending counts the calls not yet final and says when the oldest was
	// accepted.
	Pending(ctx context.Context) (int, time.Time, error)
}

// Shared-mode timings.
const (
	// DefaultSweepEvery is how often a shared Runner looks for lost refs.
	DefaultSweepEvery = 30 * time.Second
	// sweepSlack is how long past due a step must be before it counts as
	// lost rather than queued behind others.
	sweepSlack = time.Minute
	// busyWait is when a call whose function is at its concurrency is
	// offered again.
	busyWait = time.Second
	// leaseGrace is added to the function's timeout for a claim's lease.
	leaseGrace = time.Minute
	// pollEvery bounds how late a long poll sees another replica's change.
	pollEvery = 250 * time.Millisecond
)

// startShared starts the consumer of r.Queue and the sweeper of lost refs.
func (r *Runner) startShared() error {
	claims, ok := r.Store.(Claims)
	if !ok {
		return errors.New("async: a Runner with a Queue needs a Store that keeps Claims")
	}
	r.claims = claims
	if r.SweepEvery <= 0 {
		r.SweepEvery = DefaultSweepEvery
	}
	r.running.Add(2)
	go func() {
		defer r.running.Done()
		if err := r.Queue.Consume(r.ctx, r.handle); err != nil && r.ctx.Err() == nil {
			r.Logger.Error("asynchronous calls: the queue's consumer stopped", "error", err)
		}
	}()
	go func() {
		defer r.running.Done()
		r.sweep()
	}()
	return nil
}

// handle takes one step of ref's call, if it is due and this replica may,
// and queues the next.
func (r *Runner) handle(ctx context.Context, ref Ref) error {
	pol := r.policy(ref.Namespace, ref.Function)
	j, wait, err := r.claims.Claim(ctx, ref, pol.Concurrency, pol.lease())
	if err != nil {
		return fmt.Errorf("claim %s: %w", ref, err)
	}
	if j == nil {
		if wait <= 0 {
			return nil
		}
		return r.Queue.Enqueue(ctx, ref, time.Now().Add(wait))
	}
	next := r.stepShared(ctx, j, pol)
	// Released after a shutdown too, so that another replica takes the
	// call at once.
	if err := r.claims.Release(context.WithoutCancel(ctx), ref); err != nil {
		r.Logger.Warn("cannot release an asynchronous call", "call", ref.String(), "error", err)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if next.IsZero() {
		return nil
	}
	return r.Queue.Enqueue(ctx, ref, next)
}

// stepShared takes the claimed j's step and says when the next is due
// (zero: none).
func (r *Runner) stepShared(ctx context.Context, j *Job, pol Policy) time.Time {
	if !j.State.Done() && !r.expire(j, pol) && !r.step(ctx, j, pol) {
		return j.NextAttemptAt
	}
	if j.CallbackPending() && !time.Now().Before(j.Callback.NextAttemptAt) {
		r.deliverOnce(ctx, j)
	}
	if !j.CallbackPending() {
		return time.Time{}
	}
	return j.Callback.NextAttemptAt
}

// sweep queues again, every SweepEvery, the calls whose refs were lost.
func (r *Runner) sweep() {
	t := time.NewTicker(r.SweepEvery)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		refs, err := r.claims.Due(r.ctx, time.Now().Add(-sweepSlack), 500)
		if err != nil {
			if r.ctx.Err() == nil {
				r.Logger.Warn("asynchronous calls: cannot look for lost calls", "error", err)
			}
			continue
		}
		for _, ref := range refs {
			if err := r.Queue.Enqueue(r.ctx, ref, time.Now()); err != nil {
				r.Logger.Warn("asynchronous calls: cannot queue a lost call again", "call", ref.String(), "error", err)
				break
			}
		}
		if len(refs) > 0 {
			r.Logger.Info("asynchronous calls queued again after their refs were lost", "count", len(refs))
		}
	}
}

// lease is how long a claim on a call of p's function holds: an attempt
// ends within the function's timeout.
func (p Policy) lease() time.Duration {
	t := p.Timeout
	if t <= 0 {
		t = DefaultPolicy.Timeout
	}
	return t + leaseGrace
}
