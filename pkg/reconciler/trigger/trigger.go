// Package trigger reconciles Triggers. An http trigger makes its function
// public through the invoke proxy (the proxy reads the Trigger; this
// reconciler reports its URL and readiness). A cron trigger becomes a batch
// CronJob whose container calls the function through the invoke proxy with a
// per-trigger credential; with preWarmSeconds the reconciler raises the
// function's min-scale ahead of each run and restores it after. A queue
// trigger becomes a Deployment running `sless consume`.
package trigger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sless-dev/sless/pkg/adapter"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/names"
	"github.com/sless-dev/sless/pkg/reconciler/trigger/resources"
)

// connectionRecheck is how often a queue trigger whose connection Secret is
// missing looks for it again.
const connectionRecheck = 30 * time.Second

// PreWarmFinalizer lets a pre-warming trigger restore its function's
// min-scale before it goes away.
const PreWarmFinalizer = "sless.dev/prewarm"

// Reconciler reconciles Triggers.
type Reconciler struct {
	Client client.Client
	// APIReader reads what the manager does not cache (the connection
	// Secrets of queue triggers); Client when nil.
	APIReader client.Reader
	Config    resources.Config
	// PublicURL is the invoke proxy's public base URL, for status.url of
	// http triggers (https://fn.example.com).
	PublicURL string
	Tokens    TokenIssuer
	MinScale  MinScaleSetter
	Clock     clock.PassiveClock
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	t := &slessv1alpha1.Trigger{}
	if err := r.Client.Get(ctx, req.NamespacedName, t); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if t.DeletionTimestamp != nil {
		return reconcile.Result{}, r.finalize(ctx, t)
	}
	t.SetDefaults()
	before := t.Status.DeepCopy()
	t.Status.ObservedGeneration = t.Generation
	after, err := r.reconcile(ctx, t)
	if !equality.Semantic.DeepEqual(before, &t.Status) {
		if uerr := r.Client.Status().Update(ctx, t); uerr != nil && err == nil {
			return reconcile.Result{}, uerr
		}
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	if after > 0 {
		return reconcile.Result{RequeueAfter: after}, nil
	}
	return reconcile.Result{}, nil
}

func (r *Reconciler) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

// reconcile makes the children of t's type, removes those of other types (a
// trigger's type may change), and returns when to look again.
func (r *Reconciler) reconcile(ctx context.Context, t *slessv1alpha1.Trigger) (time.Duration, error) {
	if err := r.removeOthers(ctx, t); err != nil {
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
		// The children stay, so that a Function re-created under the same
		// name picks them up, but they stop calling: a CronJob firing at a
		// missing function only makes failed Jobs, and a consumer would
		// spend each message's retries and dead-letter it, while a paused
		// one leaves the messages waiting in the queue.
		t.Status.URL = ""
		t.Status.MarkFunctionNotFound(t.Spec.Function)
		return 0, r.pause(ctx, t)
	}
	if t.Spec.Type != slessv1alpha1.TriggerTypeHTTP && r.Config.Image == "" {
		t.Status.MarkNoCallerImage(t.Spec.Type)
		return 0, nil
	}
	switch t.Spec.Type {
	case slessv1alpha1.TriggerTypeHTTP:
		return 0, r.reconcileHTTP(t)
	case slessv1alpha1.TriggerTypeCron:
		return r.reconcileCron(ctx, t, fn)
	case slessv1alpha1.TriggerTypeQueue:
		return r.reconcileQueue(ctx, t, fn)
	}
	return 0, fmt.Errorf("unknown trigger type %q", t.Spec.Type)
}

// pause stops t's children calling (a suspended CronJob, a consumer scaled
// to zero) and lets go of any pre-warm hold, while t stays Ready False, as
// marked, until what pauses it is fixed.
func (r *Reconciler) pause(ctx context.Context, t *slessv1alpha1.Trigger) error {
	t.Status.NextScheduleTime = nil
	if err := r.pauseChildren(ctx, t); err != nil {
		return err
	}
	return r.releasePreWarm(ctx, t)
}

// reconcileHTTP: the invoke proxy reads http Triggers itself (an enabled one
// makes its function public); the status tells the user where.
func (r *Reconciler) reconcileHTTP(t *slessv1alpha1.Trigger) error {
	if !t.IsEnabled() {
		t.Status.URL = ""
		t.Status.MarkDisabled(t.Spec.Type)
		return nil
	}
	t.Status.URL = resources.FunctionURL(r.PublicURL, t.Namespace, t.Spec.Function)
	t.Status.MarkPublic()
	return nil
}

func (r *Reconciler) reconcileCron(ctx context.Context, t *slessv1alpha1.Trigger, fn *slessv1alpha1.Function) (time.Duration, error) {
	sched, err := Schedule(t.Spec.Schedule, t.Spec.TimeZone)
	if err != nil {
		// kubectl lets through a well-formed time zone the database does
		// not know (the schema cannot look it up); anything else comes from
		// an older sless. A CronJob made of an earlier spec would go on
		// calling on the old schedule while the trigger says it does not:
		// it is suspended, as for a missing function, until the spec is fixed.
		t.Status.MarkInvalidSchedule(err)
		return 0, r.pause(ctx, t)
	}
	if msg := slessv1alpha1.PayloadTooLarge(t.Spec.Payload); msg != "" {
		// Every run's pod would fail to start; a CronJob of an earlier
		// payload would go on calling with it. Paused as above.
		t.Status.MarkPayloadTooLarge(msg)
		return 0, r.pause(ctx, t)
	}
	renew, err := r.ensureToken(ctx, t)
	if err != nil {
		return 0, err
	}
	want := resources.MakeCronJob(t, fn, r.Config)
	cj := &batchv1.CronJob{}
	if err := r.ensure(ctx, t, want, cj, want.Spec, func() { cj.Spec = want.Spec }); err != nil {
		return 0, err
	}
	t.Status.LastScheduleTime = cj.Status.LastScheduleTime.DeepCopy()
	now := r.now()
	next := sched.Next(now)
	if t.IsEnabled() {
		t.Status.NextScheduleTime = &metav1.Time{Time: next}
		t.Status.MarkScheduled(t.Spec.Schedule, t.Spec.TimeZone)
	} else {
		t.Status.NextScheduleTime = nil
		t.Status.MarkDisabled(t.Spec.Type)
	}
	after, err := r.preWarm(ctx, t, fn, cj, sched, now)
	if err != nil {
		t.Status.MarkPreWarmFailed(err.Error())
		return 0, err
	}
	return minPositive(after, renew, next.Sub(now)+time.Second), nil
}

func (r *Reconciler) reconcileQueue(ctx context.Context, t *slessv1alpha1.Trigger, fn *slessv1alpha1.Function) (time.Duration, error) {
	renew, err := r.ensureToken(ctx, t)
	if err != nil {
		return 0, err
	}
	want := resources.MakeConsumerDeployment(t, fn, r.Config)
	d := &appsv1.Deployment{}
	if err := r.ensure(ctx, t, want, d, want.Spec, func() { d.Spec = want.Spec }); err != nil {
		return 0, err
	}
	if !t.IsEnabled() {
		t.Status.MarkDisabled(t.Spec.Type)
		return renew, nil
	}
	conn := &corev1.Secret{}
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	if err := reader.Get(ctx, types.NamespacedName{Namespace: t.Namespace, Name: t.Spec.Queue.ConnectionSecret}, conn); err != nil {
		if !apierrors.IsNotFound(err) {
			return 0, err
		}
		t.Status.MarkConnectionSecretNotFound(t.Spec.Queue.ConnectionSecret, resources.ConnectionURLKey, false)
		// User Secrets are not watched (the cache holds only sless's own).
		return minPositive(renew, connectionRecheck), nil
	}
	if _, ok := conn.Data[resources.ConnectionURLKey]; !ok {
		t.Status.MarkConnectionSecretNotFound(t.Spec.Queue.ConnectionSecret, resources.ConnectionURLKey, true)
		return minPositive(renew, connectionRecheck), nil
	}
	// The Deployment's status events bring the trigger back (Owns), so a
	// consumer that connects, or loses its broker, shows without a requeue.
	switch s, msg := consumerReadiness(d, t.Spec.Queue.Queue); s {
	case metav1.ConditionFalse:
		t.Status.MarkConsumerFailed(msg)
	case metav1.ConditionUnknown:
		t.Status.MarkConsumerStarting(msg)
	default:
		t.Status.MarkConsuming(t.Spec.Queue.Queue)
	}
	return renew, nil
}

// SpecHashAnnotation on a child holds the hash of the spec and labels the
// reconciler built it from. Comparing hashes rather than objects ignores
// what the apiserver defaults, so an unchanged trigger causes no writes, and
// any change of the built spec (a removed env var too) causes one.
const SpecHashAnnotation = "sless.dev/spec-hash"

func specHash(spec any, labels map[string]string) string {
	b, err := json.Marshal(struct {
		Spec   any               `json:"spec"`
		Labels map[string]string `json:"labels"`
	}{spec, labels})
	if err != nil {
		panic(err) // built from API types, which always marshal
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// ensure creates want, or updates the existing object (read into got) when
// the hash of what the builder made changed: setSpec copies want's spec into
// got. An object of the name that t does not control is left alone and
// reported.
func (r *Reconciler) ensure(ctx context.Context, t *slessv1alpha1.Trigger, want, got client.Object, spec any, setSpec func()) error {
	hash := specHash(spec, want.GetLabels())
	ann := want.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[SpecHashAnnotation] = hash
	want.SetAnnotations(ann)
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), got)
	if apierrors.IsNotFound(err) {
		if err := r.Client.Create(ctx, want); err != nil {
			return r.rejected(t, want, err)
		}
		// The caller reads status from got: a fresh object has none.
		return r.Client.Get(ctx, client.ObjectKeyFromObject(want), got)
	}
	if err != nil {
		return err
	}
	if !metav1.IsControlledBy(got, t) {
		t.Status.MarkConflict(kindOf(got), got.GetName())
		return reconcile.TerminalError(fmt.Errorf("%s %s exists and is not owned by this trigger", kindOf(got), got.GetName()))
	}
	if got.GetAnnotations()[SpecHashAnnotation] == hash {
		return nil
	}
	setSpec()
	got.SetLabels(want.GetLabels())
	a := got.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[SpecHashAnnotation] = hash
	got.SetAnnotations(a)
	return r.rejected(t, got, r.Client.Update(ctx, got))
}

func kindOf(o client.Object) string {
	switch o.(type) {
	case *batchv1.CronJob:
		return "CronJob"
	case *appsv1.Deployment:
		return "Deployment"
	case *corev1.Secret:
		return "Secret"
	}
	return fmt.Sprintf("%T", o)
}

// ensureToken makes the trigger's credential Secret, and issues a new token
// when a quarter of its life is left or the trigger's function or type
// changed (a token is good for one of each). It returns when to renew.
func (r *Reconciler) ensureToken(ctx context.Context, t *slessv1alpha1.Trigger) (time.Duration, error) {
	s := &corev1.Secret{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: t.Namespace, Name: names.TokenSecret(t)}, s)
	if err != nil && !apierrors.IsNotFound(err) {
		return 0, err
	}
	now := r.now()
	if err == nil {
		if !metav1.IsControlledBy(s, t) {
			t.Status.MarkConflict("Secret", s.Name)
			return 0, reconcile.TerminalError(errors.New("Secret " + s.Name + " exists and is not owned by this trigger"))
		}
		exp, perr := time.Parse(time.RFC3339, s.Annotations[resources.ExpiresAnnotation])
		renewAt := exp.Add(-DefaultTokenLifetime / 4)
		if perr == nil && now.Before(renewAt) && len(s.Data[resources.TokenKey]) > 0 &&
			s.Labels[resources.LabelFunction] == t.Spec.Function && s.Annotations[resources.TypeAnnotation] == string(t.Spec.Type) {
			return renewAt.Sub(now), nil
		}
	}
	if r.Tokens == nil {
		t.Status.MarkCredentialFailed("the controller has no signing key for trigger credentials")
		return 0, reconcile.TerminalError(errors.New("no TokenIssuer configured"))
	}
	token, exp, ierr := r.Tokens.IssueTriggerToken(t)
	if ierr != nil {
		t.Status.MarkCredentialFailed(ierr.Error())
		return 0, ierr
	}
	want := resources.MakeTokenSecret(t, token, metav1.NewTime(exp))
	if apierrors.IsNotFound(err) {
		err = r.Client.Create(ctx, want)
	} else {
		s.Data, s.Labels, s.Annotations = want.Data, want.Labels, want.Annotations
		err = r.Client.Update(ctx, s)
	}
	if err != nil {
		return 0, r.rejected(t, want, err)
	}
	return exp.Add(-DefaultTokenLifetime / 4).Sub(now), nil
}

// rejected tells a write of child that the apiserver or a webhook refused
// on t's Ready condition: it is refused again on each retry until the
// trigger or the cluster changes, and without it the trigger would show no
// reason at all, the refusal only in the controller's log. err is returned
// as it is, so the write is retried with backoff.
func (r *Reconciler) rejected(t *slessv1alpha1.Trigger, child client.Object, err error) error {
	if adapter.Rejected(err) {
		t.Status.MarkRejected(kindOf(child), child.GetName(), err)
	}
	return err
}

// pauseChildren suspends the trigger's CronJob and scales its consumer to
// zero. It also clears their spec hash, so that ensure rebuilds them in full
// (enabled again, or still suspended if the trigger is disabled) once the
// Function exists.
func (r *Reconciler) pauseChildren(ctx context.Context, t *slessv1alpha1.Trigger) error {
	var child client.Object
	var pause func() bool // sets the paused spec and reports whether it changed
	switch t.Spec.Type {
	case slessv1alpha1.TriggerTypeCron:
		cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: names.CronJob(t)}}
		child = cj
		pause = func() bool {
			if ptr.Deref(cj.Spec.Suspend, false) {
				return false
			}
			cj.Spec.Suspend = ptr.To(true)
			return true
		}
	case slessv1alpha1.TriggerTypeQueue:
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: names.ConsumerDeployment(t)}}
		child = d
		pause = func() bool {
			if d.Spec.Replicas != nil && *d.Spec.Replicas == 0 {
				return false
			}
			d.Spec.Replicas = ptr.To[int32](0)
			return true
		}
	default:
		return nil
	}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(child), child); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(child, t) {
		return nil
	}
	_, hashed := child.GetAnnotations()[SpecHashAnnotation]
	if !pause() && !hashed {
		return nil
	}
	ann := child.GetAnnotations()
	delete(ann, SpecHashAnnotation)
	child.SetAnnotations(ann)
	if err := r.Client.Update(ctx, child); err != nil {
		return fmt.Errorf("pausing %s %s: %w", kindOf(child), child.GetName(), err)
	}
	return nil
}

// removeOthers deletes the children a trigger of another type would have.
func (r *Reconciler) removeOthers(ctx context.Context, t *slessv1alpha1.Trigger) error {
	var stale []client.Object
	if t.Spec.Type != slessv1alpha1.TriggerTypeCron {
		stale = append(stale, &batchv1.CronJob{})
	}
	if t.Spec.Type != slessv1alpha1.TriggerTypeQueue {
		stale = append(stale, &appsv1.Deployment{})
	}
	if t.Spec.Type == slessv1alpha1.TriggerTypeHTTP {
		stale = append(stale, &corev1.Secret{})
	}
	for _, o := range stale {
		var name string
		switch o.(type) {
		case *batchv1.CronJob:
			name = names.CronJob(t)
		case *appsv1.Deployment:
			name = names.ConsumerDeployment(t)
		case *corev1.Secret:
			name = names.TokenSecret(t)
		}
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: t.Namespace, Name: name}, o); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return err
		}
		if !metav1.IsControlledBy(o, t) {
			continue
		}
		if err := r.Client.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	if t.Spec.Type != slessv1alpha1.TriggerTypeCron {
		return r.releasePreWarm(ctx, t)
	}
	return nil
}

// finalize restores the min-scale a deleted trigger was holding.
func (r *Reconciler) finalize(ctx context.Context, t *slessv1alpha1.Trigger) error {
	if !controllerutil.ContainsFinalizer(t, PreWarmFinalizer) {
		return nil
	}
	if r.MinScale != nil {
		if err := r.MinScale.RestoreMinScale(ctx, t.Namespace, t.Spec.Function, t.Name); err != nil {
			return err
		}
	}
	controllerutil.RemoveFinalizer(t, PreWarmFinalizer)
	return r.Client.Update(ctx, t)
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
