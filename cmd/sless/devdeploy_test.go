package main

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sless-dev/sless/test/testbed"
)

// TestDevdeployAppliesEachKind runs make run's deploy tool against a live
// sless dev: a Trigger and a FunctionJob land in their own collections, not
// in /functions, and a kind sless does not serve is refused by name.
func TestDevdeployAppliesEachKind(t *testing.T) {
	root, err := testbed.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "devdeploy")
	build := exec.Command("go", "build", "-o", bin, "./hack/devdeploy")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build devdeploy: %v\n%s", err, out)
	}
	const token = "0123456789abcdef0123"
	addr := startDev(t)
	tokenFile := filepath.Join(t.TempDir(), "dev-token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	deploy := func(file string) (string, error) {
		out, err := exec.Command(bin, "-url", "http://"+addr, "-token-file", tokenFile, "-f", file).CombinedOutput()
		return string(out), err
	}
	status := func(path string) int {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/namespaces/default/"+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct{ file, kind, path, name string }{
		{"trigger-cron.yaml", "Trigger", "triggers", "greeter-morning"},
		{"job.yaml", "FunctionJob", "jobs", "greeter-backfill"},
	} {
		out, err := deploy(filepath.Join(root, "examples", "kubectl", tc.file))
		if err != nil || !strings.Contains(out, "applied "+tc.kind+" default/"+tc.name) {
			t.Fatalf("%s: %v\n%s", tc.file, err, out)
		}
		if got := status(tc.path + "/" + tc.name); got != http.StatusOK {
			t.Errorf("%s/%s: %d after devdeploy", tc.path, tc.name, got)
		}
		if got := status("functions/" + tc.name); got != http.StatusNotFound {
			t.Errorf("a %s was posted as a Function: functions/%s answers %d", tc.kind, tc.name, got)
		}
	}
	// A SlessService from an example folder, packed and uploaded, is built,
	// Ready and called through /svc/.
	hello := filepath.Join(root, "examples", "services", "hello-node")
	out, err := exec.Command(bin, "-url", "http://"+addr, "-token-file", tokenFile, "-f", filepath.Join(hello, "service.yaml"),
		"-dir", hello, "-query", "name=Ada").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "deployed service default/hello-node") ||
		!strings.Contains(string(out), `{"message":"Hello, Ada!","path":"/"}`) || !strings.Contains(string(out), "/svc/default/hello-node/") {
		t.Fatalf("hello-node: %v\n%s", err, out)
	}
	widget := filepath.Join(t.TempDir(), "widget.yaml")
	if err := os.WriteFile(widget, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: w\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := deploy(widget); err == nil || !strings.Contains(out, `kind "ConfigMap" is not one sless serves`) {
		t.Fatalf("a ConfigMap manifest: %v\n%s", err, out)
	}
}
