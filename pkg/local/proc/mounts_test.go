//go:build linux

package proc

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A process with mounts sees each at its target, bound read-only or as a
// tmpfs of its size, while the rest of the machine's files stay visible
// and nothing is made on the host, not even the directories on the way.
func TestMountsMakeAViewOfTheirOwn(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("mount namespaces without root need unprivileged user namespaces; run as root")
	}
	s := newSupervisor(t, SupervisorOptions{})
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "token"), []byte("s3cret"), 0o644); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	// Targets under a directory the host has (/etc), under one it lacks
	// (/sless-test-…), and deep under one it has (/var/lib/…).
	missing := "/sless-test-" + filepath.Base(work)
	script := `cat /etc/sless-test/db/token; echo; ls /etc/hostname >/dev/null && echo etc-visible
echo x > /etc/sless-test/db/new 2>/dev/null && echo wrote-ro || echo ro-refused
head -c 16384 /dev/zero > ` + missing + `/scratch/big 2>/dev/null && echo over-limit-written || echo over-limit-refused; rm -f ` + missing + `/scratch/big
head -c 512 /dev/zero > ` + missing + `/scratch/small && echo small-written
ls /var/lib/sless-test/deep && echo deep-ok; pwd`
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = work
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	p, err := s.Start(cmd, Spec{Name: "fn.default.mounts", Mounts: []Mount{
		{Target: "/etc/sless-test/db", Source: src, ReadOnly: true},
		{Target: missing + "/scratch", TmpfsBytes: 8192},
		{Target: "/var/lib/sless-test/deep"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{"s3cret", "etc-visible", "ro-refused", "over-limit-refused", "small-written", "deep-ok", work} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	for _, p := range []string{"/etc/sless-test", missing, "/var/lib/sless-test"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was made on the host", p)
		}
	}
	if _, err := os.Stat(filepath.Join(src, "new")); err == nil {
		t.Error("a read-only mount took a write")
	}
	if roots, _ := os.ReadDir(filepath.Join(s.dir, "roots")); len(roots) != 0 {
		t.Errorf("the process's root is left: %v", roots)
	}
}
