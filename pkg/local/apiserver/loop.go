package apiserver

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Loop drives a reconcile.Reconciler from the store's change events, as
// controller-runtime drives it from informers on a cluster: every change of
// an object of the watched kind queues its key; workers call Reconcile; an
// error requeues with backoff, Result.RequeueAfter after that delay. The same
// key is never reconciled twice at once, and keys queued while in flight are
// reconciled once more afterwards.
type Loop struct {
	name       string
	gvk        schema.GroupKind
	reconciler reconcile.Reconciler
	queue      workqueue.TypedRateLimitingInterface[reconcile.Request]
	log        *slog.Logger
	// OnDeleted, when set, is called with each key whose object left the
	// store (the cleanup Kubernetes garbage collection does on a cluster).
	OnDeleted func(types.NamespacedName)

	cancel func()
	wg     sync.WaitGroup
}

// NewLoop watches kind gk in store for r. Start it with Run.
func NewLoop(name string, store *Store, gk schema.GroupKind, r reconcile.Reconciler, log *slog.Logger) *Loop {
	if log == nil {
		log = slog.Default()
	}
	l := &Loop{
		name: name, gvk: gk, reconciler: r, log: log,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](50*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{Name: name}),
	}
	l.cancel = store.Subscribe(func(ev Event) {
		if ev.GVK.GroupKind() != l.gvk {
			return
		}
		if ev.Type == watch.Deleted && l.OnDeleted != nil {
			l.OnDeleted(ev.Key)
		}
		l.queue.Add(reconcile.Request{NamespacedName: ev.Key})
	})
	return l
}

// Enqueue asks for a reconcile of one object (an adapter saw its build or
// service change).
func (l *Loop) Enqueue(namespace, name string) {
	l.queue.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}})
}

// Run reconciles with workers goroutines until ctx ends, after queueing
// every object already stored (a restart picks up where it stopped).
func (l *Loop) Run(ctx context.Context, existing []types.NamespacedName, workers int) {
	for _, k := range existing {
		l.queue.Add(reconcile.Request{NamespacedName: k})
	}
	for i := 0; i < max(workers, 1); i++ {
		l.wg.Add(1)
		go l.work(ctx)
	}
	<-ctx.Done()
	l.cancel()
	l.queue.ShutDown()
	l.wg.Wait()
}

func (l *Loop) work(ctx context.Context) {
	defer l.wg.Done()
	for {
		req, shutdown := l.queue.Get()
		if shutdown {
			return
		}
		res, err := l.reconcileOne(ctx, req)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				l.log.Warn("reconcile failed; retrying", "controller", l.name, "object", req.String(), "error", err)
			}
			l.queue.AddRateLimited(req)
		case res.RequeueAfter > 0:
			l.queue.Forget(req)
			l.queue.AddAfter(req, res.RequeueAfter)
		case res.Requeue: //nolint:staticcheck // still part of reconcile.Result
			l.queue.AddRateLimited(req)
		default:
			l.queue.Forget(req)
		}
		l.queue.Done(req)
	}
}

func (l *Loop) reconcileOne(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("reconcile panicked: %v", p)
		}
	}()
	return l.reconciler.Reconcile(ctx, req)
}
