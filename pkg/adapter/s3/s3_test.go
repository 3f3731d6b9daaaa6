package s3_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"testing"

	"github.com/sless-dev/sless/pkg/adapter/s3"
	"github.com/sless-dev/sless/test/testbed"
)

func TestMain(m *testing.M) { testbed.Main(m) }

func newStore(t *testing.T) *s3.Client {
	srv := testbed.SharedS3(t)
	c, err := s3.New(s3.Config{Endpoint: "http://" + srv.Endpoint, Bucket: testbed.SharedS3(t).Bucket(t), AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.EnsureBucket(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := c.EnsureBucket(context.Background()); err != nil {
		t.Fatalf("EnsureBucket twice: %v", err)
	}
	return c
}

func TestPutGetExistsDelete(t *testing.T) {
	ctx := context.Background()
	c := newStore(t)
	body := []byte("hello build context")
	if err := c.Put(ctx, "ns/fn/context/a.tar.gz", bytes.NewReader(body), int64(len(body)), "application/gzip"); err != nil {
		t.Fatal(err)
	}
	if err := c.Put(ctx, "ns/other/context/b.tar.gz", bytes.NewReader(body), -1, ""); err != nil {
		t.Fatal(err)
	}
	rc, size, err := c.Get(ctx, "ns/fn/context/a.tar.gz")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(got, body) || size != int64(len(body)) {
		t.Fatalf("Get = %q (%d bytes), want %q", got, size, body)
	}
	if ok, err := c.Exists(ctx, "ns/fn/context/a.tar.gz"); !ok || err != nil {
		t.Fatalf("Exists = %v, %v; want true", ok, err)
	}
	if _, _, err := c.Get(ctx, "ns/fn/missing"); !errors.Is(err, s3.ErrNotFound) {
		t.Fatalf("Get missing: %v, want ErrNotFound", err)
	}
	if err := c.DeletePrefix(ctx, "ns/fn"); err == nil {
		t.Fatal("DeletePrefix without a trailing slash must refuse: it would also match ns/fn2/")
	}
	if err := c.DeletePrefix(ctx, "ns/fn/"); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.Exists(ctx, "ns/fn/context/a.tar.gz"); ok || err != nil {
		t.Fatalf("after delete Exists = %v, %v; want false", ok, err)
	}
	if ok, _ := c.Exists(ctx, "ns/other/context/b.tar.gz"); !ok {
		t.Fatal("DeletePrefix removed an object outside its prefix")
	}
	if loc := c.Location("ns/x"); loc != "s3://"+c.Bucket()+"/ns/x" {
		t.Fatalf("Location = %s", loc)
	}
}

func TestUnreachableIsUnavailable(t *testing.T) {
	port, err := testbed.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	c, err := s3.New(s3.Config{Endpoint: "http://127.0.0.1:" + strconv.Itoa(port), Bucket: "bucket", PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Put(context.Background(), "k", bytes.NewReader([]byte("x")), 1, ""); !errors.Is(err, s3.ErrUnavailable) {
		t.Fatalf("Put to a closed port: %v, want ErrUnavailable", err)
	}
	if _, err := c.Exists(context.Background(), "k"); !errors.Is(err, s3.ErrUnavailable) {
		t.Fatalf("Exists on a closed port: %v, want ErrUnavailable", err)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []s3.Config{
		{Endpoint: "127.0.0.1:9000", Bucket: "bucket"},
		{Endpoint: "ftp://x", Bucket: "bucket"},
		{Endpoint: "http://x"},
	} {
		if _, err := s3.New(cfg); err == nil {
			t.Errorf("New(%+v) accepted a bad config", cfg)
		}
	}
}
