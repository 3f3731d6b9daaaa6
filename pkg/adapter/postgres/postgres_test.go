package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/adapter/postgres"
	"github.com/sless-dev/sless/pkg/adapter/postgres/postgrestest"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/invoketest"
	"github.com/sless-dev/sless/test/testbed"
)

func TestMain(m *testing.M) { testbed.Main(m) }

func count(t testing.TB, s *postgres.Store, where string, args ...any) int {
	t.Helper()
	var n int
	if err := s.Pool().QueryRow(context.Background(), "SELECT count(*) FROM invocations "+where, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestOpenRefusesBadURL(t *testing.T) {
	_, err := postgres.Open("postgres://user:secret@host:notaport/db")
	if err == nil {
		t.Fatal("Open accepted a URL with a bad port")
	}
	if got := err.Error(); got == "" || strings.Contains(got, "secret") {
		t.Fatalf("error %q is empty or leaks the password", got)
	}
}

// Replicas starting together all migrate; the advisory lock makes one of
// them apply the schema and the others find it done.
func TestMigrateConcurrentlyAndAgain(t *testing.T) {
	url := testbed.DatabaseURL(t)
	const replicas = 6
	var wg sync.WaitGroup
	errs := make(chan error, replicas)
	for range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := postgres.Open(url)
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			errs <- s.Migrate(ctx)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent migrate: %v", err)
		}
	}
	s, err := postgres.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("migrate again: %v", err)
	}
	var version int
	var dirty bool
	if err := s.Pool().QueryRow(context.Background(), "SELECT version, dirty FROM "+postgres.MigrationsTable).Scan(&version, &dirty); err != nil {
		t.Fatal(err)
	}
	if version != 5 || dirty {
		t.Fatalf("schema version %d dirty=%v, want 5 clean", version, dirty)
	}
}

func TestMigrateReportsUnreachableDatabase(t *testing.T) {
	port, err := testbed.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	s, err := postgres.Open(fmt.Sprintf("postgres://postgres@127.0.0.1:%d/none?sslmode=disable&connect_timeout=2", port))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Migrate(ctx); err == nil {
		t.Fatal("Migrate succeeded with no server")
	}
	// MigrateWhenUp keeps trying until its context ends.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel2()
	var failures int
	err = s.MigrateWhenUp(ctx2, func(error) { failures++ })
	if !errors.Is(err, context.DeadlineExceeded) || failures == 0 {
		t.Fatalf("MigrateWhenUp = %v after %d failures, want deadline after at least one", err, failures)
	}
}

func rec(ns, fn string, i int, at time.Time) invoke.Record {
	status := 200
	switch {
	case i%10 == 3:
		status = 404
	case i%10 == 7:
		status = 503
	}
	trigger := invoke.TriggerHTTP
	if i%4 == 0 {
		trigger = invoke.TriggerCron
	}
	return invoke.Record{
		Namespace: ns, Function: fn, Revision: "fn-00001", Trigger: trigger,
		RequestID: "req-" + strconv.Itoa(i), StartedAt: at.Truncate(time.Microsecond),
		Duration: time.Duration(i) * time.Millisecond, Status: status,
		BytesIn: int64(i), BytesOut: int64(2 * i), ColdStart: i%5 == 0,
	}
}

func TestWriteAndListRoundTrip(t *testing.T) {
	s := postgrestest.New(t)
	ctx := context.Background()
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var records []invoke.Record
	for i := range 100 {
		records = append(records, rec("team-a", "hello", i, base.Add(time.Duration(i)*time.Second)))
	}
	// Another function and another namespace with the same name must not show.
	records = append(records, rec("team-a", "other", 1, base), rec("team-b", "hello", 1, base))
	records[5].Error = "timeout: context deadline exceeded"
	if err := s.Write(ctx, invoke.Batch{ID: "b1", Records: records}); err != nil {
		t.Fatal(err)
	}
	page, err := s.List(ctx, invoke.Query{Namespace: "team-a", Function: "hello", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 100 || page.Next != nil {
		t.Fatalf("got %d items, next %v; want 100 and no next", len(page.Items), page.Next)
	}
	// Newest first, every field back as written.
	for i, got := range page.Items {
		want := records[99-i]
		got.ID = 0
		if got != want {
			t.Fatalf("item %d:\n got %+v\nwant %+v", i, got, want)
		}
	}
}

func TestListPaginatesWithFilters(t *testing.T) {
	s := postgrestest.New(t)
	ctx := context.Background()
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var records []invoke.Record
	for i := range 500 {
		// Several records share a start time: the id breaks ties.
		records = append(records, rec("ns", "fn", i, base.Add(time.Duration(i/3)*time.Millisecond)))
	}
	if err := s.Write(ctx, invoke.Batch{ID: "all", Records: records}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		q     invoke.Query
		match func(invoke.Record) bool
	}{
		{"all", invoke.Query{}, func(invoke.Record) bool { return true }},
		{"2xx", invoke.Query{StatusClass: 2}, func(r invoke.Record) bool { return r.Status/100 == 2 }},
		{"5xx", invoke.Query{StatusClass: 5}, func(r invoke.Record) bool { return r.Status/100 == 5 }},
		{"cron", invoke.Query{Trigger: invoke.TriggerCron}, func(r invoke.Record) bool { return r.Trigger == invoke.TriggerCron }},
		{"4xx http", invoke.Query{StatusClass: 4, Trigger: invoke.TriggerHTTP}, func(r invoke.Record) bool {
			return r.Status/100 == 4 && r.Trigger == invoke.TriggerHTTP
		}},
		{"window", invoke.Query{Since: base.Add(20 * time.Millisecond), Until: base.Add(90 * time.Millisecond)}, func(r invoke.Record) bool {
			return !r.StartedAt.Before(base.Add(20*time.Millisecond)) && r.StartedAt.Before(base.Add(90*time.Millisecond))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := map[string]bool{}
			for _, r := range records {
				if tc.match(r) {
					want[r.RequestID] = true
				}
			}
			q := tc.q
			q.Namespace, q.Function, q.Limit = "ns", "fn", 7
			seen := map[string]bool{}
			var last *invoke.Record
			for pages := 0; ; pages++ {
				if pages > 200 {
					t.Fatal("pagination does not end")
				}
				page, err := s.List(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				if len(page.Items) > q.Limit {
					t.Fatalf("page of %d items, limit %d", len(page.Items), q.Limit)
				}
				for _, r := range page.Items {
					if !tc.match(r) {
						t.Fatalf("record %+v does not match the filter", r)
					}
					if seen[r.RequestID] {
						t.Fatalf("record %s listed twice", r.RequestID)
					}
					seen[r.RequestID] = true
					// Newest first; a start time's records by request id, descending.
					if last != nil && (r.StartedAt.After(last.StartedAt) || (r.StartedAt.Equal(last.StartedAt) && r.RequestID >= last.RequestID)) {
						t.Fatalf("order broken: %v/%s after %v/%s", r.StartedAt, r.RequestID, last.StartedAt, last.RequestID)
					}
					r := r
					last = &r
				}
				if page.Next == nil {
					break
				}
				// Cursors survive their string form.
				c, err := invoke.ParseCursor(page.Next.String())
				if err != nil {
					t.Fatal(err)
				}
				q.After = &c
			}
			if len(seen) != len(want) {
				t.Fatalf("listed %d records, want %d", len(seen), len(want))
			}
		})
	}
}

// A page started before new records arrive continues where it stopped:
// newer records do not shift it.
func TestListCursorStableUnderInserts(t *testing.T) {
	s := postgrestest.New(t)
	ctx := context.Background()
	base := time.Now().Add(-time.Hour)
	var first []invoke.Record
	for i := range 20 {
		first = append(first, rec("ns", "fn", i, base.Add(time.Duration(i)*time.Second)))
	}
	if err := s.Write(ctx, invoke.Batch{ID: "1", Records: first}); err != nil {
		t.Fatal(err)
	}
	p1, err := s.List(ctx, invoke.Query{Namespace: "ns", Function: "fn", Limit: 10})
	if err != nil || p1.Next == nil {
		t.Fatalf("first page: %v, next %v", err, p1.Next)
	}
	var newer []invoke.Record
	for i := range 5 {
		newer = append(newer, rec("ns", "fn", 100+i, time.Now()))
	}
	if err := s.Write(ctx, invoke.Batch{ID: "2", Records: newer}); err != nil {
		t.Fatal(err)
	}
	p2, err := s.List(ctx, invoke.Query{Namespace: "ns", Function: "fn", Limit: 10, After: p1.Next})
	if err != nil {
		t.Fatal(err)
	}
	if len(p2.Items) != 10 || p2.Items[0].RequestID != "req-9" || p2.Items[9].RequestID != "req-0" || p2.Next != nil {
		t.Fatalf("second page = %d items from %s, next %v; want req-9 … req-0 and no next", len(p2.Items), p2.Items[0].RequestID, p2.Next)
	}
}

// Every way a record can come again lands it once: within one batch (which
// COPY refuses, so it takes the insert that skips), in a later batch, or
// both, beside records that are new.
func TestWriteStoresEachRecordOnce(t *testing.T) {
	now := time.Now().Truncate(time.Microsecond)
	r := func(i int) invoke.Record { return rec("ns", "fn", i, now) }
	tests := []struct {
		name    string
		batches [][]invoke.Record
		want    int
	}{
		{"new records", [][]invoke.Record{{r(1), r(2), r(3)}}, 3},
		{"a copy within the batch", [][]invoke.Record{{r(1), r(2), r(1)}}, 2},
		{"only copies within the batch", [][]invoke.Record{{r(1), r(1), r(1)}}, 1},
		{"the same batch again", [][]invoke.Record{{r(1), r(2)}, {r(1), r(2)}}, 2},
		{"a later batch repeats one", [][]invoke.Record{{r(1), r(2)}, {r(3), r(2), r(4)}}, 4},
		{"copies within and across batches", [][]invoke.Record{{r(1), r(2)}, {r(2), r(3), r(3), r(1)}}, 3},
		{"same request id, another start", [][]invoke.Record{{r(1)}, {rec("ns", "fn", 1, now.Add(time.Microsecond))}}, 2},
		{"same request id and start, another function", [][]invoke.Record{{r(1)}, {rec("ns", "other", 1, now)}}, 2},
	}
	s := postgrestest.New(t)
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := s.Pool().Exec(ctx, "TRUNCATE invocations"); err != nil {
				t.Fatal(err)
			}
			for i, b := range tt.batches {
				if err := s.Write(ctx, invoke.Batch{ID: fmt.Sprint(i), Records: b}); err != nil {
					t.Fatalf("batch %d: %v", i, err)
				}
			}
			if n := count(t, s, ""); n != tt.want {
				t.Fatalf("%d rows, want %d", n, tt.want)
			}
			var distinct int
			if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM (SELECT DISTINCT request_id, started_at, namespace, function
				FROM invocations) d`).Scan(&distinct); err != nil || distinct != tt.want {
				t.Fatalf("%d distinct records (%v), want %d", distinct, err, tt.want)
			}
		})
	}
}

// Writers of overlapping batches, in different orders, at once (replicas
// replaying the same records): every record stored once, no error, no
// deadlock left to the caller.
func TestWriteConcurrentOverlappingBatches(t *testing.T) {
	s := postgrestest.New(t)
	ctx := context.Background()
	now := time.Now().Truncate(time.Microsecond)
	const writers, records = 6, 400
	var wg sync.WaitGroup
	errs := make(chan error, writers*4)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range 4 {
				// Writer w's batch b: a window of records, forwards or backwards.
				from := (w*37 + b*90) % (records - 150)
				batch := make([]invoke.Record, 0, 150)
				for i := range 150 {
					j := from + i
					if (w+b)%2 == 1 {
						j = from + 149 - i
					}
					batch = append(batch, rec("ns", "fn", j, now.Add(time.Duration(j)*time.Millisecond)))
				}
				if err := s.Write(ctx, invoke.Batch{ID: fmt.Sprint(w, "-", b), Records: batch}); err != nil {
					errs <- fmt.Errorf("writer %d batch %d: %w", w, b, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var distinct int
	if err := s.Pool().QueryRow(ctx, "SELECT count(DISTINCT request_id) FROM invocations").Scan(&distinct); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, ""); n != distinct || n == 0 {
		t.Fatalf("%d rows for %d distinct records", n, distinct)
	}
}

// A record PostgreSQL refuses costs only itself: the rest of its batch is
// stored, and the answer says how many were refused and why, as a
// permanent error (the Recorder drops those and counts them). The Recorder
// cleans records first; the sink must still not retry them forever.
func TestWriteRefusesBadRecordsAlone(t *testing.T) {
	now := time.Now().Truncate(time.Microsecond)
	nul := rec("ns", "fn", 1000, now)
	nul.Error = "nul\x00byte"
	future := rec("ns", "fn", 1001, time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC))
	good := func(from, n int) []invoke.Record {
		out := make([]invoke.Record, n)
		for i := range out {
			out[i] = rec("ns", "fn", from+i, now)
		}
		return out
	}
	tests := []struct {
		name          string
		batch         []invoke.Record
		stored, refus int
		why           string
	}{
		{"one bad record alone", []invoke.Record{nul}, 0, 1, "invalid byte sequence"},
		{"a NUL byte among 99", slices.Concat(good(0, 50), []invoke.Record{nul}, good(50, 49)), 99, 1, "invalid byte sequence"},
		{"a time out of range first", slices.Concat([]invoke.Record{future}, good(0, 20)), 20, 1, "out of range"},
		{"two bad, one last", slices.Concat(good(0, 10), []invoke.Record{future}, good(10, 30), []invoke.Record{nul}), 40, 2, ""},
		{"a bad record and a copy", slices.Concat(good(0, 10), []invoke.Record{nul}, good(5, 10)), 15, 1, ""},
		{"all bad", []invoke.Record{nul, future}, 0, 2, ""},
	}
	// Every other record bad: more than the writes isolating them may
	// take, so whole halves are refused too, but never a good record alone.
	var many []invoke.Record
	for i := range 200 {
		many = append(many, rec("ns", "fn", i, now))
		bad := rec("ns", "bad", i, now)
		bad.Error = "nul\x00byte"
		many = append(many, bad)
	}
	s := postgrestest.New(t)
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := s.Pool().Exec(ctx, "TRUNCATE invocations"); err != nil {
				t.Fatal(err)
			}
			err := s.Write(ctx, invoke.Batch{ID: "x", Records: tt.batch})
			if !errors.Is(err, invoke.ErrPermanent) || !strings.Contains(err.Error(), tt.why) {
				t.Fatalf("Write = %v, want a permanent error saying %q", err, tt.why)
			}
			if tt.refus > 1 || len(tt.batch) > 1 {
				re, ok := errors.AsType[*invoke.RefusedError](err)
				if !ok || re.Refused != tt.refus {
					t.Fatalf("Write = %#v, want a RefusedError of %d", err, tt.refus)
				}
			}
			if n := count(t, s, ""); n != tt.stored {
				t.Fatalf("%d rows stored, want %d", n, tt.stored)
			}
			// Again, as the spool replays: nothing more, nothing twice.
			if err := s.Write(ctx, invoke.Batch{ID: "x", Records: tt.batch}); !errors.Is(err, invoke.ErrPermanent) {
				t.Fatalf("second Write = %v", err)
			}
			if n := count(t, s, ""); n != tt.stored {
				t.Fatalf("%d rows stored after a second write, want %d", n, tt.stored)
			}
		})
	}
	t.Run("every other record bad", func(t *testing.T) {
		if _, err := s.Pool().Exec(ctx, "TRUNCATE invocations"); err != nil {
			t.Fatal(err)
		}
		err := s.Write(ctx, invoke.Batch{ID: "many", Records: many})
		re, ok := errors.AsType[*invoke.RefusedError](err)
		if !ok {
			t.Fatalf("Write = %v, want a RefusedError", err)
		}
		stored := count(t, s, "")
		if re.Refused < 200 || stored+re.Refused != len(many) || stored == 0 {
			t.Fatalf("refused %d, stored %d of %d: want every bad record refused, the rest stored, some stored", re.Refused, stored, len(many))
		}
		if n := count(t, s, "WHERE function = 'bad'"); n != 0 {
			t.Fatalf("%d bad records stored", n)
		}
	})
}

func TestWriteWithoutSchemaIsRetryable(t *testing.T) {
	s, err := postgres.Open(testbed.DatabaseURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.Write(context.Background(), invoke.Batch{ID: "1", Records: []invoke.Record{rec("ns", "fn", 1, time.Now())}})
	if err == nil || errors.Is(err, invoke.ErrPermanent) {
		t.Fatalf("Write before migrations = %v, want a retryable error", err)
	}
}

func TestDeleteBeforeInBatches(t *testing.T) {
	s := postgrestest.New(t)
	ctx := context.Background()
	now := time.Now()
	var records []invoke.Record
	for i := range 2500 {
		records = append(records, rec("ns", "fn", i, now.Add(-48*time.Hour).Add(time.Duration(i)*time.Second)))
	}
	for i := range 300 {
		records = append(records, rec("ns", "fn", i, now.Add(-time.Duration(i)*time.Second)))
	}
	if err := s.Write(ctx, invoke.Batch{ID: "r", Records: records}); err != nil {
		t.Fatal(err)
	}
	n, err := s.DeleteBefore(ctx, now.Add(-24*time.Hour), 1000)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2500 {
		t.Fatalf("deleted %d, want 2500", n)
	}
	if left := count(t, s, ""); left != 300 {
		t.Fatalf("%d rows left, want 300", left)
	}
	if old := count(t, s, "WHERE started_at < $1", now.Add(-24*time.Hour)); old != 0 {
		t.Fatalf("%d old rows left", old)
	}
}

func TestRunRetentionDeletesOnSchedule(t *testing.T) {
	s := postgrestest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := s.Write(ctx, invoke.Batch{ID: "1", Records: []invoke.Record{rec("ns", "fn", 1, time.Now().Add(-2*time.Hour))}}); err != nil {
		t.Fatal(err)
	}
	passes := make(chan int64, 16)
	go invoke.RunRetention(ctx, s, time.Hour, 50*time.Millisecond, 100, func(n int64, err error) {
		if err != nil {
			t.Errorf("retention pass: %v", err)
		}
		passes <- n
	})
	if n := <-passes; n != 1 {
		t.Fatalf("first pass deleted %d, want 1", n)
	}
	// A record that ages past the limit later goes at a later pass.
	if err := s.Write(ctx, invoke.Batch{ID: "2", Records: []invoke.Record{rec("ns", "fn", 2, time.Now().Add(-61*time.Minute))}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case n := <-passes:
			if n == 1 {
				return
			}
		case <-deadline:
			t.Fatal("the second record was never deleted")
		}
	}
}

// Migration 3 removes exact copies stored before it (same request id,
// start, namespace and function), keeps one of each, and keeps a reused
// request id's other calls; migration 5 then moves the unique key into
// the listing's index.
func TestMigrationRemovesCopiesBeforeTheUniqueIndex(t *testing.T) {
	s := postgrestest.New(t)
	ctx := context.Background()
	// Back to version 2 as an older sless left it.
	if _, err := s.Pool().Exec(ctx, `DROP TABLE async_calls, async_idempotency_keys; DROP INDEX invocations_function_request;
		CREATE INDEX invocations_function_time ON invocations (namespace, function, started_at DESC, id DESC);
		UPDATE `+postgres.MigrationsTable+` SET version = 2`); err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Microsecond)
	for _, r := range []invoke.Record{rec("ns", "fn", 1, now), rec("ns", "fn", 1, now), rec("ns", "fn", 1, now),
		rec("ns", "fn", 1, now.Add(time.Second)), rec("ns", "fn", 2, now)} {
		if _, err := s.Pool().Exec(ctx, `INSERT INTO invocations (namespace, function, trigger, request_id, started_at, duration_us, status)
			VALUES ($1, $2, $3, $4, $5, 0, 200)`, r.Namespace, r.Function, r.Trigger, r.RequestID, r.StartedAt); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, ""); n != 3 {
		t.Fatalf("%d rows after the migration, want 3", n)
	}
	if err := s.Write(ctx, invoke.Batch{Records: []invoke.Record{rec("ns", "fn", 1, now)}}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, ""); n != 3 {
		t.Fatalf("%d rows after writing a stored record again, want 3", n)
	}
}

// A Function and a SlessService of one name share the name column, not
// their records: each listing keeps its own kind's.
func TestListKeepsFunctionAndServiceApart(t *testing.T) {
	invoketest.KindsApart(t, postgrestest.New(t))
}
