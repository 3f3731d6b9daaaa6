// Package s3 is the only code that talks to S3-compatible storage. Source zips
// and build contexts are stored content-addressed, so a Put of a key that
// exists is a no-op for the bytes and writers never race on content.
package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// ErrNotFound is returned for a key that has no object.
var ErrNotFound = errors.New("object not found")

// ErrUnavailable wraps failures to reach the storage at all, which callers
// answer with 503 and a retry rather than blaming the request.
var ErrUnavailable = errors.New("object storage unavailable")

// Store is what sless needs of blob storage. The S3 client implements it for
// clusters; local mode implements it on a directory.
type Store interface {
	// Put stores size bytes from r under key (size -1 when unknown).
	Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error
	// Get opens the object under key and tells its size.
	Get(ctx context.Context, key string) (io.ReadCloser, int64, error)
	// Exists reports whether key holds an object.
	Exists(ctx context.Context, key string) (bool, error)
	// DeletePrefix removes every object whose key starts with prefix.
	DeletePrefix(ctx context.Context, prefix string) error
	// List calls each for every object whose key starts with prefix (""
	// for all), until each returns an error, which List then returns.
	List(ctx context.Context, prefix string, each func(Object) error) error
	// Delete removes the objects under keys, a key with no object being
	// no fault. It returns the keys that hold no object now, and an error
	// naming every key it could not delete.
	Delete(ctx context.Context, keys []string) (gone []string, err error)
	// Location is the URL a builder fetches key from (s3://bucket/key).
	Location(key string) string
}

// Object is a stored object as a listing shows it.
type Object struct {
	Key  string
	Size int64
	// LastModified is when the object was last written.
	LastModified time.Time
}

// Config reaches one bucket of an S3-compatible server.
type Config struct {
	// Endpoint with scheme, e.g. http://minio.sless-system:9000.
	Endpoint  string
	Region    string
	Bucket    string
	AccessKey string
	SecretKey string
	// PathStyle addresses buckets as endpoint/bucket rather than bucket.endpoint;
	// most self-hosted servers need it.
	PathStyle bool
}

// Client is a Store on an S3-compatible server.
type Client struct {
	mc     *minio.Client
	bucket string
}

var _ Store = (*Client)(nil)

// New makes a client; it does not contact the server.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("s3 endpoint %q must be an http:// or https:// URL", cfg.Endpoint)
	}
	if cfg.Bucket == "" {
		return nil, errors.New("s3 bucket is required")
	}
	region := cfg.Region
	if region == "" {
		region = "us-east-1"
	}
	lookup := minio.BucketLookupAuto
	if cfg.PathStyle {
		lookup = minio.BucketLookupPath
	}
	mc, err := minio.New(u.Host, &minio.Options{
		Creds:        credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure:       u.Scheme == "https",
		Region:       region,
		BucketLookup: lookup,
		MaxRetries:   2,
	})
	if err != nil {
		return nil, fmt.Errorf("s3 client: %w", err)
	}
	return &Client{mc: mc, bucket: cfg.Bucket}, nil
}

// EnsureBucket creates the bucket if it does not exist.
func (c *Client) EnsureBucket(ctx context.Context) error {
	ok, err := c.mc.BucketExists(ctx, c.bucket)
	if err != nil {
		return classify("check bucket "+c.bucket, err)
	}
	if ok {
		return nil
	}
	if err := c.mc.MakeBucket(ctx, c.bucket, minio.MakeBucketOptions{}); err != nil {
		if resp := minio.ToErrorResponse(err); resp.Code == "BucketAlreadyOwnedByYou" || resp.Code == "BucketAlreadyExists" {
			return nil
		}
		return classify("create bucket "+c.bucket, err)
	}
	return nil
}

// Bucket names the client's bucket.
func (c *Client) Bucket() string { return c.bucket }

// Put stores an object.
func (c *Client) Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error {
	_, err := c.mc.PutObject(ctx, c.bucket, key, r, size, minio.PutObjectOptions{ContentType: contentType})
	if err != nil {
		return classify("put "+key, err)
	}
	return nil
}

// Get opens an object. The size comes from a stat, so a missing key is
// ErrNotFound here rather than on the first Read.
func (c *Client) Get(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	obj, err := c.mc.GetObject(ctx, c.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, 0, classify("get "+key, err)
	}
	st, err := obj.Stat()
	if err != nil {
		obj.Close()
		return nil, 0, classify("get "+key, err)
	}
	return obj, st.Size, nil
}

// Exists reports whether an object is stored under key.
func (c *Client) Exists(ctx context.Context, key string) (bool, error) {
	_, err := c.mc.StatObject(ctx, c.bucket, key, minio.StatObjectOptions{})
	if err == nil {
		return true, nil
	}
	if err = classify("stat "+key, err); errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return false, err
}

// DeletePrefix removes every object under prefix.
func (c *Client) DeletePrefix(ctx context.Context, prefix string) error {
	if prefix == "" || !strings.HasSuffix(prefix, "/") {
		return fmt.Errorf("delete prefix %q: a prefix must end with '/'", prefix)
	}
	objects := c.mc.ListObjects(ctx, c.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true})
	for res := range c.mc.RemoveObjects(ctx, c.bucket, objects, minio.RemoveObjectsOptions{}) {
		if res.Err != nil {
			return classify("delete "+res.ObjectName, res.Err)
		}
	}
	return nil
}

// List calls each for every object under prefix, in key order, a page of
// the listing at a time.
func (c *Client) List(ctx context.Context, prefix string, each func(Object) error) error {
	// Ending the listing early must stop its requests too: the channel is
	// fed by a goroutine that stops only when its context ends.
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for obj := range c.mc.ListObjects(lctx, c.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if obj.Err != nil {
			return classify("list "+prefix, obj.Err)
		}
		if err := each(Object{Key: obj.Key, Size: obj.Size, LastModified: obj.LastModified}); err != nil {
			return err
		}
	}
	// A listing cut off by its context ends the channel without an error.
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("list %s: %w", prefix, err)
	}
	return nil
}

// Delete removes the objects under keys with multi-object deletes (1000 keys
// a request).
func (c *Client) Delete(ctx context.Context, keys []string) ([]string, error) {
	objects := make(chan minio.ObjectInfo, len(keys))
	for _, k := range keys {
		objects <- minio.ObjectInfo{Key: k}
	}
	close(objects)
	failed := map[string]bool{}
	var errs []error
	whole := false
	for res := range c.mc.RemoveObjects(ctx, c.bucket, objects, minio.RemoveObjectsOptions{}) {
		if res.Err != nil {
			// An error naming no object is of the whole request.
			whole = whole || res.ObjectName == ""
			failed[res.ObjectName] = true
			errs = append(errs, classify("delete "+res.ObjectName, res.Err))
		}
	}
	if whole {
		return nil, errors.Join(errs...)
	}
	if err := ctx.Err(); err != nil {
		// The client stops reporting once the context ends: which keys
		// went is not known.
		return nil, fmt.Errorf("delete %d objects: %w", len(keys), err)
	}
	gone := make([]string, 0, len(keys))
	for _, k := range keys {
		if !failed[k] {
			gone = append(gone, k)
		}
	}
	return gone, errors.Join(errs...)
}

// Location is the s3:// URL of key, as kaniko and other builders take it.
func (c *Client) Location(key string) string { return "s3://" + c.bucket + "/" + key }

// classify wraps err with what was being done and, where it applies,
// ErrNotFound or ErrUnavailable.
func classify(op string, err error) error {
	resp := minio.ToErrorResponse(err)
	switch resp.Code {
	case "NoSuchKey", "NotFound", "NoSuchBucket":
		return fmt.Errorf("%s: %w: %w", op, ErrNotFound, err)
	}
	var netErr net.Error
	if errors.As(err, &netErr) || resp.StatusCode >= 500 || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%s: %w: %w", op, ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}
