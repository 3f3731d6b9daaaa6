// Package asynccalls keeps local mode's asynchronous calls in a bbolt file
// of the data directory: a call is on disk (fsynced) before its 202, so a
// restart of sless dev loses none. The same file keeps each namespace's
// callback signing key.
package asynccalls

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/async"
	"github.com/sless-dev/sless/pkg/invoke/callback"
)

var (
	callsBucket   = []byte("calls")
	keysBucket    = []byte("idempotency-keys")
	signingBucket = []byte("callback-signing-keys")
)

// Store is an async.Store over one bbolt file.
type Store struct{ db *bolt.DB }

var (
	_ async.Store = (*Store)(nil)
	_ async.Keys  = (*Store)(nil)
)

// Open opens (or makes) the file at path.
func Open(path string) (*Store, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("open asynchronous calls %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{callsBucket, keysBucket, signingBucket} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("asynchronous calls %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

// Close closes the file.
func (s *Store) Close() error { return s.db.Close() }

func prefix(ns, fn string) []byte { return []byte(ns + "\x00" + fn + "\x00") }

func key(ns, fn, id string) []byte { return append(prefix(ns, fn), id...) }

type keyEntry struct {
	ID string    `json:"id"`
	At time.Time `json:"at"`
}

// Create keeps j unless its Idempotency-Key names a recent call.
func (s *Store) Create(_ context.Context, j *async.Job, window time.Duration) (string, bool, error) {
	var id string
	var replayed bool
	err := s.db.Update(func(tx *bolt.Tx) error {
		calls, keys := tx.Bucket(callsBucket), tx.Bucket(keysBucket)
		if j.IdempotencyKey != "" {
			var e keyEntry
			if v := keys.Get(key(j.Namespace, j.Function, j.IdempotencyKey)); v != nil && json.Unmarshal(v, &e) == nil &&
				j.AcceptedAt.Sub(e.At) < window && calls.Get(key(j.Namespace, j.Function, e.ID)) != nil {
				id, replayed = e.ID, true
				return nil
			}
		}
		k := key(j.Namespace, j.Function, j.RequestID)
		if calls.Get(k) != nil {
			return invoke.ErrRequestIDTaken
		}
		v, err := json.Marshal(j)
		if err != nil {
			return err
		}
		if err := calls.Put(k, v); err != nil {
			return err
		}
		id = j.RequestID
		if j.IdempotencyKey == "" {
			return nil
		}
		e, _ := json.Marshal(keyEntry{ID: j.RequestID, At: j.AcceptedAt})
		return keys.Put(key(j.Namespace, j.Function, j.IdempotencyKey), e)
	})
	return id, replayed, err
}

// Update replaces j's kept state.
func (s *Store) Update(_ context.Context, j *async.Job) error {
	v, err := json.Marshal(j)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(callsBucket).Put(key(j.Namespace, j.Function, j.RequestID), v)
	})
}

// Get reads one call.
func (s *Store) Get(_ context.Context, ns, fn, id string) (*async.Job, error) {
	var j *async.Job
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(callsBucket).Get(key(ns, fn, id))
		if v == nil {
			return async.ErrNotFound
		}
		j = &async.Job{}
		return json.Unmarshal(v, j)
	})
	return j, err
}

// List lists a page of a function's calls, newest first.
func (s *Store) List(_ context.Context, q async.ListQuery) (async.ListPage, error) {
	var out []async.Job
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(callsBucket).Cursor()
		p := prefix(q.Namespace, q.Function)
		for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
			var j async.Job
			if err := json.Unmarshal(v, &j); err != nil {
				return fmt.Errorf("call %q: %w", k, err)
			}
			if (q.State == "" || j.State == q.State) && q.After.Follows(j.AcceptedAt, j.RequestID) {
				j.Body = nil
				out = append(out, j)
			}
		}
		return nil
	})
	if err != nil {
		return async.ListPage{}, err
	}
	slices.SortFunc(out, func(a, b async.Job) int {
		if c := b.AcceptedAt.Compare(a.AcceptedAt); c != 0 {
			return c
		}
		return strings.Compare(b.RequestID, a.RequestID)
	})
	var page async.ListPage
	if len(out) > q.Limit {
		out = out[:q.Limit]
		page.Next = async.CursorOf(&out[len(out)-1])
	}
	page.Items = out
	return page, nil
}

// Unfinished lists every call not in a final state or whose result is
// still to be posted.
func (s *Store) Unfinished(context.Context) ([]async.Job, error) {
	var out []async.Job
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(callsBucket).ForEach(func(k, v []byte) error {
			var j async.Job
			if err := json.Unmarshal(v, &j); err != nil {
				return fmt.Errorf("call %q: %w", k, err)
			}
			if !j.State.Done() || j.CallbackPending() {
				out = append(out, j)
			}
			return nil
		})
	})
	slices.SortFunc(out, func(a, b async.Job) int { return a.AcceptedAt.Compare(b.AcceptedAt) })
	return out, err
}

// Prune deletes the calls that ended before before, and the
// Idempotency-Keys taken before keysBefore, and says how many calls went.
func (s *Store) Prune(_ context.Context, before, keysBefore time.Time) (int, error) {
	n := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		calls := tx.Bucket(callsBucket)
		var gone [][]byte
		err := calls.ForEach(func(k, v []byte) error {
			var j async.Job
			if err := json.Unmarshal(v, &j); err != nil {
				return fmt.Errorf("call %q: %w", k, err)
			}
			if j.State.Done() && !j.CallbackPending() && j.FinishedAt.Before(before) {
				gone = append(gone, bytes.Clone(k))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range gone {
			if err := calls.Delete(k); err != nil {
				return err
			}
		}
		n = len(gone)
		keys := tx.Bucket(keysBucket)
		var old [][]byte
		err = keys.ForEach(func(k, v []byte) error {
			var e keyEntry
			if json.Unmarshal(v, &e) != nil || e.At.Before(keysBefore) {
				old = append(old, bytes.Clone(k))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range old {
			if err := keys.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}

// SigningKey is ns's callback signing key, made and kept on first use.
func (s *Store) SigningKey(_ context.Context, ns string) (string, error) {
	var key string
	err := s.db.View(func(tx *bolt.Tx) error {
		key = string(tx.Bucket(signingBucket).Get([]byte(ns)))
		return nil
	})
	if err != nil || key != "" {
		return key, err
	}
	fresh, err := callback.NewKey()
	if err != nil {
		return "", err
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(signingBucket)
		// Another caller may have made it meanwhile: the first one stays.
		if k := b.Get([]byte(ns)); k != nil {
			key = string(k)
			return nil
		}
		key = fresh
		return b.Put([]byte(ns), []byte(fresh))
	})
	if err != nil {
		return "", fmt.Errorf("keep the callback signing key of %s: %w", ns, err)
	}
	return key, nil
}
