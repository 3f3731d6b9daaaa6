package local

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/invoke"
)

// Resolver is invoke.Resolver for local mode: which functions exist and
// which are public comes from an in-memory index the store's change events
// keep current (the informer cache of a cluster), where a function is served
// from the process server, whose Activate starts a stopped instance.
type Resolver struct {
	server *Server

	mu       sync.RWMutex
	fns      map[types.NamespacedName]time.Duration // timeout of each live function
	triggers map[types.NamespacedName]types.NamespacedName
	public   map[types.NamespacedName]int // enabled http triggers per function
	cancel   func()
}

var _ invoke.Resolver = (*Resolver)(nil)

// NewResolver indexes the functions and triggers in store and follows its
// changes. Make it before anything writes to the store.
func NewResolver(ctx context.Context, store *Store, server *Server) (*Resolver, error) {
	r := &Resolver{server: server, fns: map[types.NamespacedName]time.Duration{},
		triggers: map[types.NamespacedName]types.NamespacedName{}, public: map[types.NamespacedName]int{}}
	r.cancel = store.Subscribe(r.observe)
	fns := &unstructured.UnstructuredList{}
	fns.SetGroupVersionKind(slessv1alpha1.SchemeGroupVersion.WithKind("FunctionList"))
	if err := store.List(ctx, fns); err != nil {
		return nil, err
	}
	trs := &unstructured.UnstructuredList{}
	trs.SetGroupVersionKind(slessv1alpha1.SchemeGroupVersion.WithKind("TriggerList"))
	if err := store.List(ctx, trs); err != nil {
		return nil, err
	}
	for i := range fns.Items {
		r.observe(Event{Type: watch.Added, GVK: fns.Items[i].GroupVersionKind(), Key: nsName(&fns.Items[i]), Object: &fns.Items[i]})
	}
	for i := range trs.Items {
		r.observe(Event{Type: watch.Added, GVK: trs.Items[i].GroupVersionKind(), Key: nsName(&trs.Items[i]), Object: &trs.Items[i]})
	}
	return r, nil
}

// Close stops following the store.
func (r *Resolver) Close() { r.cancel() }

func (r *Resolver) observe(ev Event) {
	if ev.GVK.Group != slessv1alpha1.SchemeGroupVersion.Group {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch ev.GVK.Kind {
	case "Function":
		if ev.Type == watch.Deleted || ev.Object.GetDeletionTimestamp() != nil {
			delete(r.fns, ev.Key)
			return
		}
		timeout := int64(slessv1alpha1.DefaultTimeoutSeconds)
		if t, ok, _ := unstructured.NestedInt64(ev.Object.Object, "spec", "timeoutSeconds"); ok && t > 0 {
			timeout = t
		}
		r.fns[ev.Key] = time.Duration(timeout) * time.Second
	case "Trigger":
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
	timeout, ok := r.fns[key]
	public := r.public[key] > 0
	r.mu.RUnlock()
	if !ok {
		return invoke.Target{}, fmt.Errorf("%w: %s/%s", invoke.ErrNotFound, namespace, name)
	}
	t := invoke.Target{Timeout: timeout, Public: public}
	rev, running, serving := r.server.Serving(namespace, name)
	if !serving {
		return t, nil // not ready: 503 with Retry-After
	}
	t.Ready, t.Revision, t.Idle = true, rev, !running
	t.Activate = func(ctx context.Context) (invoke.Activation, error) {
		call, err := r.server.Activate(ctx, namespace, name)
		if err != nil {
			return invoke.Activation{}, err
		}
		return invoke.Activation{Address: call.URL, Cold: call.Cold, Done: call.Done}, nil
	}
	return t, nil
}
