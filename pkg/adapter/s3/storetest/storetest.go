// Package storetest holds the behaviour every s3.Store must show, so the S3
// client and local mode's directory store are held to one contract.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"reflect"
	"sort"
	"testing"
	"time"

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
	listAndDelete(t, st)
}

// listAndDelete lists and deletes objects under "list/", leaving the rest.
func listAndDelete(t *testing.T, st s3.Store) {
	t.Helper()
	ctx := context.Background()
	before := time.Now().Add(-time.Minute)
	sizes := map[string]int64{"list/a/source/1.zip": 1, "list/a/source/2.zip": 2, "list/b/context/3.tar.gz": 3, "listing/c": 4}
	for key, n := range sizes {
		if err := st.Put(ctx, key, bytes.NewReader(bytes.Repeat([]byte("x"), int(n))), n, ""); err != nil {
			t.Fatal(err)
		}
	}
	list := func(prefix string) map[string]int64 {
		t.Helper()
		got := map[string]int64{}
		err := st.List(ctx, prefix, func(o s3.Object) error {
			if o.LastModified.Before(before) || o.LastModified.After(time.Now().Add(time.Minute)) {
				t.Errorf("List(%q): %s last modified %v, not about now", prefix, o.Key, o.LastModified)
			}
			got[o.Key] = o.Size
			return nil
		})
		if err != nil {
			t.Fatalf("List(%q): %v", prefix, err)
		}
		return got
	}
	for _, c := range []struct {
		prefix string
		want   []string
	}{
		{"list/", []string{"list/a/source/1.zip", "list/a/source/2.zip", "list/b/context/3.tar.gz"}},
		{"list", []string{"list/a/source/1.zip", "list/a/source/2.zip", "list/b/context/3.tar.gz", "listing/c"}},
		{"list/a/source/2", []string{"list/a/source/2.zip"}},
		{"list/b/", []string{"list/b/context/3.tar.gz"}},
		{"list/none/", nil},
	} {
		got := list(c.prefix)
		want := map[string]int64{}
		for _, k := range c.want {
			want[k] = sizes[k]
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("List(%q) = %v, want %v", c.prefix, got, want)
		}
	}
	stop := errors.New("enough")
	calls := 0
	if err := st.List(ctx, "list/", func(s3.Object) error { calls++; return stop }); !errors.Is(err, stop) || calls != 1 {
		t.Errorf("List whose callback fails: %v after %d calls, want its error after 1", err, calls)
	}

	gone, err := st.Delete(ctx, []string{"list/a/source/1.zip", "list/b/context/3.tar.gz", "list/missing.zip"})
	if err != nil {
		t.Fatalf("Delete: %v", err)
	}
	sort.Strings(gone)
	if want := []string{"list/a/source/1.zip", "list/b/context/3.tar.gz", "list/missing.zip"}; !reflect.DeepEqual(gone, want) {
		t.Errorf("Delete gone = %v, want %v (a missing key is gone too)", gone, want)
	}
	if got, want := list("list"), map[string]int64{"list/a/source/2.zip": 2, "listing/c": 4}; !reflect.DeepEqual(got, want) {
		t.Errorf("after Delete List = %v, want %v", got, want)
	}
	if gone, err := st.Delete(ctx, nil); err != nil || len(gone) != 0 {
		t.Errorf("Delete of no keys = %v, %v", gone, err)
	}
	if err := st.DeletePrefix(ctx, "list/"); err != nil {
		t.Fatal(err)
	}
	if err := st.DeletePrefix(ctx, "listing/"); err != nil {
		t.Fatal(err)
	}
}
