package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/client"
	"github.com/sless-dev/sless/test/testbed"
)

// sless deploy against a live sless dev builds an example folder as a
// SlessService, prints its /svc/ URL once Ready, and a second deploy of
// changed code (kind given by --service this time) rolls it.
func TestDeployServiceAgainstSlessDev(t *testing.T) {
	root, err := testbed.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	const token = "0123456789abcdef0123"
	addr := startDev(t)
	env := map[string]string{client.EnvServer: "http://" + addr, client.EnvToken: token, client.EnvConfig: filepath.Join(t.TempDir(), "config")}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	deploy := func(args ...string) (url, progress string) {
		t.Helper()
		var out, errb bytes.Buffer
		if err := runDeploy(ctx, &out, &errb, func(k string) string { return env[k] }, args); err != nil {
			t.Fatalf("sless deploy %q: %v\n%s", args, err, errb.String())
		}
		return strings.TrimSpace(out.String()), errb.String()
	}
	get := func(url string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	example := filepath.Join(root, "examples", "services", "hello-node")
	url, progress := deploy(example)
	if want := "http://" + addr + "/svc/default/hello-node/"; url != want {
		t.Fatalf("deploy printed %q, want %q", url, want)
	}
	for _, want := range []string{"Created service hello-node.", "BuildSucceeded ✓", "Ready "} {
		if !strings.Contains(progress, want) {
			t.Errorf("deploy's progress %q lacks %q", progress, want)
		}
	}
	if code, body := get(url + "?name=Ada"); code != http.StatusOK || body != `{"message":"Hello, Ada!","path":"/"}` {
		t.Errorf("GET %s?name=Ada: %d %s", url, code, body)
	}

	// The same folder with new code and no kind in its sless.yaml: the
	// flag makes it the service's, and maxScale changes with the code.
	dir := t.TempDir()
	files := map[string]string{
		"sless.yaml": "name: hello-node\nruntime: nodejs22\nentrypoint: server.server\nmaxScale: 2\n",
		"server.js": `const http = require('node:http');
module.exports = { server: http.createServer((req, res) => { res.end('v2 ' + req.method + ' ' + req.url); }) };
`,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	url2, progress := deploy(dir, "--service")
	if url2 != url || !strings.Contains(progress, "Updated service hello-node.") {
		t.Fatalf("second deploy: %q / %q", url2, progress)
	}
	if code, body := get(url + "a/b?c=d"); code != http.StatusOK || body != "v2 GET /a/b?c=d" {
		t.Errorf("GET %sa/b?c=d after the roll: %d %q, want the new code and the whole path", url, code, body)
	}
	api, err := client.New("http://"+addr, token)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := api.GetService(ctx, "default", "hello-node")
	if err != nil || svc.Spec.MaxScale == nil || *svc.Spec.MaxScale != 2 {
		t.Errorf("the service after the second deploy: %+v, %v", svc, err)
	}
	if _, progress := deploy(dir, "--service"); !strings.Contains(progress, "Service hello-node already has this code.") {
		t.Errorf("a third deploy: %q", progress)
	}
	// The function of that name was never made.
	if _, err := api.GetFunction(ctx, "default", "hello-node"); err == nil {
		t.Error("deploying a service made a Function too")
	}

	// sless delete --service takes it away; without the flag NAME is a
	// Function's, and there is none.
	var out bytes.Buffer
	getenv := func(k string) string { return env[k] }
	if err := runDelete(ctx, &out, getenv, []string{"hello-node"}); err == nil {
		t.Error("sless delete hello-node deleted something: no Function has that name")
	}
	if err := runDelete(ctx, &out, getenv, []string{"--service", "hello-node", "--wait"}); err != nil || out.String() != "service hello-node deleted\n" {
		t.Fatalf("sless delete --service: %v, %q", err, out.String())
	}
	if _, err := api.GetService(ctx, "default", "hello-node"); !client.IsNotFound(err) {
		t.Errorf("the service after sless delete --service: %v", err)
	}
}
