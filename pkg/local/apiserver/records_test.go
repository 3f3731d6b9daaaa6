package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/invoketest"
)

// openRecords opens a store in t's temporary directory for its records,
// and returns it and its file.
func openRecords(t *testing.T) (*Store, string) {
	path := filepath.Join(t.TempDir(), "sless.db")
	st, err := Open(path, runtime.NewScheme())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, path
}

func TestRecordsWriteAndList(t *testing.T) {
	ctx := context.Background()
	st, _ := openRecords(t)
	recs, err := st.Records()
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var batch []invoke.Record
	for i := 0; i < 25; i++ {
		status, trigger := 200, invoke.TriggerHTTP
		if i%5 == 0 {
			status = 500
		}
		if i%2 == 1 {
			trigger = invoke.TriggerCron
		}
		// Two records share each start time: the id breaks the tie.
		batch = append(batch, invoke.Record{Namespace: "ns", Function: "f", Trigger: trigger, Status: status,
			RequestID: fmt.Sprint(i), StartedAt: base.Add(time.Duration(i/2) * time.Second), Duration: time.Millisecond})
	}
	batch = append(batch, invoke.Record{Namespace: "ns", Function: "other", Status: 200, StartedAt: base, Trigger: invoke.TriggerHTTP})
	if err := recs.Write(ctx, invoke.Batch{ID: "b1", Records: batch}); err != nil {
		t.Fatal(err)
	}
	// The same batch again (a lost acknowledgement) stores nothing.
	if err := recs.Write(ctx, invoke.Batch{ID: "b1", Records: batch}); err != nil {
		t.Fatal(err)
	}
	var all []invoke.Record
	q := invoke.Query{Namespace: "ns", Function: "f", Limit: 7}
	for pages := 0; ; pages++ {
		page, err := recs.List(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page.Items...)
		if page.Next == nil {
			break
		}
		if pages > 10 {
			t.Fatal("paging does not end")
		}
		q.After = page.Next
	}
	if len(all) != 25 {
		t.Fatalf("listed %d records, want 25", len(all))
	}
	for i := 1; i < len(all); i++ {
		a, b := all[i-1], all[i]
		if a.StartedAt.Before(b.StartedAt) || (a.StartedAt.Equal(b.StartedAt) && a.ID < b.ID) {
			t.Fatalf("not newest first at %d: %v/%d then %v/%d", i, a.StartedAt, a.ID, b.StartedAt, b.ID)
		}
		if a.ID == 0 {
			t.Fatal("record without id")
		}
	}
	count := func(q invoke.Query) int {
		q.Namespace, q.Function, q.Limit = "ns", "f", 1000
		p, err := recs.List(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		return len(p.Items)
	}
	cases := []struct {
		name string
		q    invoke.Query
		want int
	}{
		{"5xx", invoke.Query{StatusClass: 5}, 5},
		{"2xx", invoke.Query{StatusClass: 2}, 20},
		{"cron", invoke.Query{Trigger: invoke.TriggerCron}, 12},
		{"since", invoke.Query{Since: base.Add(10 * time.Second)}, 5}, // i = 20..24
		{"until", invoke.Query{Until: base.Add(2 * time.Second)}, 4},  // i = 0..3
		{"window", invoke.Query{Since: base.Add(time.Second), Until: base.Add(3 * time.Second)}, 4},
		{"nothing", invoke.Query{Trigger: invoke.TriggerQueue}, 0},
	}
	for _, c := range cases {
		if got := count(c.q); got != c.want {
			t.Errorf("%s: %d records, want %d", c.name, got, c.want)
		}
	}
	if p, _ := recs.List(ctx, invoke.Query{Namespace: "ns", Function: "missing"}); len(p.Items) != 0 || p.Next != nil {
		t.Fatalf("unknown function: %+v", p)
	}
}

func TestRecordsRetention(t *testing.T) {
	ctx := context.Background()
	st, _ := openRecords(t)
	recs, _ := st.Records()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var batch []invoke.Record
	for i := 0; i < 50; i++ {
		for _, fn := range []string{"a", "b"} {
			batch = append(batch, invoke.Record{Namespace: "ns", Function: fn, Status: 200, Trigger: invoke.TriggerHTTP, StartedAt: base.Add(time.Duration(i) * time.Hour)})
		}
	}
	if err := recs.Write(ctx, invoke.Batch{ID: "r", Records: batch}); err != nil {
		t.Fatal(err)
	}
	// Small batches: the loop must go round several times.
	n, err := recs.DeleteBefore(ctx, base.Add(30*time.Hour), 7)
	if err != nil || n != 60 {
		t.Fatalf("DeleteBefore = %d, %v; want 60", n, err)
	}
	for _, fn := range []string{"a", "b"} {
		p, _ := recs.List(ctx, invoke.Query{Namespace: "ns", Function: fn, Limit: 1000})
		if len(p.Items) != 20 || p.Items[len(p.Items)-1].StartedAt.Before(base.Add(30*time.Hour)) {
			t.Fatalf("%s after retention: %d records", fn, len(p.Items))
		}
	}
}

// Records written as JSON by earlier versions are listed beside the
// compact ones.
func TestRecordsReadsJSONOfEarlierVersions(t *testing.T) {
	ctx := context.Background()
	st, _ := openRecords(t)
	recs, err := st.Records()
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	old := invoke.Record{ID: 7, Namespace: "ns", Function: "f", Trigger: invoke.TriggerHTTP, RequestID: "old",
		StartedAt: base, Status: 200, Duration: time.Millisecond, BytesOut: 3}
	raw, _ := json.Marshal(old)
	if err := st.db.Update(func(tx *bolt.Tx) error {
		fb, err := tx.Bucket(bucketInvocations).CreateBucketIfNotExists([]byte("ns/f"))
		if err != nil {
			return err
		}
		return fb.Put(recordKey(base, 7), raw)
	}); err != nil {
		t.Fatal(err)
	}
	if err := recs.Write(ctx, invoke.Batch{Records: []invoke.Record{{Namespace: "ns", Function: "f", Trigger: invoke.TriggerCron,
		RequestID: "new", StartedAt: base.Add(time.Second), Status: 500, Error: "boom", ColdStart: true}}}); err != nil {
		t.Fatal(err)
	}
	p, err := recs.List(ctx, invoke.Query{Namespace: "ns", Function: "f", Limit: 10})
	if err != nil || len(p.Items) != 2 {
		t.Fatalf("List = %+v, %v", p, err)
	}
	got := p.Items[0]
	if got.RequestID != "new" || got.Namespace != "ns" || got.Function != "f" || !got.StartedAt.Equal(base.Add(time.Second)) ||
		got.ID == 0 || got.Error != "boom" || !got.ColdStart || got.Status != 500 || got.Trigger != invoke.TriggerCron {
		t.Fatalf("compact record read back as %+v", got)
	}
	if p.Items[1] != old {
		t.Fatalf("JSON record read back as %+v, want %+v", p.Items[1], old)
	}
}

// With a size bound the oldest records go first, whatever their function,
// and the records stay within the bound.
func TestRecordsMaxSizeDeletesOldestFirst(t *testing.T) {
	ctx := context.Background()
	st, _ := openRecords(t)
	recs, err := st.Records()
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	write := func(fn string, from, n int) {
		var batch []invoke.Record
		for i := from; i < from+n; i++ {
			batch = append(batch, invoke.Record{Namespace: "ns", Function: fn, Trigger: invoke.TriggerHTTP,
				RequestID: fmt.Sprintf("r%04d", i), StartedAt: base.Add(time.Duration(i) * time.Second), Status: 200})
		}
		if err := recs.Write(ctx, invoke.Batch{Records: batch}); err != nil {
			t.Fatal(err)
		}
	}
	write("a", 0, 100)
	write("b", 100, 100)
	perRecord := recs.Size() / 200
	if err := recs.SetMaxSize(ctx, 150*perRecord); err != nil {
		t.Fatal(err)
	}
	// 90% of the bound is kept: 135 records, the newest.
	list := func(fn string) []invoke.Record {
		p, err := recs.List(ctx, invoke.Query{Namespace: "ns", Function: fn, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return p.Items
	}
	a, b := list("a"), list("b")
	if len(a) != 35 || len(b) != 100 || a[len(a)-1].RequestID != "r0065" {
		t.Fatalf("after the bound: %d of a (oldest %s), %d of b; want 35 from r0065, 100", len(a), a[len(a)-1].RequestID, len(b))
	}
	if recs.Size() > 150*perRecord {
		t.Fatalf("records take %d bytes, bound %d", recs.Size(), 150*perRecord)
	}
	// Writes past the bound trim again.
	write("a", 200, 100)
	if recs.Size() > 150*perRecord {
		t.Fatalf("records take %d bytes after more writes, bound %d", recs.Size(), 150*perRecord)
	}
	if a := list("a"); a[0].RequestID != "r0299" {
		t.Fatalf("newest record gone: %s", a[0].RequestID)
	}
	// The count survives a reopen.
	before := recs.Size()
	again, err := st.Records()
	if err != nil || again.Size() != before {
		t.Fatalf("size after reopen %d, %v; want %d", again.Size(), err, before)
	}
}

// The point of the compact encoding: a typical record in at most 200 bytes
// of the file, where the JSON of earlier versions took over 700.
func TestRecordsBytesPerRecord(t *testing.T) {
	ctx := context.Background()
	st, path := openRecords(t)
	recs, err := st.Records()
	if err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	const n = 20000
	base := time.Now()
	for b := 0; b < n/1000; b++ {
		var batch []invoke.Record
		for i := b * 1000; i < (b+1)*1000; i++ {
			batch = append(batch, invoke.Record{Namespace: "default", Function: "hello", Revision: "hello-5f2c9a1b",
				Trigger: invoke.TriggerHTTP, RequestID: fmt.Sprintf("%032x", i), StartedAt: base.Add(time.Duration(i) * time.Millisecond),
				Duration: 1500 * time.Microsecond, Status: 200, BytesIn: 0, BytesOut: 27})
		}
		if err := recs.Write(ctx, invoke.Batch{ID: fmt.Sprint(b), Records: batch}); err != nil {
			t.Fatal(err)
		}
	}
	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	per := float64(after.Size()-before.Size()) / n
	t.Logf("%.0f bytes per record in the file", per)
	if per > 200 {
		t.Fatalf("%.0f bytes per record, want at most 200", per)
	}
}

// A Function and a SlessService of one name share the name column, not
// their records: each listing keeps its own kind's.
func TestRecordsKeepFunctionAndServiceApart(t *testing.T) {
	st, _ := openRecords(t)
	recs, err := st.Records()
	if err != nil {
		t.Fatal(err)
	}
	invoketest.KindsApart(t, recs)
}
