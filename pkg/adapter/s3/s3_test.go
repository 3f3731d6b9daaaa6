package s3_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/sless-dev/sless/pkg/adapter/s3"
	"github.com/sless-dev/sless/pkg/adapter/s3/storetest"
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
	c := newStore(t)
	storetest.Contract(t, c)
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
