package kube_test

import (
	"context"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/sless-dev/sless/pkg/adapter/kube"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/logs"
	"github.com/sless-dev/sless/test/testbed"
)

// kubelet stands in for the one thing of a node the apiserver reaches for
// Pod logs: the kubelet's /containerLogs/{ns}/{pod}/{container} endpoint
// (HTTPS). No kubelet runs here; everything in front of it — client-go's
// request, the real apiserver's authorization, node lookup and proxying —
// is the real code. It answers canned lines per container, honouring
// timestamps, tailLines and sinceTime as the kubelet does, and records the
// queries it got (the container is in the path). A followed container
// stays open until ended.
type kubelet struct {
	srv *httptest.Server

	mu      sync.Mutex
	lines   map[string][]string // "ns/pod/container" → "RFC3339Nano text"
	queries map[string][]string // "ns/pod/container" → raw queries
	ended   map[string]chan struct{}
}

func newKubelet(t *testing.T) *kubelet {
	k := &kubelet{lines: map[string][]string{}, queries: map[string][]string{}, ended: map[string]chan struct{}{}}
	k.srv = httptest.NewTLSServer(http.HandlerFunc(k.serve))
	t.Cleanup(k.srv.Close)
	return k
}

func (k *kubelet) set(key string, at time.Time, texts ...string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for i, s := range texts {
		k.lines[key] = append(k.lines[key], at.Add(time.Duration(i)*time.Second).UTC().Format(time.RFC3339Nano)+" "+s)
	}
	if k.ended[key] == nil {
		k.ended[key] = make(chan struct{})
	}
}

func (k *kubelet) end(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	close(k.ended[key])
}

func (k *kubelet) queriesOf(key string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.queries[key]...)
}

func (k *kubelet) serve(w http.ResponseWriter, r *http.Request) {
	key, ok := strings.CutPrefix(r.URL.Path, "/containerLogs/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	k.mu.Lock()
	k.queries[key] = append(k.queries[key], r.URL.RawQuery)
	lines := append([]string(nil), k.lines[key]...)
	ended := k.ended[key]
	k.mu.Unlock()
	if ended == nil {
		http.Error(w, "no such container", http.StatusNotFound)
		return
	}
	if s := q.Get("sinceTime"); s != "" {
		since, _ := time.Parse(time.RFC3339, s)
		var kept []string
		for _, l := range lines {
			at, _ := time.Parse(time.RFC3339Nano, l[:strings.IndexByte(l, ' ')])
			if !at.Before(since) {
				kept = append(kept, l)
			}
		}
		lines = kept
	}
	if s := q.Get("tailLines"); s != "" {
		n, _ := strconv.Atoi(s)
		lines = lines[max(len(lines)-n, 0):]
	}
	for _, l := range lines {
		if q.Get("timestamps") != "true" {
			l = l[strings.IndexByte(l, ' ')+1:]
		}
		fmt.Fprintln(w, l)
	}
	w.(http.Flusher).Flush()
	if q.Get("follow") == "true" {
		select {
		case <-ended:
		case <-r.Context().Done():
		}
	}
}

// bed is a real kube-apiserver that trusts the stand-in kubelet's
// certificate, and a Node whose kubelet it is.
type bed struct {
	pods *corev1client.CoreV1Client
	kl   *kubelet
	ns   string
	node string
}

func newBed(t *testing.T) *bed {
	assets, err := testbed.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	kl := newKubelet(t)
	ca := filepath.Join(t.TempDir(), "kubelet-ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: kl.srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	env.ControlPlane.GetAPIServer().Configure().
		Set("kubelet-certificate-authority", ca).
		Set("kubelet-preferred-address-types", "InternalIP")
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, portStr, _ := net.SplitHostPort(strings.TrimPrefix(kl.srv.URL, "https://"))
	port, _ := strconv.Atoi(portStr)
	node, err := core.Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
	if _, err := core.Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ns := "tenant-logs"
	if _, err := core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return &bed{pods: core, kl: kl, ns: ns, node: node.Name}
}

// pod creates a pod on the node with containers; running names those
// that have started.
func (b *bed) pod(t *testing.T, name string, labels map[string]string, containers []string, running ...string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.ns, Labels: labels},
		Spec: corev1.PodSpec{NodeName: b.node}}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c, Image: "example.com/img@sha256:" + strings.Repeat("a", 64)})
	}
	p, err := b.pods.Pods(b.ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return b.start(t, p, running...)
}

// start marks containers of p as running.
func (b *bed) start(t *testing.T, p *corev1.Pod, running ...string) *corev1.Pod {
	t.Helper()
	p.Status.Phase = corev1.PodRunning
	for _, c := range running {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c, Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}})
	}
	p, err := b.pods.Pods(b.ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func read(t *testing.T, src logs.Source, fn *slessv1alpha1.Function, build string, q logs.Query) []string {
	t.Helper()
	var got []string
	emit := func(l logs.Line) error { got = append(got, l.From+": "+l.Text); return nil }
	var err error
	if build == "" {
		err = src.Function(context.Background(), fn, q, emit)
	} else {
		err = src.Build(context.Background(), fn, build, q, emit)
	}
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// Pod logs through the real apiserver: a function's revision pods merged
// by time, cut by tail and since at the kubelet and by invocation here;
// a build's step containers in order; following picks up a pod that
// starts meanwhile and a step that starts after the one before.
func TestPodLogs(t *testing.T) {
	b := newBed(t)
	src := &kube.Logs{Pods: b.pods}
	fn := &slessv1alpha1.Function{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: b.ns}}
	t0 := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	svc := map[string]string{kube.LabelKnativeService: "hello"}
	b.pod(t, "hello-00001-a", svc, []string{kube.UserContainer, "queue-proxy"}, kube.UserContainer, "queue-proxy")
	b.pod(t, "hello-00001-b", svc, []string{kube.UserContainer}, kube.UserContainer)
	b.pod(t, "hello-00001-c", svc, []string{kube.UserContainer}) // not started: no log yet
	b.pod(t, "other-00001-a", map[string]string{kube.LabelKnativeService: "other"}, []string{kube.UserContainer}, kube.UserContainer)
	b.kl.set(b.ns+"/hello-00001-a/user-container", t0, `{"msg":"a1","requestId":"r1"}`, "a2", `{"msg":"a3","requestId":"r2"}`)
	b.kl.set(b.ns+"/hello-00001-b/user-container", t0.Add(1500*time.Millisecond), "b1", `{"msg":"b2","requestId":"r1"}`)
	b.kl.set(b.ns+"/other-00001-a/user-container", t0, "not hello's")
	b.kl.set(b.ns+"/hello-00001-a/queue-proxy", t0, "not the function's")

	for _, tc := range []struct {
		name  string
		q     logs.Query
		want  string
		query string // what the kubelet was asked for pod a
	}{
		{"all, merged by time", logs.Query{Tail: -1},
			`hello-00001-a: {"msg":"a1","requestId":"r1"}|hello-00001-a: a2|hello-00001-b: b1|hello-00001-a: {"msg":"a3","requestId":"r2"}|hello-00001-b: {"msg":"b2","requestId":"r1"}`,
			"timestamps=true"},
		{"tail", logs.Query{Tail: 2}, `hello-00001-a: {"msg":"a3","requestId":"r2"}|hello-00001-b: {"msg":"b2","requestId":"r1"}`,
			"tailLines=2&timestamps=true"},
		{"since", logs.Query{Tail: -1, Since: t0.Add(2 * time.Second)}, `hello-00001-a: {"msg":"a3","requestId":"r2"}|hello-00001-b: {"msg":"b2","requestId":"r1"}`,
			"sinceTime=" + strings.ReplaceAll(t0.Add(2*time.Second).Format(time.RFC3339), ":", "%3A") + "&timestamps=true"},
		{"one invocation, its last line", logs.Query{Tail: 1, Invocation: "r1"}, `hello-00001-b: {"msg":"b2","requestId":"r1"}`,
			"timestamps=true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := len(b.kl.queriesOf(b.ns + "/hello-00001-a/user-container"))
			if got := strings.Join(read(t, src, fn, "", tc.q), "|"); got != tc.want {
				t.Errorf("lines\n%s\nwant\n%s", got, tc.want)
			}
			qs := b.kl.queriesOf(b.ns + "/hello-00001-a/user-container")
			if len(qs) != n+1 || qs[n] != tc.query {
				t.Errorf("the kubelet was asked %q, want %q", qs[n:], tc.query)
			}
		})
	}

	t.Run("build", func(t *testing.T) {
		run := map[string]string{kube.LabelTektonRun: "hello-0a1b2c3d4e", "sless.dev/function": "hello"}
		steps := []string{"step-build-and-push", "step-write-digest"}
		b.kl.set(b.ns+"/hello-0a1b2c3d4e-build-pod/step-build-and-push", t0, "INFO building", "INFO pushed")
		b.kl.set(b.ns+"/hello-0a1b2c3d4e-build-pod/step-write-digest", t0.Add(time.Minute), "sha256:abc")
		b.pod(t, "hello-0a1b2c3d4e-build-pod", run, append([]string{"prepare"}, steps...), steps...)
		if got := strings.Join(read(t, src, fn, "hello-0a1b2c3d4e", logs.Query{Tail: -1}), "|"); got != "build-and-push: INFO building|build-and-push: INFO pushed|write-digest: sha256:abc" {
			t.Errorf("build lines %q", got)
		}
		err := src.Build(context.Background(), &slessv1alpha1.Function{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: b.ns}},
			"hello-0a1b2c3d4e", logs.Query{Tail: -1}, func(logs.Line) error { return nil })
		if err == nil || !strings.Contains(err.Error(), "no pod of build") {
			t.Errorf("another function's build: %v", err)
		}
	})

	t.Run("follow a function", func(t *testing.T) {
		fn := &slessv1alpha1.Function{ObjectMeta: metav1.ObjectMeta{Name: "live", Namespace: b.ns}}
		live := map[string]string{kube.LabelKnativeService: "live"}
		b.kl.set(b.ns+"/live-00001-a/user-container", time.Now(), "first pod")
		b.pod(t, "live-00001-a", live, []string{kube.UserContainer}, kube.UserContainer)
		lines := make(chan string, 8)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- src.Function(ctx, fn, logs.Query{Tail: -1, Follow: true}, func(l logs.Line) error { lines <- l.From + ": " + l.Text; return nil })
		}()
		next := func(want string) {
			t.Helper()
			select {
			case got := <-lines:
				if got != want {
					t.Fatalf("line %q, want %q", got, want)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("no line %q", want)
			}
		}
		next("live-00001-a: first pod")
		// A scale from zero: a pod that starts while the log is followed.
		b.kl.set(b.ns+"/live-00001-b/user-container", time.Now(), "second pod")
		p := b.pod(t, "live-00001-b", live, []string{kube.UserContainer})
		b.start(t, p, kube.UserContainer)
		next("live-00001-b: second pod")
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("following did not end with its context")
		}
	})

	t.Run("follow a build", func(t *testing.T) {
		run := map[string]string{kube.LabelTektonRun: "hello-ffff", "sless.dev/function": "hello"}
		first, second := b.ns+"/hello-ffff-pod/step-one", b.ns+"/hello-ffff-pod/step-two"
		b.kl.set(first, time.Now(), "one")
		b.kl.set(second, time.Now(), "two")
		p := b.pod(t, "hello-ffff-pod", run, []string{"step-one", "step-two"}, "step-one")
		lines := make(chan string, 8)
		done := make(chan error, 1)
		go func() {
			done <- src.Build(context.Background(), fn, "hello-ffff", logs.Query{Tail: -1, Follow: true}, func(l logs.Line) error { lines <- l.From + ": " + l.Text; return nil })
		}()
		if got := <-lines; got != "one: one" {
			t.Fatalf("line %q", got)
		}
		b.kl.end(first)
		p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}
		b.start(t, p, "step-two")
		select {
		case got := <-lines:
			if got != "two: two" {
				t.Fatalf("line %q", got)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the second step's line did not come")
		}
		b.kl.end(second)
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("following the build did not end with its last step")
		}
	})
}
