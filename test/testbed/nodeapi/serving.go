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

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/invoke"
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
// host, activator, autoscaler and queue-proxy as pods), Tekton's
// controller with the real step images, and sless installed from config/
// (Install), with one function namespace NS, whose builds run kaniko in
// Tekton's TaskRun pods.
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
	return start(t, true)
}

// StartBuilding is StartServing without Knative: for builds alone, whose
// Functions then never serve.
func StartBuilding(t testing.TB) *Serving {
	t.Helper()
	return start(t, false)
}

func start(t testing.TB, knative bool) *Serving {
	t.Helper()
	n := testbed.StartNodeFor(t)
	begin := time.Now()
	images, err := n.Images()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node bed up in %v; its images pushed in %v", n.Started.Round(time.Millisecond), time.Since(begin).Round(time.Millisecond))
	if knative {
		bed, err := testbed.StartNodeKnative(n, images, FastScaleToZero)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { bed.Logs(t); bed.Stop() })
	}
	// After Knative: its start made the release's ConfigMaps, with the
	// fast scale to zero.
	functionctl.StartTekton(t, n, images)
	s := &Serving{t: t, Node: n, Images: images, API: Install(t, n, images), NS: n.Namespace(t)}
	s.API.FunctionNamespace(t, n, s.NS)
	s.token = Token(t, s.NS)
	return s
}

// For is s with its helpers failing t, a subtest of the one that started
// it.
func (s *Serving) For(t testing.TB) *Serving {
	c := *s
	c.t = t
	return &c
}

// InNamespace is s for t in a function namespace of its own: for parts of
// a test that share the node but not their functions' names.
func (s *Serving) InNamespace(t testing.TB) *Serving {
	t.Helper()
	c := *s
	c.t = t
	c.NS = s.Node.Namespace(t)
	s.API.FunctionNamespace(t, s.Node, c.NS)
	c.token = Token(t, c.NS)
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

// watchLag is how long a state the test reads from the apiserver is given
// to reach sless-api's watches of the same objects before the test relies
// on sless-api having seen it: a watch event arrives in milliseconds, the
// rest is for a busy machine.
const watchLag = time.Second

// awaitRevision waits up to within for revision rev and its pods to
// satisfy ok, and for that to hold for watchLag, and returns how long the
// wait took until ok first held.
func (s *Serving) awaitRevision(rev string, within time.Duration, ok func(*servingv1.Revision, []corev1.Pod) bool) (time.Duration, error) {
	start := time.Now()
	var since time.Time // when ok began to hold
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, within, true, func(ctx context.Context) (bool, error) {
		list, err := s.Node.Clientset.CoreV1().Pods(s.NS).List(ctx, metav1.ListOptions{LabelSelector: serving.RevisionLabelKey + "=" + rev})
		if err != nil {
			return false, err
		}
		r := &servingv1.Revision{}
		if err := s.Node.Kube.Client.Get(ctx, client.ObjectKey{Namespace: s.NS, Name: rev}, r); err != nil {
			return false, err
		}
		last = fmt.Sprintf("%d pods, actualReplicas %v", len(list.Items), ptr.Deref(r.Status.ActualReplicas, -1))
		if !ok(r, list.Items) {
			since = time.Time{}
			return false, nil
		}
		if since.IsZero() {
			since = time.Now()
		}
		return time.Since(since) >= watchLag, nil
	})
	if err != nil {
		return 0, fmt.Errorf("revision %s: %w (last: %s)", rev, err, last)
	}
	return since.Sub(start), nil
}

// AwaitScaledToZero waits until function name's revision rev has no pod
// at all and reports zero replicas, which sless-api's resolver reads from
// the Revision to tell the next call a cold start, and returns how long it
// took to get there.
func (s *Serving) AwaitScaledToZero(name, rev string) time.Duration {
	s.t.Helper()
	d, err := s.awaitRevision(rev, 3*time.Minute, func(r *servingv1.Revision, pods []corev1.Pod) bool {
		return len(pods) == 0 && r.Status.ActualReplicas != nil && *r.Status.ActualReplicas == 0
	})
	if err != nil {
		s.t.Fatalf("%s not at zero: %v", name, err)
	}
	return d
}

// AwaitWarm waits until function name's serving revision reports replicas
// up: until then sless-api's resolver takes it for idle, and a call is
// recorded as a cold start even when its pod is Ready.
func (s *Serving) AwaitWarm(name string) {
	s.t.Helper()
	fn := &slessv1alpha1.Function{}
	if err := s.Node.Kube.Client.Get(context.Background(), client.ObjectKey{Namespace: s.NS, Name: name}, fn); err != nil {
		s.t.Fatal(err)
	}
	if _, err := s.awaitRevision(fn.Status.LatestReadyRevision, time.Minute, func(r *servingv1.Revision, _ []corev1.Pod) bool {
		return ptr.Deref(r.Status.ActualReplicas, 0) > 0
	}); err != nil {
		s.t.Fatalf("%s never warm: %v", name, err)
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
func (s *Serving) AwaitRecords(name string, n int) []invoke.Invocation {
	s.t.Helper()
	return s.awaitRecords(name, n, s.API.Calls)
}

// AwaitServiceRecords is AwaitRecords of SlessService name.
func (s *Serving) AwaitServiceRecords(name string, n int) []invoke.Invocation {
	s.t.Helper()
	return s.awaitRecords(name, n, s.API.ServiceCalls)
}

func (s *Serving) awaitRecords(name string, n int, list func(context.Context, string, string) ([]invoke.Invocation, error)) []invoke.Invocation {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		recs, err := list(context.Background(), s.NS, name)
		if err == nil && len(recs) >= n {
			return recs
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%d records of %s after 30 s, want %d (last error %v): %+v", len(recs), name, n, err, recs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
