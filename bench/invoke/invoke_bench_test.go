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
	"math/rand/v2"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sless-dev/sless/pkg/adapter/postgres"
	"github.com/sless-dev/sless/pkg/adapter/postgres/postgrestest"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/test/testbed"
)

func TestMain(m *testing.M) {
	if runRole() {
		return
	}
	testbed.Main(m)
}

type fixed map[string]invoke.Target

func (f fixed) Resolve(_ context.Context, ns, name string) (invoke.Target, error) {
	t, ok := f[ns+"/"+name]
	if !ok {
		return invoke.Target{}, invoke.ErrNotFound
	}
	return t, nil
}

// The proxy benchmark measures latency in latencyRounds turns of
// latencyRound per path, one call at a time, and throughput in
// throughputRounds turns of throughputRound per path from 32 callers.
const (
	latencyRounds    = 10
	latencyRound     = 250 * time.Millisecond
	throughputRounds = 3
	throughputRound  = 2 * time.Second
)

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(len(ds)-1, int(float64(len(ds))*p))]
}

// BenchmarkProxy compares calls through the proxy (recording into
// PostgreSQL) with calls straight to the function server, on loopback, with
// the function server and the load generator in processes of their own:
// throughput from 32 concurrent callers, and latency one call at a time.
// It runs for a function that answers at once (the proxy's whole cost
// shows), one that waits 2 ms per call, one that waits 10 ms, as a
// function that calls a database or another service does, and sless's own
// Python and Node.js wrappers serving a hello function: the function
// servers users' code runs in.
//
// The relay figures are the floor: a relay that copies bytes and parses
// nothing is the cheapest hop any proxy can be. On a machine whose cores the
// caller, the hop and the function share, a hop's CPU is taken from the
// function, so the floor ratio tells how much of the gap is the hop itself
// and proxy_to_relay how much is the proxy's own work.
func BenchmarkProxy(b *testing.B) {
	s := postgrestest.New(b)
	rec := invoke.NewRecorder(s, invoke.RecorderOptions{})
	defer rec.Close(context.Background())
	loadgen := startChild(b, "load")
	for i := 0; i < b.N; i++ {
		goServer := func(delay time.Duration) func(*testing.B) string {
			return func(b *testing.B) string {
				return startChild(b, "function", "SLESS_BENCH_DELAY="+delay.String()).line(b)
			}
		}
		for _, fn := range []struct {
			name  string
			start func(*testing.B) string
		}{
			{"instant", goServer(0)},
			{"working", goServer(2 * time.Millisecond)},
			{"io10ms", goServer(10 * time.Millisecond)},
			{"python", wrapper("python3", "python3.12/server.py", "main.handler", "main.py",
				"def handler(event, context):\n    return {\"message\": \"hello from the function\"}\n")},
			{"node", wrapper("node", "nodejs22/server.js", "index.handler", "index.js",
				"exports.handler = async () => ({ message: 'hello from the function' });\n")},
		} {
			addr := fn.start(b)
			u, err := url.Parse("http://" + addr)
			if err != nil {
				b.Fatal(err)
			}
			proxy, err := invoke.NewProxy(invoke.Options{Recorder: rec, Resolver: fixed{
				"bench/" + fn.name: {Address: u, Ready: true, Public: true, Revision: fn.name + "-00001", Timeout: 30 * time.Second},
			}})
			if err != nil {
				b.Fatal(err)
			}
			front := httptest.NewServer(proxy)
			paths := []struct{ name, url string }{
				{"direct", u.String()},
				{"relay", relay(b, addr)},
				{"proxy", front.URL + "/fn/bench/" + fn.name},
			}
			// The paths take turns, in rounds, so that a drift of the
			// machine's state (another process waking, the host's
			// neighbours) falls on each path alike rather than on
			// whichever ran last.
			for _, p := range paths {
				loadgen.run(b, p.url, 32, 300*time.Millisecond) // open the connections
			}
			drain(b, rec)
			lat := map[string][]time.Duration{}
			for round := range latencyRounds {
				for i := range paths {
					p := paths[(i+round)%len(paths)]
					lat[p.name] = append(lat[p.name], loadgen.run(b, p.url, 1, latencyRound).Latencies...)
				}
			}
			done := map[string]int64{}
			took := map[string]time.Duration{}
			cpu := map[string]time.Duration{}
			for round := range throughputRounds {
				for i := range paths {
					p := paths[(i+round)%len(paths)]
					// Records of the previous turn are written first: their
					// writing is part of that turn's cost, not this one's.
					drain(b, rec)
					before := cpuTime(b)
					r := loadgen.run(b, p.url, 32, throughputRound)
					drain(b, rec)
					cpu[p.name] += cpuTime(b) - before
					done[p.name] += r.Done
					took[p.name] += r.Elapsed
				}
			}
			rps := map[string]float64{}
			p50 := map[string]time.Duration{}
			p99 := map[string]time.Duration{}
			for _, p := range paths {
				rps[p.name] = float64(done[p.name]) / took[p.name].Seconds()
				slices.Sort(lat[p.name])
				p50[p.name], p99[p.name] = pct(lat[p.name], .5), pct(lat[p.name], .99)
				if p.name != "direct" {
					b.ReportMetric(float64(cpu[p.name].Microseconds())/float64(done[p.name]), fn.name+"_"+p.name+"_cpu_us/call")
				}
				b.ReportMetric(rps[p.name], fn.name+"_"+p.name+"_req/s")
			}
			front.Close()
			b.ReportMetric(rps["proxy"]/rps["direct"], fn.name+"_throughput_ratio")
			b.ReportMetric(rps["relay"]/rps["direct"], fn.name+"_relay_floor_ratio")
			b.ReportMetric(rps["proxy"]/rps["relay"], fn.name+"_proxy_to_relay")
			b.ReportMetric(ms(p50["direct"]), fn.name+"_direct_p50_ms")
			b.ReportMetric(ms(p50["proxy"]-p50["direct"]), fn.name+"_added_p50_ms")
			b.ReportMetric(ms(p50["relay"]-p50["direct"]), fn.name+"_relay_added_p50_ms")
			b.ReportMetric(ms(p99["proxy"]-p99["direct"]), fn.name+"_added_p99_ms")
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

// drain waits until the recorder has stored every record it holds.
func drain(b *testing.B, rec *invoke.Recorder) {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for rec.Depth() > 0 {
		if time.Now().After(deadline) {
			b.Fatalf("%d records still queued after a minute", rec.Depth())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

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
		s := postgrestest.New(b)
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
		small := postgrestest.New(b)
		fill(b, small, 1000)
		baseP50, baseP99 := listLatencies(b, small, 1000)
		big := postgrestest.New(b)
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
