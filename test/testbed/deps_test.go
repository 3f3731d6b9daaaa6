package testbed_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sless-dev/sless/test/testbed"
)

// On a machine that has them all, hack/deps.sh installs nothing.
func TestDepsPresent(t *testing.T) {
	root, err := testbed.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("bash", filepath.Join(root, "hack", "deps.sh"), "python3", "node", "postgres", "rabbitmq", "realnode").CombinedOutput()
	if err != nil || len(out) != 0 {
		t.Fatalf("deps.sh on a complete machine: %v: %q", err, out)
	}
}

// A user who may not install gets the one command that would, not a
// half-done install.
func TestDepsMissingWithoutRights(t *testing.T) {
	root, err := testbed.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal(err)
	}
	// A PATH with only id: python3 and node are missing, sudo too.
	bin := t.TempDir()
	id, err := exec.LookPath("id")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(id, filepath.Join(bin, "id")); err != nil {
		t.Fatal(err)
	}
	args := []string{filepath.Join(root, "hack", "deps.sh"), "python3", "node"}
	cmd := exec.Command(bash, args...)
	if os.Geteuid() == 0 {
		// As root the script would install; run it as nobody instead.
		cmd = exec.Command("runuser", append([]string{"-u", "nobody", "--", bash}, args...)...)
	}
	cmd.Env = []string{"PATH=" + bin}
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("deps.sh succeeded without python3 and node: %s", out)
	}
	want := "missing python3 nodejs; install them with: sudo apt-get update && sudo apt-get install -y -q --no-install-recommends python3 nodejs"
	if !strings.Contains(string(out), want) {
		t.Fatalf("deps.sh said %q, want %q", out, want)
	}
}

// The newest PostgreSQL of the machine serves the throwaway clusters.
func TestPostgresBinDir(t *testing.T) {
	dir, err := testbed.PostgresBinDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"initdb", "pg_ctl"} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Mode()&0o111 == 0 {
			t.Fatalf("%s in %s: %v", name, dir, err)
		}
	}
	t.Setenv("SLESS_TEST_POSTGRES_BIN", "/opt/pg/bin")
	if dir, _ := testbed.PostgresBinDir(); dir != "/opt/pg/bin" {
		t.Fatalf("SLESS_TEST_POSTGRES_BIN ignored: %s", dir)
	}
}
