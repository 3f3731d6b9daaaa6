package nodeapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"knative.dev/serving/pkg/apis/serving"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/adapter/resources"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/invoke"
	ingressresources "github.com/sless-dev/sless/pkg/reconciler/ingress/resources"
	"github.com/sless-dev/sless/pkg/source"
	"github.com/sless-dev/sless/runtimes"
	"github.com/sless-dev/sless/test/testbed"
	"github.com/sless-dev/sless/test/testbed/functionctl"
)

// FastScaleToZero shortens Knative's scale to zero to its minimum: a
// revision with no traffic for the 6 s stable window is scaled down after
// a 6 s grace, its last pod not kept.
var FastScaleToZero = map[string]map[string]string{testbed.KnativeNamespace + "/config-autoscaler": {
	"stable-window": "6s", "scale-to-zero-grace-period": "6s", "scale-to-zero-pod-retention-period": "0s",
}}

// Serving is a real node with Knative's data plane (its controller on the
// host, activator, autoscaler and queue-proxy as pods), sless-api beside
// it and sless's Function controller with sless's ingress class, on one
// test namespace, whose builds run kaniko in Tekton's TaskRun pods
// (functionctl.NodeSetup).
type Serving struct {
	Node   *testbed.Node
	Images *testbed.NodeImages
	API    *API
	NS     string

	t     testing.TB
	token string
}

// StartServing brings a Serving up for t (skipping t where no node can
// run) and takes it down when t ends.
func StartServing(t testing.TB) *Serving {
	t.Helper()
	n := testbed.StartNodeFor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	images, err := n.Images(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bed, err := testbed.StartNodeKnative(n, images, FastScaleToZero)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bed.Logs(t); bed.Stop() })
	s := &Serving{t: t, Node: n, Images: images, API: Start(t, n), NS: n.Namespace(t)}
	s.token = Token(t, s.NS)
	// After Knative: its start made the release's ConfigMaps, with the
	// fast scale to zero.
	functionctl.StartTekton(t, n, images)
	setup := functionctl.NodeSetup(t, n, images)
	setup.Configure = append(setup.Configure, func(c *resources.Config) { c.IngressClass = ingressresources.ClassName })
	functionctl.RunWith(t, n.Kube, s.NS, setup)
	return s
}

// For is s with its helpers failing t, a subtest of the one that started
// it.
func (s *Serving) For(t testing.TB) *Serving {
	c := *s
	c.t = t
	return &c
}

// AwaitReady waits up to timeout for Function name to be Ready (built,
// when it builds, and its revision serving) and returns it.
func (s *Serving) AwaitReady(name string, timeout time.Duration) *slessv1alpha1.Function {
	s.t.Helper()
	fn := &slessv1alpha1.Function{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.NS}}
	s.waitReady(fn, timeout)
	return fn
}

// PythonImage is sless's Python runtime image of handler (main.handler),
// laid out as the generated Dockerfile lays it out on the Python base's
// stand-in, pushed to the node's registry.
func (s *Serving) PythonImage(name, handler string) string {
	s.t.Helper()
	return s.Image(name, source.Input{Runtime: runtimes.Python312, Entrypoint: "main.handler",
		Files: source.Files{"main.py": []byte(handler)}})
}

// PythonServiceImage is PythonImage of a web app: app.py's app (WSGI or
// ASGI), in service mode.
func (s *Serving) PythonServiceImage(name, app string) string {
	s.t.Helper()
	return s.Image(name, source.Input{Runtime: runtimes.Python312, Entrypoint: "app.app", Mode: slessv1alpha1.ModeService,
		Files: source.Files{"app.py": []byte(app)}})
}

// Image is the image of a function's source as a build of its generated
// context makes it, on its runtime's base stand-in (testbed.StandInImage:
// a Go function compiled here), pushed to the node's registry.
func (s *Serving) Image(name string, in source.Input) string {
	s.t.Helper()
	bctx, err := source.BuildContext(in)
	if err != nil {
		s.t.Fatal(err)
	}
	bases, err := testbed.BaseImages()
	if err != nil {
		s.t.Fatal(err)
	}
	img, err := testbed.StandInImage(bases, bctx.TarGz)
	if err != nil {
		s.t.Fatal(err)
	}
	ref, err := s.Node.Push(context.Background(), s.NS+"/"+name, "src-"+strings.TrimPrefix(bctx.Digest, "sha256:")[:32], img)
	if err != nil {
		s.t.Fatal(err)
	}
	return ref
}

// DeploySource creates a Function of in's image (Image: no build) and
// waits for it to be Ready.
func (s *Serving) DeploySource(name string, in source.Input) *slessv1alpha1.Function {
	s.t.Helper()
	fn := &slessv1alpha1.Function{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.NS},
		Spec: slessv1alpha1.FunctionSpec{
			WorkloadSpec:   slessv1alpha1.WorkloadSpec{Runtime: in.Runtime, Entrypoint: in.Entrypoint, Source: slessv1alpha1.FunctionSource{Image: s.Image(name, in)}},
			TimeoutSeconds: ptr.To(int32(30)),
		},
	}
	s.awaitReady(fn)
	return fn
}

// Deploy creates a Python Function of handler's image (PythonImage: no
// build, for tests and benchmarks of serving alone) and waits for it to be
// Ready.
func (s *Serving) Deploy(name, handler string) *slessv1alpha1.Function {
	s.t.Helper()
	return s.DeploySource(name, source.Input{Runtime: runtimes.Python312, Entrypoint: "main.handler",
		Files: source.Files{"main.py": []byte(handler)}})
}

// DeployService creates a Python SlessService of app.py's app, scaled to
// zero when idle, and waits for it to be Ready.
func (s *Serving) DeployService(name, app string) *slessv1alpha1.SlessService {
	s.t.Helper()
	svc := &slessv1alpha1.SlessService{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.NS},
		Spec: slessv1alpha1.SlessServiceSpec{
			WorkloadSpec: slessv1alpha1.WorkloadSpec{Runtime: runtimes.Python312, Entrypoint: "app.app", Source: slessv1alpha1.FunctionSource{Image: s.PythonServiceImage(name, app)}},
			MinScale:     ptr.To(int32(0)),
		},
	}
	s.awaitReady(svc)
	return svc
}

// awaitReady creates w and waits for its phase to be Ready.
func (s *Serving) awaitReady(w slessv1alpha1.Workload) {
	s.t.Helper()
	ctx := context.Background()
	if err := s.Node.Kube.Client.Create(ctx, w); err != nil {
		s.t.Fatal(err)
	}
	s.waitReady(w, 5*time.Minute)
}

// waitReady waits up to timeout for w's phase to be Ready, w updated.
func (s *Serving) waitReady(w slessv1alpha1.Workload, timeout time.Duration) {
	s.t.Helper()
	ctx := context.Background()
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		if err := s.Node.Kube.Client.Get(ctx, client.ObjectKeyFromObject(w), w); err != nil {
			s.t.Fatal(err)
		}
		st := w.WorkloadStatus()
		switch st.Phase {
		case slessv1alpha1.FunctionPhaseReady:
			s.t.Logf("%s %s Ready on the node in %v", w.WorkloadKind(), w.GetName(), time.Since(start).Round(time.Millisecond))
			return
		case slessv1alpha1.FunctionPhaseFailed:
			s.t.Fatalf("%s %s failed: %+v\n%s", w.WorkloadKind(), w.GetName(), st.Conditions, s.describe())
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s %s not Ready after %v: %s %+v\n%s", w.WorkloadKind(), w.GetName(), timeout, st.Phase, st.Conditions, s.describe())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// describe says what the namespace's Knative Services and pods are doing.
func (s *Serving) describe() string {
	var ksvc servingv1.ServiceList
	_ = s.Node.Kube.Client.List(context.Background(), &ksvc, client.InNamespace(s.NS))
	var out strings.Builder
	for _, k := range ksvc.Items {
		fmt.Fprintf(&out, "Knative Service %s: %+v\n", k.Name, k.Status.Conditions)
	}
	pods, _ := s.Node.Clientset.CoreV1().Pods(s.NS).List(context.Background(), metav1.ListOptions{})
	for _, p := range pods.Items {
		fmt.Fprintf(&out, "pod %s: %s %+v\n", p.Name, p.Status.Phase, p.Status.ContainerStatuses)
	}
	return out.String()
}

// RevisionPods are the pods of revision rev that are not terminating.
func (s *Serving) RevisionPods(rev string) []corev1.Pod {
	s.t.Helper()
	list, err := s.Node.Clientset.CoreV1().Pods(s.NS).List(context.Background(),
		metav1.ListOptions{LabelSelector: serving.RevisionLabelKey + "=" + rev})
	if err != nil {
		s.t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// AwaitScaledToZero waits until function name's revision rev has no pod
// at all and reports zero replicas, and sless-api's resolver has seen it
// (so that it tells the next call a cold start), and returns how long that
// took.
func (s *Serving) AwaitScaledToZero(name, rev string) time.Duration {
	s.t.Helper()
	start := time.Now()
	deadline := start.Add(3 * time.Minute)
	for {
		list, err := s.Node.Clientset.CoreV1().Pods(s.NS).List(context.Background(),
			metav1.ListOptions{LabelSelector: serving.RevisionLabelKey + "=" + rev})
		if err != nil {
			s.t.Fatal(err)
		}
		r := &servingv1.Revision{}
		if err := s.Node.Kube.Client.Get(context.Background(), client.ObjectKey{Namespace: s.NS, Name: rev}, r); err != nil {
			s.t.Fatal(err)
		}
		target, err := s.API.Resolver.Resolve(context.Background(), s.NS, name)
		if len(list.Items) == 0 && r.Status.ActualReplicas != nil && *r.Status.ActualReplicas == 0 && err == nil && target.Idle {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("revision %s not at zero after 3 min: %d pods, actualReplicas %v", rev, len(list.Items), r.Status.ActualReplicas)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// AwaitWarm waits until sless-api's resolver sees function name's revision
// up (not idle): before that, a call is recorded as a cold start even when
// its pod is Ready, since the resolver learns of it from the Endpoints.
func (s *Serving) AwaitWarm(name string) {
	s.t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		target, err := s.API.Resolver.Resolve(ctx, s.NS, name)
		last = err
		return err == nil && !target.Idle, nil
	})
	if err != nil {
		s.t.Fatalf("sless-api's resolver never saw %s up within a minute (last error: %v)", name, last)
	}
}

// Call GETs url (with Host host when set) with a token of the namespace
// and returns the status and body.
func (s *Serving) Call(c *http.Client, url, host string) (int, string) {
	s.t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := c.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// AwaitRecords waits until function name has at least n records and
// returns them, newest first.
func (s *Serving) AwaitRecords(name string, n int) []invoke.Record {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		recs, err := s.API.Calls(context.Background(), s.NS, name)
		if err != nil {
			s.t.Fatal(err)
		}
		if len(recs) >= n {
			return recs
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%d records of %s after 30 s, want %d: %+v", len(recs), name, n, recs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
