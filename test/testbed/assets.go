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

var (
	assetsOnce sync.Once
	assetsDir  string
	assetsErr  error
)

// RepoRoot is the directory that holds sless's go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.Contains(b, []byte("module github.com/sless-dev/sless\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no sless go.mod above the working directory")
		}
		dir = parent
	}
}

// AssetsDir is the directory holding kube-apiserver, etcd, kubectl and
// versitygw. It is KUBEBUILDER_ASSETS when that names a directory with all
// four, else what
// hack/test-assets.sh prints (the script builds them on first use and is a
// no-op afterwards).
func AssetsDir() (string, error) {
	assetsOnce.Do(func() {
		if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" && hasAssets(d) {
			assetsDir = d
			return
		}
		root, err := RepoRoot()
		if err != nil {
			assetsErr = err
			return
		}
		var out, errOut bytes.Buffer
		cmd := exec.Command("bash", filepath.Join(root, "hack", "test-assets.sh"))
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			assetsErr = fmt.Errorf("hack/test-assets.sh failed (it builds kube-apiserver, etcd, kubectl and versitygw with Go from the module proxy): %w\n%s", err, errOut.String())
			return
		}
		assetsDir = strings.TrimSpace(out.String())
		if !hasAssets(assetsDir) {
			assetsErr = fmt.Errorf("hack/test-assets.sh printed %q, which lacks kube-apiserver, etcd, kubectl or versitygw", assetsDir)
		}
	})
	return assetsDir, assetsErr
}

func hasAssets(dir string) bool {
	for _, name := range []string{"kube-apiserver", "etcd", "kubectl", "versitygw"} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// Kubectl is the kubectl the tests drive: built by hack/test-assets.sh from
// the apiserver's own release, so what the tests see is what a user of that
// release types, whatever kubectl (if any) the machine has.
func Kubectl(t testing.TB) string {
	t.Helper()
	dir, err := AssetsDir()
	if err != nil {
		t.Fatalf("testbed: %v", err)
	}
	return filepath.Join(dir, "kubectl")
}
