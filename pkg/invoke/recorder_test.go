package invoke_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sless-dev/sless/pkg/adapter/postgres"
	"github.com/sless-dev/sless/pkg/adapter/postgres/postgrestest"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/spool"
	"github.com/sless-dev/sless/test/testbed"
)

// gateSink is a Sink whose answers the test decides: the Recorder's
// contract with any sink (PostgreSQL, bbolt), its timing made explicit.
type gateSink struct {
	mu      sync.Mutex
	gate    chan struct{} // Write waits on it when set
	fail    func(invoke.Batch) error
	batches []invoke.Batch // every attempt, in order
	stored  []invoke.Record
}

func (s *gateSink) Write(ctx context.Context, b invoke.Batch) error {
	s.mu.Lock()
	gate, fail := s.gate, s.fail
	s.batches = append(s.batches, invoke.Batch{ID: b.ID, Records: append([]invoke.Record(nil), b.Records...)})
	s.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if fail != nil {
		if err := fail(b); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.stored = append(s.stored, b.Records...)
	s.mu.Unlock()
	return nil
}

func (s *gateSink) storedCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.stored)
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func record(i int) invoke.Record {
	return invoke.Record{Namespace: "ns", Function: "fn", Trigger: invoke.TriggerHTTP, RequestID: fmt.Sprint(i), StartedAt: time.Now(), Status: 200}
}

func TestRecorderQueueCapDropsAndCounts(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := invoke.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	sink := &gateSink{gate: make(chan struct{})}
	rec := invoke.NewRecorder(sink, invoke.RecorderOptions{QueueSize: 100, BatchSize: 10, Metrics: m})
	accepted := 0
	for i := range 250 {
		if rec.Record(record(i)) {
			accepted++
		}
	}
	if accepted != 100 || rec.Dropped() != 150 {
		t.Fatalf("accepted %d, dropped %d; want 100 and 150", accepted, rec.Dropped())
	}
	if d := rec.Depth(); d != 100 {
		t.Fatalf("depth %d, want 100", d)
	}
	r := &rig{registry: reg}
	if v := (prometheusCollector{r, "sless_invocation_records_dropped_total", map[string]string{"reason": invoke.DropQueueFull}}).value(t); v != 150 {
		t.Fatalf("dropped metric %v", v)
	}
	if v := (prometheusCollector{r, "sless_invocation_queue_depth", nil}).value(t); v != 100 {
		t.Fatalf("depth metric %v", v)
	}
	close(sink.gate)
	if err := rec.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rec.Written() != 100 || sink.storedCount() != 100 {
		t.Fatalf("written %d, stored %d; want 100", rec.Written(), sink.storedCount())
	}
	// In order, and no batch above BatchSize.
	for i, r := range sink.stored {
		if r.RequestID != fmt.Sprint(i) {
			t.Fatalf("record %d is %s: order lost", i, r.RequestID)
		}
	}
	for _, b := range sink.batches {
		if len(b.Records) > 10 {
			t.Fatalf("batch of %d records", len(b.Records))
		}
	}
	if rec.Record(record(0)) {
		t.Fatal("a closed recorder took a record")
	}
}

// Records that trickle in are held for FlushInterval and written as one
// batch; a full batch goes at once, and Close writes what waits without
// waiting out the interval.
func TestRecorderFlushInterval(t *testing.T) {
	t.Run("a trickle becomes one batch", func(t *testing.T) {
		sink := &gateSink{}
		rec := invoke.NewRecorder(sink, invoke.RecorderOptions{BatchSize: 1000, FlushInterval: 300 * time.Millisecond})
		defer rec.Close(context.Background())
		start := time.Now()
		for i := range 10 {
			rec.Record(record(i))
			time.Sleep(5 * time.Millisecond) // a trickle, not a burst
		}
		waitFor(t, "10 records stored", func() bool { return sink.storedCount() == 10 })
		if waited := time.Since(start); waited < 300*time.Millisecond {
			t.Errorf("stored after %s, before the flush interval", waited)
		}
		sink.mu.Lock()
		defer sink.mu.Unlock()
		if len(sink.batches) != 1 {
			t.Fatalf("%d batches, want 1", len(sink.batches))
		}
	})
	t.Run("a full batch does not wait", func(t *testing.T) {
		sink := &gateSink{}
		rec := invoke.NewRecorder(sink, invoke.RecorderOptions{BatchSize: 5, FlushInterval: time.Hour})
		for i := range 8 {
			rec.Record(record(i))
		}
		waitFor(t, "the full batch stored", func() bool { return sink.storedCount() == 5 })
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rec.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if n := sink.storedCount(); n != 8 {
			t.Fatalf("stored %d after Close, want 8", n)
		}
	})
}

// A failed batch is retried whole, with the same id, until it is stored.
func TestRecorderRetriesSameBatch(t *testing.T) {
	var attempts atomic.Int32
	sink := &gateSink{fail: func(invoke.Batch) error {
		if attempts.Add(1) <= 3 {
			return errors.New("connection refused")
		}
		return nil
	}}
	rec := invoke.NewRecorder(sink, invoke.RecorderOptions{MinBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond})
	rec.Record(record(1))
	waitFor(t, "the record to be stored", func() bool { return sink.storedCount() == 1 })
	if err := rec.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(sink.batches) != 4 {
		t.Fatalf("%d attempts, want 4", len(sink.batches))
	}
	for _, b := range sink.batches {
		if b.ID != sink.batches[0].ID || len(b.Records) != 1 {
			t.Fatalf("attempt %+v differs from the first %+v", b, sink.batches[0])
		}
	}
}

func TestRecorderDropsPermanentlyRefusedBatch(t *testing.T) {
	sink := &gateSink{fail: func(b invoke.Batch) error {
		for _, r := range b.Records {
			if r.Function == "bad" {
				return fmt.Errorf("%w: value too long", invoke.ErrPermanent)
			}
		}
		return nil
	}}
	rec := invoke.NewRecorder(sink, invoke.RecorderOptions{})
	bad := record(1)
	bad.Function = "bad"
	rec.Record(bad)
	waitFor(t, "the bad batch to be dropped", func() bool { return rec.Dropped() == 1 })
	rec.Record(record(2))
	if err := rec.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sink.storedCount() != 1 || rec.Written() != 1 {
		t.Fatalf("stored %d, want the good record only", sink.storedCount())
	}
}

// A sink that stores a batch but for a few records it refuses costs only
// those: they are counted as dropped and the rest as written, with or
// without a spool, and the batch is not retried.
func TestRecorderCountsRecordsRefusedAlone(t *testing.T) {
	for _, spooled := range []bool{false, true} {
		t.Run(fmt.Sprint("spool=", spooled), func(t *testing.T) {
			var attempts atomic.Int32
			sink := &gateSink{fail: func(b invoke.Batch) error {
				attempts.Add(1)
				return &invoke.RefusedError{Refused: 2, Err: fmt.Errorf("%w: bad bytes", invoke.ErrPermanent)}
			}}
			opts := invoke.RecorderOptions{BatchSize: 10, FlushInterval: time.Hour}
			if spooled {
				sp, err := spool.Open(filepath.Join(t.TempDir(), "spool.db"), 0, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer sp.Close()
				opts.Spool = sp
			}
			rec := invoke.NewRecorder(sink, opts)
			for i := range 10 {
				rec.Record(record(i))
			}
			// The full batch may go before Close or during it, so Close's
			// answer is not asserted; the counts are.
			_ = rec.Close(context.Background())
			if rec.Dropped() != 2 || rec.Written() != 8 || attempts.Load() != 1 {
				t.Fatalf("dropped %d, written %d, %d attempts; want 2, 8 and 1", rec.Dropped(), rec.Written(), attempts.Load())
			}
		})
	}
}

func TestRecorderCloseGivesUpAtDeadline(t *testing.T) {
	sink := &gateSink{fail: func(invoke.Batch) error { return errors.New("down") }}
	rec := invoke.NewRecorder(sink, invoke.RecorderOptions{BatchSize: 2, MinBackoff: time.Millisecond})
	for i := range 5 {
		rec.Record(record(i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := rec.Close(ctx)
	if err == nil {
		t.Fatal("Close reported success with nothing written")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Close took %v past its deadline", d)
	}
	if rec.Dropped() != 5 {
		t.Fatalf("dropped %d, want 5", rec.Dropped())
	}
}

// A write stuck in the sink is cancelled when Close gives up.
func TestRecorderCloseCancelsStuckWrite(t *testing.T) {
	sink := &gateSink{gate: make(chan struct{})}
	rec := invoke.NewRecorder(sink, invoke.RecorderOptions{})
	rec.Record(record(1))
	waitFor(t, "the write to start", func() bool { sink.mu.Lock(); defer sink.mu.Unlock(); return len(sink.batches) == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := rec.Close(ctx); err == nil || rec.Dropped() != 1 {
		t.Fatalf("Close = %v, dropped %d; want an error and 1", err, rec.Dropped())
	}
}

// Records any store can take: invalid UTF-8, NUL bytes and overlong text are
// cleaned before they reach PostgreSQL.
func TestRecorderCleansRecordsForPostgres(t *testing.T) {
	s := postgrestest.New(t)
	rec := invoke.NewRecorder(s, invoke.RecorderOptions{})
	long := make([]byte, 5000)
	for i := range long {
		long[i] = 'e'
	}
	r := record(1)
	r.Error = "bad \xff utf8 and nul \x00 " + string(long)
	r.RequestID = "id\x00"
	rec.Record(r)
	if err := rec.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	page, err := s.List(context.Background(), invoke.Query{Namespace: "ns", Function: "fn", Limit: 10})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("%v, %d items", err, len(page.Items))
	}
	got := page.Items[0]
	if got.RequestID != "id" || len(got.Error) > invoke.MaxErrorLength || !strings.HasPrefix(got.Error, "bad \uFFFD utf8 and nul  eee") {
		t.Fatalf("stored request id %q, error %q", got.RequestID, got.Error[:20])
	}
}

// PostgreSQL stopped in the middle of a run of invokes and started again:
// every invoke succeeds at its usual speed, and afterwards the table holds a
// record of each.
func TestRecordsSurvivePostgresRestart(t *testing.T) {
	srv, err := testbed.StartPostgres()
	if err != nil {
		t.Fatalf("start PostgreSQL: %v", err)
	}
	t.Cleanup(srv.Remove)
	s, err := postgres.Open(testbed.CreateDatabase(t, srv.URL("postgres")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	recorder := invoke.NewRecorder(s, invoke.RecorderOptions{MinBackoff: 20 * time.Millisecond, MaxBackoff: 500 * time.Millisecond, WriteTimeout: 5 * time.Second})
	ts := &targets{}
	ts.set("ns", "fn", invoke.Target{Address: echo(t, nil), Ready: true, Public: true})
	proxy, err := invoke.NewProxy(invoke.Options{Resolver: ts, Recorder: recorder})
	if err != nil {
		t.Fatal(err)
	}
	front := function(t, proxy.ServeHTTP)

	const perPhase, workers = 600, 6
	var latencies [3][]time.Duration
	var mu sync.Mutex
	run := func(phase int) {
		var wg sync.WaitGroup
		next := atomic.Int32{}
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= perPhase {
					start := time.Now()
					resp, err := http.Get(front.String() + "/fn/ns/fn")
					if err != nil {
						t.Error(err)
						return
					}
					resp.Body.Close()
					d := time.Since(start)
					if resp.StatusCode != 201 {
						t.Errorf("phase %d: status %d", phase, resp.StatusCode)
					}
					mu.Lock()
					latencies[phase] = append(latencies[phase], d)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	run(0)
	waitFor(t, "the first records", func() bool { return recorder.Written() == perPhase })
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	run(1) // PostgreSQL down
	if recorder.Written() != perPhase {
		t.Fatalf("%d records written while PostgreSQL was down", recorder.Written())
	}
	if d := recorder.Depth(); d != perPhase {
		t.Fatalf("queue depth %d while down, want %d", d, perPhase)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	run(2)
	waitFor(t, "every record", func() bool { return recorder.Written() == 3*perPhase })
	var n int
	if err := s.Pool().QueryRow(context.Background(), "SELECT count(*) FROM invocations").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 3*perPhase || recorder.Dropped() != 0 {
		t.Fatalf("table holds %d records, %d dropped; want %d and none", n, recorder.Dropped(), 3*perPhase)
	}
	p50 := func(ds []time.Duration) time.Duration {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[len(ds)/2]
	}
	up, down := p50(latencies[0]), p50(latencies[1])
	t.Logf("p50 latency: up %v, down %v, after %v; max down %v", up, down, p50(latencies[2]), latencies[1][len(latencies[1])-1])
	if down > 3*up+2*time.Millisecond {
		t.Fatalf("invokes slowed while PostgreSQL was down: p50 %v against %v", down, up)
	}
	if max := latencies[1][len(latencies[1])-1]; max > time.Second {
		t.Fatalf("an invoke took %v while PostgreSQL was down", max)
	}
	if err := recorder.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
