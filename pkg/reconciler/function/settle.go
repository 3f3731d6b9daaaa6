package function

import (
	"context"
	"time"

	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
	"knative.dev/pkg/apis"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// SettleWindow is how long a reconcile asked for by an owned PipelineRun's
// or Knative Service's progress waits for the next step of it.
const SettleWindow = time.Second

// OwnedSettling is the handler of the PipelineRuns and Knative Services
// that owner's kind creates: as Owns' handler, except that an update
// which leaves the object working (its Succeeded or Ready condition
// Unknown before and after) reconciles after window. Tekton and Knative
// write their progress in bursts (started, running; revision created,
// address, route), each of which the Function's status would copy in a
// write of its own; the reconcile after the window copies the burst once.
// An object's creation, deletion and the end of its work are seen at once.
func OwnedSettling(mgr ctrl.Manager, owner client.Object, window time.Duration) handler.EventHandler {
	return settling{
		EventHandler: handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), owner, handler.OnlyControllerOwner()),
		window:       window,
	}
}

type settling struct {
	handler.EventHandler
	window time.Duration
}

func (s settling) Update(ctx context.Context, e crevent.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if working(e.ObjectOld) && working(e.ObjectNew) {
		q = delayed{TypedRateLimitingInterface: q, after: s.window}
	}
	s.EventHandler.Update(ctx, e, q)
}

// delayed adds what it is given after a while; the queue keeps one entry
// per request, so the adds of a burst make one reconcile.
type delayed struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	after time.Duration
}

func (d delayed) Add(r reconcile.Request) { d.AddAfter(r, d.after) }

// working says obj's work is under way: its condition that tells the end
// (Succeeded, Ready) is there and Unknown.
func working(obj client.Object) bool {
	var c *apis.Condition
	switch o := obj.(type) {
	case *tektonv1.PipelineRun:
		c = o.Status.GetCondition(apis.ConditionSucceeded)
	case *servingv1.Service:
		c = o.Status.GetCondition(servingv1.ServiceConditionReady)
	}
	return c != nil && c.Status == corev1.ConditionUnknown
}
