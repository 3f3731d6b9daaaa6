package blobs_test

import (
	"bytes"
	"context"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sless-dev/sless/pkg/adapter/s3/storetest"
	"github.com/sless-dev/sless/pkg/local/blobs"
)

func TestBlobsPutGetExistsDelete(t *testing.T) {
	b, err := blobs.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	storetest.Contract(t, b)
	body := storetest.Body
	u, err := url.Parse(b.Location("ns/fn2/context/b.tar.gz"))
	if err != nil || u.Scheme != "file" {
		t.Fatalf("Location = %q, want a file:// URL", b.Location("ns/fn2/context/b.tar.gz"))
	}
	if got, err := os.ReadFile(filepath.FromSlash(u.Path)); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("reading Location: %q, %v", got, err)
	}
}

func TestBlobsRefuseBadKeysAndWrongSizes(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	b, err := blobs.New(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"", "/abs", "a/../../etc/passwd", "a//b", "a/./b", "dir/", `a\b`, "a/.put-x", "nul\x00"} {
		if err := b.Put(ctx, key, strings.NewReader("x"), 1, ""); err == nil {
			t.Errorf("Put(%q) stored; want an error", key)
		}
	}
	if err := b.Put(ctx, "short", strings.NewReader("abc"), 5, ""); err == nil {
		t.Error("Put with a body shorter than size stored")
	}
	if err := b.Put(ctx, "long", strings.NewReader("abcdef"), 3, ""); err == nil {
		t.Error("Put with a body longer than size stored")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := b.Put(cancelled, "cancelled", strings.NewReader("abc"), 3, ""); err == nil {
		t.Error("Put with a cancelled context stored")
	}
	entries, _ := os.ReadDir(root)
	if len(entries) != 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("refused puts left files behind: %v", names)
	}
}

// Concurrent writers of one key leave one whole object, never a mix.
func TestBlobsConcurrentPutsOfOneKey(t *testing.T) {
	ctx := context.Background()
	b, err := blobs.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	bodies := [][]byte{bytes.Repeat([]byte("a"), 1<<20), bytes.Repeat([]byte("b"), 1<<20)}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(body []byte) {
			defer wg.Done()
			if err := b.Put(ctx, "k/obj", bytes.NewReader(body), int64(len(body)), ""); err != nil {
				t.Error(err)
			}
		}(bodies[i%2])
	}
	wg.Wait()
	rc, _, err := b.Get(ctx, "k/obj")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(got, bodies[0]) && !bytes.Equal(got, bodies[1]) {
		t.Fatal("concurrent puts left a mixed object")
	}
	entries, _ := os.ReadDir(filepath.Join(b.Root(), "k"))
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %d entries", len(entries))
	}
}
