package spool

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/invoke"
)

func records(from, n int) []invoke.Record {
	out := make([]invoke.Record, n)
	for i := range out {
		out[i] = invoke.Record{Namespace: "ns", Function: "fn", Revision: "fn-00001", Trigger: invoke.TriggerHTTP,
			RequestID: "req-" + strconv.Itoa(from+i), StartedAt: time.UnixMicro(int64(1_700_000_000_000_000 + from + i)).UTC(),
			Duration: time.Millisecond, Status: 200, BytesOut: 12}
	}
	return out
}

func ids(recs []invoke.Record) string {
	var b strings.Builder
	for _, r := range recs {
		b.WriteString(strings.TrimPrefix(r.RequestID, "req-") + " ")
	}
	return strings.TrimSpace(b.String())
}

func logTo(buf *bytes.Buffer) *slog.Logger { return slog.New(slog.NewTextHandler(buf, nil)) }

func TestAppendDrainInOrderAcrossReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spool.db")
	s, err := Open(path, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, batch := range [][]invoke.Record{records(0, 3), records(3, 4)} {
		if kept, err := s.Append(batch); err != nil || kept != len(batch) {
			t.Fatalf("Append = %d, %v", kept, err)
		}
	}
	got, err := s.Oldest(5)
	if err != nil || ids(got) != "0 1 2 3 4" {
		t.Fatalf("Oldest(5) = %q, %v", ids(got), err)
	}
	if got[0] != records(0, 1)[0] {
		t.Fatalf("record changed on the way: %+v", got[0])
	}
	if err := s.Remove(2); err != nil {
		t.Fatal(err)
	}
	if s.Len() != 5 {
		t.Fatalf("Len = %d, want 5", s.Len())
	}
	bytesBefore := s.Bytes()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// A restart finds the same records, in order, and appends after them.
	s, err = Open(path, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Len() != 5 || s.Bytes() != bytesBefore {
		t.Fatalf("after reopen: %d records, %d bytes; want 5, %d", s.Len(), s.Bytes(), bytesBefore)
	}
	if _, err := s.Append(records(7, 1)); err != nil {
		t.Fatal(err)
	}
	got, _ = s.Oldest(100)
	if ids(got) != "2 3 4 5 6 7" {
		t.Fatalf("after reopen = %q", ids(got))
	}
	if err := s.Remove(100); err != nil || s.Len() != 0 || s.Bytes() != 0 {
		t.Fatalf("Remove all: %v; left %d records, %d bytes", err, s.Len(), s.Bytes())
	}
}

func TestCapKeepsAPrefix(t *testing.T) {
	one := records(0, 1)
	s, err := Open(filepath.Join(t.TempDir(), "spool.db"), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	size := func() int64 { // what one record costs, measured on a big spool
		b, err := Open(filepath.Join(t.TempDir(), "b.db"), 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		_, _ = b.Append(one)
		return b.Bytes()
	}()
	s.Close()
	s, err = Open(filepath.Join(t.TempDir(), "capped.db"), 3*size+size/2, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if kept, err := s.Append(records(0, 5)); err != nil || kept != 3 {
		t.Fatalf("Append past the cap = %d, %v; want 3", kept, err)
	}
	if kept, _ := s.Append(records(5, 1)); kept != 0 {
		t.Fatalf("Append on a full spool kept %d", kept)
	}
	_ = s.Remove(1)
	if kept, _ := s.Append(records(5, 2)); kept != 1 {
		t.Fatalf("Append after a drain kept %d, want 1", kept)
	}
	got, _ := s.Oldest(10)
	if ids(got) != "1 2 5" {
		t.Fatalf("held %q", ids(got))
	}
}

// A damaged record (its bytes changed on disk behind bbolt's back) and
// everything after it is cut at the next start, with a count in the log.
func TestDamagedTailIsCut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spool.db")
	s, err := Open(path, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	recs := records(0, 10)
	recs[6].RequestID = "the-torn-one"
	if _, err := s.Append(recs); err != nil {
		t.Fatal(err)
	}
	s.Close()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(raw, []byte("the-torn-one"))
	if at < 0 {
		t.Fatal("record not found in the file")
	}
	raw[at+3] ^= 0xff
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	s, err = Open(path, 0, logTo(&log))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Oldest(100)
	if err != nil || ids(got) != "0 1 2 3 4 5" {
		t.Fatalf("after the cut: %q, %v", ids(got), err)
	}
	if !strings.Contains(log.String(), "records_cut=4") {
		t.Fatalf("log does not count the cut:\n%s", log.String())
	}
	// The cut is on disk: the next start finds nothing to cut.
	s.Close()
	log.Reset()
	s, err = Open(path, 0, logTo(&log))
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != 6 || strings.Contains(log.String(), "records_cut") {
		t.Fatalf("second start: %d records, log %s", s.Len(), log.String())
	}
}

// A file that is no bbolt database at all is moved aside: sless starts.
func TestUnreadableFileMovedAside(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "spool.db")
	if err := os.WriteFile(path, bytes.Repeat([]byte("garbage!"), 2048), 0o600); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	s, err := Open(path, 0, logTo(&log))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Len() != 0 {
		t.Fatalf("Len = %d", s.Len())
	}
	aside, _ := filepath.Glob(path + ".corrupt-*")
	if len(aside) != 1 || !strings.Contains(log.String(), "moved aside") {
		t.Fatalf("aside %v, log %s", aside, log.String())
	}
}

func TestOpenRefusesNegativeCap(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "s.db"), -1, nil); err == nil || !strings.Contains(err.Error(), "negative") {
		t.Fatalf("Open with a negative cap = %v", err)
	}
}
