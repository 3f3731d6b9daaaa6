// Package trigger reconciles Triggers: the status rules of http, cron and
// queue triggers, written once, with an adapter.Carrier for what each mode
// does to carry the calls out. On a cluster (kube.Carrier, in
// pkg/adapter/kube) an http trigger is read by the
// invoke proxy, a cron trigger becomes a batch CronJob whose container
// calls the function through the proxy with a per-trigger credential (with
// preWarmSeconds the function's min-scale is raised ahead of each run and
// restored after), and a queue trigger a Deployment running `sless consume`.
// In local mode (pkg/local/runs) the same happens in process.
package trigger

import (
	"context"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sless-dev/sless/pkg/adapter"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// Reconciler reconciles Triggers through an adapter.Carrier.
type Reconciler struct {
	Client  client.Client
	Carrier adapter.Carrier
	// Recheck is how often a trigger looks at its function again where
	// nothing watches Functions (local mode); 0 on a cluster.
	Recheck time.Duration
	Clock   clock.PassiveClock
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	t := &slessv1alpha1.Trigger{}
	if err := r.Client.Get(ctx, req.NamespacedName, t); err != nil {
		if apierrors.IsNotFound(err) {
			r.Carrier.Gone(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if t.DeletionTimestamp != nil {
		return reconcile.Result{}, r.Carrier.Finalize(ctx, t)
	}
	t.SetDefaults()
	before := t.Status.DeepCopy()
	t.Status.ObservedGeneration = t.Generation
	after, err := r.reconcile(ctx, t)
	if !equality.Semantic.DeepEqual(before, &t.Status) {
		uerr := r.Client.Status().Update(ctx, t)
		// A conflict or a trigger gone: the newer version is queued already.
		if uerr != nil && err == nil && !apierrors.IsConflict(uerr) && !apierrors.IsNotFound(uerr) {
			return reconcile.Result{}, uerr
		}
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: minPositive(after, r.Recheck)}, nil
}

func (r *Reconciler) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

// reconcile carries out t's type, stops what other types would do, and
// returns when to look again.
func (r *Reconciler) reconcile(ctx context.Context, t *slessv1alpha1.Trigger) (time.Duration, error) {
	if err := r.Carrier.Tidy(ctx, t); err != nil {
		return 0, err
	}
	if t.Spec.Type != slessv1alpha1.TriggerTypeCron {
		t.Status.LastScheduleTime, t.Status.NextScheduleTime = nil, nil
	}
	if t.Spec.Type != slessv1alpha1.TriggerTypeHTTP {
		t.Status.URL = ""
	}
	fn := &slessv1alpha1.Function{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: t.Namespace, Name: t.Spec.Function}, fn); err != nil {
		if !apierrors.IsNotFound(err) {
			return 0, err
		}
		// What carries the calls out stays, so that a Function made again
		// under the same name picks it up, but stops calling: a run at a
		// missing function only fails, and a consumer would spend each
		// message's retries and dead-letter it, while a paused one leaves
		// the messages waiting in the queue.
		t.Status.URL = ""
		t.Status.MarkFunctionNotFound(t.Spec.Function)
		return 0, r.pause(ctx, t)
	}
	if r.Carrier.Unsupported(t) {
		return 0, nil
	}
	switch t.Spec.Type {
	case slessv1alpha1.TriggerTypeHTTP:
		// The invoke proxy reads http Triggers itself (an enabled one makes
		// its function public); the status tells the user where.
		if !t.IsEnabled() {
			t.Status.URL = ""
			t.Status.MarkDisabled(t.Spec.Type)
			return 0, nil
		}
		t.Status.URL = r.Carrier.URL(t, fn)
		t.Status.MarkPublic()
		return 0, nil
	case slessv1alpha1.TriggerTypeCron:
		return r.reconcileCron(ctx, t, fn)
	}
	if t.Spec.Type.Consumes() {
		cs, after, err := r.Carrier.Consume(ctx, t, fn)
		if err != nil {
			return 0, err
		}
		MarkConsumer(&t.Status, t, cs)
		return after, nil
	}
	return 0, fmt.Errorf("unknown trigger type %q", t.Spec.Type)
}

// pause stops t's calls while t stays Ready False, as marked, until what
// pauses it is fixed.
func (r *Reconciler) pause(ctx context.Context, t *slessv1alpha1.Trigger) error {
	t.Status.NextScheduleTime = nil
	return r.Carrier.Pause(ctx, t)
}

func (r *Reconciler) reconcileCron(ctx context.Context, t *slessv1alpha1.Trigger, fn *slessv1alpha1.Function) (time.Duration, error) {
	sched, err := Schedule(t.Spec.Schedule, t.Spec.TimeZone)
	if err != nil {
		// kubectl lets through a well-formed time zone the database does
		// not know (the schema cannot look it up); anything else comes from
		// an older sless. Runs of an earlier spec would go on on the old
		// schedule while the trigger says they do not: paused, as for a
		// missing function, until the spec is fixed.
		t.Status.MarkInvalidSchedule(err)
		return 0, r.pause(ctx, t)
	}
	if msg := slessv1alpha1.PayloadTooLarge(t.Spec.Payload); msg != "" {
		// A cluster's every run would fail to start (and a local one could
		// carry it, but what works locally must deploy). Paused as above.
		t.Status.MarkPayloadTooLarge(msg)
		return 0, r.pause(ctx, t)
	}
	last, after, err := r.Carrier.Schedule(ctx, t, fn, sched)
	if err != nil {
		return 0, err
	}
	t.Status.LastScheduleTime = last
	now := r.now()
	next := sched.Next(now)
	if t.IsEnabled() {
		t.Status.NextScheduleTime = &metav1.Time{Time: next}
		t.Status.MarkScheduled(t.Spec.Schedule, t.Spec.TimeZone)
	} else {
		t.Status.NextScheduleTime = nil
		t.Status.MarkDisabled(t.Spec.Type)
	}
	return minPositive(after, next.Sub(now)+time.Second), nil
}

// MarkConsumer marks t's Ready condition from where its consumer stands.
func MarkConsumer(st *slessv1alpha1.TriggerStatus, t *slessv1alpha1.Trigger, cs adapter.ConsumerState) {
	switch {
	case !t.IsEnabled():
		st.MarkDisabled(t.Spec.Type)
	case cs.Mark != nil:
		cs.Mark(st)
	case cs.Status == metav1.ConditionTrue:
		st.MarkConsuming(t.Source())
	case cs.Status == metav1.ConditionFalse:
		st.MarkConsumerFailed(cs.Message)
	default:
		st.MarkConsumerStarting(cs.Message)
	}
}

// Schedule parses a trigger's schedule in its time zone (UTC if unset).
func Schedule(spec, tz string) (cron.Schedule, error) {
	if err := slessv1alpha1.ParseSchedule(spec); err != nil {
		return nil, err
	}
	loc, err := slessv1alpha1.LoadTimeZone(tz)
	if err != nil {
		return nil, fmt.Errorf("time zone %q: %w", tz, err)
	}
	s, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, err
	}
	if ss, ok := s.(*cron.SpecSchedule); ok {
		ss.Location = loc
	}
	return s, nil
}

func minPositive(ds ...time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		if d > 0 && (m == 0 || d < m) {
			m = d
		}
	}
	return m
}
