package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An API problem reads as one line: status, title, detail, field errors.
func TestDescribeErr(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{&Error{Status: 404, Title: "Not Found", Detail: `function "x" not found`}, `404 Not Found: function "x" not found`},
		{&Error{Status: 400, Title: "Invalid Function", Detail: "the spec is invalid",
			Fields: []FieldError{{Field: "spec.memoryMB", Detail: "must be at least 64"}}},
			"400 Bad Request: Invalid Function: the spec is invalid; spec.memoryMB: must be at least 64"},
		{&Error{Status: 401, Detail: "token expired"}, "401 Unauthorized: token expired (log in again: sless login)"},
		{fmt.Errorf("wrapped: %w", &Error{Status: 503}), "503 Service Unavailable"},
		{errors.New("plain"), "plain"},
	}
	for _, c := range cases {
		if got := Describe(c.err); got != c.want {
			t.Errorf("Describe(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

// The login file is the user's alone; the environment overrides it.
func TestLoginConfigFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sless")
	path := filepath.Join(dir, "config")
	if err := WriteLogin(path, &Login{Server: "http://127.0.0.1:1", Token: "secret", Namespace: "team"}); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{dir: 0o700, path: 0o600} {
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm() != want {
			t.Fatalf("%s: mode %v (%v), want %v", p, st.Mode().Perm(), err, want)
		}
	}
	env := map[string]string{EnvConfig: path}
	getenv := func(k string) string { return env[k] }
	c, ns, err := Connect(context.Background(), getenv, "")
	if err != nil || ns != "team" || c.Endpoint() != "http://127.0.0.1:1" {
		t.Fatalf("from the file: %q, %v", ns, err)
	}
	if _, ns, err = Connect(context.Background(), getenv, "other"); err != nil || ns != "other" {
		t.Fatalf("-n: %q, %v", ns, err)
	}
	env[EnvServer], env[EnvNamespace] = "http://127.0.0.1:2", "ci"
	if c, ns, err = Connect(context.Background(), getenv, ""); err != nil || ns != "ci" || c.Endpoint() != "http://127.0.0.1:2" {
		t.Fatalf("$SLESS_SERVER and $SLESS_NAMESPACE: %q, %v", ns, err)
	}
	os.WriteFile(path, []byte("{"), 0o600)
	if _, _, err := Connect(context.Background(), func(k string) string { return map[string]string{EnvConfig: path}[k] }, ""); err == nil ||
		!strings.Contains(err.Error(), "is not a sless login") {
		t.Fatalf("a broken file: %v", err)
	}
}
