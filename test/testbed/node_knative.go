package testbed

import (
	"context"
	"fmt"
	"maps"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// knativeDataPlane is what the node runs of Knative Serving's release as
// pods: the activator and the autoscaler, with their accounts and roles.
// The controller runs as a process (StartNodeKnative); its webhook's work
// is the Kube's admission.
var knativeDataPlane = []releaseManifest{
	{"knative.dev/serving", "config/core/200-serviceaccount.yaml"},
	{"knative.dev/serving", "config/core/200-roles/*.yaml"},
	{"knative.dev/serving", "config/core/deployments/activator.yaml"},
	{"knative.dev/serving", "config/core/deployments/autoscaler.yaml"},
}

// StartNodeKnative runs Knative Serving for real on n: its controller as a
// process in the node's network namespace (StartPrimitivesWith, no
// stand-ins; its probes' :8080 is then the namespace's), the activator and the
// autoscaler as pods from the release manifests with their images
// rewritten to images's, and queue-proxy as every revision's sidecar
// (config-deployment). config changes the release's ConfigMaps
// (namespace/name → data), over the bed's. It returns once the activator
// and the autoscaler are available. Stop the Primitives before n.
func StartNodeKnative(n *Node, images *NodeImages, config map[string]map[string]string) (*Primitives, error) {
	overrides := map[string]map[string]string{KnativeNamespace + "/config-deployment": images.KnativeDeploymentConfig()}
	for name, data := range config {
		if overrides[name] == nil {
			overrides[name] = map[string]string{}
		}
		maps.Copy(overrides[name], data)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// The data plane first (its pods read the ConfigMaps), so that the
	// controller's first reconciles find the activator's Service.
	if err := installReleaseConfig(ctx, n.Kube, overrides); err != nil {
		return nil, err
	}
	if err := applyRelease(ctx, n.Kube, knativeDataPlane, images.RewriteRelease); err != nil {
		return nil, fmt.Errorf("Knative's data plane: %w", err)
	}
	p, err := StartPrimitivesWith(n.Kube, PrimitivesOptions{Knative: true, Config: overrides, InNodeNetns: true})
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"autoscaler", "activator"} {
		if err := n.AwaitDeployment(ctx, KnativeNamespace, name); err != nil {
			p.Stop()
			return nil, err
		}
	}
	return p, nil
}

// applyRelease creates every document of ms, each rewritten by rewrite
// first.
func applyRelease(ctx context.Context, k *Kube, ms []releaseManifest, rewrite func([]byte) ([]byte, error)) error {
	return manifests(ms, func(file string, doc []byte) error {
		doc, err := rewrite(doc)
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			return fmt.Errorf("parse %s: %w", file, err)
		}
		if len(u.Object) == 0 {
			return nil
		}
		if err := k.Client.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%s %s/%s from %s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), file, err)
		}
		return nil
	})
}

// AwaitDeployment waits until ns/name has all its replicas available, and
// says what its pods are doing when it does not.
func (n *Node) AwaitDeployment(ctx context.Context, ns, name string) error {
	for {
		d, err := n.Clientset.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil && deploymentAvailable(d) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("Deployment %s/%s not available: %w (last error %v)\n%s", ns, name, ctx.Err(), err, n.DescribePods(ns))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func deploymentAvailable(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	return d.Status.ObservedGeneration >= d.Generation && d.Status.AvailableReplicas >= want && d.Status.UpdatedReplicas >= want
}

// DescribePods is one line per pod of ns with its phase and each
// container's state, for failures.
func (n *Node) DescribePods(ns string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pods, err := n.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Sprintf("pods of %s: %v", ns, err)
	}
	var out string
	for _, p := range pods.Items {
		out += fmt.Sprintf("pod %s: %s %s", p.Name, p.Status.Phase, p.Status.Message)
		for _, c := range p.Status.ContainerStatuses {
			out += fmt.Sprintf("; %s ready=%t restarts=%d %+v", c.Name, c.Ready, c.RestartCount, c.State)
		}
		out += "\n"
	}
	return out
}
