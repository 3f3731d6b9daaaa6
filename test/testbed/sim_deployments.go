package testbed

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// DeploymentSim plays the status part of Kubernetes' Deployment controller,
// and the kubelet's readiness probes of its pods, against a test apiserver
// (which runs neither), in the namespaces given to Manage (tests elsewhere
// may write Deployment status themselves). For each apps/v1 Deployment
// there it writes the status a cluster would once the pods of the current
// template are created and pass their readiness probe or not, as
// SetReadiness says (they pass unless told). No ReplicaSet or Pod objects
// are made. The status has observedGeneration, replicas, updatedReplicas,
// readyReplicas, availableReplicas, unavailableReplicas and the Available
// and Progressing conditions with the controller's reasons. As in a rolling
// update, the pods of the previous template keep running (and count as
// available while they pass their probe) until the new ones are ready; a
// rollout that does not complete within spec.progressDeadlineSeconds is
// Progressing False ProgressDeadlineExceeded; and a rolled-out Deployment
// whose pods stop being ready stays Progressing True NewReplicaSetAvailable
// while its Available condition turns False.
type DeploymentSim struct {
	kube   *Kube
	cache  client.Reader
	cancel context.CancelFunc
	done   chan struct{}
	// kicks brings a Deployment back after SetReadiness.
	kicks chan event.GenericEvent

	mu        sync.Mutex
	managed   map[string]bool
	readiness map[types.NamespacedName]func(*corev1.PodTemplateSpec) bool
	rollouts  map[types.NamespacedName]*rollout
}

// rollout is what the simulator remembers of one Deployment between
// reconciles: the template its new pods run, the template and number of
// the pods before it that still run, and since when the rollout goes.
type rollout struct {
	uid       types.UID
	hash      string
	template  *corev1.PodTemplateSpec
	want      int32
	old       *corev1.PodTemplateSpec
	oldPods   int32
	rolledOut bool
	since     time.Time
}

var (
	deploymentsOnce   sync.Once
	deploymentsShared *DeploymentSim
	deploymentsErr    error
)

// SharedDeployments is the package's Deployment simulator on SharedKube,
// started on first use. Pods pass their readiness probe unless SetReady says not.
// It plays only in namespaces given to Manage.
func SharedDeployments(t testing.TB) *DeploymentSim {
	t.Helper()
	k := SharedKube(t)
	deploymentsOnce.Do(func() {
		deploymentsShared, deploymentsErr = StartDeploymentSim(k)
		if deploymentsErr == nil {
			sharedMu.Lock()
			atExit(deploymentsShared.Stop)
			sharedMu.Unlock()
		}
	})
	if deploymentsErr != nil {
		t.Fatalf("testbed: Deployment simulator: %v", deploymentsErr)
	}
	return deploymentsShared
}

// StartDeploymentSim starts a simulator on k; call Stop when done.
func StartDeploymentSim(k *Kube) (*DeploymentSim, error) {
	s := &DeploymentSim{kube: k, managed: map[string]bool{}, readiness: map[types.NamespacedName]func(*corev1.PodTemplateSpec) bool{}, rollouts: map[types.NamespacedName]*rollout{},
		kicks: make(chan event.GenericEvent, 64)}
	mgr, err := simManager(k)
	if err != nil {
		return nil, err
	}
	s.cache = mgr.GetClient()
	err = ctrl.NewControllerManagedBy(mgr).
		Named("sim-deployments").
		For(&appsv1.Deployment{}).
		WatchesRawSource(source.Channel(s.kicks, &handler.EnqueueRequestForObject{})).
		Complete(reconcile.Func(s.reconcile))
	if err != nil {
		return nil, err
	}
	return s, runManager(mgr, &s.cancel, &s.done)
}

// Stop ends the simulator.
func (s *DeploymentSim) Stop() {
	s.cancel()
	<-s.done
}

// Manage makes the simulator play the Deployment controller in namespace ns.
func (s *DeploymentSim) Manage(ns string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.managed[ns] = true
}

// SetReady says whether every pod of Deployment ns/name passes its
// readiness probe from now on (consumers that reach their broker, or not).
// It may be called before the Deployment is created.
func (s *DeploymentSim) SetReady(ns, name string, ready bool) {
	s.SetReadiness(ns, name, func(*corev1.PodTemplateSpec) bool { return ready })
}

// SetReadiness says, by the template a pod runs, whether the pods of
// Deployment ns/name pass their readiness probe from now on: the pods of a
// new template may fail while those of the one before still pass (a
// consumer given a queue it may not read), and updates the Deployment's
// status if it exists.
func (s *DeploymentSim) SetReadiness(ns, name string, ready func(*corev1.PodTemplateSpec) bool) {
	key := types.NamespacedName{Namespace: ns, Name: name}
	s.mu.Lock()
	s.readiness[key] = ready
	s.mu.Unlock()
	s.kicks <- event.GenericEvent{Object: &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}}
}

func (s *DeploymentSim) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	s.mu.Lock()
	managed := s.managed[req.Namespace]
	s.mu.Unlock()
	if !managed {
		return reconcile.Result{}, nil
	}
	d := &appsv1.Deployment{}
	if err := s.cache.Get(ctx, req.NamespacedName, d); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !d.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	var after time.Duration
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &appsv1.Deployment{}
		if err := s.kube.Client.Get(ctx, req.NamespacedName, cur); err != nil {
			return client.IgnoreNotFound(err)
		}
		before := cur.Status.DeepCopy()
		after = s.observe(cur)
		if equality.Semantic.DeepEqual(before, &cur.Status) {
			return nil
		}
		return s.kube.Client.Status().Update(ctx, cur)
	})
	return reconcile.Result{RequeueAfter: after}, err
}

// observe sets d's status from its spec and its pods' readiness, and
// returns when a rollout under way runs out of its deadline (0: none).
func (s *DeploymentSim) observe(d *appsv1.Deployment) time.Duration {
	key := types.NamespacedName{Namespace: d.Namespace, Name: d.Name}
	want := ptr.Deref(d.Spec.Replicas, 1)
	tmpl, _ := json.Marshal(d.Spec.Template)
	sum := sha256.Sum256(tmpl)
	hash := hex.EncodeToString(sum[:])[:10]
	now := time.Now()

	s.mu.Lock()
	defer s.mu.Unlock()
	ready := s.readiness[key]
	if ready == nil {
		ready = func(*corev1.PodTemplateSpec) bool { return true }
	}
	ro := s.rollouts[key]
	if ro == nil || ro.uid != d.UID {
		ro = &rollout{uid: d.UID}
		s.rollouts[key] = ro
	}
	if ro.hash != hash {
		// A new template: its pods start, and those of the one before keep
		// running until the new ones are ready (maxUnavailable 0 of one
		// replica), as a ReplicaSet scaled down only then.
		if ro.template != nil && ro.want > 0 {
			ro.old, ro.oldPods = ro.template, ro.want
		}
		ro.hash, ro.template, ro.rolledOut, ro.since = hash, d.Spec.Template.DeepCopy(), false, now
	}
	if ro.want != want {
		ro.want, ro.rolledOut, ro.since = want, false, now
	}
	var newAvailable, oldAvailable int32
	if ready(ro.template) {
		newAvailable = want
	}
	if newAvailable >= want {
		ro.old, ro.oldPods = nil, 0
	}
	if ro.old != nil && ready(ro.old) {
		oldAvailable = ro.oldPods
	}
	available := newAvailable + oldAvailable

	st := &d.Status
	st.ObservedGeneration = d.Generation
	st.Replicas = want + ro.oldPods
	st.UpdatedReplicas = want
	st.ReadyReplicas = available
	st.AvailableReplicas = available
	st.UnavailableReplicas = max(0, want-available)

	maxUnavailable := int32(0)
	if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType && want > 0 {
		mu := intstr.FromString("25%")
		if ru := d.Spec.Strategy.RollingUpdate; ru != nil && ru.MaxUnavailable != nil {
			mu = *ru.MaxUnavailable
		}
		v, _ := intstr.GetScaledValueFromIntOrPercent(&mu, int(want), false)
		maxUnavailable = int32(v)
	}
	if available >= want-maxUnavailable {
		setDeploymentCondition(st, appsv1.DeploymentAvailable, corev1.ConditionTrue, "MinimumReplicasAvailable", "Deployment has minimum availability.", now)
	} else {
		setDeploymentCondition(st, appsv1.DeploymentAvailable, corev1.ConditionFalse, "MinimumReplicasUnavailable", "Deployment does not have minimum availability.", now)
	}
	rs := d.Name + "-" + hash
	complete := st.UpdatedReplicas == want && st.Replicas == want && st.AvailableReplicas == want
	deadline := time.Duration(ptr.Deref(d.Spec.ProgressDeadlineSeconds, 600)) * time.Second
	switch {
	case complete:
		ro.rolledOut = true
		setDeploymentCondition(st, appsv1.DeploymentProgressing, corev1.ConditionTrue, "NewReplicaSetAvailable", fmt.Sprintf("ReplicaSet %q has successfully progressed.", rs), now)
	case ro.rolledOut:
		// Pods that stop being ready after the rollout are no rollout:
		// the controller leaves Progressing as it was.
	case now.Sub(ro.since) >= deadline:
		setDeploymentCondition(st, appsv1.DeploymentProgressing, corev1.ConditionFalse, "ProgressDeadlineExceeded", fmt.Sprintf("ReplicaSet %q has timed out progressing.", rs), now)
	default:
		setDeploymentCondition(st, appsv1.DeploymentProgressing, corev1.ConditionTrue, "ReplicaSetUpdated", fmt.Sprintf("ReplicaSet %q is progressing.", rs), now)
		return ro.since.Add(deadline).Sub(now)
	}
	return 0
}

// setDeploymentCondition sets a condition as the Deployment controller
// does: the transition time moves only when the status changes, the update
// time when anything does.
func setDeploymentCondition(st *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType, status corev1.ConditionStatus, reason, message string, now time.Time) {
	at := metav1.NewTime(now)
	for i := range st.Conditions {
		c := &st.Conditions[i]
		if c.Type != t {
			continue
		}
		if c.Status == status && c.Reason == reason && c.Message == message {
			return
		}
		if c.Status != status {
			c.LastTransitionTime = at
		}
		c.Status, c.Reason, c.Message, c.LastUpdateTime = status, reason, message, at
		return
	}
	st.Conditions = append(st.Conditions, appsv1.DeploymentCondition{Type: t, Status: status, Reason: reason, Message: message, LastUpdateTime: at, LastTransitionTime: at})
}
