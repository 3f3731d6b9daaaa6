// Package spool_bench measures the invocation spool against a throwaway
// PostgreSQL: calls per second through the proxy while the records go to
// the spool against while PostgreSQL takes them, the spool's bytes per
// record, its drain rate after the outage against the normal write rate,
// and local mode's history bytes per record, JSON against the compact
// encoding.
//
//	go test -run '^$' -bench . -benchtime 1x ./bench/spool/
//
// Every ratio's baseline is measured in the same run.
package spool_bench

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/sless-dev/sless/pkg/adapter/postgres"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/spool"
	"github.com/sless-dev/sless/pkg/local/apiserver"
	"github.com/sless-dev/sless/test/testbed"
)

func TestMain(m *testing.M) { testbed.Main(m) }

type fixed map[string]invoke.Target

func (f fixed) Resolve(_ context.Context, ns, name string) (invoke.Target, error) {
	t, ok := f[ns+"/"+name]
	if !ok {
		return invoke.Target{}, invoke.ErrNotFound
	}
	return t, nil
}

// sizes of one run.
type sizes struct {
	phase   time.Duration // each load phase
	callers int
	records int // records for the local-store measure
}

// results are the numbers a run reports.
type results struct {
	upCallsPerSec, spoolingCallsPerSec float64
	spooled                            int
	spoolFileBytesPerRecord            float64
	spoolBytesPerRecord                float64
	drainPerSec, writePerSec           float64
	localJSONBytes, localCompactBytes  float64
}

func run(tb testing.TB, sz sizes) results {
	var res results
	srv, err := testbed.StartPostgres()
	if err != nil {
		tb.Fatalf("start PostgreSQL: %v", err)
	}
	tb.Cleanup(srv.Remove)
	store, err := postgres.Open(testbed.CreateDatabase(tb, srv.URL("postgres")) + "&synchronous_commit=on")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(store.Close)
	if err := store.Migrate(context.Background()); err != nil {
		tb.Fatal(err)
	}
	fn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"message":"hello"}`)
	}))
	tb.Cleanup(fn.Close)
	dir := tb.TempDir()
	spoolPath := filepath.Join(dir, "spool.db")
	sp, err := spool.Open(spoolPath, 0, nil)
	if err != nil {
		tb.Fatal(err)
	}
	opts := invoke.RecorderOptions{MinBackoff: 50 * time.Millisecond, MaxBackoff: time.Second, WriteTimeout: 5 * time.Second}
	ropts := opts
	ropts.Spool = sp
	rec := invoke.NewRecorder(store, ropts)
	target, _ := http.NewRequest("GET", fn.URL, nil)
	proxy, err := invoke.NewProxy(invoke.Options{Recorder: rec, Resolver: fixed{
		"bench/hello": {Address: target.URL, Ready: true, Public: true, Revision: "hello-00001", Timeout: 30 * time.Second},
	}})
	if err != nil {
		tb.Fatal(err)
	}
	front := httptest.NewServer(proxy)
	tb.Cleanup(front.Close)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: sz.callers}}
	load := func(d time.Duration) float64 {
		var n atomic.Int64
		var wg sync.WaitGroup
		end := time.Now().Add(d)
		start := time.Now()
		for range sz.callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(end) {
					resp, err := client.Get(front.URL + "/fn/bench/hello")
					if err != nil {
						tb.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					n.Add(1)
				}
			}()
		}
		wg.Wait()
		return float64(n.Load()) / time.Since(start).Seconds()
	}
	load(sz.phase / 4) // warm the connections
	res.upCallsPerSec = load(sz.phase)
	if err := srv.Crash(); err != nil {
		tb.Fatal(err)
	}
	res.spoolingCallsPerSec = load(sz.phase)
	front.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rec.Close(ctx); err != nil {
		tb.Fatal(err)
	}
	if rec.Dropped() != 0 {
		tb.Fatalf("%d records dropped", rec.Dropped())
	}
	res.spooled = sp.Len()
	if res.spooled == 0 {
		tb.Fatal("nothing spooled while PostgreSQL was down")
	}
	fileSize, err := sp.FileSize()
	if err != nil {
		tb.Fatal(err)
	}
	res.spoolFileBytesPerRecord = float64(fileSize) / float64(res.spooled)
	res.spoolBytesPerRecord = float64(sp.Bytes()) / float64(res.spooled)

	// Drain: a new recorder on the spool (a restart), PostgreSQL back.
	if err := srv.Start(); err != nil {
		tb.Fatal(err)
	}
	if err := store.Ping(context.Background()); err != nil {
		// The pool reconnects on the next query; one failed ping is fine.
		_ = store.Ping(context.Background())
	}
	start := time.Now()
	rec2 := invoke.NewRecorder(store, ropts)
	for sp.Len() > 0 {
		time.Sleep(time.Millisecond)
	}
	res.drainPerSec = float64(res.spooled) / time.Since(start).Seconds()
	_ = rec2.Close(ctx)
	sp.Close()

	// The normal write rate: as many records, queued at once, no spool.
	opts.QueueSize = res.spooled
	rec3 := invoke.NewRecorder(store, opts)
	base := time.Now()
	start = time.Now()
	for i := range res.spooled {
		rec3.Record(sample(i, base))
	}
	for rec3.Written() < int64(res.spooled) {
		time.Sleep(time.Millisecond)
	}
	res.writePerSec = float64(res.spooled) / time.Since(start).Seconds()
	_ = rec3.Close(ctx)

	res.localJSONBytes = localJSON(tb, sz.records)
	res.localCompactBytes = localCompact(tb, sz.records)
	return res
}

// sample is a record as the proxy makes it for a call of a small function.
func sample(i int, base time.Time) invoke.Record {
	return invoke.Record{Namespace: "default", Function: "hello", Revision: "hello-00001", Trigger: invoke.TriggerHTTP,
		RequestID: fmt.Sprintf("%026X", i), StartedAt: base.Add(time.Duration(i) * 50 * time.Microsecond).Truncate(time.Microsecond),
		Duration: 1200 * time.Microsecond, Status: 200, BytesOut: 19}
}

// localJSON is bytes per record of local mode's history as it was before
// the compact encoding: JSON values, bbolt's default page fill.
func localJSON(tb testing.TB, n int) float64 {
	path := filepath.Join(tb.TempDir(), "json.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		tb.Fatal(err)
	}
	base := time.Now()
	for b := 0; b*5000 < n; b++ {
		err := db.Update(func(tx *bolt.Tx) error {
			inv, err := tx.CreateBucketIfNotExists([]byte("invocations"))
			if err != nil {
				return err
			}
			batches, err := tx.CreateBucketIfNotExists([]byte("invocation-batches"))
			if err != nil {
				return err
			}
			fb, err := inv.CreateBucketIfNotExists([]byte("default/hello"))
			if err != nil {
				return err
			}
			for i := b * 5000; i < min(n, (b+1)*5000); i++ {
				r := sample(i, base)
				seq, _ := inv.NextSequence()
				r.ID = int64(seq)
				v, _ := json.Marshal(r)
				k := make([]byte, 16)
				binary.BigEndian.PutUint64(k, uint64(r.StartedAt.UnixMicro()))
				binary.BigEndian.PutUint64(k[8:], seq)
				if err := fb.Put(k, v); err != nil {
					return err
				}
			}
			return batches.Put([]byte(fmt.Sprintf("batch-%d", b)), make([]byte, 8))
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
	db.Close()
	return perRecord(tb, path, n)
}

// localCompact is bytes per record of local mode's history now.
func localCompact(tb testing.TB, n int) float64 {
	path := filepath.Join(tb.TempDir(), "sless.db")
	st, err := apiserver.Open(path, runtime.NewScheme())
	if err != nil {
		tb.Fatal(err)
	}
	recs, err := st.Records()
	if err != nil {
		tb.Fatal(err)
	}
	empty := perRecord(tb, path, 1)
	base := time.Now()
	for b := 0; b*5000 < n; b++ {
		var batch []invoke.Record
		for i := b * 5000; i < min(n, (b+1)*5000); i++ {
			batch = append(batch, sample(i, base))
		}
		if err := recs.Write(context.Background(), invoke.Batch{ID: fmt.Sprintf("batch-%d", b), Records: batch}); err != nil {
			tb.Fatal(err)
		}
	}
	st.Close()
	return perRecord(tb, path, n) - empty/float64(n)
}

func perRecord(tb testing.TB, path string, n int) float64 {
	fi, err := os.Stat(path)
	if err != nil {
		tb.Fatal(err)
	}
	return float64(fi.Size()) / float64(n)
}

func report(b *testing.B, r results) {
	b.ReportMetric(r.upCallsPerSec, "calls/s-pg-up")
	b.ReportMetric(r.spoolingCallsPerSec, "calls/s-spooling")
	b.ReportMetric(r.spoolingCallsPerSec/r.upCallsPerSec, "spooling/up")
	b.ReportMetric(float64(r.spooled), "records-spooled")
	b.ReportMetric(r.spoolFileBytesPerRecord, "spool-file-B/record")
	b.ReportMetric(r.spoolBytesPerRecord, "spool-B/record")
	b.ReportMetric(r.drainPerSec, "drain-records/s")
	b.ReportMetric(r.writePerSec, "write-records/s")
	b.ReportMetric(r.drainPerSec/r.writePerSec, "drain/write")
	b.ReportMetric(r.localJSONBytes, "local-json-B/record")
	b.ReportMetric(r.localCompactBytes, "local-compact-B/record")
	b.ReportMetric(r.localCompactBytes/r.localJSONBytes, "compact/json")
}

func BenchmarkSpool(b *testing.B) {
	for range b.N {
		report(b, run(b, sizes{phase: 5 * time.Second, callers: 8, records: 200000}))
	}
}

// TestSpoolBenchSmoke runs the benchmark small so that it cannot rot.
func TestSpoolBenchSmoke(t *testing.T) {
	r := run(t, sizes{phase: 500 * time.Millisecond, callers: 4, records: 5000})
	t.Logf("%+v", r)
	for name, v := range map[string]float64{
		"calls/s up": r.upCallsPerSec, "calls/s spooling": r.spoolingCallsPerSec,
		"spool bytes": r.spoolBytesPerRecord, "spool file bytes": r.spoolFileBytesPerRecord,
		"drain rate": r.drainPerSec, "write rate": r.writePerSec,
		"local json": r.localJSONBytes, "local compact": r.localCompactBytes,
	} {
		if !(v > 0) {
			t.Errorf("%s = %v, want a positive number", name, v)
		}
	}
	if r.localCompactBytes > 200 {
		t.Errorf("local history takes %.0f bytes a record, want at most 200", r.localCompactBytes)
	}
}
