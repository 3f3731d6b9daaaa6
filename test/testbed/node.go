package testbed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Node is a real Kubernetes node on this machine (../shared DESIGN §10):
// containerd, runc and kubelet in a network namespace of their own, joined
// to a kube-apiserver that listens on the host side of the namespace's
// veth, with kube-controller-manager, kube-scheduler, kube-proxy and
// CoreDNS, and a registry the node pulls from. Pods run under the test's
// own cgroup and reach nothing but the host-side address. One node runs
// per machine; StartNode waits for the machine's lock and first undoes what
// a killed earlier run left.
type Node struct {
	Kube      *Kube
	Clientset kubernetes.Interface
	// Registry is the plain-HTTP registry the node pulls from (host:port on
	// NodeHostIP): distribution's, with htpasswd auth; containerd pulls
	// with its user's credentials.
	Registry string
	// PauseImage and ShellImage are digest-pinned references in Registry:
	// containerd's sandbox image and a busybox shell for test pods.
	PauseImage, ShellImage string
	// Started is how long StartNode took; Stopped how long Stop took.
	Started, Stopped time.Duration

	dir      string
	assets   NodeAssets
	state    *nodeState
	lock     *os.File
	reg      *Registry
	imagesMu sync.Mutex
	images   *NodeImages
	s3       *S3Server
	pg       *PostgresServer
	procs    []*controllerProcess
	stopMu   sync.Mutex
	stopped  bool
	signals  chan os.Signal
}

var nodeHeld atomic.Bool

// NodeAvailable says why a node cannot run here, or nil: it needs root,
// the node's programs (FindNodeAssets), busybox-static for the shell image,
// and ip, iptables, nsenter and gcc (for pause).
func NodeAvailable() (NodeAssets, error) {
	if os.Geteuid() != 0 {
		return NodeAssets{}, errors.New("no real node: it needs root (network namespace, cgroups, mounts)")
	}
	a, err := FindNodeAssets()
	if err != nil {
		return a, err
	}
	if !executable(BusyboxPath) {
		return a, fmt.Errorf("no real node: %s missing: install Debian's busybox-static with `bash hack/deps.sh realnode`", BusyboxPath)
	}
	for _, tool := range []string{"ip", "iptables", "nsenter", "gcc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return a, fmt.Errorf("no real node: %s missing (`bash hack/deps.sh realnode`): %w", tool, err)
		}
	}
	return a, nil
}

// StartNodeFor starts a node for t and stops it when t ends, or skips t
// (fails it with SLESS_REQUIRE_NODE=1) when no node can run here.
func StartNodeFor(t testing.TB) *Node {
	t.Helper()
	if _, err := NodeAvailable(); err != nil {
		SkipWithoutNode(t, err.Error())
	}
	n, err := StartNode()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		n.Logs(t)
		if err := n.Stop(); err != nil {
			t.Errorf("node teardown: %v", err)
		}
	})
	return n
}

// StartNode brings a node up: lock, clean what an earlier run left,
// network, cgroups, control plane, registry, containerd, kubelet and the
// cluster's add-ons, then waits for the node to be Ready and schedulable.
// Stop undoes all of it; call it on every exit path.
func StartNode() (*Node, error) {
	start := time.Now()
	assets, err := NodeAvailable()
	if err != nil {
		return nil, err
	}
	n := &Node{dir: nodeBase(), assets: assets}
	if n.lock, err = lockNode(); err != nil {
		return nil, err
	}
	// An interrupted test binary runs no cleanups: tear down here, then
	// exit as the signal would have.
	n.signals = make(chan os.Signal, 1)
	signal.Notify(n.signals, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		if sig, ok := <-n.signals; ok {
			fmt.Fprintf(os.Stderr, "testbed: %v: tearing the node down\n", sig)
			_ = n.Stop()
			os.Exit(2)
		}
	}()
	fail := func(step string, err error) (*Node, error) {
		err = fmt.Errorf("node: %s: %w", step, err)
		if serr := n.Stop(); serr != nil {
			err = errors.Join(err, serr)
		}
		return nil, err
	}
	if err := cleanNode(); err != nil { // the lock is held already
		return fail("clean what an earlier run left", err)
	}
	n.state = newNodeState()
	if n.state.CgroupRoot, err = nodeCgroupRoot(); err != nil {
		return fail("cgroup", err)
	}
	n.state.Cgroups = absentCgroups(n.state.CgroupRoot)
	// Written before any change, so a run killed from here on is undone
	// by the next start.
	if err := n.state.save(); err != nil {
		return fail("state file", err)
	}
	for _, d := range []string{"logs", "run", "cni/net.d", "cni/ipam", "containerd/certs.d", "kubelet", "podlogs", "plugins", "etcd", "apiserver"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o755); err != nil {
			return fail("directories", err)
		}
	}
	if err := setupNodeNet(); err != nil {
		return fail("network", err)
	}
	if err := makeCgroups(n.state.CgroupRoot); err != nil {
		return fail("cgroups", err)
	}
	if n.Kube, err = startKube(nil, n.configureKube); err != nil {
		return fail("control plane", err)
	}
	if n.Clientset, err = kubernetes.NewForConfig(n.Kube.Config); err != nil {
		return fail("client", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := n.startRegistry(ctx); err != nil {
		return fail("registry", err)
	}
	if err := n.startContainerd(ctx); err != nil {
		return fail("containerd", err)
	}
	if err := n.startKubelet(); err != nil {
		return fail("kubelet", err)
	}
	if err := n.startControllers(); err != nil {
		return fail("controller-manager and scheduler", err)
	}
	if err := n.startProxyAndDNS(ctx); err != nil {
		return fail("kube-proxy and CoreDNS", err)
	}
	if err := n.awaitReady(ctx); err != nil {
		return fail("node Ready", err)
	}
	n.Started = time.Since(start)
	return n, nil
}

// configureKube makes the apiserver listen on the host side of the veth,
// where the node reaches it, and keeps its state under the node's
// directory so a killed run's leftovers are found by path.
func (n *Node) configureKube(env *envtest.Environment) error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	api := &envtest.APIServer{CertDir: filepath.Join(n.dir, "apiserver")}
	api.SecureServing.Address = NodeHostIP
	api.SecureServing.Port = fmt.Sprint(port)
	if api.SecureServing.CA, err = writeAPIServerPKI(api.CertDir); err != nil {
		return fmt.Errorf("apiserver certificates: %w", err)
	}
	args := api.Configure()
	args.Set("advertise-address", NodeHostIP)
	args.Set("kubelet-preferred-address-types", "InternalIP")
	args.Set("service-cluster-ip-range", nodeServiceCIDR)
	// envtest disables the ServiceAccount admission plugin (no
	// controller-manager makes the accounts there); here one does, and
	// pods get their projected tokens as on a cluster.
	args.Disable("disable-admission-plugins")
	env.ControlPlane.APIServer = api
	env.ControlPlane.Etcd = &envtest.Etcd{DataDir: filepath.Join(n.dir, "etcd")}
	return nil
}

// awaitReady waits for the node's Ready condition and for the
// controller-manager to lift the not-ready taint, so Deployments schedule.
func (n *Node) awaitReady(ctx context.Context) error {
	for {
		node, err := n.Clientset.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err == nil && nodeReady(node) && len(node.Spec.Taints) == 0 {
			return nil
		}
		if dead := n.deadProcess(); dead != nil {
			return fmt.Errorf("%s exited (%v):\n%s", dead.name, dead.err, dead.Tail(30))
		}
		select {
		case <-ctx.Done():
			msg := fmt.Sprintf("%v (last error %v)", ctx.Err(), err)
			if node != nil {
				msg += fmt.Sprintf("; conditions %v taints %v", node.Status.Conditions, node.Spec.Taints)
			}
			return fmt.Errorf("%s\nkubelet log:\n%s", msg, n.proc("kubelet").Tail(30))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (n *Node) deadProcess() *controllerProcess {
	for _, p := range n.procs {
		select {
		case <-p.done:
			return p
		default:
		}
	}
	return nil
}

func (n *Node) proc(name string) *controllerProcess {
	for _, p := range n.procs {
		if p.name == name {
			return p
		}
	}
	return &controllerProcess{name: name, log: filepath.Join(n.dir, "logs", name+".log")}
}

// Logs writes the tail of each node program's log to t's log when t has
// failed.
func (n *Node) Logs(t testing.TB) {
	t.Helper()
	if !t.Failed() {
		return
	}
	for _, p := range n.procs {
		t.Logf("%s log (last 40 lines, %s):\n%s", p.name, p.log, p.Tail(40))
	}
}

// startProcess runs argv with its output in the node's log directory,
// inside the node's network namespace when inNetns. A test binary killed
// before Stop takes it along (the next start cleans the rest).
func (n *Node) startProcess(name string, inNetns bool, env []string, argv ...string) (*controllerProcess, error) {
	if inNetns {
		// Not `ip netns exec`: it remounts /sys, and kubelet then finds no
		// cgroup mounts.
		argv = append([]string{"nsenter", "--net=/run/netns/" + nodeNetns}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	p, err := startLogged(name, cmd, filepath.Join(n.dir, "logs", name+".log"))
	if err != nil {
		return nil, err
	}
	n.procs = append(n.procs, p)
	return p, nil
}

// stopProcess asks p to stop and kills it after grace.
func stopProcess(p *controllerProcess, grace time.Duration) {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}
