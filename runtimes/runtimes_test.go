package runtimes_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sless-dev/sless/runtimes"
)

func TestCanonical(t *testing.T) {
	for name, want := range map[string]string{
		"python3.12": "python3.12", "python3.11": "python3.12",
		"nodejs22": "nodejs22", "nodejs20": "nodejs22", "go1.24": "go1.24",
	} {
		if got, ok := runtimes.Canonical(name); !ok || got != want {
			t.Errorf("Canonical(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
	for _, bad := range []string{"", "python3", "node", "go", "Python3.12", "go1.23"} {
		if _, ok := runtimes.Canonical(bad); ok {
			t.Errorf("Canonical(%q) accepted", bad)
		}
	}
}

func TestRuntimeMetadata(t *testing.T) {
	for _, rt := range runtimes.All() {
		if !strings.Contains(rt.BaseImage, ":") || strings.HasSuffix(rt.BaseImage, ":latest") {
			t.Errorf("%s: base image %q is not pinned by version", rt.Name, rt.BaseImage)
		}
		files := rt.WrapperFiles()
		if len(files) == 0 {
			t.Errorf("%s: no wrapper files", rt.Name)
		}
		for name := range files {
			if strings.Contains(name, "test") {
				t.Errorf("%s: test file %s embedded in the wrapper", rt.Name, name)
			}
		}
		if df := string(rt.BaseDockerfile()); !strings.Contains(df, "FROM "+rt.BaseImage) || !strings.Contains(df, "/sless/runtime") {
			t.Errorf("%s: base Dockerfile does not start from %s with the wrapper under /sless/runtime", rt.Name, rt.BaseImage)
		}
		if err := fs.WalkDir(rt.Wrapper(), ".", func(p string, d fs.DirEntry, err error) error {
			if err == nil && strings.HasSuffix(p, "_test.go") {
				t.Errorf("%s: %s embedded", rt.Name, p)
			}
			return err
		}); err != nil {
			t.Error(err)
		}
	}
	gomod := string(mustLookup(t, "go1.24").WrapperFiles()["go.mod"])
	if !strings.HasPrefix(gomod, "module "+runtimes.GoLibraryModule+"\n") {
		t.Errorf("Go library go.mod = %q", gomod)
	}
}

func mustLookup(t *testing.T, name string) *runtimes.Runtime {
	rt, ok := runtimes.Lookup(name)
	if !ok {
		t.Fatalf("no runtime %s", name)
	}
	return rt
}

func TestSteps(t *testing.T) {
	has := func(names ...string) func(string) bool {
		return func(n string) bool {
			for _, x := range names {
				if x == n {
					return true
				}
			}
			return false
		}
	}
	tests := []struct {
		runtime string
		files   []string
		want    string
	}{
		{"python3.12", nil, ""},
		{"python3.12", []string{"requirements.txt"}, "python3 -m pip install --no-cache-dir --disable-pip-version-check --no-warn-script-location --target .deps -r requirements.txt"},
		{"nodejs22", nil, ""},
		{"nodejs22", []string{"package.json"}, "npm install --omit=dev --no-audit --no-fund"},
		{"nodejs22", []string{"package.json", "package-lock.json"}, "npm ci --omit=dev --no-audit --no-fund"},
		{"go1.24", nil, "go build -trimpath -o ../bin/function ."},
	}
	for _, tc := range tests {
		var got []string
		for _, st := range mustLookup(t, tc.runtime).Steps(has(tc.files...)) {
			got = append(got, strings.Join(st.Args, " "))
		}
		if strings.Join(got, "; ") != tc.want {
			t.Errorf("%s %v: steps %q, want %q", tc.runtime, tc.files, got, tc.want)
		}
	}
}

func TestLocalCommandNeedsAContext(t *testing.T) {
	if _, err := runtimes.LocalCommand(t.TempDir(), runtimes.LocalOptions{}); err == nil {
		t.Fatal("LocalCommand accepted a directory without sless.json")
	}
}

// A function's process inherits the environment of whoever starts it, but
// none of its SLESS_* variables: sless dev's own settings (its dev token,
// database URL) are not the function's, and a stray SLESS_MODE or
// SLESS_TIMEOUT_SECONDS would change how the wrapper runs. The contract's
// own variables are set, and the rest of the environment passes.
func TestLocalCommandEnvironment(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, runtimes.ManifestFile), []byte(`{"runtime":"python3.12","entrypoint":"main.handler"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"SLESS_DEV_TOKEN": "dev-token-of-the-platform", "SLESS_DATABASE_URL": "postgres://u:secret@db/sless",
		"SLESS_MODE": "job", "SLESS_TIMEOUT_SECONDS": "1", "SLESS_PAYLOAD": `{"stray":true}`,
		"HOME_FOR_TEST": "kept",
		// sless dev's own tracing settings: the endpoint passes, its service name does not.
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SERVICE_NAME": "sless",
	} {
		t.Setenv(k, v)
	}
	opts := runtimes.LocalOptions{Port: 9000, FunctionName: "fn", Namespace: "ns", Revision: "fn-00001",
		Python: "/usr/bin/python3", Env: []string{"GREETING=hi"}}
	serve, err := runtimes.LocalCommand(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	job, err := runtimes.LocalJobCommand(dir, opts, []byte(`{"x":1}`), "/tmp/term")
	if err != nil {
		t.Fatal(err)
	}
	// A Function's own env names its service as it likes.
	opts.Env = []string{"OTEL_SERVICE_NAME=mine"}
	own, err := runtimes.LocalCommand(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  []string
		want map[string]string // "" for must be absent
	}{
		{"serve", serve.Env, map[string]string{
			"SLESS_DEV_TOKEN": "", "SLESS_DATABASE_URL": "", "SLESS_MODE": "", "SLESS_TIMEOUT_SECONDS": "", "SLESS_PAYLOAD": "",
			"SLESS_FUNCTION_NAME": "fn", "SLESS_REVISION": "fn-00001", "PORT": "9000", "GREETING": "hi", "HOME_FOR_TEST": "kept",
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SERVICE_NAME": "fn",
		}},
		{"own service name", own.Env, map[string]string{"OTEL_SERVICE_NAME": "mine"}},
		{"job", job.Env, map[string]string{
			"SLESS_DEV_TOKEN": "", "SLESS_DATABASE_URL": "", "SLESS_TIMEOUT_SECONDS": "",
			"SLESS_MODE": "job", "SLESS_PAYLOAD": `{"x":1}`, "GREETING": "hi", "HOME_FOR_TEST": "kept",
		}},
	} {
		// exec.Cmd uses the last of duplicate keys, and so does this.
		got := map[string]string{}
		for _, kv := range tc.env {
			k, v, _ := strings.Cut(kv, "=")
			got[k] = v
		}
		for k, want := range tc.want {
			if v, ok := got[k]; want == "" && ok {
				t.Errorf("%s: %s=%q is passed to the function", tc.name, k, v)
			} else if want != "" && v != want {
				t.Errorf("%s: %s=%q, want %q", tc.name, k, v, want)
			}
		}
	}
}
