// Package e2e_test drives sless on the real Knative Serving and Tekton
// Pipelines: their CRDs and admission (testbed.Kube) and their own
// controllers (testbed.Primitives), with stand-ins only for the node, the
// autoscaler's pod metrics and the ingress's proxies. A Function applied
// with kubectl is built by Tekton's PipelineRun and TaskRun and served by
// Knative's Configuration, Revision and Route.
package e2e_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"knative.dev/serving/pkg/apis/serving"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/test/testbed"
	"github.com/sless-dev/sless/test/testbed/functionctl"
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	testbed.Main(m)
}

// realSlice is one test's namespace on the real bed with sless's Function
// controller running on it, and kubectl pointed at it.
type realSlice struct {
	t    *testing.T
	bed  *testbed.Primitives
	ns   string
	kctl string
	dir  string
}

func newRealSlice(t *testing.T) *realSlice {
	t.Helper()
	bed := testbed.SharedPrimitives(t)
	t.Cleanup(func() { bed.Logs(t) })
	s := &realSlice{t: t, bed: bed, ns: bed.Namespace(t), kctl: testbed.Kubectl(t), dir: t.TempDir()}
	functionctl.Run(t, bed.Kube, s.ns)
	return s
}

// kubectl runs kubectl against the bed in the slice's namespace.
func (s *realSlice) kubectl(args ...string) (string, error) {
	s.t.Helper()
	cmd := exec.Command(s.kctl, append([]string{"--kubeconfig", s.bed.Kube.Kubeconfig, "-n", s.ns}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func (s *realSlice) mustKubectl(args ...string) string {
	s.t.Helper()
	out, err := s.kubectl(args...)
	if err != nil {
		s.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// apply writes a Function manifest and applies it with kubectl.
func (s *realSlice) apply(name, greeting string, timeoutSeconds int) {
	s.t.Helper()
	manifest := fmt.Sprintf(`apiVersion: sless.dev/v1alpha1
kind: Function
metadata:
  name: %s
spec:
  runtime: python3.12
  entrypoint: main.handler
  timeoutSeconds: %d
  source:
    inline:
      files:
        main.py: |
          def handler(event, context):
              return {"greeting": %q}
`, name, timeoutSeconds, greeting)
	file := filepath.Join(s.dir, name+".yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		s.t.Fatal(err)
	}
	s.mustKubectl("apply", "-f", file)
}

func (s *realSlice) function(name string) *slessv1alpha1.Function {
	s.t.Helper()
	fn := &slessv1alpha1.Function{}
	if err := s.bed.Kube.Client.Get(context.Background(), client.ObjectKey{Namespace: s.ns, Name: name}, fn); err != nil {
		s.t.Fatal(err)
	}
	return fn
}

// settle waits until the Function's generation gen is Ready or Failed: a
// refusal or failed build ends the wait at once, with its condition.
func (s *realSlice) settle(name string, gen int64) *slessv1alpha1.Function {
	s.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		fn := s.function(name)
		phase := fn.Status.Phase
		if fn.Status.ObservedGeneration >= gen && (phase == slessv1alpha1.FunctionPhaseReady || phase == slessv1alpha1.FunctionPhaseFailed) {
			return fn
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("Function %s generation %d not settled after 2 min: phase %s, conditions %+v", name, gen, phase, fn.Status.Conditions)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ready asserts that fn settled Ready, with its conditions when not.
func (s *realSlice) ready(fn *slessv1alpha1.Function) {
	s.t.Helper()
	if fn.Status.Phase != slessv1alpha1.FunctionPhaseReady {
		c := meta.FindStatusCondition(fn.Status.Conditions, slessv1alpha1.FunctionConditionReady)
		s.t.Fatalf("Function %s is %s, not Ready: %+v", fn.Name, fn.Status.Phase, c)
	}
}

// pipelineRun is the PipelineRun that built fn last.
func (s *realSlice) pipelineRun(fn *slessv1alpha1.Function) *tektonv1.PipelineRun {
	s.t.Helper()
	run := &tektonv1.PipelineRun{}
	s.get(fn.Status.BuildRef, run)
	return run
}

func (s *realSlice) get(name string, obj client.Object) {
	s.t.Helper()
	if err := s.bed.Kube.Client.Get(context.Background(), client.ObjectKey{Namespace: s.ns, Name: name}, obj); err != nil {
		s.t.Fatal(err)
	}
}

// TestFunctionOnRealKnativeAndTekton: kubectl apply of a Function reaches
// Ready through Tekton's and Knative's own controllers, with the image
// digest Tekton's result carried and the revision Knative made; a changed
// source rolls a new revision out and retires the old one.
func TestFunctionOnRealKnativeAndTekton(t *testing.T) {
	s := newRealSlice(t)
	start := time.Now()
	s.apply("greeter", "hello", 30)
	fn := s.settle("greeter", 1)
	s.ready(fn)
	t.Logf("Function Ready through the real controllers in %v", time.Since(start).Round(time.Millisecond))
	s.mustKubectl("wait", "--for=condition=Ready", "function/greeter", "--timeout=10s")
	pr := s.pipelineRun(fn)
	if !pr.IsSuccessful() {
		t.Fatalf("PipelineRun %s: %+v", pr.Name, pr.Status.Conditions)
	}
	// The TaskRun and its pod are Tekton's doing: the digest is the result
	// the kubelet stand-in wrote into the build step's termination message.
	if len(pr.Status.ChildReferences) != 1 || pr.Status.ChildReferences[0].Kind != "TaskRun" {
		t.Fatalf("PipelineRun children: %+v", pr.Status.ChildReferences)
	}
	results := map[string]string{}
	for _, r := range pr.Status.Results {
		results[r.Name] = r.Value.StringVal
	}
	dest := fmt.Sprintf("%s/%s/greeter:%s", functionctl.Registry, s.ns, "src-"+strings.TrimPrefix(fn.Status.SourceDigest, "sha256:")[:32])
	sum := sha256.Sum256([]byte(dest))
	wantImage := functionctl.Registry + "/" + s.ns + "/greeter@sha256:" + hex.EncodeToString(sum[:])
	if got := results["IMAGE_URL"] + "@" + results["IMAGE_DIGEST"]; got != wantImage || fn.Status.Image != wantImage {
		t.Errorf("image: Tekton's results give %s, the Function says %s, want %s", got, fn.Status.Image, wantImage)
	}

	// The revision is Knative's: its name in the Function's status is the
	// one the Service reports ready, made by the Configuration.
	svc := &servingv1.Service{}
	s.get("greeter", svc)
	first := fn.Status.LatestReadyRevision
	if first == "" || first != svc.Status.LatestReadyRevisionName {
		t.Fatalf("Function's latestReadyRevision %q, Knative Service's %q", first, svc.Status.LatestReadyRevisionName)
	}
	rev := &servingv1.Revision{}
	s.get(first, rev)
	if owner := metav1.GetControllerOf(rev); owner == nil || owner.Kind != "Configuration" || !rev.IsReady() {
		t.Fatalf("Revision %s: controller %v, ready %v", first, owner, rev.IsReady())
	}
	if rev.Spec.Containers[0].Image != wantImage {
		t.Errorf("Revision %s runs %s, want %s", first, rev.Spec.Containers[0].Image, wantImage)
	}
	if out := s.mustKubectl("get", "function", "greeter"); !strings.Contains(out, "Ready") {
		t.Errorf("kubectl get function:\n%s", out)
	}

	// A changed source: a second build, a second revision serving all
	// traffic, the first one retired by Knative's route and labeler.
	s.apply("greeter", "hello again", 30)
	fn = s.settle("greeter", 2)
	s.ready(fn)
	second := fn.Status.LatestReadyRevision
	if second == first || fn.Status.Image == wantImage {
		t.Fatalf("after the update: revision %s (was %s), image %s (was %s)", second, first, fn.Status.Image, wantImage)
	}
	route := &servingv1.Route{}
	s.get("greeter", route)
	if tr := route.Status.Traffic; len(tr) != 1 || tr[0].RevisionName != second || ptr.Deref(tr[0].Percent, 0) != 100 {
		t.Errorf("Route traffic after the update: %+v, want 100%% to %s", tr, second)
	}
	s.mustKubectl("wait", "--for=jsonpath={.metadata.labels.serving\\.knative\\.dev/routingState}=reserve", "revision/"+first, "--timeout=60s")
	s.get(first, rev)
	if rev.Labels[serving.RoutingStateLabelKey] != string(servingv1.RoutingStateReserve) {
		t.Errorf("first revision's routing state %q, want reserve", rev.Labels[serving.RoutingStateLabelKey])
	}
}

// TestBuildFailureOnRealTekton: a build step that exits 1 fails the
// TaskRun and PipelineRun as Tekton words it, and that reaches the
// Function's Ready condition.
func TestBuildFailureOnRealTekton(t *testing.T) {
	s := newRealSlice(t)
	s.bed.Kubelet.SetPolicy(s.ns, testbed.KubeletPolicy{Step: testbed.FailStep("step-build-and-push")})
	s.apply("broken", "never served", 30)
	fn := s.settle("broken", 1)
	ready := meta.FindStatusCondition(fn.Status.Conditions, slessv1alpha1.FunctionConditionReady)
	want := `"step-build-and-push" exited with code 1`
	if ready == nil || !strings.Contains(ready.Message, want) || fn.Status.Phase != slessv1alpha1.FunctionPhaseFailed {
		t.Fatalf("phase %s, Ready %+v: want Failed and a message with %s", fn.Status.Phase, ready, want)
	}
	t.Logf("Ready: %s: %s", ready.Reason, ready.Message)
	tr := &tektonv1.TaskRun{}
	s.get(s.pipelineRun(fn).Status.ChildReferences[0].Name, tr)
	if hint := "its log: kubectl logs -n " + s.ns + " " + tr.Status.PodName + " -c step-build-and-push"; tr.Status.PodName == "" || !strings.Contains(ready.Message, hint) {
		t.Errorf("Ready's message does not say where the step's log is (%q)", hint)
	}
	if out := s.mustKubectl("describe", "function", "broken"); !strings.Contains(out, want) {
		t.Errorf("kubectl describe does not show the step's failure:\n%s", out)
	}
}

// TestKnativeRefusalReachesTheFunction: a timeout Knative's own validation
// refuses (above max-revision-timeout-seconds, 600 by default) is the
// Function's Ready condition, in Knative's words.
func TestKnativeRefusalReachesTheFunction(t *testing.T) {
	s := newRealSlice(t)
	s.apply("slow", "too slow", 900)
	fn := s.settle("slow", 1)
	ready := meta.FindStatusCondition(fn.Status.Conditions, slessv1alpha1.FunctionConditionReady)
	if ready == nil || ready.Reason != slessv1alpha1.FunctionReasonServiceRejected || !strings.Contains(ready.Message, "timeoutSeconds") {
		t.Fatalf("Ready %+v: want %s with Knative's message on timeoutSeconds", ready, slessv1alpha1.FunctionReasonServiceRejected)
	}
	t.Logf("Ready: %s: %s", ready.Reason, ready.Message)
}

// TestPlacementWaitsForKnativeFeature: a nodeSelector while Knative's
// kubernetes.podspec-nodeselector is off is sless's condition naming the
// flag and the patch, not Knative's webhook error; once the patch it names
// is applied, Knative's own webhook takes the Service on a retry.
func TestPlacementWaitsForKnativeFeature(t *testing.T) {
	s := newRealSlice(t)
	manifest := `apiVersion: sless.dev/v1alpha1
kind: Function
metadata:
  name: placed
spec:
  runtime: python3.12
  entrypoint: main.handler
  nodeSelector:
    pool: fast
  source:
    inline:
      files:
        main.py: |
          def handler(event, context):
              return "placed"
`
	file := filepath.Join(s.dir, "placed.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	s.mustKubectl("apply", "-f", file)
	fn := s.settle("placed", 1)
	ready := meta.FindStatusCondition(fn.Status.Conditions, slessv1alpha1.FunctionConditionReady)
	if ready == nil || ready.Reason != slessv1alpha1.FunctionReasonServiceRejected || !strings.Contains(ready.Message, "kubernetes.podspec-nodeselector") {
		t.Fatalf("Ready %+v: want ServiceRejected naming kubernetes.podspec-nodeselector", ready)
	}
	t.Logf("Ready: %s: %s", ready.Reason, ready.Message)

	// Run the command the message gives, as an admin would.
	_, cmd, ok := strings.Cut(ready.Message, "turns it on with: kubectl ")
	if !ok {
		t.Fatalf("no kubectl command in %q", ready.Message)
	}
	args := strings.Fields(strings.TrimSuffix(strings.SplitN(cmd, " -p ", 2)[0], " "))
	patch := strings.Trim(strings.SplitN(cmd, " -p ", 2)[1], "'")
	t.Cleanup(func() {
		s.kubectl("patch", "configmap", "config-features", "-n", "knative-serving", "--type", "merge",
			"-p", `{"data":{"kubernetes.podspec-nodeselector":"disabled"}}`)
	})
	s.mustKubectl(append(args, "-p", patch)...)
	// The refusal is retried with backoff, which finds the flag on.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		svc := &servingv1.Service{}
		err := s.bed.Kube.Client.Get(context.Background(), client.ObjectKey{Namespace: s.ns, Name: "placed"}, svc)
		if err == nil {
			if got := svc.Spec.Template.Spec.NodeSelector["pool"]; got != "fast" {
				t.Fatalf("Knative Service's nodeSelector %v", svc.Spec.Template.Spec.NodeSelector)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Knative Service after the flag was enabled: %v; Function %+v", err, s.function("placed").Status.Conditions)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
