package localdev_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A secret made and rotated with the CLI reaches a real Python function
// through secretKeyRef: after the rotation a new revision serves the new
// value. No API answer, CLI output, log or invocation record shows a value,
// and the data directory holds none in the clear.
func TestSecretRotationReachesFunction(t *testing.T) {
	d := startDev(t, time.Minute)
	v1, v2 := "first-Zq8vN3-value", "second-Jp4rT7-value"
	home := t.TempDir()
	var cliOut bytes.Buffer
	sless := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(slessBin, args...)
		cmd.Env = append(os.Environ(), "SLESS_SERVER="+d.base, "SLESS_TOKEN="+d.token, "SLESS_NAMESPACE=e2e",
			"SLESS_CONFIG="+filepath.Join(home, "config"))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("sless %s: %v: %s", strings.Join(args, " "), err, out.String())
		}
		cliOut.Write(out.Bytes())
		return out.String()
	}
	if out := sless("secret", "create", "db", "--from-literal", "password="+v1, "--from-literal", "user=app"); !strings.Contains(out, "secret db created: keys password, user") {
		t.Fatalf("create: %s", out)
	}

	body, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"name": "reader"},
		"spec": map[string]any{"runtime": "python3.12", "entrypoint": "main.handler",
			"env": []any{map[string]any{"name": "DB_PASSWORD", "valueFrom": map[string]any{
				"secretKeyRef": map[string]any{"name": "db", "key": "password"}}}},
			"source": map[string]any{"inline": map[string]any{"files": map[string]string{
				"main.py": "import os\n\ndef handler(event, context):\n    return {'password': os.environ.get('DB_PASSWORD', '')}\n"}}}},
	})
	var answers [][]byte
	api := func(method, path, ct string, b []byte) (int, []byte) {
		code, out := d.do(method, path, ct, b)
		answers = append(answers, out)
		return code, out
	}
	if code, b := api("POST", "/v1/namespaces/e2e/functions", "application/json", body); code != 201 {
		t.Fatalf("create function: %d %s", code, b)
	}
	first := d.awaitReady("e2e", "reader", 3*time.Minute)
	if code, b := d.do("GET", "/fn/e2e/reader", "", nil); code != 200 || !strings.Contains(string(b), v1) {
		t.Fatalf("invoke before the rotation: %d %s", code, b)
	}

	valueFile := filepath.Join(home, "password")
	if err := os.WriteFile(valueFile, []byte(v2), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := sless("secret", "rotate", "db", "--keep", "--from-file", "password="+valueFile); !strings.Contains(out, "secret db rotated: keys password, user") {
		t.Fatalf("rotate: %s", out)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		code, b := d.do("GET", "/fn/e2e/reader", "", nil)
		if code == 200 && strings.Contains(string(b), v2) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the function did not serve the rotated value: %d %s", code, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	now := d.awaitReady("e2e", "reader", time.Minute)
	if now.Status.LatestReadyRevision == first.Status.LatestReadyRevision || now.Metadata.Generation != first.Metadata.Generation {
		t.Fatalf("revision %s (generation %d) after the rotation, was %s (%d)", now.Status.LatestReadyRevision,
			now.Metadata.Generation, first.Status.LatestReadyRevision, first.Metadata.Generation)
	}

	for _, out := range []string{sless("secret", "list"), sless("secret", "describe", "db"), sless("secret", "list", "-o", "json")} {
		if !strings.Contains(out, "db") {
			t.Errorf("list/describe lack the secret: %s", out)
		}
	}
	api("GET", "/v1/namespaces/e2e/secrets", "", nil)
	api("GET", "/v1/namespaces/e2e/secrets/db", "", nil)
	api("GET", "/v1/namespaces/e2e/functions/reader", "", nil)
	if code, b := api("GET", "/v1/namespaces/e2e/functions/reader/invocations", "", nil); code != 200 || !strings.Contains(string(b), `"items"`) {
		t.Fatalf("invocations: %d %s", code, b)
	}
	sless("secret", "delete", "db")
	d.stop()

	for _, v := range []string{v1, v2} {
		for i, a := range answers {
			if bytes.Contains(a, []byte(v)) {
				t.Errorf("API answer %d shows a value: %s", i, a)
			}
		}
		if strings.Contains(cliOut.String(), v) {
			t.Errorf("the CLI printed a value: %s", cliOut.String())
		}
		// The data directory: the store, the dev log, the function logs,
		// the invocation records.
		err := filepath.WalkDir(d.data, func(path string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if bytes.Contains(b, []byte(v)) {
				t.Errorf("%s holds a value in the clear", path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	st, err := os.Stat(filepath.Join(d.data, "secrets.key"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("secrets.key: %v %v", st, err)
	}
}
