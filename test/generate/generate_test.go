// Package generate_test fails when the committed generated files (deepcopy
// functions and CRD manifests) differ from what `make generate` would write.
package generate_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sless-dev/sless/test/testbed"
)

// controllerGen is the pinned generator, the same the Makefile runs.
const controllerGen = "sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0"

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestGeneratedFilesAreCurrent(t *testing.T) {
	root, err := testbed.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	// Generate into a copy of the API package so the work tree is untouched.
	tmp := t.TempDir()
	for _, f := range []string{"go.mod", "go.sum", "hack/boilerplate.go.txt"} {
		copyFile(t, filepath.Join(root, f), filepath.Join(tmp, f))
	}
	apis := filepath.Join("pkg", "apis", "sless", "v1alpha1")
	sources, err := filepath.Glob(filepath.Join(root, apis, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range sources {
		if base := filepath.Base(src); base != "zz_generated.deepcopy.go" && filepath.Ext(base) == ".go" && !bytes.HasSuffix([]byte(base), []byte("_test.go")) {
			copyFile(t, src, filepath.Join(tmp, apis, base))
		}
	}
	cmd := exec.Command("go", "run", controllerGen,
		"object:headerFile=hack/boilerplate.go.txt", "crd:crdVersions=v1,maxDescLen=400",
		"paths=./pkg/apis/...", "output:crd:dir=config/crd")
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("controller-gen: %v\n%s", err, out)
	}

	generated := []string{filepath.Join(apis, "zz_generated.deepcopy.go")}
	crds, _ := filepath.Glob(filepath.Join(tmp, "config", "crd", "*.yaml"))
	if len(crds) != 5 {
		t.Fatalf("controller-gen wrote %d CRDs, want 5", len(crds))
	}
	for _, c := range crds {
		generated = append(generated, filepath.Join("config", "crd", filepath.Base(c)))
	}
	committed, _ := filepath.Glob(filepath.Join(root, "config", "crd", "*.yaml"))
	if len(committed) != len(crds) {
		t.Errorf("config/crd holds %d files, generation gives %d: run make generate", len(committed), len(crds))
	}
	for _, rel := range generated {
		want, err := os.ReadFile(filepath.Join(tmp, rel))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Errorf("%s is missing: run make generate", rel)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run make generate and commit the result", rel)
		}
	}
}
