// Package kubectl_test drives the real kubectl against the test apiserver:
// what users type must be accepted or refused with a message naming the field.
package kubectl_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sless-dev/sless/test/testbed"
)

func TestMain(m *testing.M) { testbed.Main(m) }

func kubectl(t *testing.T, kube *testbed.Kube, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.Command(testbed.Kubectl(t), append([]string{"--kubeconfig", kube.Kubeconfig}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

func examples(t *testing.T, dir string) []string {
	t.Helper()
	root, err := testbed.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "examples", dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples in examples/%s: %v", dir, err)
	}
	return files
}

func TestApplyValidExamples(t *testing.T) {
	kube := testbed.SharedKube(t)
	ns := kube.Namespace(t)
	files := append(examples(t, "kubectl"), examples(t, "functions/hello-python")...)
	for _, f := range files {
		out, errOut, err := kubectl(t, kube, "apply", "-n", ns, "-f", f)
		if err != nil {
			t.Errorf("kubectl apply -f %s: %v\n%s", filepath.Base(f), err, errOut)
			continue
		}
		if !strings.Contains(out, "created") {
			t.Errorf("kubectl apply -f %s said %q, want created", filepath.Base(f), out)
		}
	}

	out, errOut, err := kubectl(t, kube, "get", "fn", "-n", ns)
	if err != nil {
		t.Fatalf("kubectl get fn: %v\n%s", err, errOut)
	}
	header := strings.Fields(strings.SplitN(out, "\n", 2)[0])
	if want := []string{"NAME", "PHASE", "READY", "URL", "AGE"}; strings.Join(header, " ") != strings.Join(want, " ") {
		t.Errorf("kubectl get fn columns = %v, want %v\n%s", header, want, out)
	}
	for _, name := range []string{"greeter", "prebuilt", "adder", "hello-python"} {
		if !regexp.MustCompile(`(?m)^` + name + `\s`).MatchString(out) {
			t.Errorf("kubectl get fn lacks %s:\n%s", name, out)
		}
	}
	wide, _, err := kubectl(t, kube, "get", "functions.sless.dev", "-n", ns, "-o", "wide")
	if err != nil || !strings.Contains(strings.SplitN(wide, "\n", 2)[0], "RUNTIME") || !strings.Contains(wide, "nodejs20") {
		t.Errorf("kubectl get -o wide should show the runtime column: %v\n%s", err, wide)
	}
	for _, kind := range []string{"trg", "fnjob"} {
		if out, errOut, err := kubectl(t, kube, "get", kind, "-n", ns); err != nil || len(strings.Split(strings.TrimSpace(out), "\n")) < 2 {
			t.Errorf("kubectl get %s: %v %s\n%s", kind, err, errOut, out)
		}
	}
	// Defaults the schema fills are visible to kubectl users. Memory has
	// none there: unset, the site's default applies when the revision is
	// built (docs/api.md), so that spec.resources may name it instead.
	got, _, err := kubectl(t, kube, "get", "fn", "adder", "-n", ns, "-o", "jsonpath={.spec.memoryMB}|{.spec.timeoutSeconds}")
	if err != nil || got != "|30" {
		t.Errorf("defaults: got %q (%v), want \"|30\"", got, err)
	}
}

// fieldOf reads the field an invalid example must be refused for from its
// first comment line ("# Refused: spec.memoryMB must ...").
func fieldOf(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^# Refused: (spec\.[A-Za-z.]+[A-Za-z])`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s: first line must be '# Refused: <field> ...'", file)
	}
	return string(m[1])
}

func TestApplyInvalidExamplesIsRefused(t *testing.T) {
	kube := testbed.SharedKube(t)
	ns := kube.Namespace(t)
	files := examples(t, "invalid")
	if len(files) < 6 {
		t.Fatalf("want at least the six invalid examples, found %d", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			field := fieldOf(t, f)
			_, errOut, err := kubectl(t, kube, "apply", "-n", ns, "-f", f)
			if err == nil {
				t.Fatalf("kubectl apply accepted %s", filepath.Base(f))
			}
			if !strings.Contains(errOut, field) {
				t.Errorf("kubectl's error does not name %s:\n%s", field, errOut)
			}
		})
	}
	out, _, err := kubectl(t, kube, "get", "fn,trg", "-n", ns, "-o", "name")
	if err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("refused objects must not exist, found %q (%v)", out, err)
	}
}
