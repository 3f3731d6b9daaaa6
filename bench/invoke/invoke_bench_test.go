// Package invoke_bench measures the invoke path on loopback, recording on:
// the proxy against calling the function server directly, records per
// second into PostgreSQL, and the invocation listing at a million rows.
//
//	go test -run '^$' -bench . -benchtime 1x ./bench/invoke/
//
// Each benchmark measures its baseline in the same run and reports ratios.
package invoke_bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sless-dev/sless/pkg/adapter/postgres"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/test/testbed"
)

func TestMain(m *testing.M) { testbed.Main(m) }

func openStore(b *testing.B) *postgres.Store {
	b.Helper()
	s, err := postgres.Open(testbed.DatabaseURL(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	if err := s.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	return s
}

type fixed map[string]invoke.Target

func (f fixed) Resolve(_ context.Context, ns, name string) (invoke.Target, error) {
	t, ok := f[ns+"/"+name]
	if !ok {
		return invoke.Target{}, invoke.ErrNotFound
	}
	return t, nil
}

// load sends requests to u from workers goroutines for d and returns the
// completed requests per second and every latency.
func load(b *testing.B, u string, workers int, d time.Duration) (float64, []time.Duration) {
	b.Helper()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers, MaxConnsPerHost: workers}}
	defer client.CloseIdleConnections()
	var done atomic.Int64
	var failed atomic.Int64
	lat := make([][]time.Duration, workers)
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				t0 := time.Now()
				resp, err := client.Get(u)
				if err != nil {
					failed.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					failed.Add(1)
					continue
				}
				lat[w] = append(lat[w], time.Since(t0))
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d requests failed", f)
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	return float64(done.Load()) / elapsed.Seconds(), all
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(len(ds)-1, int(float64(len(ds))*p))]
}

// BenchmarkProxy compares calls through the proxy (recording into
// PostgreSQL) with calls straight to the function server: throughput at
// 32 concurrent callers and latency one call at a time, for a function
// that answers at once (the proxy's whole cost shows) and one that works
// 2 ms per call (closer to a real function).
func BenchmarkProxy(b *testing.B) {
	s := openStore(b)
	rec := invoke.NewRecorder(s, invoke.RecorderOptions{})
	defer rec.Close(context.Background())
	body := []byte(`{"message":"hello from the function"}`)
	instant := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	defer instant.Close()
	working := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(2 * time.Millisecond)
		_, _ = w.Write(body)
	}))
	defer working.Close()
	iu, _ := url.Parse(instant.URL)
	wu, _ := url.Parse(working.URL)
	proxy, err := invoke.NewProxy(invoke.Options{Recorder: rec, Resolver: fixed{
		"bench/instant": {Address: iu, Ready: true, Public: true, Revision: "instant-00001", Timeout: 30 * time.Second},
		"bench/working": {Address: wu, Ready: true, Public: true, Revision: "working-00001", Timeout: 30 * time.Second},
	}})
	if err != nil {
		b.Fatal(err)
	}
	front := httptest.NewServer(proxy)
	defer front.Close()

	for i := 0; i < b.N; i++ {
		for _, fn := range []struct {
			name   string
			direct string
		}{{"instant", instant.URL}, {"working", working.URL}} {
			via := front.URL + "/fn/bench/" + fn.name
			// Warm both paths' connections first.
			load(b, fn.direct, 32, 200*time.Millisecond)
			load(b, via, 32, 200*time.Millisecond)
			directRPS, _ := load(b, fn.direct, 32, 3*time.Second)
			proxyRPS, _ := load(b, via, 32, 3*time.Second)
			_, directLat := load(b, fn.direct, 1, 2*time.Second)
			_, proxyLat := load(b, via, 1, 2*time.Second)
			b.ReportMetric(directRPS, fn.name+"_direct_req/s")
			b.ReportMetric(proxyRPS, fn.name+"_proxy_req/s")
			b.ReportMetric(proxyRPS/directRPS, fn.name+"_throughput_ratio")
			b.ReportMetric(float64(pct(directLat, .5).Microseconds())/1000, fn.name+"_direct_p50_ms")
			b.ReportMetric(float64((pct(proxyLat, .5)-pct(directLat, .5)).Microseconds())/1000, fn.name+"_added_p50_ms")
			b.ReportMetric(float64((pct(proxyLat, .99)-pct(directLat, .99)).Microseconds())/1000, fn.name+"_added_p99_ms")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := rec.Close(ctx); err != nil {
		b.Fatal(err)
	}
	if rec.Dropped() != 0 {
		b.Fatalf("%d records dropped", rec.Dropped())
	}
	b.ReportMetric(float64(rec.Written()), "records_written")
}

func benchRecords(n int, fns int, start time.Time, step time.Duration) []invoke.Record {
	out := make([]invoke.Record, n)
	for i := range out {
		// Every function gets the same mix: 1 % 5xx, 5 % 4xx, 10 % cron.
		j := i / fns
		status := 200
		switch {
		case j%100 == 0:
			status = 502
		case j%20 == 1:
			status = 404
		}
		trigger := invoke.TriggerHTTP
		if j%10 == 0 {
			trigger = invoke.TriggerCron
		}
		out[i] = invoke.Record{
			Namespace: "tenant-a", Function: fmt.Sprintf("fn-%d", i%fns), Revision: "fn-00001", Trigger: trigger,
			RequestID: fmt.Sprintf("req-%09d", i), StartedAt: start.Add(time.Duration(i) * step).Truncate(time.Microsecond),
			Duration: time.Duration(1000+i%5000) * time.Microsecond, Status: status, BytesIn: 120, BytesOut: 2048,
		}
	}
	return out
}

// BenchmarkRecordsPerSecond writes 300,000 records into the invocations
// table (three indexes) in COPY batches of 5,000, through the Recorder as
// the proxy does; the baseline is COPY of the same rows into a table of the
// same columns without indexes.
func BenchmarkRecordsPerSecond(b *testing.B) {
	const n = 300000
	records := benchRecords(n, 50, time.Now().Add(-time.Hour), time.Millisecond)
	for i := 0; i < b.N; i++ {
		s := openStore(b)
		ctx := context.Background()
		if _, err := s.Pool().Exec(ctx, `CREATE UNLOGGED TABLE plain (namespace text, function text, revision text, trigger text,
			request_id text, started_at timestamptz, duration_us bigint, status smallint, bytes_in bigint, bytes_out bigint,
			cold_start boolean, error text)`); err != nil {
			b.Fatal(err)
		}
		// Baseline: COPY without indexes, identity or transaction bookkeeping.
		t0 := time.Now()
		for off := 0; off < n; off += 5000 {
			rows := make([][]any, 0, 5000)
			for _, r := range records[off : off+5000] {
				rows = append(rows, []any{r.Namespace, r.Function, r.Revision, r.Trigger, r.RequestID, r.StartedAt,
					r.Duration.Microseconds(), int16(r.Status), r.BytesIn, r.BytesOut, r.ColdStart, r.Error})
			}
			if _, err := s.Pool().CopyFrom(ctx, []string{"plain"}, []string{"namespace", "function", "revision", "trigger",
				"request_id", "started_at", "duration_us", "status", "bytes_in", "bytes_out", "cold_start", "error"}, pgx.CopyFromRows(rows)); err != nil {
				b.Fatal(err)
			}
		}
		baseline := float64(n) / time.Since(t0).Seconds()

		rec := invoke.NewRecorder(s, invoke.RecorderOptions{QueueSize: n, BatchSize: 5000})
		t1 := time.Now()
		for _, r := range records {
			if !rec.Record(r) {
				b.Fatal("queue full")
			}
		}
		if err := rec.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
		rate := float64(n) / time.Since(t1).Seconds()
		var stored int
		if err := s.Pool().QueryRow(ctx, "SELECT count(*) FROM invocations").Scan(&stored); err != nil || stored != n {
			b.Fatalf("stored %d of %d: %v", stored, n, err)
		}
		b.ReportMetric(rate, "records/s")
		b.ReportMetric(baseline, "baseline_unindexed_copy_rows/s")
		b.ReportMetric(rate/baseline, "ratio_to_unindexed_copy")
	}
}

// BenchmarkListAtMillionRows lists one function's invocations from a table
// of 1,000,000 rows (ten functions, 100,000 each): first pages, pages deep
// in the history by cursor, 5xx only (1 %), cron only, and a time window.
// The baseline is the same queries against a table of 1,000 rows.
func BenchmarkListAtMillionRows(b *testing.B) {
	for i := 0; i < b.N; i++ {
		small := openStore(b)
		fill(b, small, 1000)
		baseP50, baseP99 := listLatencies(b, small, 1000)
		big := openStore(b)
		fill(b, big, 1000000)
		p50, p99 := listLatencies(b, big, 1000000)
		b.ReportMetric(float64(p50.Microseconds())/1000, "p50_ms")
		b.ReportMetric(float64(p99.Microseconds())/1000, "p99_ms")
		b.ReportMetric(float64(baseP99.Microseconds())/1000, "baseline_1k_rows_p99_ms")
		b.ReportMetric(float64(baseP50.Microseconds())/1000, "baseline_1k_rows_p50_ms")
		b.ReportMetric(float64(p99)/float64(baseP99), "p99_ratio_to_1k_rows")
	}
}

var listStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func fill(b *testing.B, s *postgres.Store, n int) {
	b.Helper()
	ctx := context.Background()
	const batch = 50000
	for off := 0; off < n; off += batch {
		records := benchRecords(min(batch, n-off), 10, listStart.Add(time.Duration(off)*100*time.Millisecond), 100*time.Millisecond)
		if err := s.Write(ctx, invoke.Batch{ID: fmt.Sprint("fill-", off), Records: records}); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := s.Pool().Exec(ctx, "VACUUM ANALYZE invocations"); err != nil {
		b.Fatal(err)
	}
}

// listLatencies runs 600 listings of fn-3 (n/10 rows) in a fixed mix and
// returns their p50 and p99.
func listLatencies(b *testing.B, s *postgres.Store, n int) (time.Duration, time.Duration) {
	b.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	span := time.Duration(n) * 100 * time.Millisecond
	base := invoke.Query{Namespace: "tenant-a", Function: "fn-3", Limit: 50}
	var lat []time.Duration
	for q := range 600 {
		query := base
		switch q % 6 {
		case 0: // newest page
		case 1: // a page deep in the history
			query.After = &invoke.Cursor{StartedAt: listStart.Add(time.Duration(rng.Int64N(int64(span)))), ID: 1 << 62}
		case 2:
			query.StatusClass = 5
		case 3:
			query.Trigger = invoke.TriggerCron
		case 4: // a one-hour window somewhere in the history
			from := listStart.Add(time.Duration(rng.Int64N(int64(span))))
			query.Since, query.Until = from, from.Add(time.Hour)
		case 5: // 5xx deep in the history
			query.StatusClass = 5
			query.After = &invoke.Cursor{StartedAt: listStart.Add(time.Duration(rng.Int64N(int64(span)))), ID: 1 << 62}
		}
		t0 := time.Now()
		page, err := s.List(ctx, query)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		if q%6 == 0 && len(page.Items) != min(50, n/10) {
			b.Fatalf("newest page has %d items", len(page.Items))
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return pct(lat, .5), pct(lat, .99)
}
