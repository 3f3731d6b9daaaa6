package controller

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	toolscache "k8s.io/client-go/tools/cache"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/adapter/resources"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/test/testbed"
)

// The moments of a Function's way to Ready, as the bench's own watch sees
// them (object timestamps have whole seconds only; the watch's delay is the
// same for every stage).
const (
	created     = iota // the Function exists
	buildRef           // sless wrote status.buildRef: the build is started and told
	buildDone          // Tekton says the PipelineRun succeeded
	serviceMade        // the Knative Service exists
	deploying          // sless wrote status.image: the service is asked for and told
	serviceUp          // Knative says the Service is Ready for its generation
	ready              // sless says the Function is Ready
	moments
)

var momentNames = [moments]string{"created", "buildRef", "buildDone", "serviceMade", "deploying", "serviceUp", "ready"}

// stage is the time between two moments, and who it waits on.
type stage struct {
	name     string
	from, to int
	sless    bool
}

var stages = []stage{
	{"Function created → build started and told [sless]", created, buildRef, true},
	{"build started → build succeeded [Tekton + kubelet stand-in]", buildRef, buildDone, false},
	{"build succeeded → Knative Service created [sless]", buildDone, serviceMade, true},
	{"Knative Service created → Ready [Knative + stand-ins]", serviceMade, serviceUp, false},
	{"Knative Service Ready → Function Ready [sless]", serviceUp, ready, true},
}

// watcher records, per Function of one namespace, the first time it saw
// each moment.
type watcher struct {
	mu    sync.Mutex
	seen  map[string]*[moments]time.Time
	count [moments]int
	// changed is signalled on every new moment.
	changed chan struct{}
	stop    context.CancelFunc
}

func watch(ctx context.Context, k *testbed.Kube, ns string) (*watcher, error) {
	c, err := cache.New(k.Config, cache.Options{Scheme: k.Scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		return nil, err
	}
	w := &watcher{seen: map[string]*[moments]time.Time{}, changed: make(chan struct{}, 1)}
	for _, h := range []struct {
		obj client.Object
		see func(obj any)
	}{
		{&slessv1alpha1.Function{}, func(obj any) {
			fn, ok := obj.(*slessv1alpha1.Function)
			if !ok {
				return
			}
			w.mark(fn.Name, created)
			if fn.Status.BuildRef != "" {
				w.mark(fn.Name, buildRef)
			}
			if fn.Status.Image != "" {
				w.mark(fn.Name, deploying)
			}
			if fn.IsReady() {
				w.mark(fn.Name, ready)
			}
		}},
		{&tektonv1.PipelineRun{}, func(obj any) {
			pr, ok := obj.(*tektonv1.PipelineRun)
			if ok && pr.IsDone() && pr.IsSuccessful() {
				w.mark(pr.Labels[resources.LabelFunction], buildDone)
			}
		}},
		{&servingv1.Service{}, func(obj any) {
			svc, ok := obj.(*servingv1.Service)
			if !ok {
				return
			}
			w.mark(svc.Labels[resources.LabelFunction], serviceMade)
			if svc.IsReady() && svc.Status.LatestReadyRevisionName == svc.Spec.Template.Name {
				w.mark(svc.Labels[resources.LabelFunction], serviceUp)
			}
		}},
	} {
		inf, err := c.GetInformer(ctx, h.obj)
		if err != nil {
			return nil, err
		}
		see := h.see
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    see,
			UpdateFunc: func(_, obj any) { see(obj) },
		}); err != nil {
			return nil, err
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	w.stop = cancel
	go func() { _ = c.Start(cctx) }()
	if !c.WaitForCacheSync(ctx) {
		cancel()
		return nil, fmt.Errorf("watch of namespace %s did not sync", ns)
	}
	return w, nil
}

func (w *watcher) mark(fn string, m int) {
	if fn == "" {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.seen[fn]
	if s == nil {
		s = &[moments]time.Time{}
		w.seen[fn] = s
	}
	if !s[m].IsZero() {
		return
	}
	s[m] = now
	w.count[m]++
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// await waits until n Functions have reached moment m, and returns when
// the last did.
func (w *watcher) await(ctx context.Context, m, n int, timeout time.Duration) (time.Time, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		have := w.count[m]
		var last time.Time
		if have >= n {
			for _, s := range w.seen {
				if s[m].After(last) {
					last = s[m]
				}
			}
		}
		w.mu.Unlock()
		if have >= n {
			return last, nil
		}
		select {
		case <-w.changed:
		case <-deadline.C:
			return time.Time{}, fmt.Errorf("%d of %d Functions reached %q in %v", have, n, momentNames[m], timeout)
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
}

// latencies are a stage's durations over the Functions that went through
// both its moments in order.
type latencies []time.Duration

func (w *watcher) stage(s stage) latencies {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out latencies
	for _, m := range w.seen {
		if !m[s.from].IsZero() && !m[s.to].IsZero() {
			// A moment seen in the same event as the one before it (the
			// watch coalesces updates) took no time of its own.
			out = append(out, max(m[s.to].Sub(m[s.from]), 0))
		}
	}
	slices.Sort(out)
	return out
}

func (l latencies) quantile(q float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	return l[min(int(q*float64(len(l))), len(l)-1)]
}

func (l latencies) mean() time.Duration {
	if len(l) == 0 {
		return 0
	}
	var t time.Duration
	for _, d := range l {
		t += d
	}
	return t / time.Duration(len(l))
}
