package function

import (
	"context"
	"testing"
	"time"

	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"knative.dev/pkg/apis"
	duckv1 "knative.dev/pkg/apis/duck/v1"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// queue records what a handler adds, and how.
type queue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	now   []reconcile.Request
	after map[reconcile.Request]time.Duration
}

func (q *queue) Add(r reconcile.Request) { q.now = append(q.now, r) }
func (q *queue) AddAfter(r reconcile.Request, d time.Duration) {
	if q.after == nil {
		q.after = map[reconcile.Request]time.Duration{}
	}
	q.after[r] = d
}

func TestOwnedSettlingDelaysOnlyWorkInProgress(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := slessv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(slessv1alpha1.SchemeGroupVersion.WithKind("Function"), meta.RESTScopeNamespace)
	h := settling{EventHandler: handler.EnqueueRequestForOwner(scheme, mapper, &slessv1alpha1.Function{}, handler.OnlyControllerOwner()),
		window: time.Second}
	owner := []metav1.OwnerReference{{APIVersion: slessv1alpha1.SchemeGroupVersion.String(), Kind: "Function", Name: "fn",
		UID: "u1", Controller: ptr.To(true)}}
	want := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "fn"}}

	cond := func(typ apis.ConditionType, s corev1.ConditionStatus, reason string) duckv1.Status {
		if s == "" {
			return duckv1.Status{}
		}
		return duckv1.Status{Conditions: duckv1.Conditions{{Type: typ, Status: s, Reason: reason}}}
	}
	pr := func(s corev1.ConditionStatus, reason string) client.Object {
		p := &tektonv1.PipelineRun{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "fn-b1", OwnerReferences: owner}}
		p.Status.Status = cond(apis.ConditionSucceeded, s, reason)
		return p
	}
	ksvc := func(s corev1.ConditionStatus, reason string) client.Object {
		k := &servingv1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "fn", OwnerReferences: owner}}
		k.Status.Status = cond(servingv1.ServiceConditionReady, s, reason)
		return k
	}
	const U, T, F = corev1.ConditionUnknown, corev1.ConditionTrue, corev1.ConditionFalse
	for _, tc := range []struct {
		name     string
		old, new client.Object
		delayed  bool
	}{
		{"build started", pr("", ""), pr(U, "Started"), false},
		{"build running", pr(U, "Started"), pr(U, "Running"), true},
		{"build succeeded", pr(U, "Running"), pr(T, "Succeeded"), false},
		{"build failed", pr(U, "Running"), pr(F, "Failed"), false},
		{"finished build touched", pr(T, "Succeeded"), pr(T, "Succeeded"), false},
		{"service observed", ksvc("", ""), ksvc(U, "RevisionMissing"), false},
		{"service rolling out", ksvc(U, "RevisionMissing"), ksvc(U, "IngressNotConfigured"), true},
		{"service ready", ksvc(U, "IngressNotConfigured"), ksvc(T, ""), false},
		{"new revision asked for", ksvc(T, ""), ksvc(U, "RevisionMissing"), false},
		{"service failed", ksvc(U, "RevisionMissing"), ksvc(F, "RevisionFailed"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := &queue{}
			h.Update(context.Background(), crevent.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}, q)
			if tc.delayed {
				if len(q.now) != 0 || q.after[want] != time.Second {
					t.Errorf("added now %v, after %v; want %v after 1s only", q.now, q.after, want)
				}
				return
			}
			if len(q.now) != 1 || q.now[0] != want || len(q.after) != 0 {
				t.Errorf("added now %v, after %v; want %v now only", q.now, q.after, want)
			}
		})
	}

	t.Run("created and deleted at once", func(t *testing.T) {
		q := &queue{}
		h.Create(context.Background(), crevent.CreateEvent{Object: ksvc(U, "")}, q)
		h.Delete(context.Background(), crevent.DeleteEvent{Object: pr(U, "Running")}, q)
		if len(q.now) != 2 || len(q.after) != 0 {
			t.Errorf("added now %v, after %v; want both now", q.now, q.after)
		}
	})
}
