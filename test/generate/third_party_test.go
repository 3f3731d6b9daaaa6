package generate_test

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"

	"github.com/sless-dev/sless/test/testbed"
)

// third_party/ is what hack/third-party.sh writes for go.mod's versions of
// Knative and Tekton: bump a pin and this fails until the script is run.
func TestThirdPartyIsCurrent(t *testing.T) {
	root, err := testbed.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(t.TempDir(), "third_party")
	cmd := exec.Command("bash", "hack/third-party.sh", want)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/third-party.sh: %v\n%s", err, out)
	}
	got, wanted := tree(t, filepath.Join(root, "third_party")), tree(t, want)
	for name, b := range wanted {
		if g, ok := got[name]; !ok {
			t.Errorf("third_party/%s is missing", name)
		} else if !bytes.Equal(g, b) {
			t.Errorf("third_party/%s differs from what hack/third-party.sh writes", name)
		}
	}
	var extra []string
	for name := range got {
		if _, ok := wanted[name]; !ok && name != "README.md" {
			extra = append(extra, name)
		}
	}
	sort.Strings(extra)
	for _, name := range extra {
		t.Errorf("third_party/%s is not written by hack/third-party.sh", name)
	}
	if t.Failed() {
		t.Log("run: bash hack/third-party.sh")
	}
}

func tree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
