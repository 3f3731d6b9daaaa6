package testbed

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"knative.dev/networking/pkg/apis/networking"
	networkingv1alpha1 "knative.dev/networking/pkg/apis/networking/v1alpha1"
	autoscalingv1alpha1 "knative.dev/serving/pkg/apis/autoscaling/v1alpha1"
	"knative.dev/serving/pkg/apis/serving"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ingressresources "github.com/sless-dev/sless/pkg/reconciler/ingress/resources"
)

// The stand-ins play what cannot run here, and only that: Knative's
// autoscaler (it scrapes pods, and no pod runs), the networking layer's
// ingress (Kourier or Istio, which program proxies), and the kubelet of
// Tekton's build pods (which runs containers). Each writes the status its
// real counterpart writes, through the upstream types' own methods.
type standIns struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// IngressDomain is the in-cluster name the ingress stand-in reports as the
// load balancer of every Knative Ingress.
const IngressDomain = "testbed-ingress.knative-serving.svc.cluster.local"

func startStandIns(k *Kube) (*standIns, *Kubelet, error) {
	scheme := NewScheme()
	for _, add := range []func(*runtime.Scheme) error{autoscalingv1alpha1.AddToScheme, networkingv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, nil, err
		}
	}
	mgr, err := simManager(&Kube{Config: k.Config, Scheme: scheme})
	if err != nil {
		return nil, nil, err
	}
	c := mgr.GetClient()
	kubelet := &Kubelet{client: c, policies: map[string]KubeletPolicy{}}
	for _, r := range []struct {
		name string
		obj  client.Object
		do   reconcile.Func
	}{
		{"standin-autoscaler", &autoscalingv1alpha1.PodAutoscaler{}, func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			return reconcile.Result{}, scalePodAutoscaler(ctx, c, req)
		}},
		{"standin-ingress", &networkingv1alpha1.Ingress{}, func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			return reconcile.Result{}, readyIngress(ctx, c, req)
		}},
		{"standin-kubelet", &corev1.Pod{}, kubelet.reconcile},
	} {
		if err := ctrl.NewControllerManagedBy(mgr).Named(r.name).For(r.obj).Complete(r.do); err != nil {
			return nil, nil, err
		}
	}
	s := &standIns{}
	if err := runManager(mgr, &s.cancel, &s.done); err != nil {
		return nil, nil, err
	}
	return s, kubelet, nil
}

func (s *standIns) stop() {
	s.cancel()
	<-s.done
}

// scalePodAutoscaler reports what Knative's autoscaler reports once the
// revision's one pod is up: scaled to 1 and active, or to 0 once routing
// made the revision unreachable (a retired revision scales to zero
// whatever its min-scale).
func scalePodAutoscaler(ctx context.Context, c client.Client, req reconcile.Request) error {
	pa := &autoscalingv1alpha1.PodAutoscaler{}
	if err := c.Get(ctx, req.NamespacedName, pa); err != nil {
		return client.IgnoreNotFound(err)
	}
	st := pa.Status.DeepCopy()
	st.InitializeConditions()
	scale := int32(1)
	if pa.Spec.Reachability == autoscalingv1alpha1.ReachabilityUnreachable {
		scale = 0
	}
	st.ObservedGeneration = pa.Generation
	st.ServiceName, st.MetricsServiceName = pa.Name, pa.Name+"-private"
	st.DesiredScale, st.ActualScale = &scale, &scale
	st.MarkScaleTargetInitialized()
	st.MarkSKSReady()
	if scale > 0 {
		st.MarkActive()
	} else {
		st.MarkInactive("NoTraffic", "The target is not receiving traffic.")
	}
	if equality.Semantic.DeepEqual(st, &pa.Status) {
		return nil
	}
	pa.Status = *st
	return c.Status().Update(ctx, pa)
}

// readyIngress reports what a networking layer reports once it has
// programmed its proxies for the Ingress.
func readyIngress(ctx context.Context, c client.Client, req reconcile.Request) error {
	ing := &networkingv1alpha1.Ingress{}
	if err := c.Get(ctx, req.NamespacedName, ing); err != nil {
		return client.IgnoreNotFound(err)
	}
	if ing.Annotations[networking.IngressClassAnnotationKey] == ingressresources.ClassName {
		return nil // sless's own class: its reconciler reports these
	}
	st := ing.Status.DeepCopy()
	st.InitializeConditions()
	st.ObservedGeneration = ing.Generation
	lb := []networkingv1alpha1.LoadBalancerIngressStatus{{DomainInternal: IngressDomain}}
	st.MarkLoadBalancerReady(lb, lb)
	st.MarkNetworkConfigured()
	if equality.Semantic.DeepEqual(st, &ing.Status) {
		return nil
	}
	ing.Status = *st
	return c.Status().Update(ctx, ing)
}

// StepOutcome is how one step of a build pod ends: its exit code and the
// results it wrote to /tekton/results.
type StepOutcome struct {
	ExitCode int32
	Results  map[string]string
}

// KubeletPolicy is how the kubelet stand-in runs the build pods of one
// namespace.
type KubeletPolicy struct {
	// Hold leaves pods Running until the policy changes.
	Hold bool
	// Step runs one step container; nil runs sless's build (KanikoStep).
	Step func(pod *corev1.Pod, step corev1.Container) StepOutcome
}

// Kubelet plays the kubelet for the Pods Tekton makes: it runs each
// step container in order (through the policy's Step) and writes what the
// node would: the containers' terminated states with the termination
// message Tekton's entrypoint writes (StartedAt, results), and the pod's
// phase. Other pods are left alone.
type Kubelet struct {
	client client.Client

	mu       sync.Mutex
	policies map[string]KubeletPolicy
}

// SetPolicy sets how build pods of namespace ns run from now on; pods
// already finished keep their status.
func (k *Kubelet) SetPolicy(ns string, p KubeletPolicy) {
	k.mu.Lock()
	k.policies[ns] = p
	k.mu.Unlock()
}

func (k *Kubelet) policy(ns string) KubeletPolicy {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.policies[ns]
}

// tektonTimeFormat is how Tekton's entrypoint writes StartedAt.
const tektonTimeFormat = "2006-01-02T15:04:05.000Z07:00"

// Termination message result types of Tekton's entrypoint.
const (
	resultTypeTask     = 1
	resultTypeInternal = 3
)

func (k *Kubelet) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pod := &corev1.Pod{}
	if err := k.client.Get(ctx, req.NamespacedName, pod); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if pod.Labels["tekton.dev/taskRun"] == "" || !pod.DeletionTimestamp.IsZero() ||
		pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return reconcile.Result{}, nil
	}
	p := k.policy(pod.Namespace)
	now := metav1.Now()
	st := corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &now, HostIP: "127.0.0.1", PodIP: "127.0.0.1"}
	if pod.Status.StartTime != nil {
		st.StartTime = pod.Status.StartTime
	}
	for _, c := range pod.Spec.InitContainers {
		st.InitContainerStatuses = append(st.InitContainerStatuses, terminated(c, 0, "Completed", "", now))
	}
	if p.Hold {
		for _, c := range pod.Spec.Containers {
			st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: true,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}})
		}
	} else {
		run := p.Step
		if run == nil {
			run = KanikoStep
		}
		st.Phase = corev1.PodSucceeded
		for _, c := range pod.Spec.Containers {
			msg := []map[string]any{{"key": "StartedAt", "value": now.UTC().Format(tektonTimeFormat), "type": resultTypeInternal}}
			if st.Phase == corev1.PodFailed {
				// Tekton's entrypoint skips the steps after a failed one.
				msg = append(msg, map[string]any{"key": "Reason", "value": "Skipped", "type": resultTypeInternal})
				st.ContainerStatuses = append(st.ContainerStatuses, terminated(c, 1, "Error", jsonText(msg), now))
				continue
			}
			out := run(pod, c)
			for _, name := range slices.Sorted(maps.Keys(out.Results)) {
				msg = append(msg, map[string]any{"key": name, "value": out.Results[name], "type": resultTypeTask})
			}
			reason := "Completed"
			if out.ExitCode != 0 {
				st.Phase, reason = corev1.PodFailed, "Error"
			}
			st.ContainerStatuses = append(st.ContainerStatuses, terminated(c, out.ExitCode, reason, jsonText(msg), now))
		}
	}
	if equality.Semantic.DeepEqual(st.ContainerStatuses, pod.Status.ContainerStatuses) && st.Phase == pod.Status.Phase {
		return reconcile.Result{}, nil
	}
	pod.Status = st
	return reconcile.Result{}, k.client.Status().Update(ctx, pod)
}

func terminated(c corev1.Container, code int32, reason, message string, at metav1.Time) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: c.Name, Image: c.Image, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: code, Reason: reason, Message: message, StartedAt: at, FinishedAt: metav1.NewTime(at.Add(time.Millisecond)),
	}}}
}

// KanikoStep runs sless's build steps as their programs would: the
// image-url step writes its IMAGE variable as IMAGE_URL, and the builder
// "pushes" its --destination and writes the digest, a hash of the
// destination (whose tag is the source digest's), as IMAGE_DIGEST. Other
// steps succeed without results.
func KanikoStep(pod *corev1.Pod, step corev1.Container) StepOutcome {
	switch step.Name {
	case "step-image-url":
		for _, e := range step.Env {
			if e.Name == "IMAGE" {
				return StepOutcome{Results: map[string]string{"IMAGE_URL": e.Value}}
			}
		}
	case "step-build-and-push":
		for _, a := range step.Args {
			if dest, ok := strings.CutPrefix(a, "--destination="); ok {
				sum := sha256.Sum256([]byte(dest))
				return StepOutcome{Results: map[string]string{"IMAGE_DIGEST": "sha256:" + hex.EncodeToString(sum[:])}}
			}
		}
	}
	return StepOutcome{}
}

// FailStep is a KubeletPolicy.Step that fails the named step (e.g.
// "step-build-and-push") with exit code 1, as a build that breaks does,
// and runs the others as KanikoStep.
func FailStep(name string) func(*corev1.Pod, corev1.Container) StepOutcome {
	return func(pod *corev1.Pod, step corev1.Container) StepOutcome {
		if step.Name == name {
			return StepOutcome{ExitCode: 1}
		}
		return KanikoStep(pod, step)
	}
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// CrashRevision makes the pod of Knative revision rev in ns crash as a node
// reports it: the user container restarting after it exited with code and
// message (lastState.terminated), and its Deployment without an available
// replica, the change that wakes Knative's revision reconciler. No pod runs
// here, so the Kubelet makes the one it reports on.
func (k *Kubelet) CrashRevision(ctx context.Context, ns, rev string, code int32, message string) error {
	var deps appsv1.DeploymentList
	if err := k.client.List(ctx, &deps, client.InNamespace(ns), client.MatchingLabels{serving.RevisionLabelKey: rev}); err != nil {
		return err
	}
	if len(deps.Items) != 1 {
		return fmt.Errorf("revision %s/%s has %d Deployments, want 1", ns, rev, len(deps.Items))
	}
	dep := &deps.Items[0]
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: rev + "-crashing", Labels: dep.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(dep, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
		Spec: *dep.Spec.Template.Spec.DeepCopy(),
	}
	if err := k.client.Create(ctx, pod); err != nil {
		return err
	}
	now := metav1.Now()
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &now, HostIP: "127.0.0.1", PodIP: "127.0.0.1"}
	for _, c := range pod.Spec.Containers {
		cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}
		if c.Name != "queue-proxy" {
			cs.RestartCount = 1
			cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
				Message: fmt.Sprintf("back-off 10s restarting failed container=%s pod=%s", c.Name, pod.Name)}}
			cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: code, Reason: "Error", Message: message, StartedAt: now, FinishedAt: now}}
		}
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, cs)
	}
	if err := k.client.Status().Update(ctx, pod); err != nil {
		return err
	}
	// What the deployment controller reports of a replica that never
	// becomes available.
	patch := client.MergeFrom(dep.DeepCopy())
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: 1, UpdatedReplicas: 1, UnavailableReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: "MinimumReplicasUnavailable",
				Message: "Deployment does not have minimum availability.", LastUpdateTime: now, LastTransitionTime: now},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "ReplicaSetUpdated",
				Message: fmt.Sprintf("ReplicaSet %q is progressing.", dep.Name), LastUpdateTime: now, LastTransitionTime: now},
		}}
	return k.client.Status().Patch(ctx, dep, patch)
}
