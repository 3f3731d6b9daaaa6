package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/client"
	"github.com/sless-dev/sless/pkg/source"
)

// sless.yaml's secretEnv names secrets' keys; what cannot be one is refused
// before anything is uploaded.
func TestManifestSecretEnv(t *testing.T) {
	head := "name: f\nruntime: python3.12\nentrypoint: main.handler\n"
	for _, tc := range []struct {
		name, yaml, err string
		env             []slessv1alpha1.EnvVar
	}{
		{name: "value and secret", yaml: head + "env:\n  A: one\nsecretEnv:\n  DB_PASSWORD: db/password\n",
			env: []slessv1alpha1.EnvVar{{Name: "A", Value: "one"}, {Name: "DB_PASSWORD", ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}}}},
		{name: "no key", yaml: head + "secretEnv:\n  P: db\n", err: `secretEnv P: "db" is not SECRET/KEY`},
		{name: "empty secret", yaml: head + "secretEnv:\n  P: /password\n", err: `secretEnv P: "/password" is not SECRET/KEY`},
		{name: "key with a slash", yaml: head + "secretEnv:\n  P: db/a/b\n", err: `"db/a/b" is not SECRET/KEY`},
		{name: "in both maps", yaml: head + "env:\n  P: x\nsecretEnv:\n  P: db/password\n", err: "P is in both env and secretEnv"},
		{name: "misspelt key", yaml: head + "secretEnvs:\n  P: db/password\n", err: `unknown field "secretEnvs"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, source.ManifestFile), []byte(tc.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			o, err := parseDeploy([]string{dir})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := o.m.EnvVars()
			if len(got) != len(tc.env) {
				t.Fatalf("env %+v, want %+v", got, tc.env)
			}
			for i := range got {
				if got[i].Name != tc.env[i].Name || got[i].Value != tc.env[i].Value ||
					(got[i].ValueFrom == nil) != (tc.env[i].ValueFrom == nil) ||
					(got[i].ValueFrom != nil && *got[i].ValueFrom.SecretKeyRef != *tc.env[i].ValueFrom.SecretKeyRef) {
					t.Errorf("env[%d] %+v, want %+v", i, got[i], tc.env[i])
				}
			}
			// A Function that has them needs no patch; one without gets them.
			fn := &slessv1alpha1.Function{Spec: slessv1alpha1.FunctionSpec{WorkloadSpec: slessv1alpha1.WorkloadSpec{Env: got}}}
			if p := o.m.Patch(&fn.Spec); p != nil {
				t.Errorf("patch %v for a Function with the manifest's env", p)
			}
			if p := o.m.Patch(&slessv1alpha1.FunctionSpec{}); p == nil {
				t.Error("no patch for a Function without the manifest's env")
			}
		})
	}
}

// kind: service (or --service) makes sless.yaml a SlessService's, the only
// kind that may set a scale; what cannot be one is refused before upload.
func TestManifestKind(t *testing.T) {
	head := "name: web\nruntime: nodejs22\nentrypoint: server.server\n"
	for _, tc := range []struct {
		name, yaml string
		args       []string
		kind, err  string
	}{
		{name: "default is a function", yaml: head, kind: client.KindFunction},
		{name: "service", yaml: "kind: service\n" + head + "minScale: 0\nmaxScale: 3\ncontainerConcurrency: 10\n", kind: client.KindService},
		{name: "flag", yaml: head + "maxScale: 2\n", args: []string{"--service"}, kind: client.KindService},
		{name: "flag over kind function", yaml: "kind: function\n" + head, args: []string{"--service"}, kind: client.KindService},
		{name: "bad kind", yaml: "kind: job\n" + head, err: `kind "job" in sless.yaml: want function or service`},
		{name: "minScale on a function", yaml: head + "minScale: 1\n", err: "minScale in sless.yaml is for a service: write kind: service or give --service"},
		{name: "maxScale on a function", yaml: "kind: function\n" + head + "maxScale: 1\n", err: "maxScale in sless.yaml is for a service"},
		{name: "containerConcurrency on a function", yaml: head + "containerConcurrency: 1\n", err: "containerConcurrency in sless.yaml is for a service"},
		{name: "negative minScale", yaml: "kind: service\n" + head + "minScale: -1\n", err: "minScale -1: want 0 to 1000"},
		{name: "zero maxScale", yaml: "kind: service\n" + head + "maxScale: 0\n", err: "maxScale 0: want 1 to 1000"},
		{name: "max below min", yaml: "kind: service\n" + head + "minScale: 3\nmaxScale: 2\n", err: "maxScale 2 is below minScale 3"},
		{name: "concurrency too high", yaml: "kind: service\n" + head + "containerConcurrency: 1001\n", err: "containerConcurrency 1001: want 0 (no limit) to 1000"},
		{name: "service name starting with a digit", yaml: "kind: service\n" + head, args: []string{"--name", "1web"}, err: `name "1web": a DNS-1035 label`},
		{name: "service name too long", yaml: "kind: service\n" + head, args: []string{"--name", strings.Repeat("a", 53)}, err: "at most 52 characters"},
		{name: "no service name", yaml: "kind: service\nruntime: nodejs22\nentrypoint: server.server\n", err: "no service name"},
		{name: "scale not a number", yaml: "kind: service\n" + head + "minScale: two\n", err: "sless.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, source.ManifestFile), []byte(tc.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			o, err := parseDeploy(append([]string{dir}, tc.args...))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := o.m.KindOrDefault(); got != tc.kind {
				t.Errorf("kind %q, want %q", got, tc.kind)
			}
		})
	}
}
