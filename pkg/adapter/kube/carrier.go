package kube

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
	"github.com/sless-dev/sless/pkg/auth/triggertoken"
	"github.com/sless-dev/sless/pkg/names"
)

// connectionRecheck is how often a queue trigger whose connection Secret is
// missing looks for it again.
const connectionRecheck = 30 * time.Second

// PreWarmFinalizer lets a pre-warming trigger restore its function's
// min-scale before it goes away.
const PreWarmFinalizer = "sless.dev/prewarm"

// Carrier is adapter.Carrier on a cluster: CronJobs, consumer Deployments
// and their credentials, pre-warming.
type Carrier struct {
	Client client.Client
	// APIReader reads what the manager does not cache (the connection
	// Secrets of queue triggers); Client when nil.
	APIReader client.Reader
	Config    TriggerConfig
	// PublicURL is the invoke proxy's public base URL, for status.url of
	// http triggers (https://fn.example.com).
	PublicURL string
	Tokens    adapter.TokenIssuer
	MinScale  adapter.MinScaleSetter
	Clock     clock.PassiveClock
}

var _ adapter.Carrier = (*Carrier)(nil)

func (r *Carrier) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

// Unsupported implements adapter.Carrier: cron and queue triggers need the image
// their containers run.
func (r *Carrier) Unsupported(t *slessv1alpha1.Trigger) bool {
	if t.Spec.Type != slessv1alpha1.TriggerTypeHTTP && r.Config.Image == "" {
		t.Status.MarkNoCallerImage(t.Spec.Type)
		return true
	}
	return false
}

// URL implements adapter.Carrier: the invoke proxy's public URL of the function.
func (r *Carrier) URL(t *slessv1alpha1.Trigger, _ *slessv1alpha1.Function) string {
	return FunctionURL(r.PublicURL, t.Namespace, t.Spec.Function)
}

// Pause implements adapter.Carrier: it suspends the CronJob, scales the consumer
// to zero and lets go of any pre-warm hold.
func (r *Carrier) Pause(ctx context.Context, t *slessv1alpha1.Trigger) error {
	if err := r.pauseChildren(ctx, t); err != nil {
		return err
	}
	return r.releasePreWarm(ctx, t)
}

// Gone implements adapter.Carrier: the children are owned; garbage collection
// removes them.
func (r *Carrier) Gone(types.NamespacedName) {}

// Schedule implements adapter.Scheduler: the trigger's CronJob (suspended while the
// trigger is disabled), its credential, and the pre-warm of its function.
func (r *Carrier) Schedule(ctx context.Context, t *slessv1alpha1.Trigger, fn *slessv1alpha1.Function, sched cron.Schedule) (*metav1.Time, time.Duration, error) {
	renew, err := r.ensureToken(ctx, t)
	if err != nil {
		return nil, 0, err
	}
	want := MakeCronJob(t, fn, r.Config)
	cj := &batchv1.CronJob{}
	if err := r.ensure(ctx, t, want, cj, want.Spec, func() { cj.Spec = want.Spec }); err != nil {
		return nil, 0, err
	}
	after, err := r.preWarm(ctx, t, fn, cj, sched, r.now())
	if err != nil {
		t.Status.MarkPreWarmFailed(err.Error())
		return nil, 0, err
	}
	return cj.Status.LastScheduleTime.DeepCopy(), sooner(after, renew), nil
}

// Consume implements adapter.Consumer: the trigger's consumer Deployment and its
// credential, read as `kubectl rollout status` reads it.
func (r *Carrier) Consume(ctx context.Context, t *slessv1alpha1.Trigger, fn *slessv1alpha1.Function) (adapter.ConsumerState, time.Duration, error) {
	renew, err := r.ensureToken(ctx, t)
	if err != nil {
		return adapter.ConsumerState{}, 0, err
	}
	want := MakeConsumerDeployment(t, fn, r.Config)
	d := &appsv1.Deployment{}
	if err := r.ensure(ctx, t, want, d, want.Spec, func() { d.Spec = want.Spec }); err != nil {
		return adapter.ConsumerState{}, 0, err
	}
	if !t.IsEnabled() {
		return adapter.ConsumerState{}, renew, nil
	}
	conn := &corev1.Secret{}
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	secret, key := t.ConnectionSecret(), ConnectionKey(t)
	if err := reader.Get(ctx, types.NamespacedName{Namespace: t.Namespace, Name: secret}, conn); err != nil {
		if !apierrors.IsNotFound(err) {
			return adapter.ConsumerState{}, 0, err
		}
		// User Secrets are not watched (the cache holds only sless's own).
		return adapter.ConsumerState{Mark: func(s *slessv1alpha1.TriggerStatus) {
			s.MarkConnectionSecretNotFound(secret, key, false)
		}}, sooner(renew, connectionRecheck), nil
	}
	if _, ok := conn.Data[key]; !ok {
		return adapter.ConsumerState{Mark: func(s *slessv1alpha1.TriggerStatus) {
			s.MarkConnectionSecretNotFound(secret, key, true)
		}}, sooner(renew, connectionRecheck), nil
	}
	// The Deployment's status events bring the trigger back (Owns), so a
	// consumer that connects, or loses its broker, shows without a requeue.
	s, msg := consumerReadiness(d, t.Source())
	return adapter.ConsumerState{Status: s, Message: msg}, renew, nil
}

// SpecHashAnnotation on a child holds the hash of the spec and labels the
// Carrier built it from. Comparing hashes rather than objects ignores
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
func (r *Carrier) ensure(ctx context.Context, t *slessv1alpha1.Trigger, want, got client.Object, spec any, setSpec func()) error {
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

// sooner is the sooner of two times to look again, where 0 (or less)
// means none.
func sooner(a, b time.Duration) time.Duration {
	if b > 0 && (a <= 0 || b < a) {
		return b
	}
	return max(a, 0)
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
func (r *Carrier) ensureToken(ctx context.Context, t *slessv1alpha1.Trigger) (time.Duration, error) {
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
		exp, perr := time.Parse(time.RFC3339, s.Annotations[ExpiresAnnotation])
		renewAt := exp.Add(-triggertoken.DefaultLifetime / 4)
		if perr == nil && now.Before(renewAt) && len(s.Data[TokenKey]) > 0 &&
			s.Labels[LabelFunction] == t.Spec.Function && s.Annotations[TypeAnnotation] == string(t.Spec.Type) {
			return renewAt.Sub(now), nil
		}
	}
	if r.Tokens == nil {
		t.Status.MarkCredentialFailed("the controller has no signing key for trigger credentials")
		return 0, reconcile.TerminalError(errors.New("no adapter.TokenIssuer configured"))
	}
	token, exp, ierr := r.Tokens.IssueTriggerToken(t)
	if ierr != nil {
		t.Status.MarkCredentialFailed(ierr.Error())
		return 0, ierr
	}
	want := MakeTokenSecret(t, token, metav1.NewTime(exp))
	if apierrors.IsNotFound(err) {
		err = r.Client.Create(ctx, want)
	} else {
		s.Data, s.Labels, s.Annotations = want.Data, want.Labels, want.Annotations
		err = r.Client.Update(ctx, s)
	}
	if err != nil {
		return 0, r.rejected(t, want, err)
	}
	return exp.Add(-triggertoken.DefaultLifetime / 4).Sub(now), nil
}

// rejected tells a write of child that the apiserver or a webhook refused
// on t's Ready condition: it is refused again on each retry until the
// trigger or the cluster changes, and without it the trigger would show no
// reason at all, the refusal only in the controller's log. err is returned
// as it is, so the write is retried with backoff.
func (r *Carrier) rejected(t *slessv1alpha1.Trigger, child client.Object, err error) error {
	if adapter.Rejected(err) {
		t.Status.MarkRejected(kindOf(child), child.GetName(), err)
	}
	return err
}

// pauseChildren suspends the trigger's CronJob and scales its consumer to
// zero. It also clears their spec hash, so that ensure rebuilds them in full
// (enabled again, or still suspended if the trigger is disabled) once the
// Function exists.
func (r *Carrier) pauseChildren(ctx context.Context, t *slessv1alpha1.Trigger) error {
	var child client.Object
	var pause func() bool // sets the paused spec and reports whether it changed
	switch {
	case t.Spec.Type == slessv1alpha1.TriggerTypeCron:
		cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: names.CronJob(t)}}
		child = cj
		pause = func() bool {
			if ptr.Deref(cj.Spec.Suspend, false) {
				return false
			}
			cj.Spec.Suspend = ptr.To(true)
			return true
		}
	case t.Spec.Type.Consumes():
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

// Tidy implements adapter.Carrier: it deletes the children a trigger of another
// type would have.
func (r *Carrier) Tidy(ctx context.Context, t *slessv1alpha1.Trigger) error {
	var stale []client.Object
	if t.Spec.Type != slessv1alpha1.TriggerTypeCron {
		stale = append(stale, &batchv1.CronJob{})
	}
	if !t.Spec.Type.Consumes() {
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

// Finalize implements adapter.Carrier: it restores the min-scale a deleted trigger
// was holding.
func (r *Carrier) Finalize(ctx context.Context, t *slessv1alpha1.Trigger) error {
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
