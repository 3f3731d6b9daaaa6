package testbed

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Namespaces the upstream controllers run in, as their release manifests
// install them.
const (
	KnativeNamespace = "knative-serving"
	TektonNamespace  = "tekton-pipelines"
)

// Primitives is Knative Serving's and Tekton Pipelines' own controllers,
// built from the versions go.mod pins, running against a Kube with their
// release configuration, and the stand-ins for what needs a node or a
// network (standins.go). Knative's controller makes Configurations,
// Revisions, Routes, Deployments and PodAutoscalers; Tekton's makes the
// TaskRun and its Pod. Their webhooks' defaulting and validation are the
// Kube's own (webhook.go).
type Primitives struct {
	Kube *Kube
	// Kubelet finishes build pods; tests set how per namespace.
	Kubelet *Kubelet

	dir      string
	procs    []*controllerProcess
	standins *standIns
	portLock *os.File
	// netns runs the controllers in the node's network namespace, where
	// their probes answer on probeHost.
	netns     bool
	probeHost string
}

type controllerProcess struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// knativeHealthPort is where Knative's controller serves its probes: v0.50
// binds :8080 with no way to move it (so does Tekton's, through the same
// knative.dev/pkg main), so one bed at a time per machine, taken in turn
// through lockKnativePort.
const knativeHealthPort = 8080

// StartPrimitives starts the controllers and stand-ins on k, which must be
// a bed of its own: the controllers act on every namespace, as they do on a
// cluster, and would fight the simulators. Stop them before k.
func StartPrimitives(k *Kube) (*Primitives, error) {
	return StartPrimitivesWith(k, PrimitivesOptions{Knative: true, Tekton: true, StandIns: true})
}

// PrimitivesOptions say which upstream controllers StartPrimitivesWith runs
// and with what.
type PrimitivesOptions struct {
	Knative, Tekton bool
	// StandIns play the kubelet, autoscaler and ingress; never with a real
	// node, whose kubelet runs the pods.
	StandIns bool
	// TektonImages are the Tekton controller's image flags
	// (NodeImages.TektonControllerArgs); digest-pinned placeholders, never
	// pulled, when empty.
	TektonImages []string
	// Config overrides keys of the release's config maps, by
	// namespace/name (e.g. NodeImages.KnativeDeploymentConfig under
	// knative-serving/config-deployment).
	Config map[string]map[string]string
	// InNodeNetns runs the controllers in the real node's network
	// namespace, where pods would run them: Knative's probes bind :8080
	// there, apart from the host's, so no machine-wide lock is taken.
	InNodeNetns bool
}

// StartPrimitivesWith starts the controllers o names on k, each with its
// release configuration.
func StartPrimitivesWith(k *Kube, o PrimitivesOptions) (*Primitives, error) {
	bin, err := ControllersDir()
	if err != nil {
		return nil, err
	}
	p := &Primitives{Kube: k, probeHost: "127.0.0.1", netns: o.InNodeNetns}
	if o.InNodeNetns {
		p.probeHost = NodeIP
	}
	// Tekton's controller, built on the same knative.dev/pkg main, binds
	// :8080 for its probes too, whatever PROBES_PORT says.
	if (o.Knative || o.Tekton) && !o.InNodeNetns {
		if p.portLock, err = lockKnativePort(); err != nil {
			return nil, err
		}
	}
	if p.dir, err = os.MkdirTemp("", "sless-primitives-"); err != nil {
		p.Stop()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fail := func(err error) (*Primitives, error) { p.Stop(); return nil, err }
	if err := installReleaseConfig(ctx, k, o.Config); err != nil {
		return fail(err)
	}
	if o.StandIns {
		if p.standins, p.Kubelet, err = startStandIns(k); err != nil {
			return fail(fmt.Errorf("stand-ins: %w", err))
		}
	}
	type probe struct {
		proc *controllerProcess
		port int
	}
	var probes []probe
	if o.Knative {
		if err := portFree(knativeHealthPort); err != nil && !o.InNodeNetns {
			return fail(fmt.Errorf("Knative's controller serves its probes on :%d, which is taken (by make run's sless dev, or another real-controller bed?): %w", knativeHealthPort, err))
		}
		knative, err := p.start("knative-controller", filepath.Join(bin, "knative-controller"), nil, map[string]string{
			"SYSTEM_NAMESPACE": KnativeNamespace, "POD_NAME": "controller-testbed",
			"CONFIG_LOGGING_NAME": "config-logging", "CONFIG_OBSERVABILITY_NAME": "config-observability",
		})
		if err != nil {
			return fail(err)
		}
		probes = append(probes, probe{knative, knativeHealthPort})
	}
	if o.Tekton {
		tektonProbes, err := FreePort()
		if err != nil {
			return fail(err)
		}
		images := o.TektonImages
		if len(images) == 0 {
			// Tekton's controller puts these images into the pods it
			// makes; no image is pulled without a node, so any
			// digest-pinned reference does.
			for _, flag := range []string{"entrypoint-image", "nop-image", "sidecarlogresults-image", "workingdirinit-image", "shell-image", "shell-image-win"} {
				images = append(images, "-"+flag, "registry.testbed.local/tekton/"+strings.TrimSuffix(flag, "-image")+"@sha256:"+strings.Repeat("7", 64))
			}
		}
		tekton, err := p.start("tekton-controller", filepath.Join(bin, "tekton-controller"), images, map[string]string{
			"SYSTEM_NAMESPACE": TektonNamespace, "KUBERNETES_MIN_VERSION": "v1.28.0",
			"CONFIG_DEFAULTS_NAME": "config-defaults", "CONFIG_LOGGING_NAME": "config-logging",
			"CONFIG_OBSERVABILITY_NAME": "config-observability", "CONFIG_FEATURE_FLAGS_NAME": "feature-flags",
			"CONFIG_LEADERELECTION_NAME": "config-leader-election-controller", "CONFIG_SPIRE": "config-spire",
			"METRICS_DOMAIN": "tekton.dev/pipeline", "PROBES_PORT": strconv.Itoa(tektonProbes),
		})
		if err != nil {
			return fail(err)
		}
		probes = append(probes, probe{tekton, tektonProbes})
	}
	for _, w := range probes {
		if err := w.proc.awaitReady(ctx, p.probeHost, w.port); err != nil {
			return fail(err)
		}
	}
	return p, nil
}

// ControllersDir is where hack/test-assets.sh keeps Knative's and Tekton's
// controllers, building them on first use.
func ControllersDir() (string, error) {
	return testAssets("controllers", "builds Knative's and Tekton's controllers from the module proxy")
}

// testAssets runs hack/test-assets.sh target (what says what it does, for
// the error) and returns the path it prints.
func testAssets(target, what string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	var out, errOut bytes.Buffer
	cmd := exec.Command("bash", filepath.Join(root, "hack", "test-assets.sh"), target)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("hack/test-assets.sh %s (%s): %w\n%s", target, what, err, errOut.String())
	}
	return strings.TrimSpace(out.String()), nil
}

// start runs one controller with the bed's kubeconfig and ports of its
// own on loopback (the binaries default to the same ones).
func (p *Primitives) start(name, bin string, args []string, env map[string]string) (*controllerProcess, error) {
	profiling, err := FreePort()
	if err != nil {
		return nil, err
	}
	metrics, err := FreePort()
	if err != nil {
		return nil, err
	}
	argv := append([]string{bin, "-kubeconfig", p.Kube.Kubeconfig}, args...)
	if p.netns {
		argv = inNodeNetns(argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "PROFILING_PORT="+strconv.Itoa(profiling),
		"METRICS_PROMETHEUS_PORT="+strconv.Itoa(metrics), "METRICS_PROMETHEUS_HOST=127.0.0.1")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	proc, err := startLogged(name, cmd, filepath.Join(p.dir, name+".log"))
	if err != nil {
		return nil, err
	}
	p.procs = append(p.procs, proc)
	return proc, nil
}

// startLogged starts cmd with its output in logPath. A test binary killed
// before Stop takes it along: no controller may hold its ports or act on a
// dead apiserver.
func startLogged(name string, cmd *exec.Cmd, logPath string) (*controllerProcess, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	proc := &controllerProcess{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		proc.err = cmd.Wait()
		logFile.Close()
		close(proc.done)
	}()
	return proc, nil
}

// awaitReady waits for the controller's readiness probe, which answers once
// its informers have synced.
func (c *controllerProcess) awaitReady(ctx context.Context, host string, port int) error {
	url := fmt.Sprintf("http://%s/readiness", net.JoinHostPort(host, strconv.Itoa(port)))
	for {
		select {
		case <-c.done:
			return fmt.Errorf("%s exited (%v) before it was ready:\n%s", c.name, c.err, c.Tail(40))
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready at %s: %w\n%s", c.name, url, ctx.Err(), c.Tail(40))
		case <-c.done:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Tail is the last n lines the controller logged.
func (c *controllerProcess) Tail(n int) string {
	b, _ := os.ReadFile(c.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// LogFiles are the paths of the controllers' logs, for tests that look
// for what a controller must never write.
func (p *Primitives) LogFiles() []string {
	out := make([]string, 0, len(p.procs))
	for _, c := range p.procs {
		out = append(out, c.log)
	}
	return out
}

// Logs writes the tail of each controller's log to t's log when t has
// failed: the reason a real controller did not act is there.
func (p *Primitives) Logs(t testing.TB) {
	t.Helper()
	if !t.Failed() {
		return
	}
	for _, c := range p.procs {
		t.Logf("%s log (last 60 lines, %s):\n%s", c.name, c.log, c.Tail(60))
	}
}

// Pause stops Knative's and Tekton's controllers where they stand
// (SIGSTOP) until the returned resume is called, so that a benchmark can
// time another client's work on the same cores and apiserver without
// theirs. Their leases outlive a pause of some seconds; what they missed
// they see from their watches, or relist, once resumed.
func (p *Primitives) Pause() (resume func()) {
	for _, c := range p.procs {
		_ = c.cmd.Process.Signal(syscall.SIGSTOP)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			for _, c := range p.procs {
				_ = c.cmd.Process.Signal(syscall.SIGCONT)
			}
		})
	}
}

// Stop ends the controllers (a polite signal, then a kill) and stand-ins.
func (p *Primitives) Stop() {
	for _, c := range p.procs {
		// A paused controller would not see the SIGTERM.
		_ = c.cmd.Process.Signal(syscall.SIGCONT)
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, c := range p.procs {
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	}
	if p.standins != nil {
		p.standins.stop()
	}
	if p.dir != "" && os.Getenv("SLESS_TESTBED_KEEP_LOGS") == "" {
		_ = os.RemoveAll(p.dir)
	}
	if p.portLock != nil {
		// Closing releases the flock; so does the process dying.
		_ = p.portLock.Close()
		p.portLock = nil
		knativePortHeld.Store(false)
	}
}

// lockKnativePort takes the machine-wide lock on knativeHealthPort, waiting
// while another process's bed holds it: go test runs packages in parallel,
// and two beds would fight over the port.
func lockKnativePort() (*os.File, error) {
	// A second bed of this process would wait on its own lock for ever.
	if !knativePortHeld.CompareAndSwap(false, true) {
		return nil, fmt.Errorf("this process already runs a real-controller bed (Knative binds :%d): stop it first", knativeHealthPort)
	}
	f, err := flockKnativePort()
	if err != nil {
		knativePortHeld.Store(false)
	}
	return f, err
}

var knativePortHeld atomic.Bool

func flockKnativePort() (*os.File, error) {
	path := filepath.Join(os.TempDir(), fmt.Sprintf("sless-testbed-knative-%d.lock", knativeHealthPort))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("real-controller bed lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		return f, nil
	}
	fmt.Fprintf(os.Stderr, "testbed: waiting for another real-controller bed on this machine to finish (%s)\n", path)
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("real-controller bed lock %s: %w", path, err)
	}
	return f, nil
}

// Namespace is k.Namespace with the default ServiceAccount that a cluster's
// controller-manager would make: Tekton looks the build's account up.
func (p *Primitives) Namespace(t testing.TB) string {
	t.Helper()
	ns := p.Kube.Namespace(t)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}
	if err := p.Kube.Client.Create(context.Background(), sa); err != nil {
		t.Fatalf("testbed: default ServiceAccount in %s: %v", ns, err)
	}
	return ns
}

// releaseConfig is what the bed installs of each project's release
// manifests besides CRDs: its namespace and the config maps its controller
// reads at start and watches.
var releaseConfig = []releaseManifest{
	{"knative.dev/serving", "config/core/100-namespace.yaml"},
	{"knative.dev/serving", "config/core/configmaps/*.yaml"},
	{"knative.dev/networking", "config/config-network.yaml"},
	{"github.com/tektoncd/pipeline", "config/100-namespace/*.yaml"},
	{"github.com/tektoncd/pipeline", "config/config-*.yaml"},
}

// configOverrides are the bed's changes to the release's config maps.
var configOverrides = map[string]map[string]string{
	// The release names the queue-proxy by a ko:// reference that only
	// its build resolves; no image is pulled here.
	KnativeNamespace + "/config-deployment": {"queue-sidecar-image": "registry.testbed.local/knative/queue@sha256:" + strings.Repeat("5", 64)},
}

func installReleaseConfig(ctx context.Context, k *Kube, extra map[string]map[string]string) error {
	overrides := map[string]map[string]string{}
	for _, o := range []map[string]map[string]string{configOverrides, extra} {
		for cm, data := range o {
			if overrides[cm] == nil {
				overrides[cm] = map[string]string{}
			}
			maps.Copy(overrides[cm], data)
		}
	}
	err := manifests(releaseConfig, func(file string, doc []byte) error {
		return applyConfig(ctx, k, file, doc, overrides)
	})
	if err != nil {
		return err
	}
	// No controller-manager makes the system namespaces' default accounts.
	for _, ns := range []string{KnativeNamespace, TektonNamespace} {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}
		if err := k.Client.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("default ServiceAccount in %s: %w", ns, err)
		}
	}
	return k.webhook.awaitConfig(ctx, k.Client)
}

// applyConfig creates doc, a document of a release manifest, when it is a
// Namespace or a ConfigMap, with overrides applied.
func applyConfig(ctx context.Context, k *Kube, file string, doc []byte, overrides map[string]map[string]string) error {
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(doc, &u.Object); err != nil {
		return fmt.Errorf("parse %s: %w", file, err)
	}
	if u.GetAPIVersion() != "v1" || (u.GetKind() != "Namespace" && u.GetKind() != "ConfigMap") {
		return nil
	}
	if o, ok := overrides[u.GetNamespace()+"/"+u.GetName()]; ok && u.GetKind() == "ConfigMap" {
		for key, v := range o {
			if err := unstructured.SetNestedField(u.Object, v, "data", key); err != nil {
				return err
			}
		}
	}
	if err := k.Client.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("%s %s/%s from %s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), file, err)
	}
	return nil
}

func portFree(port int) error {
	l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		return err
	}
	return l.Close()
}

var (
	primitivesOnce   sync.Once
	primitivesShared *Primitives
	primitivesErr    error
)

// SharedPrimitives is the package's bed with the real controllers, on a
// control plane of its own (never SharedKube's, where simulators run),
// started on first use and stopped by Main: controllers first, then the
// apiserver.
func SharedPrimitives(t testing.TB) *Primitives {
	t.Helper()
	primitivesOnce.Do(func() {
		k, err := StartKube(nil)
		if err != nil {
			primitivesErr = err
			return
		}
		p, err := StartPrimitives(k)
		if err != nil {
			_ = k.Stop()
			primitivesErr = err
			return
		}
		primitivesShared = p
		sharedMu.Lock()
		atExit(func() {
			p.Stop()
			if err := k.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "testbed: stop control plane: %v\n", err)
			}
		})
		sharedMu.Unlock()
	})
	if primitivesErr != nil {
		t.Fatalf("testbed: real Knative and Tekton: %v", primitivesErr)
	}
	return primitivesShared
}
