package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/sless-dev/sless/test/testbed"
	"github.com/sless-dev/sless/test/testbed/nodeapi"
)

const nodeHandler = `def handler(event, context):
    return {"greeting": "hello from the node", "function": context.function_name}
`

// TestNodeServesFunction: a Function whose image is sless's Python runtime
// image runs as a real Knative revision on the real node, behind sless's
// ingress class: queue-proxy and the function Ready in its pod, calls
// through sless-api (the function's host and /fn/) answered and recorded;
// with no traffic Knative scales it to zero pods, and the next call wakes
// it through the activator and is recorded as a cold start. A pod in
// another namespace calling the function's cluster-local host goes
// through sless-api too, refused without a token and answered with one.
func TestNodeServesFunction(t *testing.T) {
	s := nodeapi.StartServing(t)
	fn := s.Deploy("hello", nodeHandler)
	rev := fn.Status.LatestReadyRevision

	pods := s.RevisionPods(rev)
	if len(pods) != 1 || !podReady(&pods[0]) {
		t.Fatalf("revision %s: pods %v", rev, podNames(pods))
	}
	var names []string
	for _, c := range pods[0].Spec.Containers {
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != "function,queue-proxy" {
		t.Errorf("revision pod's containers %v, want the function and queue-proxy", names)
	}

	c := &http.Client{Timeout: 2 * time.Minute}
	for _, call := range []struct{ name, url, host string }{
		{"/fn/", s.API.URL + "/fn/" + s.NS + "/hello", ""},
		{"the function's host", s.API.URL + "/", "hello." + s.NS + "." + nodeapi.Domain},
	} {
		status, body := s.Call(c, call.url, call.host)
		if status != http.StatusOK || !strings.Contains(body, "hello from the node") {
			t.Fatalf("call through %s: %d %s", call.name, status, body)
		}
	}
	for _, r := range s.AwaitRecords("hello", 2) {
		if r.Status != http.StatusOK || r.ColdStart || r.Revision != rev {
			t.Errorf("warm call's record: %+v", r)
		}
	}

	// No traffic: Knative's autoscaler takes the revision to zero pods.
	t.Logf("revision %s at zero pods %v after the last call", rev, s.AwaitScaledToZero("hello", rev).Round(time.Millisecond))
	start := time.Now()
	status, body := s.Call(c, s.API.URL+"/fn/"+s.NS+"/hello", "")
	if status != http.StatusOK || !strings.Contains(body, "hello from the node") {
		t.Fatalf("call from zero: %d %s", status, body)
	}
	t.Logf("call from zero answered in %v", time.Since(start).Round(time.Millisecond))
	if recs := s.AwaitRecords("hello", 3); !recs[0].ColdStart || recs[0].Status != http.StatusOK {
		t.Errorf("call from zero's record: %+v", recs[0])
	}
	if pods := s.RevisionPods(rev); len(pods) != 1 {
		t.Errorf("after the wake, revision %s has pods %v", rev, podNames(pods))
	}

	t.Run("NodeClusterLocalHostHeldToPolicy", func(t *testing.T) {
		out := podCalls(t, s.Node, s.Node.Namespace(t), "hello."+s.NS+".svc.cluster.local", nodeapi.Token(t, s.NS))
		if !strings.Contains(out, "without: HTTP/1.1 401") {
			t.Errorf("without a token, want 401:\n%s", out)
		}
		if !strings.Contains(out, "with: HTTP/1.1 200") || !strings.Contains(out, "hello from the node") {
			t.Errorf("with a token, want the function's answer:\n%s", out)
		}
	})
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
