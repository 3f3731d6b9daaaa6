package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
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
			if err := os.WriteFile(filepath.Join(dir, manifestName), []byte(tc.yaml), 0o644); err != nil {
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
			got := o.m.envVars()
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
			fn := &slessv1alpha1.Function{Spec: slessv1alpha1.FunctionSpec{Env: got}}
			if p := o.m.patch(fn); p != nil {
				t.Errorf("patch %v for a Function with the manifest's env", p)
			}
			if p := o.m.patch(&slessv1alpha1.Function{}); p == nil {
				t.Error("no patch for a Function without the manifest's env")
			}
		})
	}
}
