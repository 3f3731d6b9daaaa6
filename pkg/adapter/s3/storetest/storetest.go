// Package storetest holds the behaviour every s3.Store must show, so the S3
// client and local mode's directory store are held to one contract.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/sless-dev/sless/pkg/adapter/s3"
)

// Body is what Contract stores under "ns/fn2/context/b.tar.gz", which it leaves
// in place so the caller can check its own Location of that key.
var Body = []byte("hello build context")

// Contract puts, reads, probes and deletes objects in an empty store.
func Contract(t *testing.T, st s3.Store) {
	t.Helper()
	ctx := context.Background()
	if err := st.Put(ctx, "ns/fn/context/a.tar.gz", bytes.NewReader(Body), int64(len(Body)), "application/gzip"); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, "ns/fn2/context/b.tar.gz", bytes.NewReader(Body), -1, ""); err != nil {
		t.Fatal(err)
	}
	rc, size, err := st.Get(ctx, "ns/fn/context/a.tar.gz")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(got, Body) || size != int64(len(Body)) {
		t.Fatalf("Get = %q (%d bytes), want %q", got, size, Body)
	}
	if ok, err := st.Exists(ctx, "ns/fn/context/a.tar.gz"); !ok || err != nil {
		t.Fatalf("Exists = %v, %v; want true", ok, err)
	}
	for _, key := range []string{"ns/fn/missing", "ns/fn", "ns/fn/context/a.tar.gz/below"} {
		if ok, err := st.Exists(ctx, key); ok || err != nil {
			t.Errorf("Exists(%q) = %v, %v; want false, nil", key, ok, err)
		}
		if _, _, err := st.Get(ctx, key); !errors.Is(err, s3.ErrNotFound) {
			t.Errorf("Get(%q): %v, want ErrNotFound", key, err)
		}
	}
	if err := st.DeletePrefix(ctx, "ns/fn"); err == nil {
		t.Fatal("DeletePrefix without a trailing slash must refuse: it would also match ns/fn2/")
	}
	if err := st.DeletePrefix(ctx, "ns/fn/"); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.Exists(ctx, "ns/fn/context/a.tar.gz"); ok || err != nil {
		t.Fatalf("after DeletePrefix Exists = %v, %v; want false", ok, err)
	}
	if ok, _ := st.Exists(ctx, "ns/fn2/context/b.tar.gz"); !ok {
		t.Fatal("DeletePrefix ns/fn/ removed ns/fn2/")
	}
	if err := st.DeletePrefix(ctx, "ns/nothing/"); err != nil {
		t.Fatalf("DeletePrefix of nothing: %v", err)
	}
}
