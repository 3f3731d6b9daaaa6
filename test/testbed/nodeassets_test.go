package testbed_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/sless-dev/sless/test/testbed"
)

// Every program of the node runs here and reports the version
// hack/test-assets.sh pins (its linker flags set them), or Debian's.
func TestNodeAssetsRun(t *testing.T) {
	a := testbed.NodeAssetsFor(t)
	for _, c := range []struct {
		bin  string
		args []string
		want string
	}{
		{a.Kubelet, []string{"--version"}, "Kubernetes v1.36.3"},
		{a.KubeProxy, []string{"--version"}, "Kubernetes v1.36.3"},
		{a.KubeControllerManager, []string{"--version"}, "Kubernetes v1.36.3"},
		{a.KubeScheduler, []string{"--version"}, "Kubernetes v1.36.3"},
		{a.Containerd, []string{"--version"}, "v2.3.7"},
		{a.ContainerdShim, []string{"-v"}, "v2.3.7"},
		{a.Ctr, []string{"--version"}, "v2.3.7"},
		{a.Kaniko, []string{"version"}, "v1.23.2"},
		{a.CoreDNS, []string{"-version"}, "CoreDNS-1.15.0"},
		{a.Runc, []string{"--version"}, "runc version"},
	} {
		out, err := exec.Command(c.bin, c.args...).CombinedOutput()
		if err != nil {
			t.Errorf("%s %s: %v: %s", c.bin, strings.Join(c.args, " "), err, out)
			continue
		}
		if !strings.Contains(string(out), c.want) {
			t.Errorf("%s %s said %q, want %q in it", c.bin, strings.Join(c.args, " "), out, c.want)
		}
	}
}

// A missing program is named with the command that provides it, so a
// skipped node test says how to run it.
func TestNodeAssetsMissing(t *testing.T) {
	t.Setenv("SLESS_NODE_ASSETS", t.TempDir())
	_, err := testbed.FindNodeAssets()
	if err == nil {
		t.Fatal("FindNodeAssets found programs in an empty directory")
	}
	for _, want := range []string{"kubelet", "containerd-shim-runc-v2", "executor", "coredns", "bash hack/test-assets.sh node"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}
