// Package kube resolves functions and SlessServices for the invoke proxy
// on a Kubernetes cluster, from informer caches of Functions, SlessServices,
// Triggers and Knative Revisions: no apiserver call per request.
package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"knative.dev/networking/pkg/apis/networking/v1alpha1"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/routing"
)

// ErrNotSynced is what Resolve returns until the caches have their first
// full listing; the proxy answers 503 with Retry-After meanwhile.
var ErrNotSynced = errors.New("function cache not synced yet")

// Resolver is invoke.Resolver over informer caches. Event handlers keep a
// precomputed target per Function, a count of enabled http Triggers per
// Function, and the actual replicas of Knative Revisions, so Resolve is a
// map lookup under a read lock.
//
// What the proxy learns of a Function:
//   - Address: status.address, the Knative Service's cluster-local URL.
//   - Ready: status.address is set and either the Ready condition is True
//     for the current generation, or status.latestReadyRevision names a
//     revision that still serves while a newer generation rolls out.
//   - Timeout: spec.timeoutSeconds (30 s when unset).
//   - Revision: status.latestReadyRevision.
//   - Public: an enabled http Trigger in the namespace names the Function.
//   - Idle: the latest ready Revision reports zero actual replicas.
//   - Failed: the Ready reason, when the current generation failed and no
//     revision serves.
//
// A Function being deleted resolves as not found. SlessServices resolve
// the same way through Services, except that nothing makes one public.
type Resolver struct {
	mu        sync.RWMutex
	functions map[key]invoke.Target
	services  map[key]invoke.Target
	triggers  map[key]triggerRef // by the Trigger's own key
	public    map[key]int        // enabled http Triggers per Function key
	replicas  map[key]int32      // actual replicas per Revision key, when reported

	routes *routing.Table // nil without Options.IngressClass

	synced []toolscache.ResourceEventHandlerRegistration
}

type key struct{ ns, name string }

type triggerRef struct {
	function string
	public   bool
}

// Options tune New and Start.
type Options struct {
	// WatchRevisions watches Knative Revisions to tell cold starts (the
	// Revision reports zero replicas). It needs list and watch on
	// revisions.serving.knative.dev.
	WatchRevisions bool
	// IngressClass, when set, watches the Knative Ingresses of this
	// networking class (sless's is resources.ClassName of
	// pkg/reconciler/ingress) into Routes. It needs list and watch on
	// ingresses.networking.internal.knative.dev, and on the Services and
	// EndpointSlices of their backends (core and discovery.k8s.io).
	IngressClass string
	// Logger takes the Ingresses that cannot be routed, at debug level.
	// Default slog.Default().
	Logger *slog.Logger
	// SyncTimeout bounds Start's wait for the first listing. Default 2 min.
	SyncTimeout time.Duration
}

// New registers the resolver's event handlers with informers (a manager's
// cache, or one from Start). Resolve answers ErrNotSynced until the
// handlers have seen the first listing.
func New(ctx context.Context, informers cache.Informers, opts Options) (*Resolver, error) {
	r := &Resolver{
		functions: map[key]invoke.Target{},
		services:  map[key]invoke.Target{},
		triggers:  map[key]triggerRef{},
		public:    map[key]int{},
		replicas:  map[key]int32{},
	}
	setFunction, deleteFunction := targets(r, r.functions, TargetOf)
	setService, deleteService := targets(r, r.services, TargetOfService)
	watches := []struct {
		obj     client.Object
		set     func(any)
		deleted func(any)
	}{
		{&slessv1alpha1.Function{}, setFunction, deleteFunction},
		{&slessv1alpha1.Trigger{}, r.setTrigger, r.deleteTrigger},
		{&slessv1alpha1.SlessService{}, setService, deleteService},
	}
	if opts.WatchRevisions {
		watches = append(watches, struct {
			obj     client.Object
			set     func(any)
			deleted func(any)
		}{&servingv1.Revision{}, r.setRevision, r.deleteRevision})
	}
	if opts.IngressClass != "" {
		r.routes = &routing.Table{}
		g := &ingresses{class: opts.IngressClass, table: r.routes, log: opts.Logger}
		if g.log == nil {
			g.log = slog.Default()
		}
		watches = append(watches, struct {
			obj     client.Object
			set     func(any)
			deleted func(any)
		}{&v1alpha1.Ingress{}, g.set, g.deleted}, struct {
			obj     client.Object
			set     func(any)
			deleted func(any)
		}{&corev1.Service{}, g.setService, g.deletedService}, struct {
			obj     client.Object
			set     func(any)
			deleted func(any)
		}{&discoveryv1.EndpointSlice{}, g.setEndpoints, g.deletedEndpoints})
	}
	for _, w := range watches {
		inf, err := informers.GetInformer(ctx, w.obj)
		if err != nil {
			return nil, fmt.Errorf("informer for %T: %w", w.obj, err)
		}
		reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    w.set,
			UpdateFunc: func(_, obj any) { w.set(obj) },
			DeleteFunc: w.deleted,
		})
		if err != nil {
			return nil, err
		}
		r.synced = append(r.synced, reg)
	}
	return r, nil
}

// Start makes a cache of just the kinds the resolver reads and runs it
// until ctx ends. It returns once the cache is synced, or fails after
// Options.SyncTimeout. scheme must know sless's types (and Knative's, with
// WatchRevisions).
func Start(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, opts Options) (*Resolver, error) {
	c, err := cache.New(cfg, cache.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	r, err := New(ctx, c, opts)
	if err != nil {
		return nil, err
	}
	go func() { _ = c.Start(ctx) }()
	timeout := opts.SyncTimeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if !c.WaitForCacheSync(sctx) {
		return nil, fmt.Errorf("function cache did not sync within %s", timeout)
	}
	for !r.Synced() {
		select {
		case <-sctx.Done():
			return nil, fmt.Errorf("function cache did not sync within %s", timeout)
		case <-time.After(10 * time.Millisecond):
		}
	}
	return r, nil
}

// Synced reports whether every handler has seen its informer's first listing.
func (r *Resolver) Synced() bool {
	for _, s := range r.synced {
		if !s.HasSynced() {
			return false
		}
	}
	return true
}

// Resolve implements invoke.Resolver.
func (r *Resolver) Resolve(_ context.Context, namespace, name string) (invoke.Target, error) {
	if !r.Synced() {
		return invoke.Target{}, ErrNotSynced
	}
	k := key{namespace, name}
	r.mu.RLock()
	t, ok := r.functions[k]
	public := r.public[k] > 0
	replicas, known := r.replicas[key{namespace, t.Revision}]
	r.mu.RUnlock()
	if !ok {
		return invoke.Target{}, invoke.ErrNotFound
	}
	t.Public = public
	t.Idle = known && replicas == 0 && t.Revision != ""
	return t, nil
}

// ResolveTag implements invoke.TagResolver: the function's traffic target
// tagged tag, at the address Knative gave the tag.
func (r *Resolver) ResolveTag(_ context.Context, namespace, name, tag string) (invoke.Target, error) {
	if !r.Synced() {
		return invoke.Target{}, ErrNotSynced
	}
	k := key{namespace, name}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.tagged(r.functions, k, tag, r.public[k] > 0)
}

// tagged is the target tagged tag of the workload at k in m; call it
// with r.mu held.
func (r *Resolver) tagged(m map[key]invoke.Target, k key, tag string, public bool) (invoke.Target, error) {
	t, ok := m[k].Tagged[tag]
	if !ok {
		return invoke.Target{}, fmt.Errorf("%w: %s/%s has no traffic target tagged %s", invoke.ErrNotFound, k.ns, k.name, tag)
	}
	replicas, known := r.replicas[key{k.ns, t.Revision}]
	t.Public = public
	t.Idle = known && replicas == 0 && t.Revision != ""
	return t, nil
}

// Services resolves SlessServices, for invoke.Options.Services.
func (r *Resolver) Services() invoke.Resolver { return services{r} }

type services struct{ r *Resolver }

func (s services) Resolve(_ context.Context, namespace, name string) (invoke.Target, error) {
	r := s.r
	if !r.Synced() {
		return invoke.Target{}, ErrNotSynced
	}
	r.mu.RLock()
	t, ok := r.services[key{namespace, name}]
	replicas, known := r.replicas[key{namespace, t.Revision}]
	r.mu.RUnlock()
	if !ok {
		return invoke.Target{}, invoke.ErrNotFound
	}
	t.Idle = known && replicas == 0 && t.Revision != ""
	return t, nil
}

func (s services) ResolveTag(_ context.Context, namespace, name, tag string) (invoke.Target, error) {
	r := s.r
	if !r.Synced() {
		return invoke.Target{}, ErrNotSynced
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.tagged(r.services, key{namespace, name}, tag, false)
}

// TargetOfService is what the proxy needs of s, all but Idle; ok is false
// for a SlessService being deleted. Its status is a Function's, read alike.
func TargetOfService(s *slessv1alpha1.SlessService) (t invoke.Target, ok bool) {
	if s.DeletionTimestamp != nil {
		return invoke.Target{}, false
	}
	t = target(&s.Status, s.Timeout(), s.IsReady())
	if reason, _, failed := s.Failure(); failed && !t.Ready {
		t.Failed = reason
	}
	return t, true
}

// target reads the serving part of a Function's or SlessService's status.
func target(st *slessv1alpha1.FunctionStatus, timeoutSeconds int32, ready bool) (t invoke.Target) {
	t.Timeout = time.Duration(timeoutSeconds) * time.Second
	t.Revision = st.LatestReadyRevision
	if a := st.Address; a != "" {
		if u, err := url.Parse(a); err == nil && u.Host != "" && (u.Scheme == "http" || u.Scheme == "https") {
			t.Address = u
		}
	}
	t.Ready = t.Address != nil && (ready || t.Revision != "")
	for _, tt := range st.Traffic {
		if tt.Tag == "" {
			continue
		}
		tag := invoke.Target{Timeout: t.Timeout, Revision: tt.RevisionName}
		if u, err := url.Parse(tt.Address); err == nil && u.Host != "" && (u.Scheme == "http" || u.Scheme == "https") {
			tag.Address = u
		}
		tag.Ready = tag.Address != nil && tag.Revision != ""
		if t.Tagged == nil {
			t.Tagged = map[string]invoke.Target{}
		}
		t.Tagged[tt.Tag] = tag
	}
	return t
}

// TargetOf is what the proxy needs of fn, all but Public and Idle; ok is
// false for a Function being deleted.
func TargetOf(fn *slessv1alpha1.Function) (t invoke.Target, ok bool) {
	if fn.DeletionTimestamp != nil {
		return invoke.Target{}, false
	}
	t = target(&fn.Status, fn.Timeout(), fn.IsReady())
	if reason, _, failed := fn.Failure(); failed && !t.Ready {
		t.Failed = reason
	}
	return t, true
}

// object unwraps the tombstone a delete event may carry.
func object(obj any) any {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}

// targets returns the informer handlers that keep m, one of the
// resolver's maps, in step with the objects of kind T: target says where
// one is served, if anywhere.
func targets[T client.Object](r *Resolver, m map[key]invoke.Target, target func(T) (invoke.Target, bool)) (set, deleted func(any)) {
	set = func(obj any) {
		o, ok := object(obj).(T)
		if !ok {
			return
		}
		k := key{o.GetNamespace(), o.GetName()}
		t, exists := target(o)
		r.mu.Lock()
		defer r.mu.Unlock()
		if !exists {
			delete(m, k)
			return
		}
		m[k] = t
	}
	deleted = func(obj any) {
		o, ok := object(obj).(T)
		if !ok {
			return
		}
		r.mu.Lock()
		delete(m, key{o.GetNamespace(), o.GetName()})
		r.mu.Unlock()
	}
	return set, deleted
}

func (r *Resolver) setTrigger(obj any) {
	tr, ok := object(obj).(*slessv1alpha1.Trigger)
	if !ok {
		return
	}
	ref := triggerRef{
		function: tr.Spec.Function,
		public:   tr.Spec.Type == slessv1alpha1.TriggerTypeHTTP && tr.IsEnabled() && tr.DeletionTimestamp == nil,
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forgetTrigger(tr.Namespace, tr.Name)
	r.triggers[key{tr.Namespace, tr.Name}] = ref
	if ref.public {
		r.public[key{tr.Namespace, ref.function}]++
	}
}

func (r *Resolver) deleteTrigger(obj any) {
	tr, ok := object(obj).(*slessv1alpha1.Trigger)
	if !ok {
		return
	}
	r.mu.Lock()
	r.forgetTrigger(tr.Namespace, tr.Name)
	r.mu.Unlock()
}

// forgetTrigger takes back what a trigger contributed; r.mu is held.
func (r *Resolver) forgetTrigger(ns, name string) {
	old, ok := r.triggers[key{ns, name}]
	if !ok {
		return
	}
	delete(r.triggers, key{ns, name})
	if old.public {
		fk := key{ns, old.function}
		if r.public[fk]--; r.public[fk] <= 0 {
			delete(r.public, fk)
		}
	}
}

func (r *Resolver) setRevision(obj any) {
	rev, ok := object(obj).(*servingv1.Revision)
	if !ok {
		return
	}
	k := key{rev.Namespace, rev.Name}
	r.mu.Lock()
	defer r.mu.Unlock()
	if rev.Status.ActualReplicas == nil {
		delete(r.replicas, k)
		return
	}
	r.replicas[k] = *rev.Status.ActualReplicas
}

func (r *Resolver) deleteRevision(obj any) {
	rev, ok := object(obj).(*servingv1.Revision)
	if !ok {
		return
	}
	r.mu.Lock()
	delete(r.replicas, key{rev.Namespace, rev.Name})
	r.mu.Unlock()
}

var _ invoke.TagResolver = (*Resolver)(nil)
