package function_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/adapter/s3"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/reconciler/function"
	"github.com/sless-dev/sless/test/testbed"
)

// functionEvents are the Events the apiserver holds regarding Function
// name, oldest first.
func (w *world) functionEvents(name string) []eventsv1.Event {
	w.t.Helper()
	l := &eventsv1.EventList{}
	if err := w.kube.Client.List(context.Background(), l, client.InNamespace(w.ns)); err != nil {
		w.t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range l.Items {
		if e.Regarding.Kind == "Function" && e.Regarding.Name == name {
			out = append(out, e)
		}
	}
	// Events of one reconcile may share a microsecond of eventTime; their
	// names carry the nanosecond they were made.
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].EventTime.Equal(&out[j].EventTime) {
			return out[i].EventTime.Before(&out[j].EventTime)
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// waitEvent awaits the Event of reason regarding Function name.
func (w *world) waitEvent(name, reason string) eventsv1.Event {
	w.t.Helper()
	var found eventsv1.Event
	w.eventually("Event "+reason+" of Function "+name, func() (bool, string) {
		evs := w.functionEvents(name)
		for _, e := range evs {
			if e.Reason == reason {
				found = e
				return true, ""
			}
		}
		return false, summary(evs)
	})
	return found
}

func summary(evs []eventsv1.Event) string {
	var parts []string
	for _, e := range evs {
		n := int32(1)
		if e.Series != nil {
			n = e.Series.Count
		}
		parts = append(parts, fmt.Sprintf("%s %s ×%d %q", e.Type, e.Reason, n, e.Note))
	}
	return "[" + strings.Join(parts, "; ") + "]"
}

func reasons(evs []eventsv1.Event) string {
	var rs []string
	for _, e := range evs {
		rs = append(rs, e.Reason)
	}
	return strings.Join(rs, ",")
}

// checkEvent fails unless e is an Event of the Function controller of type
// typ whose note holds each of parts.
func checkEvent(t *testing.T, e eventsv1.Event, typ, action string, parts ...string) {
	t.Helper()
	if e.Type != typ || e.Action != action || e.ReportingController != function.RecorderName || e.Series != nil {
		t.Errorf("%s: type %s action %s controller %s series %+v; want %s, %s, %s, no series",
			e.Reason, e.Type, e.Action, e.ReportingController, e.Series, typ, action, function.RecorderName)
	}
	for _, p := range parts {
		if !strings.Contains(e.Note, p) {
			t.Errorf("%s note %q lacks %q", e.Reason, e.Note, p)
		}
	}
}

// A Function built and served tells each step once, in order; a reconcile
// that changes nothing tells nothing; a rollout of a new revision tells
// the update and the new Ready.
func TestEventsBuildAndServe(t *testing.T) {
	w := newWorld(t)
	w.tekton.SetPolicy(w.ns, testbed.BuildPolicy{Mode: testbed.BuildHold})
	w.knative.SetPolicy(w.ns, testbed.ServePolicy{Mode: testbed.ServeHold})
	w.startController()
	ctx := context.Background()
	w.create(pythonFunction(w.ns, "told", `1`))

	building := w.waitPhase("told", slessv1alpha1.FunctionPhaseBuilding)
	started := w.waitEvent("told", function.EventBuildStarted)
	checkEvent(t, started, corev1.EventTypeNormal, "Build", building.Status.BuildRef, building.Status.SourceDigest)

	if err := w.tekton.Succeed(ctx, w.ns, building.Status.BuildRef); err != nil {
		t.Fatal(err)
	}
	deploying := w.waitPhase("told", slessv1alpha1.FunctionPhaseDeploying)
	checkEvent(t, w.waitEvent("told", function.EventBuildSucceeded), corev1.EventTypeNormal, "Build", building.Status.BuildRef, deploying.Status.Image)
	checkEvent(t, w.waitEvent("told", function.EventServiceCreated), corev1.EventTypeNormal, "Serve", "told-00001", deploying.Status.Image)

	if err := w.knative.Ready(ctx, w.ns, "told"); err != nil {
		t.Fatal(err)
	}
	w.waitReady("told")
	checkEvent(t, w.waitEvent("told", function.EventReady), corev1.EventTypeNormal, "Serve", "told-00001")
	evs := w.functionEvents("told")
	if got, want := reasons(evs), "BuildStarted,BuildSucceeded,ServiceCreated,Ready"; got != want {
		t.Errorf("Events %s, want %s: %s", got, want, summary(evs))
	}

	// A reconcile that changes nothing (the Service's watch fires for a
	// label sless does not set) tells nothing.
	handed := w.recorder.n.Load()
	n := reconcileCount(t)
	svc, err := w.service("told")
	if err != nil {
		t.Fatal(err)
	}
	svc.Labels["team"] = "blue"
	if err := w.kube.Client.Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	w.eventually("a reconcile caused by the Service change", func() (bool, string) {
		return reconcileCount(t) > n, "no reconcile yet"
	})
	if got := w.recorder.n.Load(); got != handed {
		t.Errorf("%d Events recorded by a reconcile that changed nothing", got-handed)
	}
	if after := w.functionEvents("told"); summary(after) != summary(evs) {
		t.Errorf("Events changed:\n%s\nwas\n%s", summary(after), summary(evs))
	}

	// A new revision tells the update, and Ready again once it serves.
	w.update("told", func(fn *slessv1alpha1.Function) { fn.Spec.Env = []slessv1alpha1.EnvVar{{Name: "A", Value: "1"}} })
	checkEvent(t, w.waitEvent("told", function.EventServiceUpdated), corev1.EventTypeNormal, "Serve", "told-00002", deploying.Status.Image)
	if err := w.knative.Ready(ctx, w.ns, "told"); err != nil {
		t.Fatal(err)
	}
	w.eventually("a second Ready Event", func() (bool, string) {
		evs = w.functionEvents("told")
		return reasons(evs) == "BuildStarted,BuildSucceeded,ServiceCreated,Ready,ServiceUpdated,Ready", summary(evs)
	})
	checkEvent(t, evs[len(evs)-1], corev1.EventTypeNormal, "Serve", "told-00002")
}

// A failed build is a Warning that carries the reason and message the
// build gave, and nothing is served.
func TestEventsBuildFailed(t *testing.T) {
	w := newWorld(t)
	msg := "error building image: pip: No matching distribution found for nosuchpkg"
	w.tekton.SetPolicy(w.ns, testbed.BuildPolicy{Mode: testbed.BuildFail, Message: msg})
	w.startController()
	w.create(pythonFunction(w.ns, "broken", `1`))
	failed := w.waitPhase("broken", slessv1alpha1.FunctionPhaseFailed)
	ev := w.waitEvent("broken", function.EventBuildFailed)
	checkEvent(t, ev, corev1.EventTypeWarning, "Build", failed.Status.BuildRef, "(Failed)", msg)
	evs := w.functionEvents("broken")
	if got, want := reasons(evs), "BuildStarted,BuildFailed"; got != want {
		t.Errorf("Events %s, want %s: %s", got, want, summary(evs))
	}
}

// An error a retry may fix (here: the bucket is missing) is a Warning
// InternalError with the error, repeats of it one Event's series.
func TestEventsInternalError(t *testing.T) {
	w := newWorld(t)
	store, err := s3.New(s3.Config{Endpoint: "http://" + w.s3srv.Endpoint, Region: w.s3srv.Region, Bucket: w.bucket + "-missing",
		AccessKey: w.s3srv.AccessKey, SecretKey: w.s3srv.SecretKey, PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	w.store = store
	w.startController()
	w.create(pythonFunction(w.ns, "stuck", `1`))
	ev := w.waitEvent("stuck", function.EventInternalError)
	if ev.Type != corev1.EventTypeWarning || ev.Action != "Reconcile" || !strings.Contains(ev.Note, "store build context "+w.ns+"/stuck/") {
		t.Errorf("InternalError %s %s %q", ev.Type, ev.Action, ev.Note)
	}
	// The controller retries with backoff; the apiserver sees one Event
	// whose series counts the repeats.
	w.eventually("a series of InternalError", func() (bool, string) {
		evs := w.functionEvents("stuck")
		return len(evs) == 1 && evs[0].Series != nil && evs[0].Series.Count >= 2, summary(evs)
	})
}
