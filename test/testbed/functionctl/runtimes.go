package functionctl

import (
	"context"
	"fmt"
	"testing"
	"time"

	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/adapter/resources"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/test/testbed"
)

// RuntimeFunctions are one Function per runtime, named after it (py, js,
// golang), in namespace ns: inline code with no third-party packages, as
// the node's pods have no egress. Changing mark changes each one's source.
func RuntimeFunctions(ns, mark string) []*slessv1alpha1.Function {
	return []*slessv1alpha1.Function{
		inlineFunction(ns, "py", "python3.12", "main.handler", map[string]string{
			"main.py": fmt.Sprintf("def handler(event, context):\n    return {'runtime': 'python', 'mark': %q}\n", mark)}),
		inlineFunction(ns, "js", "nodejs22", "index.handler", map[string]string{
			"index.js": fmt.Sprintf("exports.handler = async () => ({runtime: 'node', mark: %q});\n", mark)}),
		inlineFunction(ns, "golang", "go1.24", "hello.Handle", map[string]string{
			"go.mod": "module example.com/hello\n\ngo 1.24\n",
			"hello.go": "package hello\n\nimport \"context\"\n\n" +
				"func Handle(ctx context.Context, ev map[string]any) (map[string]string, error) {\n" +
				fmt.Sprintf("\treturn map[string]string{\"runtime\": \"go\", \"mark\": %q}, nil\n}\n", mark)}),
	}
}

// BrokenGoFunction is a Go Function whose import lacks its closing quote:
// its build fails at hello.go:3 ("string literal not terminated"). The go
// command finds that while reading imports, before it compiles the
// standard library, so the failing build costs seconds, not the minutes
// of a compile beside the good Go build.
func BrokenGoFunction(ns, name string) *slessv1alpha1.Function {
	return inlineFunction(ns, name, "go1.24", "hello.Handle", map[string]string{
		"go.mod":   "module example.com/hello\n\ngo 1.24\n",
		"hello.go": "package hello\n\nimport \"context\n\nfunc Handle(ctx context.Context) {}\n",
	})
}

func inlineFunction(ns, name, runtime, entrypoint string, files map[string]string) *slessv1alpha1.Function {
	fn := &slessv1alpha1.Function{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	fn.APIVersion, fn.Kind = slessv1alpha1.SchemeGroupVersion.String(), slessv1alpha1.KindFunction
	fn.Spec.Runtime, fn.Spec.Entrypoint = runtime, entrypoint
	fn.Spec.Source.Inline = &slessv1alpha1.InlineSource{Files: files}
	return fn
}

// AwaitBuilt waits until the Function ns/name's build has ended: its image
// is in status.image (it deploys from there), or it failed.
func AwaitBuilt(t testing.TB, k *testbed.Kube, ns, name string, timeout time.Duration) *slessv1alpha1.Function {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		fn := &slessv1alpha1.Function{}
		if err := k.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, fn); err != nil {
			t.Fatal(err)
		}
		if fn.Status.Image != "" || fn.Status.Phase == slessv1alpha1.FunctionPhaseFailed {
			return fn
		}
		if time.Now().After(deadline) {
			t.Fatalf("Function %s not built after %v: phase %s, conditions %+v", name, timeout, fn.Status.Phase, fn.Status.Conditions)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// BuildPod is the pod of the TaskRun of fn's last build.
func BuildPod(t testing.TB, k *testbed.Kube, fn *slessv1alpha1.Function) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pr := &tektonv1.PipelineRun{}
	if err := k.Client.Get(ctx, client.ObjectKey{Namespace: fn.Namespace, Name: fn.Status.BuildRef}, pr); err != nil {
		t.Fatal(err)
	}
	if len(pr.Status.ChildReferences) != 1 {
		t.Fatalf("PipelineRun %s children: %+v", pr.Name, pr.Status.ChildReferences)
	}
	tr := &tektonv1.TaskRun{}
	if err := k.Client.Get(ctx, client.ObjectKey{Namespace: fn.Namespace, Name: pr.Status.ChildReferences[0].Name}, tr); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{}
	if err := k.Client.Get(ctx, client.ObjectKey{Namespace: fn.Namespace, Name: tr.Status.PodName}, pod); err != nil {
		t.Fatalf("TaskRun %s's pod %q: %v", tr.Name, tr.Status.PodName, err)
	}
	return pod
}

// BuilderStatus is the status of the builder's (kaniko's) step container
// in a build pod, nil when it has none.
func BuilderStatus(pod *corev1.Pod) *corev1.ContainerStatus {
	for i, c := range pod.Status.ContainerStatuses {
		if c.Name == "step-"+resources.StepBuild {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}
