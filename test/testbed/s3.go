package testbed

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Server is a real S3-compatible server (versitygw, posix back end) on loopback.
type S3Server struct {
	Endpoint  string // host:port
	AccessKey string
	SecretKey string
	Region    string

	cmd    *exec.Cmd
	exited chan struct{}
	dir    string
}

var (
	s3Once   sync.Once
	s3Shared *S3Server
	s3Err    error
)

// SharedS3 is the package's S3 server, started on first use.
func SharedS3(t testing.TB) *S3Server {
	t.Helper()
	s3Once.Do(func() {
		s3Shared, s3Err = StartS3()
		if s3Err == nil {
			sharedMu.Lock()
			atExit(s3Shared.Stop)
			sharedMu.Unlock()
		}
	})
	if s3Err != nil {
		t.Fatalf("testbed: S3: %v", s3Err)
	}
	return s3Shared
}

// StartS3 starts a versitygw on loopback serving a fresh directory.
func StartS3() (*S3Server, error) {
	dir, err := os.MkdirTemp("", "sless-s3-")
	if err != nil {
		return nil, err
	}
	return startS3("127.0.0.1", dir)
}

// startS3 starts a versitygw on a free port of host, with its data and log
// in dir, which Stop removes.
func startS3(host, dir string) (*S3Server, error) {
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	port, err := freePortOn(host)
	if err != nil {
		return nil, err
	}
	s := &S3Server{
		Endpoint:  net.JoinHostPort(host, strconv.Itoa(port)),
		AccessKey: "sless-test-" + randomSuffix(4),
		SecretKey: randomSuffix(16),
		Region:    "us-east-1",
		dir:       dir,
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		return nil, err
	}
	s.cmd = exec.Command(filepath.Join(assets, "versitygw"), "--port", s.Endpoint, "-q", "posix", data)
	// Keys go through the environment so they are not on the command line.
	s.cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+s.AccessKey, "ROOT_SECRET_KEY="+s.SecretKey)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start versitygw: %w", err)
	}
	s.exited = make(chan struct{})
	go func() { _ = s.cmd.Wait(); logf.Close(); close(s.exited) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + s.Endpoint + "/")
		if err == nil {
			resp.Body.Close()
			return s, nil
		}
		if time.Now().After(deadline) {
			s.Stop()
			log, _ := os.ReadFile(filepath.Join(dir, "log"))
			return nil, fmt.Errorf("versitygw did not answer on %s: %v\n%s", s.Endpoint, err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop ends the server and deletes its data.
func (s *S3Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	_ = os.RemoveAll(s.dir)
}

// Client is a minio-go client for this server.
func (s *S3Server) Client() (*minio.Client, error) {
	return minio.New(s.Endpoint, &minio.Options{
		Creds:        credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""),
		Secure:       false,
		Region:       s.Region,
		BucketLookup: minio.BucketLookupPath,
	})
}

// Bucket creates a fresh bucket for one test and returns its name. Objects are
// left for the server's directory to take with it.
func (s *S3Server) Bucket(t testing.TB) string {
	t.Helper()
	c, err := s.Client()
	if err != nil {
		t.Fatalf("testbed: S3 client: %v", err)
	}
	name := "sless-test-" + strings.ToLower(randomSuffix(6))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.MakeBucket(ctx, name, minio.MakeBucketOptions{Region: s.Region}); err != nil {
		t.Fatalf("testbed: make bucket %s: %v", name, err)
	}
	return name
}
