package testbed

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// The node bed changes host state that outlives its processes: a network
// namespace and a veth, cgroups, mounts, sysctls, directories the node's
// programs create at fixed paths. Before it changes any of it, it writes
// what it is about to change to a state file at a well-known path, so that
// a run killed mid-way is undone by the next start (cleanNode).

// nodeBase is the node bed's fixed directory: one node per machine, and a
// next run must find what a killed one left.
func nodeBase() string { return filepath.Join(os.TempDir(), "sless-node") }

func nodeStatePath() string { return filepath.Join(os.TempDir(), "sless-node.state.json") }

func nodeLockPath() string { return filepath.Join(os.TempDir(), "sless-node.lock") }

// Fixed names and addresses of the node's network: one node per machine.
const (
	nodeNetns    = "sless-node"
	nodeVethHost = "sless-nh"
	nodeVethNode = "sless-nn"
	// NodeHostIP is the host side of the veth: the apiserver and registry
	// listen here, and pods reach the host at this address only.
	NodeHostIP = "10.201.0.1"
	// NodeIP is the node's address inside its network namespace, where
	// kubelet and CoreDNS listen.
	NodeIP      = "10.201.0.2"
	nodePodCIDR = "10.88.0.0/16"
	// nodeVethCIDR holds NodeHostIP and NodeIP.
	nodeVethCIDR = "10.201.0.0/30"
	// nodeServiceCIDR is the apiserver's Service range.
	nodeServiceCIDR = "10.0.0.0/24"
	// NodeName is the Node object's name.
	NodeName = "sless-node"
)

// nodeSysctls are the host-wide sysctls kubelet sets (kernel tunables) or a
// node program may; teardown writes back any that changed.
var nodeSysctls = []string{
	"kernel/panic", "kernel/panic_on_oops", "vm/overcommit_memory",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
	"net/netfilter/nf_conntrack_max", "net/ipv4/ip_forward",
}

// nodeHostPaths are paths the node's programs create whatever their
// configuration says; teardown removes those that did not exist before.
var nodeHostPaths = []string{
	"/var/log/containers", "/run/containerd", "/var/lib/cni", "/usr/libexec/kubernetes", "/run/mount", "/var/lib/kubelet",
}

// nodeState is what a node run changed on the host, as first found.
type nodeState struct {
	// Sysctls are the values before the first run (path under /proc/sys).
	Sysctls map[string]string `json:"sysctls"`
	// Absent are host paths that did not exist before the first run.
	Absent []string `json:"absent"`
	// NetnsDirAbsent is whether /run/netns did not exist (ip netns add
	// makes it a shared bind mount).
	NetnsDirAbsent bool `json:"netnsDirAbsent"`
	// Cgroups are cgroup directories the bed created, parents first.
	Cgroups []string `json:"cgroups"`
	// CgroupRoot is kubelet's cgroupRoot, the subtree pods run in.
	CgroupRoot string `json:"cgroupRoot"`
}

// newNodeState records the host as it is now, before any change.
func newNodeState() *nodeState {
	s := &nodeState{Sysctls: map[string]string{}}
	for _, k := range nodeSysctls {
		if b, err := os.ReadFile(filepath.Join("/proc/sys", k)); err == nil {
			s.Sysctls[k] = strings.TrimSpace(string(b))
		}
	}
	for _, p := range nodeHostPaths {
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			s.Absent = append(s.Absent, p)
		}
	}
	_, err := os.Stat("/run/netns")
	s.NetnsDirAbsent = errors.Is(err, os.ErrNotExist)
	return s
}

func (s *nodeState) save() error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := nodeStatePath() + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, nodeStatePath())
}

func loadNodeState() (*nodeState, error) {
	b, err := os.ReadFile(nodeStatePath())
	if err != nil {
		return nil, err
	}
	s := &nodeState{}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, fmt.Errorf("node state %s: %w", nodeStatePath(), err)
	}
	return s, nil
}

// lockNode takes the machine-wide node lock, waiting while another
// process's node runs. The lock dies with the process.
func lockNode() (*os.File, error) {
	if !nodeHeld.CompareAndSwap(false, true) {
		return nil, errors.New("this process already runs a node bed: stop it first")
	}
	f, err := os.OpenFile(nodeLockPath(), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		nodeHeld.Store(false)
		return nil, fmt.Errorf("node lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		return f, nil
	}
	fmt.Fprintf(os.Stderr, "testbed: waiting for another node bed on this machine to finish (%s)\n", nodeLockPath())
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		nodeHeld.Store(false)
		return nil, fmt.Errorf("node lock %s: %w", nodeLockPath(), err)
	}
	return f, nil
}
