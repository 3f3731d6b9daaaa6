// Package spool keeps invocation records on local disk while the history
// store cannot take them: an append-only queue in a bbolt file, one
// transaction (and one fsync) per appended batch, each record checksummed.
//
// bbolt rather than a file format of our own or a write-ahead-log library:
// the project already ships it, its commits are atomic (a crash mid-append
// leaves the previous commit, told apart by the checksums on its meta
// pages), it reuses the pages of drained records so the file stays within
// the cap, and the one WAL library tried (tidwall/wal) keeps no checksums
// and refuses to open a log with a torn tail. The CRC-32C on every record
// catches what bbolt does not check: damaged data pages.
package spool

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/recordcodec"
)

// DefaultMaxBytes is the spool's default cap: 1 GiB.
const DefaultMaxBytes = 1 << 30

// recordOverhead approximates what bbolt spends on a record beside its
// value: the 8-byte key and the 16-byte leaf element header.
const recordOverhead = 8 + 16

var (
	bucket = []byte("records")
	crcTab = crc32.MakeTable(crc32.Castagnoli)
)

// Spool is a FIFO of invocation records in a file. It implements
// invoke.Spool; one goroutine appends and drains at a time, as the Recorder
// does, but every method is safe to call concurrently.
type Spool struct {
	db  *bolt.DB
	max int64

	mu    sync.Mutex
	next  uint64 // key of the next appended record
	n     int
	bytes int64
}

var _ invoke.Spool = (*Spool)(nil)

// Open opens (or creates) the spool file at path, holding at most maxBytes
// of records (0: DefaultMaxBytes). Records left by an earlier run are kept
// for draining; from the first one whose checksum or encoding is wrong on,
// the tail is cut and the number cut is logged. A file bbolt cannot open
// at all is moved aside (path.corrupt-<time>) and a new one started, so a
// damaged spool never keeps sless from starting.
func Open(path string, maxBytes int64, log *slog.Logger) (*Spool, error) {
	if maxBytes == 0 {
		maxBytes = DefaultMaxBytes
	}
	if maxBytes < 0 {
		return nil, errors.New("spool: the size cap must not be negative")
	}
	if log == nil {
		log = slog.Default()
	}
	opts := &bolt.Options{Timeout: 5 * time.Second, NoFreelistSync: true, FreelistType: bolt.FreelistMapType}
	db, err := bolt.Open(path, 0o600, opts)
	if err != nil && !errors.Is(err, bolt.ErrTimeout) {
		if _, statErr := os.Stat(path); statErr == nil {
			aside := fmt.Sprintf("%s.corrupt-%d", path, time.Now().Unix())
			if rerr := os.Rename(path, aside); rerr != nil {
				return nil, fmt.Errorf("spool %s: %w (and moving it aside: %v)", path, err, rerr)
			}
			log.Error("invocation spool could not be read; moved aside and started anew", "file", aside, "error", err)
			db, err = bolt.Open(path, 0o600, opts)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("spool %s: %w", path, err)
	}
	s := &Spool{db: db, max: maxBytes}
	if err := s.load(log); err != nil {
		db.Close()
		return nil, fmt.Errorf("spool %s: %w", path, err)
	}
	return s, nil
}

// load counts the records an earlier run left and cuts a damaged tail.
func (s *Spool) load(log *slog.Logger) error {
	var cut int
	err := s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucket)
		if err != nil {
			return err
		}
		c := b.Cursor()
		var rec invoke.Record
		k, v := c.First()
		for ; k != nil; k, v = c.Next() {
			if len(k) != 8 || !valid(v, &rec) {
				break
			}
			s.n++
			s.bytes += int64(len(v) + recordOverhead)
			s.next = binary.BigEndian.Uint64(k) + 1
		}
		// From the first bad record on, nothing is trusted.
		var bad [][]byte
		for ; k != nil; k, _ = c.Next() {
			bad = append(bad, append([]byte(nil), k...))
		}
		for _, k := range bad {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		cut = len(bad)
		return nil
	})
	if err != nil {
		return err
	}
	if cut > 0 {
		log.Warn("invocation spool: cut a damaged tail (checksum or encoding wrong)", "records_cut", cut, "records_kept", s.n)
	}
	if s.n > 0 {
		log.Info("invocation spool holds records from an earlier run; writing them to the store", "records", s.n)
	}
	return nil
}

func valid(v []byte, rec *invoke.Record) bool {
	if len(v) < 4 || crc32.Checksum(v[4:], crcTab) != binary.LittleEndian.Uint32(v) {
		return false
	}
	return recordcodec.Decode(v[4:], rec) == nil
}

// Len is the number of records held.
func (s *Spool) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// Bytes is what the records held take, as counted against the cap.
func (s *Spool) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// FileSize is the size of the spool's file.
func (s *Spool) FileSize() (int64, error) {
	fi, err := os.Stat(s.db.Path())
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// Append adds records at the tail, in one transaction made durable before
// it returns, as many as fit under the cap; kept says how many (a prefix).
func (s *Spool) Append(records []invoke.Record) (kept int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	first := s.next
	var added int64
	err = s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		// Keys only grow: fill pages whole instead of splitting them in half.
		b.FillPercent = 1
		// bbolt keeps the key and value slices until the commit: one
		// buffer for the whole batch, carved up.
		buf := make([]byte, 0, len(records)*(8+4+96))
		for i := range records {
			at := len(buf)
			buf = binary.BigEndian.AppendUint64(buf, first+uint64(kept))
			buf = append(buf, 0, 0, 0, 0)
			buf = recordcodec.Append(buf, recordcodec.Full, &records[i])
			key, val := buf[at:at+8:at+8], buf[at+8:]
			binary.LittleEndian.PutUint32(val, crc32.Checksum(val[4:], crcTab))
			size := int64(len(val) + recordOverhead)
			if s.bytes+added+size > s.max {
				break
			}
			if err := b.Put(key, val); err != nil {
				return err
			}
			added += size
			kept++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("spool: append: %w", err)
	}
	s.next += uint64(kept)
	s.n += kept
	s.bytes += added
	return kept, nil
}

// Oldest returns up to n records from the head, leaving them in place.
func (s *Spool) Oldest(n int) ([]invoke.Record, error) {
	out := make([]invoke.Record, 0, min(n, s.Len()))
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucket).Cursor()
		for k, v := c.First(); k != nil && len(out) < n; k, v = c.Next() {
			var rec invoke.Record
			if !valid(v, &rec) {
				return fmt.Errorf("spool: record %d is damaged", binary.BigEndian.Uint64(k))
			}
			out = append(out, rec)
		}
		return nil
	})
	return out, err
}

// Remove deletes the n oldest records.
func (s *Spool) Remove(n int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var removed int
	var freed int64
	err := s.db.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucket).Cursor()
		for removed < n {
			k, v := c.First()
			if k == nil {
				break
			}
			freed += int64(len(v) + recordOverhead)
			if err := c.Delete(); err != nil {
				return err
			}
			removed++
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("spool: remove: %w", err)
	}
	s.n -= removed
	s.bytes -= freed
	return nil
}

// Close closes the file; the records stay for the next Open.
func (s *Spool) Close() error { return s.db.Close() }
