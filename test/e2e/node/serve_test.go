package node_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	nodebench "github.com/sless-dev/sless/bench/node"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/test/testbed"
	"github.com/sless-dev/sless/test/testbed/functionctl"
	"github.com/sless-dev/sless/test/testbed/nodeapi"
)

// TestNodeServing: sless on one real node, kaniko building and Knative's
// data plane serving. The node's start (bed, images, Knative, Tekton,
// sless from config/) costs minutes, so the package's parts share one and
// run at once, as a cluster's users would.
func TestNodeServing(t *testing.T) {
	s := nodeapi.StartServing(t)
	together(t,
		subtest{"BuildsAndServesFunctions", func(t *testing.T) { buildsAndServesFunctions(t, s.For(t)) }},
		subtest{"RunsWorkloads", func(t *testing.T) { runsWorkloads(t, s.InNamespace(t)) }},
		subtest{"BenchSmoke", func(t *testing.T) { benchSmoke(t, s.InNamespace(t)) }},
	)
}

// benchSmoke runs bench/node's measuring with one wake and a few calls per
// runtime, so that it cannot rot; the numbers, taken beside the other
// parts, are for no one.
func benchSmoke(t *testing.T, s *nodeapi.Serving) {
	m := nodebench.Measure(t, s, 1, 5)
	if len(m.Runtimes) != 3 {
		t.Fatalf("figures of %d runtimes, want 3", len(m.Runtimes))
	}
	for _, r := range m.Runtimes {
		t.Logf("%+v pod/api %.2f", r, r.Ratio())
		if r.Cold50 <= 0 || r.Cold95 <= 0 || r.API <= 0 || r.Pod <= 0 {
			t.Errorf("%s: not every number measured: %+v", r.Runtime, r)
		}
		if ratio := r.Ratio(); math.IsNaN(ratio) || math.IsInf(ratio, 0) || ratio <= 0 {
			t.Errorf("%s: pod/api %v", r.Runtime, ratio)
		}
	}
}

// buildsAndServesFunctions: sless's first "done when", end to end.
// kubectl apply of a Python, a Node.js and a Go Function: Tekton's TaskRun
// pod runs kaniko on the context sless stored in S3, kaniko pulls the base
// image's stand-in through its registry mirror and pushes to the registry
// with the push Secret, and the digest under the build's tag is the
// Function's status.image. That image then runs as a Knative revision
// behind sless's ingress class: queue-proxy and the function Ready in its
// pod, calls through sless-api (the function's host and /fn/) answered and
// recorded; with no traffic Knative scales it to zero pods, and the next
// call wakes it through the activator and is recorded as a cold start. A
// Go Function that does not compile fails, and the go command's line is in
// `sless logs --build latest`. A pod in another namespace calling a
// function's cluster-local host goes through sless-api too, refused
// without a token and answered with one.
func buildsAndServesFunctions(t *testing.T, s *nodeapi.Serving) {
	b := newNodeBuilds(t, s)
	functions := functionctl.RuntimeFunctions(s.NS, "first")
	broken := functionctl.BrokenGoFunction(s.NS, "broken")
	// All at once: the builds share the node, as a cluster's do.
	applied := time.Now()
	for _, fn := range append(functions, broken) {
		b.apply(fn)
	}
	t.Run("BuildError", func(t *testing.T) {
		fn := functionctl.AwaitBuilt(t, s.Node.Kube, s.NS, broken.Name, 10*time.Minute)
		ready := meta.FindStatusCondition(fn.Status.Conditions, slessv1alpha1.FunctionConditionReady)
		if fn.Status.Phase != slessv1alpha1.FunctionPhaseFailed || fn.Status.Image != "" {
			t.Fatalf("Function %s: phase %s, image %q, Ready %+v: want Failed with no image", broken.Name, fn.Status.Phase, fn.Status.Image, ready)
		}
		t.Logf("Ready: %s: %s", ready.Reason, ready.Message)
		out := b.slessCLI(t, "logs", broken.Name, "--build", "latest")
		// The go command's line, as kaniko's RUN printed it.
		if !strings.Contains(out, "hello.go:3") || !strings.Contains(out, "string literal not terminated") {
			t.Errorf("sless logs --build latest lacks the go command's error:\n%s", out)
		}
	})
	// What each runtime's function answers (RuntimeFunctions).
	answers := map[string]string{"py": "python", "js": "node", "golang": "go"}
	var runtimes []subtest
	for _, f := range functions {
		runtimes = append(runtimes, subtest{f.Spec.Runtime, func(t *testing.T) {
			fn := functionctl.AwaitBuilt(t, s.Node.Kube, s.NS, f.Name, 10*time.Minute)
			if fn.Status.Phase == slessv1alpha1.FunctionPhaseFailed {
				t.Fatalf("Function %s failed: %+v\nits build's log:\n%s", f.Name,
					meta.FindStatusCondition(fn.Status.Conditions, slessv1alpha1.FunctionConditionReady), b.buildLog(fn))
			}
			built := b.checkPushed(t, fn)
			t.Logf("kaniko's step done %v after the apply", built.Sub(applied).Round(time.Second))
			ready := checkServes(t, s.For(t), fn.Name, fn.Status.Image, `"`+answers[f.Name]+`"`)
			t.Logf("Function Ready %v after kaniko's step", ready.Sub(built).Round(time.Second))
		}})
	}
	together(t, runtimes...)
	t.Run("NodeClusterLocalHostHeldToPolicy", func(t *testing.T) {
		out := podCalls(t, s.Node, s.Node.Namespace(t), "py."+s.NS+".svc.cluster.local", nodeapi.Token(t, s.NS))
		if !strings.Contains(out, "without: HTTP/1.1 401") {
			t.Errorf("without a token, want 401:\n%s", out)
		}
		if !strings.Contains(out, "with: HTTP/1.1 200") || !strings.Contains(out, `"python"`) {
			t.Errorf("with a token, want the function's answer:\n%s", out)
		}
	})
}

// checkServes asserts that Function name, built into image, serves on the
// node: a call through sless-api's /fn/ answers with answer in the body
// (waking the revision when it is already at zero: an idle revision gets
// there in seconds here); its revision's one pod is Ready with the
// function (image) and queue-proxy; calls through /fn/ and the function's
// host answer and are recorded warm; after Knative scaled it to zero, a
// call wakes it through the activator, answers, and is recorded cold. It
// returns when the Function became Ready.
func checkServes(t *testing.T, s *nodeapi.Serving, name, image, answer string) time.Time {
	t.Helper()
	fn := s.AwaitReady(name, 5*time.Minute)
	ready := meta.FindStatusCondition(fn.Status.Conditions, slessv1alpha1.FunctionConditionReady)
	rev := fn.Status.LatestReadyRevision
	c := &http.Client{Timeout: 2 * time.Minute}
	fnURL := s.API.URL + "/fn/" + s.NS + "/" + name
	call := func(what, url, host string) {
		t.Helper()
		status, body := s.Call(c, url, host)
		if status != http.StatusOK || !strings.Contains(body, answer) || !strings.Contains(body, `"first"`) {
			t.Fatalf("call through %s: %d %s", what, status, body)
		}
	}
	call("/fn/", fnURL, "")

	// The call may have caught the revision scaling down: a new pod is
	// then on its way to Ready, so await it rather than read once.
	var pods []corev1.Pod
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, time.Second, true, func(context.Context) (bool, error) {
		pods = s.RevisionPods(rev)
		return len(pods) == 1 && podReady(&pods[0]), nil
	}); err != nil {
		t.Fatalf("revision %s: pods %v, want one Ready", rev, podNames(pods))
	}
	var names []string
	for _, ct := range pods[0].Spec.Containers {
		names = append(names, ct.Name)
		if ct.Name == "function" && ct.Image != image {
			t.Errorf("revision %s runs %s, want the build's %s", rev, ct.Image, image)
		}
	}
	if strings.Join(names, ",") != "function,queue-proxy" {
		t.Errorf("revision pod's containers %v, want the function and queue-proxy", names)
	}

	s.AwaitWarm(name)
	call("/fn/", fnURL, "")
	call("the function's host", s.API.URL+"/", name+"."+s.NS+"."+nodeapi.Domain)
	for _, r := range s.AwaitRecords(name, 3)[:2] {
		if r.Status != http.StatusOK || r.ColdStart || r.Revision != rev {
			t.Errorf("warm call's record: %+v", r)
		}
	}

	// No traffic: Knative's autoscaler takes the revision to zero pods.
	t.Logf("revision %s at zero pods %v after the last call", rev, s.AwaitScaledToZero(name, rev).Round(time.Millisecond))
	start := time.Now()
	call("/fn/ from zero", fnURL, "")
	t.Logf("call from zero answered in %v", time.Since(start).Round(time.Millisecond))
	if recs := s.AwaitRecords(name, 4); !recs[0].ColdStart || recs[0].Status != http.StatusOK || recs[0].Revision != rev {
		t.Errorf("call from zero's record: %+v", recs[0])
	}
	if pods := s.RevisionPods(rev); len(pods) != 1 {
		t.Errorf("after the wake, revision %s has pods %v", rev, podNames(pods))
	}
	return ready.LastTransitionTime.Time
}

// podCalls runs a pod in namespace ns that calls host (port 80, as
// Knative's cluster-local URL names it) twice, without and with token,
// and returns its log: the status line of each after "without: " and
// "with: ", and the bodies.
func podCalls(t *testing.T, n *testbed.Node, ns, host, token string) string {
	t.Helper()
	// busybox's nslookup and nc: Debian's static busybox crashes in glibc's
	// NSS lookups (docs/testing.md). nc's input stays open until the answer
	// is in: a client that half-closes is gone to Go's server, which
	// cancels the call.
	script := fmt.Sprintf(`for i in $(seq 60); do
  ip=$(nslookup %[1]s | awk '/^Name:/ {f=1} f && /^Address/ {print $2; exit}')
  [ -n "$ip" ] && break; sleep 1
done
[ -n "$ip" ] || { nslookup %[1]s; exit 1; }
printf 'without: '; { printf 'GET / HTTP/1.1\r\nHost: %[1]s\r\nConnection: close\r\n\r\n'; sleep 30; } | nc -w 30 $ip 80
echo; printf 'with: '; { printf 'GET / HTTP/1.1\r\nHost: %[1]s\r\nAuthorization: Bearer %[2]s\r\nConnection: close\r\n\r\n'; sleep 30; } | nc -w 30 $ip 80
`, host, token)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "caller", Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To(int64(0)),
			Containers:                    []corev1.Container{{Name: "c", Image: n.ShellImage, Command: []string{"/bin/sh", "-c", script}}},
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pods := n.Clientset.CoreV1().Pods(ns)
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		got, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err == nil && (got.Status.Phase == corev1.PodSucceeded || got.Status.Phase == corev1.PodFailed) {
			b, err := pods.GetLogs(pod.Name, &corev1.PodLogOptions{}).Do(ctx).Raw()
			if err != nil {
				t.Fatalf("log of %s: %v", pod.Name, err)
			}
			if got.Status.Phase == corev1.PodFailed {
				t.Fatalf("pod %s failed:\n%s", pod.Name, b)
			}
			return string(b)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pod %s did not finish: %v", pod.Name, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podNames(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name+"("+string(p.Status.Phase)+")")
	}
	return out
}
