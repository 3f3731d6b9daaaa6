package testbed

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// NodeAssets are the programs a real node runs: the ones
// `hack/test-assets.sh node` builds from the Go module proxy, and Debian's
// runc and CNI plugins (`hack/deps.sh realnode`).
type NodeAssets struct {
	// Dir is the directory hack/test-assets.sh keeps the built ones in.
	Dir                   string
	Kubelet               string
	KubeProxy             string
	KubeControllerManager string
	KubeScheduler         string
	Containerd            string
	ContainerdShim        string // containerd-shim-runc-v2
	Ctr                   string
	Kaniko                string // kaniko's executor
	CoreDNS               string
	Runc                  string
	// CNIBinDir holds the bridge, host-local and loopback plugins.
	CNIBinDir string
}

// DebianCNIBinDir is where Debian's containernetworking-plugins puts them.
const DebianCNIBinDir = "/usr/lib/cni"

var (
	nodeDirOnce sync.Once
	nodeDir     string
	nodeDirErr  error
)

// NodeAssetsDir is SLESS_NODE_ASSETS when set, else the directory
// `hack/test-assets.sh node-dir` names (keyed by the programs' versions). It
// builds nothing: `make test` builds the node's programs with the rest.
func NodeAssetsDir() (string, error) {
	if d := os.Getenv("SLESS_NODE_ASSETS"); d != "" {
		return d, nil
	}
	nodeDirOnce.Do(func() {
		root, err := RepoRoot()
		if err != nil {
			nodeDirErr = err
			return
		}
		var out, errOut bytes.Buffer
		cmd := exec.Command("bash", filepath.Join(root, "hack", "test-assets.sh"), "node-dir")
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			nodeDirErr = fmt.Errorf("hack/test-assets.sh node-dir: %w\n%s", err, errOut.String())
			return
		}
		nodeDir = strings.TrimSpace(out.String())
	})
	return nodeDir, nodeDirErr
}

// FindNodeAssets returns the node's programs, or an error naming every one
// missing and the command that provides it.
func FindNodeAssets() (NodeAssets, error) {
	dir, err := NodeAssetsDir()
	if err != nil {
		return NodeAssets{}, err
	}
	in := func(name string) string { return filepath.Join(dir, name) }
	a := NodeAssets{
		Dir:                   dir,
		Kubelet:               in("kubelet"),
		KubeProxy:             in("kube-proxy"),
		KubeControllerManager: in("kube-controller-manager"),
		KubeScheduler:         in("kube-scheduler"),
		Containerd:            in("containerd"),
		ContainerdShim:        in("containerd-shim-runc-v2"),
		Ctr:                   in("ctr"),
		Kaniko:                in("executor"),
		CoreDNS:               in("coredns"),
		CNIBinDir:             DebianCNIBinDir,
	}
	var built, debian []string
	for _, p := range []string{a.Kubelet, a.KubeProxy, a.KubeControllerManager, a.KubeScheduler,
		a.Containerd, a.ContainerdShim, a.Ctr, a.Kaniko, a.CoreDNS} {
		if !executable(p) {
			built = append(built, filepath.Base(p))
		}
	}
	if a.Runc, err = exec.LookPath("runc"); err != nil {
		debian = append(debian, "runc")
	}
	for _, plugin := range []string{"bridge", "host-local", "loopback"} {
		if !executable(filepath.Join(a.CNIBinDir, plugin)) {
			debian = append(debian, filepath.Join(a.CNIBinDir, plugin))
		}
	}
	var msgs []string
	if len(built) > 0 {
		msgs = append(msgs, fmt.Sprintf("%s missing in %s: build them with `bash hack/test-assets.sh node` (about 15 minutes cold on 2 cores)",
			strings.Join(built, ", "), dir))
	}
	if len(debian) > 0 {
		msgs = append(msgs, fmt.Sprintf("%s missing: install Debian's with `bash hack/deps.sh realnode`", strings.Join(debian, ", ")))
	}
	if len(msgs) > 0 {
		return a, fmt.Errorf("no real node: %s", strings.Join(msgs, "; "))
	}
	return a, nil
}

func executable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// SkipWithoutNode skips t because no real node can run here, saying why; with
// SLESS_REQUIRE_NODE=1 (a machine meant to run one) it fails t instead.
func SkipWithoutNode(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("SLESS_REQUIRE_NODE") == "1" {
		t.Fatalf("%s; SLESS_REQUIRE_NODE=1 forbids skipping", why)
	}
	t.Skip(why)
}

// NodeAssetsFor returns the node's programs, or skips t (fails it with
// SLESS_REQUIRE_NODE=1) when one is missing.
func NodeAssetsFor(t testing.TB) NodeAssets {
	t.Helper()
	a, err := FindNodeAssets()
	if err != nil {
		SkipWithoutNode(t, err.Error())
	}
	return a
}
