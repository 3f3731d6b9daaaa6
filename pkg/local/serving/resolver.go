package serving

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/local/apiserver"
)

// Resolver is invoke.Resolver for local mode: which functions exist and
// which are public comes from an in-memory index the store's change events
// keep current (the informer cache of a cluster), where a function is served
// from the process server, whose Activate starts a stopped instance.
type Resolver struct {
	server *Server
	// kind is what it resolves: Function, or SlessService for /svc/.
	kind string

	mu       sync.RWMutex
	fns      map[types.NamespacedName]liveFunction // each live function
	triggers map[types.NamespacedName]types.NamespacedName
	public   map[types.NamespacedName]int // enabled http triggers per function
	cancel   func()
}

var _ invoke.TagResolver = (*Resolver)(nil)

// liveFunction is what the resolver keeps of a live Function.
type liveFunction struct {
	timeout time.Duration
	// failed is the Ready reason when its current generation failed.
	failed string
}

// NewResolver indexes the functions and triggers in store and follows its
// changes. Make it before anything writes to the store.
func NewResolver(ctx context.Context, store *apiserver.Store, server *Server) (*Resolver, error) {
	return newResolver(ctx, store, server, slessv1alpha1.KindFunction)
}

// NewServiceResolver is NewResolver for the SlessServices server runs, the
// proxy's /svc/ (its Options.Services). No Trigger makes a service public.
func NewServiceResolver(ctx context.Context, store *apiserver.Store, server *Server) (*Resolver, error) {
	return newResolver(ctx, store, server, slessv1alpha1.KindSlessService)
}

func newResolver(ctx context.Context, store *apiserver.Store, server *Server, kind string) (*Resolver, error) {
	r := &Resolver{server: server, kind: kind, fns: map[types.NamespacedName]liveFunction{},
		triggers: map[types.NamespacedName]types.NamespacedName{}, public: map[types.NamespacedName]int{}}
	r.cancel = store.Subscribe(r.observe)
	fns := &unstructured.UnstructuredList{}
	fns.SetGroupVersionKind(slessv1alpha1.SchemeGroupVersion.WithKind(kind + "List"))
	if err := store.List(ctx, fns); err != nil {
		return nil, err
	}
	trs := &unstructured.UnstructuredList{}
	trs.SetGroupVersionKind(slessv1alpha1.SchemeGroupVersion.WithKind("TriggerList"))
	if kind == slessv1alpha1.KindFunction {
		if err := store.List(ctx, trs); err != nil {
			return nil, err
		}
	}
	for i := range fns.Items {
		r.observe(apiserver.Event{Type: watch.Added, GVK: fns.Items[i].GroupVersionKind(), Key: client.ObjectKeyFromObject(&fns.Items[i]), Object: &fns.Items[i]})
	}
	for i := range trs.Items {
		r.observe(apiserver.Event{Type: watch.Added, GVK: trs.Items[i].GroupVersionKind(), Key: client.ObjectKeyFromObject(&trs.Items[i]), Object: &trs.Items[i]})
	}
	return r, nil
}

// Close stops following the store.
func (r *Resolver) Close() { r.cancel() }

func (r *Resolver) observe(ev apiserver.Event) {
	if ev.GVK.Group != slessv1alpha1.SchemeGroupVersion.Group {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch ev.GVK.Kind {
	case r.kind:
		if ev.Type == watch.Deleted || ev.Object.GetDeletionTimestamp() != nil {
			delete(r.fns, ev.Key)
			return
		}
		var fn slessv1alpha1.Workload = &slessv1alpha1.Function{}
		if r.kind == slessv1alpha1.KindSlessService {
			fn = &slessv1alpha1.SlessService{}
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(ev.Object.Object, fn); err != nil {
			// The store holds only objects that passed validation; keep
			// what the proxy needs most, that the function exists.
			r.fns[ev.Key] = liveFunction{timeout: slessv1alpha1.DefaultTimeoutSeconds * time.Second}
			return
		}
		reason, _, _ := fn.(interface{ Failure() (string, string, bool) }).Failure()
		r.fns[ev.Key] = liveFunction{timeout: time.Duration(fn.Timeout()) * time.Second, failed: reason}
	case "Trigger":
		if r.kind != slessv1alpha1.KindFunction {
			return
		}
		if old, ok := r.triggers[ev.Key]; ok {
			r.public[old]--
			if r.public[old] <= 0 {
				delete(r.public, old)
			}
			delete(r.triggers, ev.Key)
		}
		if ev.Type == watch.Deleted || ev.Object.GetDeletionTimestamp() != nil {
			return
		}
		typ, _, _ := unstructured.NestedString(ev.Object.Object, "spec", "type")
		fn, _, _ := unstructured.NestedString(ev.Object.Object, "spec", "function")
		enabled, found, _ := unstructured.NestedBool(ev.Object.Object, "spec", "enabled")
		if typ != string(slessv1alpha1.TriggerTypeHTTP) || fn == "" || (found && !enabled) {
			return
		}
		target := types.NamespacedName{Namespace: ev.Key.Namespace, Name: fn}
		r.triggers[ev.Key] = target
		r.public[target]++
	}
}

// Resolve tells the proxy how to reach a function. It reads memory only.
func (r *Resolver) Resolve(_ context.Context, namespace, name string) (invoke.Target, error) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	r.mu.RLock()
	fn, ok := r.fns[key]
	public := r.public[key] > 0
	r.mu.RUnlock()
	if !ok {
		return invoke.Target{}, fmt.Errorf("%w: %s/%s", invoke.ErrNotFound, namespace, name)
	}
	t := invoke.Target{Timeout: fn.timeout, Public: public}
	rev, running, serving := r.server.Serving(namespace, name)
	if !serving {
		t.Failed = fn.failed // not ready: 503, with Retry-After unless it failed
		return t, nil
	}
	t.Ready, t.Revision, t.Idle = true, rev, !running
	t.Activate = func(ctx context.Context) (invoke.Activation, error) {
		return activation(r.server.Activate(ctx, namespace, name))
	}
	return t, nil
}

// ResolveTag implements invoke.TagResolver: the revision of the traffic
// target tagged tag, started by Activate as any call's.
func (r *Resolver) ResolveTag(ctx context.Context, namespace, name, tag string) (invoke.Target, error) {
	t, err := r.Resolve(ctx, namespace, name)
	if err != nil {
		return t, err
	}
	if !r.server.HasTag(namespace, name, tag) {
		return invoke.Target{}, fmt.Errorf("%w: %s/%s has no traffic target tagged %s", invoke.ErrNotFound, namespace, name, tag)
	}
	t.Ready, t.Idle = true, false
	t.Activate = func(ctx context.Context) (invoke.Activation, error) {
		return activation(r.server.ActivateTag(ctx, namespace, name, tag))
	}
	return t, nil
}

// activation is what the proxy needs of a Call.
func activation(call *Call, err error) (invoke.Activation, error) {
	if err != nil {
		return invoke.Activation{}, err
	}
	return invoke.Activation{Address: call.URL, Revision: call.Revision, Cold: call.Cold, Done: call.Done, Lost: call.Lost}, nil
}
