package invoke_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sless-dev/sless/pkg/adapter/postgres"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/spool"
	"github.com/sless-dev/sless/test/testbed"
)

// outage is a throwaway PostgreSQL with a migrated store, a proxy in front
// of an echo function, and callers that keep calling it, each call with a
// request id of its own.
type outage struct {
	t      *testing.T
	srv    *testbed.PostgresServer
	store  *postgres.Store
	dir    string // the spool's directory
	front  string
	http   *httptest.Server
	ts     *targets
	served sync.Map // request id -> struct{}
	n      atomic.Int64
	seq    atomic.Int64
}

func newOutage(t *testing.T) *outage {
	srv, err := testbed.StartPostgres()
	if err != nil {
		t.Fatalf("start PostgreSQL: %v", err)
	}
	t.Cleanup(srv.Remove)
	// The throwaway server runs with synchronous_commit off, which loses
	// the last acknowledged commits in a crash; a real server does not.
	s, err := postgres.Open(testbed.CreateDatabase(t, srv.URL("postgres")) + "&synchronous_commit=on")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	var sync string
	if err := s.Pool().QueryRow(context.Background(), "SHOW synchronous_commit").Scan(&sync); err != nil || sync != "on" {
		t.Fatalf("synchronous_commit = %q, %v", sync, err)
	}
	o := &outage{t: t, srv: srv, store: s, dir: t.TempDir(), ts: &targets{}}
	o.ts.set("ns", "fn", invoke.Target{Address: echo(t, nil), Ready: true, Public: true})
	return o
}

// start opens the spool and a Recorder with a small queue, and serves the
// proxy through it.
func (o *outage) start(log *slog.Logger) (*invoke.Recorder, *spool.Spool) {
	sp, err := spool.Open(filepath.Join(o.dir, "spool.db"), 0, log)
	if err != nil {
		o.t.Fatal(err)
	}
	// A queue small enough that the outage spools within a second of
	// calls, yet holding the calls that arrive while a write to the store
	// coming back hangs up to WriteTimeout on a starved CPU: at 300, four
	// unpaced callers overflowed it then, on a machine at load 13-17.
	rec := invoke.NewRecorder(o.store, invoke.RecorderOptions{
		QueueSize: 2000, BatchSize: 100, FlushInterval: 10 * time.Millisecond,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, WriteTimeout: 2 * time.Second,
		Spool: sp, Logger: log,
	})
	proxy, err := invoke.NewProxy(invoke.Options{Resolver: o.ts, Recorder: rec})
	if err != nil {
		o.t.Fatal(err)
	}
	o.http = httptest.NewServer(proxy)
	o.t.Cleanup(o.http.Close)
	o.front = o.http.URL
	return rec, sp
}

// stopCalls stops the callers and waits for the proxy's handlers, which
// record a call after its caller has the answer.
func (o *outage) stopCalls(stop chan struct{}, wg *sync.WaitGroup) {
	close(stop)
	wg.Wait()
	o.http.Close()
}

// load calls the function from 4 callers until stop is closed.
func (o *outage) load(stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	front := o.front
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("call-%d", o.seq.Add(1))
				req, _ := http.NewRequest("GET", front+"/fn/ns/fn", nil)
				req.Header.Set(invoke.RequestIDHeader, id)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					o.t.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != 201 {
					o.t.Errorf("call %s: status %d", id, resp.StatusCode)
					return
				}
				o.served.Store(id, struct{}{})
				o.n.Add(1)
			}
		}()
	}
	return &wg
}

// check asserts every served call's request id is stored exactly once,
// and nothing else.
func (o *outage) check() {
	o.t.Helper()
	rows, err := o.store.Pool().Query(context.Background(), "SELECT request_id, count(*) FROM invocations GROUP BY request_id")
	if err != nil {
		o.t.Fatal(err)
	}
	defer rows.Close()
	stored := 0
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			o.t.Fatal(err)
		}
		if n != 1 {
			o.t.Errorf("request id %s stored %d times", id, n)
		}
		if _, ok := o.served.Load(id); !ok {
			o.t.Errorf("request id %s stored but never served", id)
		}
		stored++
	}
	if err := rows.Err(); err != nil {
		o.t.Fatal(err)
	}
	if served := int(o.n.Load()); stored != served {
		o.t.Fatalf("%d calls served, %d stored", served, stored)
	}
	o.t.Logf("%d calls served, each stored once", stored)
}

func (o *outage) count() int {
	var n int
	if err := o.store.Pool().QueryRow(context.Background(), "SELECT count(*) FROM invocations").Scan(&n); err != nil {
		o.t.Fatal(err)
	}
	return n
}

// PostgreSQL crashes under load for longer than the in-memory queue lasts:
// the records go to the spool, and once PostgreSQL is back every call is
// stored exactly once, while calls go on.
func TestNoRecordLostAcrossPostgresCrash(t *testing.T) {
	o := newOutage(t)
	var logs testbed.SyncBuffer
	rec, sp := o.start(slog.New(slog.NewTextHandler(&logs, nil)))
	defer sp.Close()
	stop := make(chan struct{})
	wg := o.load(stop)
	waitFor(t, "records written", func() bool { return rec.Written() >= 200 })
	if err := o.srv.Crash(); err != nil {
		t.Fatal(err)
	}
	// Three queues' worth of calls while PostgreSQL is down.
	from := o.n.Load()
	waitFor(t, "calls during the outage", func() bool { return o.n.Load()-from >= 900 && sp.Len() >= 600 })
	if err := o.srv.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the spool to drain under load", func() bool { return sp.Len() == 0 && o.n.Load()-from >= 1500 })
	o.stopCalls(stop, wg)
	if err := rec.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rec.Dropped() != 0 {
		t.Fatalf("%d records dropped", rec.Dropped())
	}
	o.check()
	for _, want := range []string{"spooling them to disk", "being written again"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
}

// sless restarts while PostgreSQL is down: the spool keeps what the first
// run could not write, the second run replays it once PostgreSQL is back.
func TestNoRecordLostAcrossRestartDuringOutage(t *testing.T) {
	o := newOutage(t)
	rec, sp := o.start(nil)
	stop := make(chan struct{})
	wg := o.load(stop)
	waitFor(t, "records written", func() bool { return rec.Written() >= 200 })
	if err := o.srv.Crash(); err != nil {
		t.Fatal(err)
	}
	from := o.n.Load()
	waitFor(t, "calls during the outage", func() bool { return o.n.Load()-from >= 900 && sp.Len() >= 600 })
	o.stopCalls(stop, wg)
	// Shutdown does not wait for a store that is down: what is in memory
	// goes to the spool, and nothing is lost.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	begin := time.Now()
	if err := rec.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Fatalf("Close took %v with the store down", d)
	}
	if rec.Dropped() != 0 {
		t.Fatalf("%d records dropped", rec.Dropped())
	}
	held := sp.Len()
	if err := sp.Close(); err != nil {
		t.Fatal(err)
	}

	// The second run starts during the outage, takes more calls, and
	// writes everything once PostgreSQL is back.
	var logs testbed.SyncBuffer
	rec2, sp2 := o.start(slog.New(slog.NewTextHandler(&logs, nil)))
	defer sp2.Close()
	if sp2.Len() != held {
		t.Fatalf("the spool holds %d records after the restart, want %d", sp2.Len(), held)
	}
	stop = make(chan struct{})
	wg = o.load(stop)
	waitFor(t, "calls after the restart", func() bool { return sp2.Len() >= held+300 })
	if err := o.srv.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the spool to drain", func() bool { return sp2.Len() == 0 })
	o.stopCalls(stop, wg)
	if err := rec2.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rec2.Dropped() != 0 {
		t.Fatalf("%d records dropped after the restart", rec2.Dropped())
	}
	o.check()
	if !strings.Contains(logs.String(), "from an earlier run") {
		t.Errorf("log does not say the spool is replayed:\n%s", logs.String())
	}
}

// Past the spool's cap records are dropped and counted, with one WARN when
// dropping starts and one, with the count, when it stops.
func TestRecorderSpoolCapDropsWithTwoWarnings(t *testing.T) {
	sink := &gateSink{}
	down := errors.New("store down")
	var failing atomic.Bool
	failing.Store(true)
	sink.fail = func(invoke.Batch) error {
		if failing.Load() {
			return down
		}
		return nil
	}
	one := func() int64 { // what one record takes in a spool
		sp, err := spool.Open(filepath.Join(t.TempDir(), "probe.db"), 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer sp.Close()
		_, _ = sp.Append([]invoke.Record{record(1000)})
		return sp.Bytes()
	}()
	sp, err := spool.Open(filepath.Join(t.TempDir(), "spool.db"), 20*one+one/2, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	var logs testbed.SyncBuffer
	reg := prometheus.NewRegistry()
	m, err := invoke.NewRecorderMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	rec := invoke.NewRecorder(sink, invoke.RecorderOptions{QueueSize: 10, BatchSize: 5, FlushInterval: -1,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 10 * time.Millisecond, Spool: sp, Metrics: m,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	for i := range 50 {
		rec.Record(record(1000 + i))
		waitFor(t, "the record spooled or dropped", func() bool { return rec.Depth() == 0 })
	}
	if sp.Len() != 20 || rec.Dropped() != 30 {
		t.Fatalf("spooled %d, dropped %d; want 20 and 30", sp.Len(), rec.Dropped())
	}
	r := &rig{registry: reg}
	if v := (prometheusCollector{r, "sless_invocation_spooled_records", nil}).value(t); v != 20 {
		t.Fatalf("spooled records metric = %v, want 20", v)
	}
	if v := (prometheusCollector{r, "sless_invocation_records_dropped_total", map[string]string{"reason": invoke.DropSpoolFull}}).value(t); v != 30 {
		t.Fatalf("dropped{reason=spool_full} = %v, want 30", v)
	}
	failing.Store(false)
	waitFor(t, "the spool to drain", func() bool { return sp.Len() == 0 })
	rec.Record(record(2000))
	if err := rec.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := sink.storedCount(); n != 21 {
		t.Fatalf("stored %d, want 21", n)
	}
	out := logs.String()
	if strings.Count(out, "are being dropped") != 1 || strings.Count(out, "no longer dropped") != 1 ||
		!strings.Contains(out, "reason=spool_full") || !strings.Contains(out, "dropped=30") {
		t.Fatalf("want one WARN at the start of dropping and one with dropped=30 at its end:\n%s", out)
	}
}

// A write that hangs does not keep records from the disk: past half the
// queue they go to the spool, nothing is dropped, and once the write ends
// everything is stored once, the spool oldest first.
func TestRecorderSpoolsBehindASlowWrite(t *testing.T) {
	sink := &gateSink{gate: make(chan struct{})}
	sp, err := spool.Open(filepath.Join(t.TempDir(), "spool.db"), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	rec := invoke.NewRecorder(sink, invoke.RecorderOptions{QueueSize: 100, BatchSize: 10, FlushInterval: -1, Spool: sp})
	rec.Record(record(0))
	waitFor(t, "the first write to start", func() bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		return len(sink.batches) == 1
	})
	for i := 1; i <= 300; i++ {
		if !rec.Record(record(i)) {
			t.Fatalf("record %d refused behind a slow write", i)
		}
		// Record never waits; give the writer its turn now and then.
		if i%25 == 0 {
			waitFor(t, "the queue to reach the spool", func() bool { return rec.Depth() < 50 })
		}
	}
	if sp.Len() < 200 {
		t.Fatalf("spool holds %d records behind the hanging write", sp.Len())
	}
	close(sink.gate)
	waitFor(t, "everything stored", func() bool { return sink.storedCount() == 301 })
	if err := rec.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	for i, r := range sink.stored {
		if r.RequestID != fmt.Sprint(i) {
			t.Fatalf("stored[%d] is record %s: not in order", i, r.RequestID)
		}
	}
	if rec.Dropped() != 0 || sp.Len() != 0 {
		t.Fatalf("dropped %d, spool holds %d", rec.Dropped(), sp.Len())
	}
}

// A write that hangs sends even a few records behind it to the spool once it
// has taken SlowWrite, long before they fill half the queue.
func TestRecorderSpoolsAfterSlowWrite(t *testing.T) {
	sink := &gateSink{gate: make(chan struct{})}
	sp, err := spool.Open(filepath.Join(t.TempDir(), "spool.db"), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	rec := invoke.NewRecorder(sink, invoke.RecorderOptions{QueueSize: 1000, BatchSize: 100,
		FlushInterval: 5 * time.Millisecond, SlowWrite: 50 * time.Millisecond, Spool: sp})
	rec.Record(record(0))
	waitFor(t, "the first write to start", func() bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		return len(sink.batches) == 1
	})
	for i := 1; i <= 10; i++ {
		rec.Record(record(i))
	}
	waitFor(t, "10 records in the spool", func() bool { return sp.Len() == 10 })
	close(sink.gate)
	waitFor(t, "everything stored", func() bool { return sink.storedCount() == 11 })
	if err := rec.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rec.Dropped() != 0 || sp.Len() != 0 {
		t.Fatalf("dropped %d, spool holds %d", rec.Dropped(), sp.Len())
	}
}

// A backlog that drains says so once, with how many records it held and how
// long it lasted; a second backlog gets its own line.
func TestRecorderLogsDrainedSpool(t *testing.T) {
	sink := &gateSink{}
	var failing atomic.Bool
	sink.fail = func(invoke.Batch) error {
		if failing.Load() {
			return errors.New("store down")
		}
		return nil
	}
	sp, err := spool.Open(filepath.Join(t.TempDir(), "spool.db"), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	var logs testbed.SyncBuffer
	rec := invoke.NewRecorder(sink, invoke.RecorderOptions{QueueSize: 100, BatchSize: 5, FlushInterval: -1,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 10 * time.Millisecond, Spool: sp,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	backlog := func(from, n int) {
		failing.Store(true)
		for i := range n {
			rec.Record(record(from + i))
		}
		waitFor(t, "the records spooled", func() bool { return sp.Len() == n })
		if strings.Contains(logs.String(), "spool drained") && from == 0 {
			t.Fatalf("drained logged before the store came back:\n%s", logs.String())
		}
		failing.Store(false)
		waitFor(t, "the spool to drain", func() bool { return sp.Len() == 0 && strings.Count(logs.String(), "spool drained") == from/100+1 })
	}
	backlog(0, 23)
	backlog(100, 7)
	if err := rec.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "spool drained") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 2 || !strings.Contains(lines[0], "records=23 ") || !strings.Contains(lines[1], "records=7 ") ||
		!strings.Contains(lines[0], "took=") || !strings.Contains(lines[0], "level=INFO") {
		t.Fatalf("want one INFO line per backlog, records=23 then records=7, each with took=:\n%s", logs.String())
	}
	if n := sink.storedCount(); n != 30 {
		t.Fatalf("stored %d, want 30", n)
	}
}
