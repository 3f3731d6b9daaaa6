package apiserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/recordcodec"
	"github.com/sless-dev/sless/pkg/invoke/stats"
)

// Records keeps invocation records in the store's bbolt file: invoke.Sink
// for the Recorder and invoke.History for the invocations API, when sless dev
// runs without PostgreSQL. Records of one function live in a bucket of their
// own, keyed by start time then id, so a listing (newest first, keyset
// paginated) is a reverse cursor walk. Values are recordcodec's Keyed layout
// (namespace, function, start and id are in the bucket name and key), about
// 110 bytes a record on disk; values written as JSON by earlier versions
// are still read.
type Records struct {
	db *bolt.DB

	mu       sync.Mutex
	size     int64 // bytes the records take, as counted against maxBytes
	maxBytes int64 // 0: no bound
}

// recordOverhead is what bbolt spends on a record beside key and value:
// its leaf element header.
const recordOverhead = 16

var (
	_ invoke.Sink    = (*Records)(nil)
	_ invoke.History = (*Records)(nil)
	_ stats.Source   = (*Records)(nil)
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
	r := &Records{db: s.db}
	err := s.db.View(func(tx *bolt.Tx) error {
		inv := tx.Bucket(bucketInvocations)
		return inv.ForEachBucket(func(name []byte) error {
			return inv.Bucket(name).ForEach(func(k, v []byte) error {
				r.size += int64(len(k) + len(v) + recordOverhead)
				return nil
			})
		})
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// SetMaxSize bounds the records to about maxBytes (0: no bound). Past it a
// write deletes the oldest records, whatever their function, until they
// take 90% of it, so that not every write deletes. The file keeps its size
// and reuses the freed pages.
func (r *Records) SetMaxSize(ctx context.Context, maxBytes int64) error {
	r.mu.Lock()
	r.maxBytes = maxBytes
	r.mu.Unlock()
	return r.trim(ctx)
}

// Size is what the records take, as counted against the bound.
func (r *Records) Size() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.size
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
	var added int64
	err := r.db.Update(func(tx *bolt.Tx) error {
		added = 0
		batches := tx.Bucket(bucketBatches)
		if batch.ID != "" && batches.Get([]byte(batch.ID)) != nil {
			return nil
		}
		inv := tx.Bucket(bucketInvocations)
		for i := range batch.Records {
			rec := &batch.Records[i]
			fb, err := inv.CreateBucketIfNotExists([]byte(rec.Namespace + "/" + rec.Function))
			if err != nil {
				return err
			}
			// Records come mostly in time order: fill pages whole.
			fb.FillPercent = 1
			seq, err := inv.NextSequence()
			if err != nil {
				return err
			}
			// bbolt keeps the value until the commit: a new one each time.
			raw := recordcodec.Append(make([]byte, 0, 96), recordcodec.Keyed, rec)
			if err := fb.Put(recordKey(rec.StartedAt.UTC().Truncate(time.Microsecond), int64(seq)), raw); err != nil {
				return err
			}
			added += int64(16 + len(raw) + recordOverhead)
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
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.size += added
	over := r.maxBytes > 0 && r.size > r.maxBytes
	r.mu.Unlock()
	if over {
		return r.trim(ctx)
	}
	return nil
}

// trim deletes the oldest records, across functions, until they take 90%
// of maxBytes, a bounded number per transaction so writers are not held up.
func (r *Records) trim(ctx context.Context) error {
	for {
		r.mu.Lock()
		limit, size := r.maxBytes, r.size
		r.mu.Unlock()
		target := limit * 9 / 10
		if limit <= 0 || size <= target {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		var freed int64
		n := 0
		err := r.db.Update(func(tx *bolt.Tx) error {
			freed, n = 0, 0
			inv := tx.Bucket(bucketInvocations)
			// The first key of every function's bucket is its oldest record.
			type head struct {
				c *bolt.Cursor
				k []byte
				v []byte
			}
			var heads []*head
			if err := inv.ForEachBucket(func(name []byte) error {
				c := inv.Bucket(name).Cursor()
				if k, v := c.First(); k != nil {
					heads = append(heads, &head{c, k, v})
				}
				return nil
			}); err != nil {
				return err
			}
			for n < 10000 && size-freed > target && len(heads) > 0 {
				oldest := 0
				for i, h := range heads {
					if bytes.Compare(h.k, heads[oldest].k) < 0 {
						oldest = i
					}
				}
				h := heads[oldest]
				freed += int64(len(h.k) + len(h.v) + recordOverhead)
				if err := h.c.Delete(); err != nil {
					return err
				}
				n++
				if h.k, h.v = h.c.First(); h.k == nil {
					heads = append(heads[:oldest], heads[oldest+1:]...)
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("trim invocation records: %w", err)
		}
		r.mu.Lock()
		r.size -= freed
		r.mu.Unlock()
		if n == 0 {
			return nil // nothing left to delete
		}
	}
}

// decodeRecord reads a stored value: recordcodec's Keyed layout, or the
// JSON of earlier versions.
func decodeRecord(bucket, k, v []byte, rec *invoke.Record) error {
	if len(v) > 0 && v[0] == '{' {
		return json.Unmarshal(v, rec)
	}
	if err := recordcodec.Decode(v, rec); err != nil {
		return err
	}
	rec.Namespace, rec.Function, _ = strings.Cut(string(bucket), "/")
	rec.StartedAt = time.UnixMicro(int64(binary.BigEndian.Uint64(k[:8]))).UTC()
	rec.ID = int64(binary.BigEndian.Uint64(k[8:]))
	return nil
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
		name := []byte(q.Namespace + "/" + q.Function)
		fb := inv.Bucket(name)
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
			if err := decodeRecord(name, k, v, &rec); err != nil {
				return err
			}
			if !q.Until.IsZero() && !rec.StartedAt.Before(q.Until) {
				continue
			}
			if !q.Since.IsZero() && rec.StartedAt.Before(q.Since) {
				break // older from here on
			}
			if (q.StatusClass != 0 && rec.Status/100 != q.StatusClass) || (q.Status != 0 && rec.Status != q.Status) {
				continue
			}
			if (q.Trigger != "" && rec.Trigger != q.Trigger) || q.Service != (rec.Trigger == invoke.TriggerService) {
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
		var freed int64
		err := r.db.Update(func(tx *bolt.Tx) error {
			n, freed = 0, 0
			inv := tx.Bucket(bucketInvocations)
			if inv == nil {
				return nil
			}
			return inv.ForEachBucket(func(name []byte) error {
				c := inv.Bucket(name).Cursor()
				for k, v := c.First(); k != nil && n < batch && bytes.Compare(k, limit) < 0; k, v = c.First() {
					freed += int64(len(k) + len(v) + recordOverhead)
					if err := c.Delete(); err != nil {
						return err
					}
					n++
				}
				return nil
			})
		})
		if err == nil {
			total += int64(n)
			r.mu.Lock()
			r.size -= freed
			r.mu.Unlock()
		}
		if err != nil || n < batch {
			return total, err
		}
	}
}

// Stats is stats.Source over the records: a walk of the window's range of
// the function's bucket, aggregated in Go.
func (r *Records) Stats(ctx context.Context, q stats.Query) ([]stats.Bucket, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if q.Step <= 0 || !q.From.Before(q.Until) {
		return nil, fmt.Errorf("stats: a window and a step are required")
	}
	agg := stats.NewAggregate(q)
	err := r.db.View(func(tx *bolt.Tx) error {
		inv := tx.Bucket(bucketInvocations)
		if inv == nil {
			return nil
		}
		name := []byte(q.Namespace + "/" + q.Function)
		fb := inv.Bucket(name)
		if fb == nil {
			return nil
		}
		until := recordKey(q.Until.UTC(), 0)
		c := fb.Cursor()
		for k, v := c.Seek(recordKey(q.From.UTC(), 0)); k != nil && bytes.Compare(k, until) < 0; k, v = c.Next() {
			var rec invoke.Record
			if err := decodeRecord(name, k, v, &rec); err != nil {
				return err
			}
			if q.Matches(&rec) {
				agg.Add(&rec)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("invocation stats: %w", err)
	}
	return agg.Buckets(), nil
}
