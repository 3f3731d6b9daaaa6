package function

import (
	"context"
	"fmt"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sless-dev/sless/pkg/adapter"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// Reasons of the Events the reconciler records on a Function, so that
// `kubectl describe function` tells what happened. Each marks a step taken
// or a transition of the status, never a reconcile that changed nothing.
const (
	EventBuildStarted   = "BuildStarted"
	EventBuildSucceeded = "BuildSucceeded"
	EventBuildFailed    = "BuildFailed"
	EventBuildCancelled = "BuildCancelled"
	EventServiceCreated = "ServiceCreated"
	EventServiceUpdated = "ServiceUpdated"
	EventReady          = "Ready"
	EventInternalError  = "InternalError"
)

// Actions of those Events (events.k8s.io requires one): what the
// controller was doing.
const (
	actionBuild     = "Build"
	actionServe     = "Serve"
	actionReconcile = "Reconcile"
)

// noteLimit is the apiserver's limit on an Event's note; a longer one is
// refused and the Event lost.
const noteLimit = 1024

// event is one Event to record on the Function.
type event struct {
	typ, reason, action, note string
	// transition marks an Event that tells a change of the status, told
	// only once that status is stored; the others tell a step taken (an
	// object created or updated), which happened whatever the write does.
	transition bool
	// build is the finished build a transition tells of. It goes to
	// BuildFinished with the Event, so that a status write lost to a
	// conflict, after which the next reconcile sees the same end again,
	// does not count the build twice.
	build *adapter.BuildState
}

// step is the Normal Event of a step taken.
func step(reason, action, format string, args ...any) event {
	return event{typ: corev1.EventTypeNormal, reason: reason, action: action, note: fmt.Sprintf(format, args...)}
}

// steps are the Events of evs that tell steps taken.
func steps(evs []event) []event {
	var out []event
	for _, e := range evs {
		if !e.transition {
			out = append(out, e)
		}
	}
	return out
}

// tell hands over what a reconcile found once its status is stored: the
// Events, and each build's end to BuildFinished.
func (r *Reconciler) tell(ctx context.Context, fn slessv1alpha1.Workload, evs []event) {
	r.record(fn, evs...)
	for _, e := range evs {
		if e.build == nil {
			continue
		}
		if r.BuildFinished != nil {
			r.BuildFinished(*e.build)
		}
		r.traceBuild(ctx, fn, *e.build)
	}
}

// record sends evs on fn's behalf. A nil Recorder records nothing: local
// mode has no Event API, and its REST API serves the same story as
// conditions.
func (r *Reconciler) record(fn slessv1alpha1.Workload, evs ...event) {
	if r.Recorder == nil {
		return
	}
	for _, e := range evs {
		r.Recorder.Eventf(fn, nil, e.typ, e.reason, e.action, "%s", truncate(e.note, noteLimit))
	}
}

// becameReady is the Ready Event when the status turned Ready: before it
// was not Ready (a new Function, a rollout, a recovery), now it is.
func becameReady(before, after *slessv1alpha1.FunctionStatus) []event {
	if meta.IsStatusConditionTrue(before.Conditions, slessv1alpha1.FunctionConditionReady) ||
		!meta.IsStatusConditionTrue(after.Conditions, slessv1alpha1.FunctionConditionReady) {
		return nil
	}
	note := "the function is ready"
	if after.LatestReadyRevision != "" {
		note = "revision " + after.LatestReadyRevision + " is ready and serves image " + after.Image
	}
	return []event{{typ: corev1.EventTypeNormal, reason: EventReady, action: actionServe, note: note, transition: true}}
}

// buildEnded is the Event of a build's outcome (the BuildSucceeded
// condition turning True or False for the build in buildRef).
func buildEnded(c metav1.Condition, bs adapter.BuildState) event {
	if c.Status == metav1.ConditionTrue {
		return event{typ: corev1.EventTypeNormal, reason: EventBuildSucceeded, action: actionBuild,
			note: "build " + bs.Name + " succeeded: image " + bs.Image, transition: true, build: &bs}
	}
	note := "build " + bs.Name + " failed (" + c.Reason + ")"
	if c.Message != "" {
		note += ": " + c.Message
	}
	return event{typ: corev1.EventTypeWarning, reason: EventBuildFailed, action: actionBuild, note: note, transition: true, build: &bs}
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "…"
	cut := n - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}
