package testbed

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Stop tears the node down in the order that leaves nothing behind: pods,
// kube-proxy and CoreDNS, controllers, kubelet, containerd, then the
// control plane and registry, then (sweepNode) what is left of shims and
// containers, mounts, cgroups, the network namespace, sysctls and the
// host paths the node's programs made. It runs whatever failed before.
func (n *Node) Stop() error {
	n.stopMu.Lock()
	defer n.stopMu.Unlock()
	if n.stopped {
		return nil
	}
	n.stopped = true
	if n.signals != nil {
		signal.Stop(n.signals)
		close(n.signals)
	}
	start := time.Now()
	var errs []error
	// The controller-manager first: its ReplicaSets would make the pods
	// deleted next anew.
	for _, name := range []string{"kube-controller-manager", "kube-scheduler"} {
		stopProcess(n.proc(name), 10*time.Second)
	}
	if n.Clientset != nil && n.proc("kubelet").cmd != nil {
		errs = append(errs, n.deletePods())
	}
	for _, name := range []string{"kube-proxy", "coredns", "kubelet", "containerd"} {
		stopProcess(n.proc(name), 10*time.Second)
	}
	// Containers outlive kubelet and containerd (their shims keep them);
	// one that watches the apiserver (Knative's activator and autoscaler)
	// would hold its graceful shutdown for envtest's whole timeout.
	if n.state != nil && n.state.CgroupRoot != "" {
		errs = append(errs, killCgroups(n.state.CgroupRoot))
	}
	if n.Kube != nil {
		errs = append(errs, n.Kube.Stop())
	}
	n.stopRegistry()
	if n.s3 != nil {
		n.s3.Stop()
	}
	if n.pg != nil {
		errs = append(errs, n.pg.Stop())
	}
	if n.state != nil {
		errs = append(errs, sweepNode(n.state))
	}
	if n.lock != nil {
		_ = n.lock.Close()
		nodeHeld.Store(false)
	}
	n.Stopped = time.Since(start)
	return errors.Join(errs...)
}

// deletePods deletes every pod at once and waits for kubelet to stop them,
// so containerd is left with nothing running.
func (n *Node) deletePods() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pods := n.Clientset.CoreV1().Pods(metav1.NamespaceAll)
	list, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	zero := int64(0)
	for _, p := range list.Items {
		_ = n.Clientset.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	}
	for {
		list, err := pods.List(ctx, metav1.ListOptions{})
		if err == nil && len(list.Items) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			// The sweep kills what kubelet did not stop.
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// CleanNode undoes what an earlier node run left on this machine (one
// killed before its Stop ran), waiting for the machine's node lock first.
func CleanNode() error {
	f, err := lockNode()
	if err != nil {
		return err
	}
	defer func() { f.Close(); nodeHeld.Store(false) }()
	return cleanNode()
}

// cleanNode is CleanNode for a caller holding the lock.
func cleanNode() error {
	s, err := loadNodeState()
	if errors.Is(err, os.ErrNotExist) {
		s = nil
	} else if err != nil {
		return err
	}
	return sweepNode(s)
}

// sweepNode removes by force what the node leaves when its programs die
// without cleaning up; s (nil when no state file was found) says what the
// host was like before.
func sweepNode(s *nodeState) error {
	var errs []error
	errs = append(errs, killReferencing(nodeBase()))
	if s != nil && s.CgroupRoot != "" {
		errs = append(errs, killCgroups(s.CgroupRoot))
	}
	errs = append(errs, unmountUnder(nodeBase()))
	if s != nil && s.CgroupRoot != "" {
		errs = append(errs, removeCgroups(s.CgroupRoot, s.Cgroups))
	}
	errs = append(errs, removeNodeNet())
	if s != nil {
		if entries, err := os.ReadDir("/run/netns"); err == nil && len(entries) == 0 && s.NetnsDirAbsent {
			// ip netns add made /run/netns a bind mount of itself.
			_ = syscall.Unmount("/run/netns", syscall.MNT_DETACH)
			errs = append(errs, os.Remove("/run/netns"))
		}
		for k, v := range s.Sysctls {
			p := filepath.Join("/proc/sys", k)
			if cur, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(cur)) != v {
				errs = append(errs, os.WriteFile(p, []byte(v), 0o644))
			}
		}
		for _, p := range s.Absent {
			errs = append(errs, os.RemoveAll(p))
		}
	}
	errs = append(errs, os.RemoveAll(nodeBase()))
	if err := os.Remove(nodeStatePath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// killReferencing kills every process whose command line names a path
// under dir: the node's programs, containerd's shims (by their socket
// address), etcd and kube-apiserver (data and cert directories).
func killReferencing(dir string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		procs := processesReferencing(dir)
		if len(procs) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes left: %v", procs)
		}
		for pid := range procs {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// processesReferencing maps the pid of each process naming a path under
// dir in its command line to that command line.
func processesReferencing(dir string) map[int]string {
	out := map[int]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cmdline := strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ")
		if strings.Contains(cmdline, dir+"/") || strings.Contains(cmdline, "/run/netns/"+nodeNetns) {
			out[pid] = cmdline
		}
	}
	return out
}

// unmountUnder unmounts every mount at or under dir, deepest first
// (containers' rootfs, kubelet's volumes and its root's self-bind, the
// pod network namespaces' bind mounts), lazily when busy.
func unmountUnder(dir string) error {
	for round := 0; round < 5; round++ {
		mounts := mountsUnder(dir)
		if len(mounts) == 0 {
			return nil
		}
		for _, m := range mounts {
			if err := syscall.Unmount(m, 0); err != nil {
				_ = syscall.Unmount(m, syscall.MNT_DETACH)
			}
		}
	}
	if left := mountsUnder(dir); len(left) > 0 {
		return fmt.Errorf("mounts left: %v", left)
	}
	return nil
}

func mountsUnder(dir string) []string {
	var out []string
	for _, m := range mountPoints() {
		if m == dir || strings.HasPrefix(m, dir+"/") {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// mountPoints are the mount points of this mount namespace.
func mountPoints() []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 {
			out = append(out, unescapeMount(fields[4]))
		}
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
