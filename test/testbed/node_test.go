package testbed_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/sless-dev/sless/test/testbed"
)

// cleanHost undoes what an earlier run left and returns the host's state
// before a node runs.
func cleanHost(t *testing.T) testbed.NodeHostState {
	t.Helper()
	if err := testbed.CleanNode(); err != nil {
		t.Fatalf("clean an earlier node's leftovers: %v", err)
	}
	before, err := testbed.TakeNodeHostState()
	if err != nil {
		t.Fatal(err)
	}
	return before
}

func wantNothingLeft(t *testing.T, before testbed.NodeHostState) {
	t.Helper()
	after, err := testbed.TakeNodeHostState()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range before.Leftovers(after) {
		t.Errorf("left after teardown: %s", l)
	}
}

func TestNode(t *testing.T) {
	if _, err := testbed.NodeAvailable(); err != nil {
		testbed.SkipWithoutNode(t, err.Error())
	}
	before := cleanHost(t)
	n, err := testbed.StartNode()
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		n.Logs(t)
		if err := n.Stop(); err != nil {
			t.Errorf("teardown: %v", err)
		}
		t.Logf("node bed: start %v, teardown %v", n.Started.Round(time.Millisecond), n.Stopped.Round(time.Millisecond))
	}
	t.Cleanup(stop)

	t.Run("NodeReady", func(t *testing.T) {
		node, err := n.Clientset.CoreV1().Nodes().Get(context.Background(), testbed.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if v := node.Status.NodeInfo.KubeletVersion; v != "v1.36.3" {
			t.Errorf("kubelet version %s, want v1.36.3", v)
		}
		var ip string
		for _, a := range node.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				ip = a.Address
			}
		}
		if ip != testbed.NodeIP {
			t.Errorf("node InternalIP %q, want %s", ip, testbed.NodeIP)
		}
	})
	t.Run("NodePodLog", func(t *testing.T) {
		ns := n.Namespace(t)
		pod := shellPod(n, ns, "hello", "echo hello from the node; id -u")
		pod = runPod(t, n, pod, corev1.PodSucceeded)
		logs := podLog(t, n, pod)
		if !strings.Contains(logs, "hello from the node\n0\n") {
			t.Errorf("log of %s = %q, want the greeting and uid 0", pod.Name, logs)
		}
	})
	t.Run("NodeServiceByDNSName", func(t *testing.T) {
		ns := n.Namespace(t)
		ctx := context.Background()
		labels := map[string]string{"app": "web"}
		web := shellPod(n, ns, "web", "mkdir /www && echo served-by-web > /www/index.html && exec httpd -f -p 8080 -h /www")
		dep := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To(int32(1)),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: web.Spec},
			},
		}
		dep.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
		if _, err := n.Clientset.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
			Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
		}
		if _, err := n.Clientset.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// From another pod, by the Service's name: CoreDNS answers its
		// ClusterIP and kube-proxy's rules carry the call to the pod.
		// busybox's nslookup and nc: Debian's static busybox crashes in
		// glibc's NSS lookups (wget looks up the "http" service even for
		// an address), which the image has no modules for.
		name := "web." + ns + ".svc.cluster.local"
		client := shellPod(n, ns, "client", "for i in $(seq 60); do "+
			"ip=$(nslookup "+name+" | awk '/^Name:/ {f=1} f && /^Address/ {print $2; exit}'); "+
			"[ -n \"$ip\" ] && printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 $ip 80 | grep served-by-web && exit 0; "+
			"sleep 1; done; nslookup "+name+"; exit 1")
		client = runPod(t, n, client, corev1.PodSucceeded)
		if logs := podLog(t, n, client); !strings.Contains(logs, "served-by-web") {
			t.Errorf("client pod's log = %q, want the page served by the Deployment", logs)
		}
	})
	t.Run("NodeServiceAccountToken", func(t *testing.T) {
		// A pod's projected token and the CA beside it reach the apiserver
		// through the kubernetes Service, as in-cluster clients (Knative's
		// activator and autoscaler) do.
		ctx := context.Background()
		ns := n.Namespace(t)
		bin, err := testbed.BuildStatic("./test/testbed/testdata/whoami", t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		img, err := testbed.StaticProgramImage("whoami", bin)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := n.Push(ctx, "whoami", "test", img)
		if err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "whoami", Namespace: ns},
			Spec: corev1.PodSpec{
				RestartPolicy:                 corev1.RestartPolicyNever,
				TerminationGracePeriodSeconds: ptr.To(int64(0)),
				Containers:                    []corev1.Container{{Name: "c", Image: ref}},
			},
		}
		pod = runPod(t, n, pod, corev1.PodSucceeded)
		if logs, want := podLog(t, n, pod), "user: system:serviceaccount:"+ns+":default\n"; logs != want {
			t.Errorf("whoami's log = %q, want %q", logs, want)
		}
	})
	t.Run("NodeTeardownLeavesNothing", func(t *testing.T) {
		stop()
		wantNothingLeft(t, before)
	})
}

// TestNodeKilledRunIsCleaned kills a process running a node with pods
// (SIGKILL: no cleanup runs) and checks the next start's clean step
// leaves nothing.
func TestNodeKilledRunIsCleaned(t *testing.T) {
	if _, err := testbed.NodeAvailable(); err != nil {
		testbed.SkipWithoutNode(t, err.Error())
	}
	before := cleanHost(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestNodeHelperProcess$", "-test.v", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), "SLESS_NODE_HELPER=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	up := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			t.Logf("node process: %s", sc.Text())
			if strings.Contains(sc.Text(), "NODE-UP") {
				up <- true
			}
		}
		close(up)
	}()
	select {
	case ok := <-up:
		if !ok {
			t.Fatal("the node process ended before its node was up")
		}
	case <-time.After(5 * time.Minute):
		t.Fatal("the node process did not bring its node up in 5 min")
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()

	mid, err := testbed.TakeNodeHostState()
	if err != nil {
		t.Fatal(err)
	}
	if len(before.Leftovers(mid)) == 0 {
		t.Fatal("the killed run left nothing to clean: the test does not test the clean step")
	}
	start := time.Now()
	if err := testbed.CleanNode(); err != nil {
		t.Errorf("clean the killed run's leftovers: %v", err)
	}
	t.Logf("cleaned a killed run in %v", time.Since(start).Round(time.Millisecond))
	wantNothingLeft(t, before)
}

// TestNodeHelperProcess is the node TestNodeKilledRunIsCleaned kills: it
// runs only in that test's child process.
func TestNodeHelperProcess(t *testing.T) {
	if os.Getenv("SLESS_NODE_HELPER") != "1" {
		t.Skip("runs as TestNodeKilledRunIsCleaned's child")
	}
	n, err := testbed.StartNode()
	if err != nil {
		t.Fatal(err)
	}
	ns := n.Namespace(t)
	runPod(t, n, shellPod(n, ns, "sleeper", "exec sleep 3600"), corev1.PodRunning)
	os.Stdout.WriteString("NODE-UP\n")
	select {}
}

// shellPod runs script in the shell image, without a service account
// token or Service environment, and stops at once when deleted.
func shellPod(n *testbed.Node, ns, name, script string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To(int64(0)),
			Containers: []corev1.Container{{
				Name: "c", Image: n.ShellImage, Command: []string{"/bin/sh", "-c", script},
			}},
		},
	}
}

// runPod creates pod and waits for it to reach phase.
func runPod(t *testing.T, n *testbed.Node, pod *corev1.Pod, phase corev1.PodPhase) *corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	pods := n.Clientset.CoreV1().Pods(pod.Namespace)
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		got, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err == nil && got.Status.Phase == phase {
			t.Logf("pod %s %s after %v", pod.Name, phase, time.Since(start).Round(time.Millisecond))
			return got
		}
		if err == nil && (got.Status.Phase == corev1.PodFailed || got.Status.Phase == corev1.PodSucceeded) {
			t.Fatalf("pod %s ended %s, want %s: %v\nlog: %s", pod.Name, got.Status.Phase, phase, got.Status, podLog(t, n, got))
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pod %s not %s: %v (last %v)", pod.Name, phase, ctx.Err(), got)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// podLog is the pod's log as the apiserver reads it from kubelet.
func podLog(t *testing.T, n *testbed.Node, pod *corev1.Pod) string {
	t.Helper()
	b, err := n.Clientset.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{}).Do(context.Background()).Raw()
	if err != nil {
		t.Errorf("log of pod %s: %v", pod.Name, err)
	}
	return string(b)
}
