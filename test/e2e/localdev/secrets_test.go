package localdev_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/console"
)

// A secret made through the REST API and rotated with the CLI reaches a
// real Python function and a Python (WSGI) service through secretKeyRef:
// after the rotation a new revision of each uses the new value. They use
// the value without printing it (they answer its SHA-256), so the audit that follows
// is of sless alone: no API answer (objects, lists, secrets, OpenAPI,
// invocation records, logs, builds, console pages), CLI output, line of
// sless dev's own stdout or stderr, or file of the data directory — logs,
// records, the sealed store itself — holds a value or its base64.
func TestSecretRotationReachesFunctionAndService(t *testing.T) {
	d := startDev(t, time.Minute)
	v1, v2 := "first-Zq8vN3-value", "second-Jp4rT7-value"
	digest := func(v string) string {
		sum := sha256.Sum256([]byte(v))
		return hex.EncodeToString(sum[:])
	}
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
	var answers []string
	api := func(method, path, ct string, b []byte) (int, []byte) {
		t.Helper()
		code, out := d.do(method, path, ct, b)
		answers = append(answers, method+" "+path+": "+string(out))
		return code, out
	}
	// The values go in as the API's base64 data, so that form is audited
	// too.
	secret, _ := json.Marshal(map[string]any{"metadata": map[string]any{"name": "db"},
		"data": map[string]string{"password": base64.StdEncoding.EncodeToString([]byte(v1))}, "stringData": map[string]string{"user": "app"}})
	if code, b := api("POST", "/v1/namespaces/e2e/secrets", "application/json", secret); code != 201 {
		t.Fatalf("create secret: %d %s", code, b)
	}

	body, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"name": "reader"},
		"spec": map[string]any{"runtime": "python3.12", "entrypoint": "main.handler",
			"env": []any{map[string]any{"name": "DB_PASSWORD", "valueFrom": map[string]any{
				"secretKeyRef": map[string]any{"name": "db", "key": "password"}}}},
			"source": map[string]any{"inline": map[string]any{"files": map[string]string{
				"main.py": "import hashlib, os\n\nprint('reader loaded', flush=True)\n\n" +
					"def handler(event, context):\n    print('checking the password', flush=True)\n" +
					"    return {'sha256': hashlib.sha256(os.environ.get('DB_PASSWORD', '').encode()).hexdigest()}\n"}}}},
	})
	if code, b := api("POST", "/v1/namespaces/e2e/functions", "application/json", body); code != 201 {
		t.Fatalf("create function: %d %s", code, b)
	}
	svcBody, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"name": "books"},
		"spec": map[string]any{"runtime": "python3.12", "entrypoint": "app.app",
			"env": []any{map[string]any{"name": "DB_PASSWORD", "valueFrom": map[string]any{
				"secretKeyRef": map[string]any{"name": "db", "key": "password"}}}},
			"source": map[string]any{"inline": map[string]any{"files": map[string]string{
				"app.py": "import hashlib, json, os\n\n" +
					"def app(environ, start_response):\n    print('books checking the password', flush=True)\n" +
					"    start_response('200 OK', [('Content-Type', 'application/json')])\n" +
					"    return [json.dumps({'sha256': hashlib.sha256(os.environ.get('DB_PASSWORD', '').encode()).hexdigest()}).encode()]\n"}}}},
	})
	if code, b := api("POST", "/v1/namespaces/e2e/services", "application/json", svcBody); code != 201 {
		t.Fatalf("create service: %d %s", code, b)
	}
	first := d.awaitReady("e2e", "reader", 3*time.Minute)
	if code, b := d.do("GET", "/fn/e2e/reader", "", nil); code != 200 || !strings.Contains(string(b), digest(v1)) {
		t.Fatalf("invoke before the rotation: %d %s, want the digest of the first value", code, b)
	}
	svcFirst := d.awaitServiceReady("e2e", "books", 3*time.Minute)
	if code, b := d.do("GET", "/svc/e2e/books/", "", nil); code != 200 || !strings.Contains(string(b), digest(v1)) {
		t.Fatalf("service before the rotation: %d %s, want the digest of the first value", code, b)
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
		if code == 200 && strings.Contains(string(b), digest(v2)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the function did not use the rotated value: %d %s", code, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for {
		code, b := d.do("GET", "/svc/e2e/books/", "", nil)
		if code == 200 && strings.Contains(string(b), digest(v2)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the service did not use the rotated value: %d %s", code, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, c := range []struct {
		what        string
		first, then fnStatus
	}{
		{"function", first, d.awaitReady("e2e", "reader", time.Minute)},
		{"service", svcFirst, d.awaitServiceReady("e2e", "books", time.Minute)},
	} {
		if c.then.Status.LatestReadyRevision == c.first.Status.LatestReadyRevision || c.then.Metadata.Generation != c.first.Metadata.Generation {
			t.Fatalf("%s: revision %s (generation %d) after the rotation, was %s (%d)", c.what, c.then.Status.LatestReadyRevision,
				c.then.Metadata.Generation, c.first.Status.LatestReadyRevision, c.first.Metadata.Generation)
		}
	}
	for range 3 {
		if code, b := d.do("GET", "/fn/e2e/reader?q=1", "", nil); code != 200 {
			t.Fatalf("invoke: %d %s", code, b)
		}
		if code, b := d.do("POST", "/svc/e2e/books/notes?q=1", "application/json", []byte(`{"text":"hi"}`)); code != 200 {
			t.Fatalf("call the service: %d %s", code, b)
		}
	}

	// Every place sless shows a function or a secret, each checked to
	// show what it is for, so that the audit below reads real answers.
	for out, want := range map[string]string{
		sless("secret", "list"):                   "db",
		sless("secret", "describe", "db"):         "password",
		sless("secret", "list", "-o", "json"):     `"password"`,
		sless("list"):                             "reader",
		sless("list", "-o", "yaml"):               "secretKeyRef",
		sless("describe", "reader"):               "DB_PASSWORD",
		sless("describe", "reader", "-o", "json"): `"secretKeyRef"`,
		sless("history", "reader"):                "200",
		sless("logs", "reader"):                   "checking the password",
		sless("services"):                         "books",
		sless("services", "-o", "json"):           `"secretKeyRef"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("a CLI answer lacks %q: %s", want, out)
		}
	}
	sless("logs", "reader", "--build", "latest")
	for _, path := range []string{
		"/v1/namespaces/e2e/secrets", "/v1/namespaces/e2e/secrets/db",
		"/v1/namespaces/e2e/functions", "/v1/namespaces/e2e/functions/reader",
		"/v1/namespaces/e2e/functions/reader/invocations", "/v1/namespaces/e2e/functions/reader/logs",
		"/v1/namespaces/e2e/functions/reader/builds/latest/logs", "/openapi.json",
		"/v1/namespaces/e2e/services", "/v1/namespaces/e2e/services/books",
		"/v1/namespaces/e2e/services/books/logs", "/v1/namespaces/e2e/services/books/builds/latest/logs",
	} {
		if code, b := api("GET", path, "", nil); code != 200 {
			t.Errorf("GET %s: %d %s", path, code, b)
		}
	}
	if _, b := api("GET", "/v1/namespaces/e2e/functions/reader/logs", "", nil); !strings.Contains(string(b), "checking the password") {
		t.Errorf("the function's log lacks its own line: %s", b)
	}
	if _, b := api("GET", "/v1/namespaces/e2e/services/books/logs", "", nil); !strings.Contains(string(b), "books checking the password") {
		t.Errorf("the service's log lacks its own line: %s", b)
	}
	if _, b := api("GET", "/v1/namespaces/e2e/functions/reader/invocations", "", nil); strings.Count(string(b), `"status":200`) < 5 {
		t.Errorf("the invocation records lack the calls: %s", b)
	}
	// The console's pages, signed in with the token's cookie.
	for _, path := range []string{"/console/", "/console/namespaces/e2e/functions/", "/console/namespaces/e2e/functions/reader",
		"/console/namespaces/e2e/functions/reader/invocations", "/console/namespaces/e2e/functions/reader/source/main.py"} {
		req, _ := http.NewRequest("GET", d.base+path, nil)
		req.AddCookie(&http.Cookie{Name: console.CookieName, Value: d.token})
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var page bytes.Buffer
		_, _ = page.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("console %s: %d %s", path, resp.StatusCode, page.String())
		}
		answers = append(answers, "console "+path+": "+page.String())
	}
	sless("secret", "delete", "db")
	d.stop()

	if _, err := os.Stat(filepath.Join(d.data, "sless.db")); err != nil {
		t.Fatalf("the sealed store: %v", err)
	}
	var files int
	for _, v := range []string{v1, v2} {
		forms := []string{v, base64.StdEncoding.EncodeToString([]byte(v)), base64.RawStdEncoding.EncodeToString([]byte(v)),
			base64.URLEncoding.EncodeToString([]byte(v))}
		for _, form := range forms {
			for _, a := range answers {
				if strings.Contains(a, form) {
					t.Errorf("an API answer shows %q: %s", form, a)
				}
			}
			if strings.Contains(cliOut.String(), form) {
				t.Errorf("the CLI printed %q: %s", form, cliOut.String())
			}
			// The data directory: the sealed store, sless dev's stdout and
			// stderr (e2e-dev.out, e2e-dev.log), the function logs, the
			// invocation records, the serving state.
			files = 0
			err := filepath.WalkDir(d.data, func(path string, e fs.DirEntry, err error) error {
				if err != nil || e.IsDir() {
					return err
				}
				files++
				b, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				if bytes.Contains(b, []byte(form)) {
					t.Errorf("%s holds %q", path, form)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("audited %d API and console answers, %d bytes of CLI output, %d files of the data directory", len(answers), cliOut.Len(), files)
	if st, err := os.Stat(filepath.Join(d.data, "e2e-dev.log")); err != nil || st.Size() == 0 {
		t.Errorf("sless dev's stderr was not captured: %v", err)
	}
	if _, err := os.Stat(filepath.Join(d.data, "e2e-dev.out")); err != nil {
		t.Errorf("sless dev's stdout was not captured: %v", err)
	}
	st, err := os.Stat(filepath.Join(d.data, "secrets.key"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("secrets.key: %v %v", st, err)
	}
}
