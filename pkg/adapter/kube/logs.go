package kube

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/sless-dev/sless/pkg/adapter/resources"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/logs"
	"github.com/sless-dev/sless/pkg/names"
)

// Labels and containers the logs are found by: Knative's on the pods of
// a Service's revisions, Tekton's on the pod of a PipelineRun's TaskRun.
const (
	LabelKnativeService = "serving.knative.dev/service"
	LabelTektonRun      = "tekton.dev/pipelineRun"
	UserContainer       = "user-container"
	stepContainerPrefix = "step-"
)

// Logs is logs.Source on a cluster: Pod logs through the apiserver, read
// with timestamps so that since, tail and the merge of several pods go by
// the kubelet's times.
type Logs struct {
	Pods corev1client.PodsGetter
}

var _ logs.Source = (*Logs)(nil)

// Function reads the user-container of the pods of fn's Knative Service.
// Following, it also reads pods that start meanwhile (a scale from zero);
// Tail then applies per pod, as with kubectl logs -f -l.
func (l *Logs) Function(ctx context.Context, fn slessv1alpha1.Workload, q logs.Query, emit logs.Emit) error {
	sel := LabelKnativeService + "=" + names.Service(fn)
	list, err := l.Pods.Pods(fn.GetNamespace()).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return fmt.Errorf("list pods of %s: %w", fn.GetName(), err)
	}
	pods := list.Items
	sort.SliceStable(pods, func(i, j int) bool { return pods[i].CreationTimestamp.Before(&pods[j].CreationTimestamp) })
	if !q.Follow {
		var all []logs.Line
		for i := range pods {
			if !started(&pods[i], UserContainer) {
				continue
			}
			lines, err := l.read(ctx, &pods[i], UserContainer, pods[i].Name, q)
			if err != nil {
				return err
			}
			all = append(all, lines...)
		}
		// Each pod's lines are in order; merged by time they read as one log.
		sort.SliceStable(all, func(i, j int) bool { return all[i].Time.Before(all[j].Time) })
		return emitAll(logs.Tail(all, q.Tail), emit)
	}

	f := &follower{l: l, q: q, emit: emit, seen: map[string]bool{}}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	for i := range pods {
		f.start(ctx, cancel, &pods[i])
	}
	w, err := l.Pods.Pods(fn.GetNamespace()).Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: list.ResourceVersion})
	if err != nil {
		return fmt.Errorf("watch pods of %s: %w", fn.GetName(), err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			f.wg.Wait()
			if err := context.Cause(ctx); !errors.Is(err, context.Canceled) {
				return err
			}
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				// The watch ended (the apiserver's timeout): carry on
				// following the pods already read, and stop looking for new.
				<-ctx.Done()
				continue
			}
			if pod, isPod := ev.Object.(*corev1.Pod); isPod && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				f.start(ctx, cancel, pod)
			}
		}
	}
}

// follower streams the pods of one Function call, one goroutine each,
// their lines passed to emit one at a time.
type follower struct {
	l    *Logs
	q    logs.Query
	emit logs.Emit
	mu   sync.Mutex
	seen map[string]bool
	wg   sync.WaitGroup
}

func (f *follower) start(ctx context.Context, cancel context.CancelCauseFunc, pod *corev1.Pod) {
	if !started(pod, UserContainer) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen[string(pod.UID)] {
		return
	}
	f.seen[string(pod.UID)] = true
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		err := f.l.stream(ctx, pod, UserContainer, pod.Name, f.q, func(line logs.Line) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.emit(line)
		})
		if err != nil && ctx.Err() == nil {
			cancel(err)
		}
	}()
}

// Build reads the step containers of the pod of fn's build, step after
// step. Following, it waits for each step to start and ends when the last
// one does.
func (l *Logs) Build(ctx context.Context, fn slessv1alpha1.Workload, build string, q logs.Query, emit logs.Emit) error {
	sel := LabelTektonRun + "=" + build + "," + resources.OwnerLabel(fn) + "=" + fn.GetName()
	list, err := l.Pods.Pods(fn.GetNamespace()).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return fmt.Errorf("list pods of build %s: %w", build, err)
	}
	if len(list.Items) == 0 {
		return fmt.Errorf("%w: no pod of build %s of %s (it has not started, or it was removed)", logs.ErrNotFound, build, fn.GetName())
	}
	pod := &list.Items[0]
	var steps []string
	for _, c := range pod.Spec.Containers {
		if strings.HasPrefix(c.Name, stepContainerPrefix) {
			steps = append(steps, c.Name)
		}
	}
	if !q.Follow {
		var all []logs.Line
		for _, step := range steps {
			if !started(pod, step) {
				break
			}
			lines, err := l.read(ctx, pod, step, strings.TrimPrefix(step, stepContainerPrefix), q)
			if err != nil {
				return err
			}
			all = append(all, lines...)
		}
		return emitAll(logs.Tail(all, q.Tail), emit)
	}
	for _, step := range steps {
		if pod, err = l.await(ctx, pod, func(p *corev1.Pod) bool { return started(p, step) || podDone(p) }); err != nil {
			return err
		}
		if !started(pod, step) {
			return nil // the pod ended before this step ran
		}
		if err := l.stream(ctx, pod, step, strings.TrimPrefix(step, stepContainerPrefix), q, emit); err != nil {
			return err
		}
	}
	return nil
}

// await watches pod until cond holds of it.
func (l *Logs) await(ctx context.Context, pod *corev1.Pod, cond func(*corev1.Pod) bool) (*corev1.Pod, error) {
	if cond(pod) {
		return pod, nil
	}
	pods := l.Pods.Pods(pod.Namespace)
	for {
		w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", pod.Name).String(),
			ResourceVersion: pod.ResourceVersion})
		if err != nil {
			return nil, fmt.Errorf("watch pod %s: %w", pod.Name, err)
		}
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if ev.Type == watch.Deleted {
				w.Stop()
				return p, nil
			}
			pod = p
			if cond(pod) {
				w.Stop()
				return pod, nil
			}
		}
		w.Stop()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// The watch timed out: watch again from where it was.
	}
}

func (l *Logs) options(container string, q logs.Query, follow bool) *corev1.PodLogOptions {
	o := &corev1.PodLogOptions{Container: container, Timestamps: true, Follow: follow}
	if !q.Since.IsZero() {
		t := metav1.NewTime(q.Since)
		o.SinceTime = &t
	}
	// Filtered by invocation, the last N lines of the pod may hold none of
	// the call's: the cut is made here.
	if q.Tail >= 0 && q.Invocation == "" {
		n := int64(q.Tail)
		o.TailLines = &n
	}
	return o
}

// read reads a container's log as it stands.
func (l *Logs) read(ctx context.Context, pod *corev1.Pod, container, from string, q logs.Query) ([]logs.Line, error) {
	var out []logs.Line
	err := l.stream(ctx, pod, container, from, logs.Query{Since: q.Since, Tail: q.Tail, Invocation: q.Invocation}, func(line logs.Line) error {
		out = append(out, line)
		return nil
	})
	return out, err
}

// stream sends a container's lines that q keeps; following, until the
// container ends or ctx does.
func (l *Logs) stream(ctx context.Context, pod *corev1.Pod, container, from string, q logs.Query, emit logs.Emit) error {
	rc, err := l.Pods.Pods(pod.Namespace).GetLogs(pod.Name, l.options(container, q, q.Follow)).Stream(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("logs of %s/%s: %w", pod.Name, container, err)
	}
	defer rc.Close()
	rd := bufio.NewReaderSize(rc, 64<<10)
	for {
		line, err := rd.ReadString('\n')
		if line != "" {
			t, text := logs.ParseStamped(strings.TrimSuffix(line, "\n"))
			l := logs.Line{Time: t, Text: text, From: from}
			// The kubelet cut by tail and since; the invocation is cut here.
			if q.Keep(l) {
				if err := emit(l); err != nil {
					return err
				}
			}
		}
		if err == io.EOF || (err != nil && ctx.Err() != nil) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("logs of %s/%s: %w", pod.Name, container, err)
		}
	}
}

func emitAll(lines []logs.Line, emit logs.Emit) error {
	for _, l := range lines {
		if err := emit(l); err != nil {
			return err
		}
	}
	return nil
}

// started tells whether the container has run: only then has it a log.
func started(pod *corev1.Pod, container string) bool {
	i := slices.IndexFunc(pod.Status.ContainerStatuses, func(s corev1.ContainerStatus) bool { return s.Name == container })
	if i < 0 {
		return false
	}
	s := pod.Status.ContainerStatuses[i]
	return s.State.Running != nil || s.State.Terminated != nil || s.LastTerminationState.Terminated != nil
}

func podDone(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed || pod.DeletionTimestamp != nil
}
