package testbed_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	corev1 "k8s.io/api/core/v1"

	"github.com/sless-dev/sless/test/testbed"
)

// startRegistry runs the bed's registry on loopback for one test.
func startRegistry(t *testing.T) *testbed.Registry {
	t.Helper()
	reg, err := testbed.StartRegistry(t.TempDir(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Stop)
	return reg
}

func wantStatus(t *testing.T, what string, err error, code int) {
	t.Helper()
	var te *transport.Error
	if !errors.As(err, &te) || te.StatusCode != code {
		t.Errorf("%s: got %v, want HTTP %d", what, err, code)
	}
}

func TestRegistryNeedsCredentials(t *testing.T) {
	reg := startRegistry(t)
	shell, err := testbed.ShellImage(testbed.BusyboxPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	_, err = testbed.PushImage(ctx, reg.Host, "shell", "anon", shell, authn.Anonymous)
	wantStatus(t, "push without credentials", err, http.StatusUnauthorized)
	_, err = testbed.PushImage(ctx, reg.Host, "shell", "wrong", shell, &authn.Basic{Username: reg.Username, Password: "not-" + reg.Password})
	wantStatus(t, "push with a wrong password", err, http.StatusUnauthorized)

	// The push Secret's config file is what kaniko reads as
	// /kaniko/.docker/config.json, through the same keychain.
	sec := reg.PushSecret("fn-ns", "sless-registry")
	if sec.Type != corev1.SecretTypeDockerConfigJson {
		t.Errorf("push Secret of type %s", sec.Type)
	}
	docker := t.TempDir()
	if err := os.WriteFile(filepath.Join(docker, "config.json"), sec.Data[corev1.DockerConfigJsonKey], 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", docker)
	repo, err := name.NewRepository(reg.Host+"/fn-ns/shell", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	auth, err := authn.DefaultKeychain.Resolve(repo)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := testbed.PushImage(ctx, reg.Host, "fn-ns/shell", "latest", shell, auth)
	if err != nil {
		t.Fatalf("push with the Secret's credentials: %v", err)
	}
	if want := reg.Host + "/fn-ns/shell@" + digestOf(t, shell); ref != want {
		t.Errorf("reference %s, want %s", ref, want)
	}

	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	_, err = remote.Image(r, remote.WithContext(ctx))
	wantStatus(t, "pull without credentials", err, http.StatusUnauthorized)
	got := pulled(t, ref, reg.Auth())
	if digestOf(t, got) != digestOf(t, shell) {
		t.Errorf("pulled %s, pushed %s", digestOf(t, got), digestOf(t, shell))
	}
}
