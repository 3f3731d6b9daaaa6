// Package blobs is what local mode has in place of S3: source zips and
// build contexts as files in a directory.
package blobs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sless-dev/sless/pkg/adapter/s3"
)

// Store is an s3.Store on a directory: each key is a file under the root.
// Writes go to a temporary file renamed into place, so a reader never sees
// half an object and two writers of one key leave one whole object (the keys
// sless writes are content-addressed, so both carry the same bytes).
type Store struct {
	root string
}

var _ s3.Store = (*Store)(nil)

// blobTempPrefix marks files being written; they are never keys.
const blobTempPrefix = ".put-"

// New makes (if needed) and opens a blob directory.
func New(root string) (*Store, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("blob directory: %w", err)
	}
	return &Store{root: abs}, nil
}

// Root is the directory the blobs live in.
func (b *Store) Root() string { return b.root }

// path maps a key onto a file, refusing keys S3 would take but a file system
// cannot hold safely: empty segments, "." and "..", and a trailing slash.
func (b *Store) path(key string) (string, error) {
	if key == "" || strings.HasPrefix(key, "/") || strings.HasSuffix(key, "/") || strings.Contains(key, "\\") || strings.ContainsRune(key, 0) {
		return "", fmt.Errorf("blob key %q: must be a relative path without a trailing slash", key)
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "" || seg == "." || seg == ".." || strings.HasPrefix(seg, blobTempPrefix) {
			return "", fmt.Errorf("blob key %q: segment %q is not allowed", key, seg)
		}
	}
	return filepath.Join(b.root, filepath.FromSlash(key)), nil
}

// Put stores the bytes of r under key. When size is not -1 a short or long
// body is refused and nothing is stored, as S3 refuses a wrong Content-Length.
func (b *Store) Put(ctx context.Context, key string, r io.Reader, size int64, _ string) error {
	p, err := b.path(key)
	if err != nil {
		return err
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(filepath.Dir(p), blobTempPrefix+hex.EncodeToString(rnd[:]))
	var f *os.File
	// Delete and DeletePrefix remove the directories they leave empty; one
	// removed between making it and creating the file in it is made again.
	for range 3 {
		if err = os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("put %s: %w", key, err)
		}
		f, err = os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	src := io.Reader(ctxReader{ctx, r})
	if size >= 0 {
		src = io.LimitReader(src, size+1)
	}
	n, err := io.Copy(f, src)
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if size >= 0 && n != size {
		return fmt.Errorf("put %s: body has %d bytes, want %d", key, n, size)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	ok = true
	return nil
}

// Get opens the object under key.
func (b *Store) Get(_ context.Context, key string) (io.ReadCloser, int64, error) {
	p, err := b.path(key)
	if err != nil {
		return nil, 0, fmt.Errorf("get %s: %w: %w", key, s3.ErrNotFound, err)
	}
	f, err := os.Open(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil, 0, fmt.Errorf("get %s: %w", key, s3.ErrNotFound)
		}
		return nil, 0, fmt.Errorf("get %s: %w", key, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("get %s: %w", key, err)
	}
	if st.IsDir() {
		f.Close()
		return nil, 0, fmt.Errorf("get %s: %w", key, s3.ErrNotFound)
	}
	return f, st.Size(), nil
}

// Exists reports whether an object is stored under key.
func (b *Store) Exists(_ context.Context, key string) (bool, error) {
	p, err := b.path(key)
	if err != nil {
		return false, nil
	}
	st, err := os.Stat(p)
	switch {
	case err == nil:
		return !st.IsDir(), nil
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		// ENOTDIR: a file stands where a directory of the key would be.
		return false, nil
	default:
		return false, fmt.Errorf("stat %s: %w", key, err)
	}
}

// DeletePrefix removes every object whose key starts with prefix, which must
// end with "/" (as for the S3 client: "ns/fn" would also match "ns/fn2/").
func (b *Store) DeletePrefix(_ context.Context, prefix string) error {
	if prefix == "" || !strings.HasSuffix(prefix, "/") {
		return fmt.Errorf("delete prefix %q: a prefix must end with '/'", prefix)
	}
	p, err := b.path(strings.TrimSuffix(prefix, "/"))
	if err != nil {
		return fmt.Errorf("delete prefix %q: %w", prefix, err)
	}
	if err := os.RemoveAll(p); err != nil {
		return fmt.Errorf("delete prefix %q: %w", prefix, err)
	}
	b.pruneAbove(p)
	return nil
}

// pruneAbove drops the directories above p that are empty, up to the root,
// so listings of the data directory stay tidy.
func (b *Store) pruneAbove(p string) {
	for d := filepath.Dir(p); d != b.root && strings.HasPrefix(d, b.root); d = filepath.Dir(d) {
		if os.Remove(d) != nil {
			break
		}
	}
}

// List calls each for every object whose key starts with prefix, in the
// order of a walk of the directory. Files being written are not objects.
func (b *Store) List(ctx context.Context, prefix string, each func(s3.Object) error) error {
	// Walk only the directory the prefix's last "/" names.
	start := b.root
	if i := strings.LastIndex(prefix, "/"); i > 0 {
		p, err := b.path(prefix[:i])
		if err != nil {
			return nil // no key lies under a prefix no key can start with
		}
		start = p
	}
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed during the walk, or never there
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() || !d.Type().IsRegular() || strings.HasPrefix(d.Name(), blobTempPrefix) {
			return nil
		}
		rel, err := filepath.Rel(b.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if !strings.HasPrefix(key, prefix) {
			return nil
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		return each(s3.Object{Key: key, Size: info.Size(), LastModified: info.ModTime()})
	})
	if err != nil {
		return fmt.Errorf("list %q: %w", prefix, err)
	}
	return nil
}

// Delete removes the files of keys and the directories that leaves empty.
func (b *Store) Delete(ctx context.Context, keys []string) ([]string, error) {
	gone := make([]string, 0, len(keys))
	var errs []error
	for _, key := range keys {
		if err := ctx.Err(); err != nil {
			return gone, errors.Join(append(errs, fmt.Errorf("delete %s: %w", key, err))...)
		}
		p, err := b.path(key)
		if err != nil {
			gone = append(gone, key) // a key no file can hold has no object
			continue
		}
		if st, err := os.Lstat(p); err == nil && st.IsDir() {
			gone = append(gone, key) // a directory is no object
			continue
		}
		switch err := os.Remove(p); {
		case err == nil:
			b.pruneAbove(p)
			gone = append(gone, key)
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
			gone = append(gone, key)
		default:
			errs = append(errs, fmt.Errorf("delete %s: %w", key, err))
		}
	}
	return gone, errors.Join(errs...)
}

// Location is the file:// URL of key; the local builder reads contexts from it.
func (b *Store) Location(key string) string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(filepath.Join(b.root, filepath.FromSlash(path.Clean("/"+key))))}).String()
}

// ctxReader stops a copy when its context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
