package local

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/sless-dev/sless/pkg/invoke"
)

// Records keeps invocation records in the store's bbolt file: invoke.Sink
// for the Recorder and invoke.History for the invocations API, when sless dev
// runs without PostgreSQL. Records of one function live in a bucket of their
// own, keyed by start time then id, so a listing (newest first, keyset
// paginated) is a reverse cursor walk.
type Records struct {
	db *bolt.DB
}

var (
	_ invoke.Sink    = (*Records)(nil)
	_ invoke.History = (*Records)(nil)
)

var (
	bucketInvocations = []byte("invocations")
	bucketBatches     = []byte("invocation-batches")
)

// batchMemory is how long a stored batch's id is remembered, so a retried
// batch whose acknowledgement was lost is not stored twice.
const batchMemory = time.Hour

// Records is the store's invocation history.
func (s *Store) Records() (*Records, error) {
	if err := s.db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(bucketInvocations); err != nil {
			return err
		}
		_, err := tx.CreateBucketIfNotExists(bucketBatches)
		return err
	}); err != nil {
		return nil, err
	}
	return &Records{db: s.db}, nil
}

func recordKey(startedAt time.Time, id int64) []byte {
	k := make([]byte, 16)
	binary.BigEndian.PutUint64(k[:8], uint64(startedAt.UnixMicro()))
	binary.BigEndian.PutUint64(k[8:], uint64(id))
	return k
}

// Write stores a batch in one transaction; a batch already stored is a no-op.
func (r *Records) Write(ctx context.Context, batch invoke.Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return r.db.Update(func(tx *bolt.Tx) error {
		batches := tx.Bucket(bucketBatches)
		if batch.ID != "" && batches.Get([]byte(batch.ID)) != nil {
			return nil
		}
		inv := tx.Bucket(bucketInvocations)
		for _, rec := range batch.Records {
			fb, err := inv.CreateBucketIfNotExists([]byte(rec.Namespace + "/" + rec.Function))
			if err != nil {
				return err
			}
			seq, err := inv.NextSequence()
			if err != nil {
				return err
			}
			rec.ID = int64(seq)
			rec.StartedAt = rec.StartedAt.UTC().Truncate(time.Microsecond)
			raw, err := json.Marshal(rec)
			if err != nil {
				return fmt.Errorf("%w: %v", invoke.ErrPermanent, err)
			}
			if err := fb.Put(recordKey(rec.StartedAt, rec.ID), raw); err != nil {
				return err
			}
		}
		if batch.ID == "" {
			return nil
		}
		now := time.Now()
		var stamp [8]byte
		binary.BigEndian.PutUint64(stamp[:], uint64(now.UnixNano()))
		if err := batches.Put([]byte(batch.ID), stamp[:]); err != nil {
			return err
		}
		// Forget old batch ids (a handful per write keeps this bounded).
		c := batches.Cursor()
		dropped := 0
		for k, v := c.First(); k != nil && dropped < 16; k, v = c.Next() {
			if len(v) == 8 && now.Sub(time.Unix(0, int64(binary.BigEndian.Uint64(v)))) > batchMemory {
				if err := c.Delete(); err != nil {
					return err
				}
				dropped++
			}
		}
		return nil
	})
}

// List returns a page of a function's invocations, newest first.
func (r *Records) List(ctx context.Context, q invoke.Query) (invoke.Page, error) {
	if err := ctx.Err(); err != nil {
		return invoke.Page{}, err
	}
	limit := q.Limit
	if limit <= 0 {
		limit = invoke.DefaultListLimit
	}
	limit = min(limit, invoke.MaxListLimit)
	var page invoke.Page
	err := r.db.View(func(tx *bolt.Tx) error {
		inv := tx.Bucket(bucketInvocations)
		if inv == nil {
			return nil
		}
		fb := inv.Bucket([]byte(q.Namespace + "/" + q.Function))
		if fb == nil {
			return nil
		}
		c := fb.Cursor()
		var k, v []byte
		if q.After != nil {
			after := recordKey(q.After.StartedAt, q.After.ID)
			k, v = c.Seek(after)
			if k == nil {
				k, v = c.Last()
			}
			for k != nil && bytes.Compare(k, after) >= 0 {
				k, v = c.Prev()
			}
		} else {
			k, v = c.Last()
		}
		for ; k != nil; k, v = c.Prev() {
			var rec invoke.Record
			if err := json.Unmarshal(v, &rec); err != nil {
				return err
			}
			if !q.Until.IsZero() && !rec.StartedAt.Before(q.Until) {
				continue
			}
			if !q.Since.IsZero() && rec.StartedAt.Before(q.Since) {
				break // older from here on
			}
			if q.StatusClass != 0 && rec.Status/100 != q.StatusClass {
				continue
			}
			if q.Trigger != "" && rec.Trigger != q.Trigger {
				continue
			}
			if len(page.Items) == limit {
				last := page.Items[len(page.Items)-1]
				page.Next = &invoke.Cursor{StartedAt: last.StartedAt, ID: last.ID}
				return nil
			}
			page.Items = append(page.Items, rec)
		}
		return nil
	})
	return page, err
}

// DeleteBefore removes the records that started before cutoff, at most
// batch per transaction so writers are not held up, and tells how many went.
func (r *Records) DeleteBefore(ctx context.Context, cutoff time.Time, batch int) (int64, error) {
	if batch <= 0 {
		batch = 10000
	}
	limit := recordKey(cutoff.UTC().Truncate(time.Microsecond), 0)
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		n := 0
		err := r.db.Update(func(tx *bolt.Tx) error {
			inv := tx.Bucket(bucketInvocations)
			if inv == nil {
				return nil
			}
			return inv.ForEachBucket(func(name []byte) error {
				c := inv.Bucket(name).Cursor()
				for k, _ := c.First(); k != nil && n < batch && bytes.Compare(k, limit) < 0; k, _ = c.First() {
					if err := c.Delete(); err != nil {
						return err
					}
					n++
				}
				return nil
			})
		})
		total += int64(n)
		if err != nil || n < batch {
			return total, err
		}
	}
}
