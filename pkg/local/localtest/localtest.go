// Package localtest holds what the tests of local mode's packages share: a
// scheme, a store in a temporary directory, functions, build contexts and
// builds.
package localtest

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/sless-dev/sless/pkg/adapter"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/local/apiserver"
	"github.com/sless-dev/sless/pkg/local/blobs"
	"github.com/sless-dev/sless/pkg/local/build"
	"github.com/sless-dev/sless/pkg/source"
)

// Scheme knows the sless kinds and core/v1.
func Scheme(t testing.TB) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := slessv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := corev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// OpenStore opens a store in t's temporary directory, closed when t ends,
// and returns it and its file.
func OpenStore(t testing.TB) (*apiserver.Store, string) {
	path := filepath.Join(t.TempDir(), "sless.db")
	st, err := apiserver.Open(path, Scheme(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, path
}

// Function is a Python function of inline source, not yet stored.
func Function(ns, name string) *slessv1alpha1.Function {
	return &slessv1alpha1.Function{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: slessv1alpha1.FunctionSpec{
			WorkloadSpec: slessv1alpha1.WorkloadSpec{
				Runtime:    "python3.12",
				Entrypoint: "main.handler",
				Source:     slessv1alpha1.FunctionSource{Inline: &slessv1alpha1.InlineSource{Files: map[string]string{"main.py": "def handler(e, c): return 1\n"}}},
			},
		},
	}
}

// FunctionNamed is a function with nothing but its name.
func FunctionNamed(ns, name string) *slessv1alpha1.Function {
	return &slessv1alpha1.Function{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// StoreContext makes the build context of files and stores it as the
// reconciler would, returning the build input.
func StoreContext(t testing.TB, blobs *blobs.Store, runtime, entrypoint string, files map[string]string) adapter.BuildInput {
	t.Helper()
	bc, err := source.BuildContext(source.Input{Runtime: runtime, Entrypoint: entrypoint, Files: source.Inline(files)})
	if err != nil {
		t.Fatal(err)
	}
	key := "ns/contexts/" + strings.TrimPrefix(bc.Digest, "sha256:") + ".tar.gz"
	if err := blobs.Put(context.Background(), key, bytes.NewReader(bc.TarGz), int64(len(bc.TarGz)), "application/gzip"); err != nil {
		t.Fatal(err)
	}
	return adapter.BuildInput{Digest: bc.Digest, Location: blobs.Location(key)}
}

// AwaitBuild polls EnsureBuild until the build is done.
func AwaitBuild(t testing.TB, b *build.Builder, fn *slessv1alpha1.Function, in adapter.BuildInput, within time.Duration) adapter.BuildState {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		st, err := b.EnsureBuild(context.Background(), fn, in)
		if err != nil {
			t.Fatal(err)
		}
		if st.Done {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("build not done within %s: %+v", within, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
