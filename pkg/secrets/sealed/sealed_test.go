package sealed_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/local/apiserver"
	"github.com/sless-dev/sless/pkg/secrets"
	"github.com/sless-dev/sless/pkg/secrets/sealed"
)

const value = "hunter2-0123456789-the-value"

func open(t *testing.T, dir string) (*apiserver.Store, *sealed.Store) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	objects, err := apiserver.Open(filepath.Join(dir, "sless.db"), scheme)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { objects.Close() })
	s, err := sealed.LoadKey(filepath.Join(dir, "secrets.key"))
	if err != nil {
		t.Fatal(err)
	}
	return objects, &sealed.Store{Objects: objects, Sealer: s}
}

// The store file holds no value in the clear, the key file is 0600, and a
// value comes back as it went in.
func TestValuesSealedAtRest(t *testing.T) {
	dir := t.TempDir()
	objects, store := open(t, dir)
	ctx := context.Background()
	sec := secrets.Make("default", "db", map[string][]byte{"password": []byte(value)}, time.Now())
	sec.StringData = map[string]string{"user": value + "-user"}
	if err := store.Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	if sec.ResourceVersion == "" || string(sec.Data["password"]) != value {
		t.Fatalf("after create: rv %q data %q", sec.ResourceVersion, sec.Data)
	}
	got := &corev1.Secret{}
	if err := store.Get(ctx, client.ObjectKey{Namespace: "default", Name: "db"}, got); err != nil {
		t.Fatal(err)
	}
	if string(got.Data["password"]) != value || string(got.Data["user"]) != value+"-user" {
		t.Fatalf("read back %q", got.Data)
	}
	raw := &corev1.Secret{}
	if err := objects.Get(ctx, client.ObjectKey{Namespace: "default", Name: "db"}, raw); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw.Data["password"], []byte(value)) {
		t.Fatal("the object store holds the value in the clear")
	}
	// Rotate, then read the file: neither the old nor the new value.
	got.Data["password"] = []byte(value + "-rotated")
	if err := store.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	if err := objects.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := os.ReadFile(filepath.Join(dir, "sless.db"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(db, []byte(value)) || bytes.Contains(db, []byte("hunter2")) {
		t.Fatal("sless.db holds a value in the clear")
	}
	for _, f := range []string{"sless.db", "secrets.key"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %04o, want 0600", f, st.Mode().Perm())
		}
	}
	// The same key file opens it again after a restart.
	_, again := open(t, dir)
	got = &corev1.Secret{}
	if err := again.Get(ctx, client.ObjectKey{Namespace: "default", Name: "db"}, got); err != nil {
		t.Fatal(err)
	}
	if string(got.Data["password"]) != value+"-rotated" {
		t.Fatalf("after restart %q", got.Data["password"])
	}
}

// A ciphertext changed on disk, moved to another key, or opened with
// another key file is refused with an error that says so.
func TestTamperedValueRefused(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, raw *corev1.Secret)
	}{
		{"flipped byte", func(_ *testing.T, raw *corev1.Secret) { raw.Data["password"][len(raw.Data["password"])-1] ^= 1 }},
		{"moved to another key", func(_ *testing.T, raw *corev1.Secret) { raw.Data["other"] = raw.Data["password"] }},
		{"truncated", func(_ *testing.T, raw *corev1.Secret) { raw.Data["password"] = raw.Data["password"][:10] }},
		{"plain text", func(_ *testing.T, raw *corev1.Secret) { raw.Data["password"] = []byte(value) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objects, store := open(t, t.TempDir())
			if err := store.Create(ctx, secrets.Make("default", "db", map[string][]byte{"password": []byte(value)}, time.Now())); err != nil {
				t.Fatal(err)
			}
			raw := &corev1.Secret{}
			key := client.ObjectKey{Namespace: "default", Name: "db"}
			if err := objects.Get(ctx, key, raw); err != nil {
				t.Fatal(err)
			}
			tc.tamper(t, raw)
			if err := objects.Update(ctx, raw); err != nil {
				t.Fatal(err)
			}
			err := store.Get(ctx, key, &corev1.Secret{})
			if !errors.Is(err, sealed.ErrOpen) || !strings.Contains(err.Error(), "default/db") {
				t.Fatalf("Get of a tampered secret: %v", err)
			}
			if strings.Contains(err.Error(), value) {
				t.Fatal("the error shows the value")
			}
			if err := store.List(ctx, &corev1.SecretList{}); !errors.Is(err, sealed.ErrOpen) {
				t.Fatalf("List: %v", err)
			}
		})
	}

	// Another key file opens nothing.
	dir := t.TempDir()
	_, store := open(t, dir)
	if err := store.Create(ctx, secrets.Make("default", "db", map[string][]byte{"password": []byte(value)}, time.Now())); err != nil {
		t.Fatal(err)
	}
	raw := &corev1.Secret{}
	if err := store.Objects.Get(ctx, client.ObjectKey{Namespace: "default", Name: "db"}, raw); err != nil {
		t.Fatal(err)
	}
	other, err := sealed.LoadKey(filepath.Join(t.TempDir(), "other.key"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Open("default", "db", "password", raw.Data["password"]); !errors.Is(err, sealed.ErrOpen) {
		t.Fatalf("another key opened it: %v", err)
	}
}

func TestLoadKeyRefusals(t *testing.T) {
	dir := t.TempDir()
	loose := filepath.Join(dir, "loose.key")
	if err := os.WriteFile(loose, bytes.Repeat([]byte{7}, sealed.KeySize), 0o644); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "short.key")
	if err := os.WriteFile(short, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{loose: "chmod 600", short: "5 bytes, want 32"} {
		if _, err := sealed.LoadKey(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("LoadKey(%s): %v, want %q", filepath.Base(path), err, want)
		}
	}
	if _, err := sealed.LoadKey(filepath.Join(dir, "missing-dir", "k")); err == nil {
		t.Error("LoadKey in a missing directory succeeded")
	}
}
