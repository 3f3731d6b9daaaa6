// Package invoke_bench measures the invoke path on loopback, recording on:
// the proxy against calling the function server directly and against
// Knative's queue-proxy and net/http's ReverseProxy, records per
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
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
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

// proxyBench says how long BenchmarkProxy measures: latency in
// latencyRounds turns of latencyRound per path, one call at a time, and
// throughput in throughputRounds turns of throughputRound per path from
// callers concurrent callers.
type proxyBench struct {
	functions        []benchFunction
	latencyRounds    int
	latencyRound     time.Duration
	throughputRounds int
	throughputRound  time.Duration
	callers          int
	// profile, when set, is a directory the sless hop writes its CPU and
	// alloc profiles to (cpu.pprof, allocs.pprof), one pair per function.
	profile string
}

type benchFunction struct {
	name  string
	start func(testing.TB) string
}

func goFunction(name string, delay time.Duration) benchFunction {
	return benchFunction{name, func(tb testing.TB) string {
		return startChild(tb, "function", "SLESS_BENCH_DELAY="+delay.String()).line(tb)
	}}
}

// The paths a call takes: straight to the function, or through one hop.
const (
	pathDirect       = "direct"
	pathRelay        = "relay"
	pathSless        = "sless"
	pathQueueProxy   = "queueproxy"
	pathReverseProxy = "reverseproxy"
)

var benchPaths = []string{pathDirect, pathRelay, pathSless, pathQueueProxy, pathReverseProxy}

// pathResult is what one path measured for one function.
type pathResult struct {
	Path  string
	Calls int64   // calls in the throughput turns
	RPS   float64 // calls per second from the concurrent callers
	// CPUPerCall is the hop process's own CPU per call (zero for direct):
	// for sless, writing the records into PostgreSQL included.
	CPUPerCall time.Duration
	P50, P99   time.Duration // one call at a time
}

type functionResult struct {
	Function string
	Paths    map[string]pathResult
	Written  int64 // records the sless hop stored
}

// runProxyBench measures every function on every path.
func runProxyBench(tb testing.TB, cfg proxyBench) []functionResult {
	tb.Helper()
	db := migratedDatabase(tb)
	qp := queueProxyBinary(tb)
	loadgen := startChild(tb, "load")
	var out []functionResult
	for _, fn := range cfg.functions {
		addr := fn.start(tb)
		hopEnv := []string{targetEnv + "=" + addr, fnEnv + "=" + fn.name}
		relay := startChild(tb, "relay", hopEnv...)
		rproxy := startChild(tb, "reverseproxy", hopEnv...)
		slessEnv := append([]string{dbEnv + "=" + db}, hopEnv...)
		if cfg.profile != "" {
			dir := filepath.Join(cfg.profile, fn.name)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				tb.Fatal(err)
			}
			slessEnv = append(slessEnv, profileEnv+"="+dir)
		}
		sless := startChild(tb, "sless", slessEnv...)
		qpCmd, qpAddr, stopQP := startQueueProxy(tb, qp, addr, fn.name)
		urls := map[string]string{
			pathDirect:       "http://" + addr,
			pathRelay:        "http://" + relay.line(tb),
			pathReverseProxy: "http://" + rproxy.line(tb),
			pathSless:        "http://" + sless.line(tb) + "/fn/bench/" + fn.name,
			pathQueueProxy:   "http://" + qpAddr,
		}
		pids := map[string]int{
			pathRelay: relay.cmd.Process.Pid, pathReverseProxy: rproxy.cmd.Process.Pid,
			pathSless: sless.cmd.Process.Pid, pathQueueProxy: qpCmd.Process.Pid,
		}
		cpuOf := func(path string) time.Duration {
			if pid, ok := pids[path]; ok {
				return processCPU(tb, pid)
			}
			return 0
		}
		// The paths take turns, in rounds, so that a drift of the
		// machine's state (another process waking, the host's neighbours)
		// falls on each path alike rather than on whichever ran last.
		for _, p := range benchPaths {
			loadgen.run(tb, urls[p], cfg.callers, 300*time.Millisecond) // open the connections
		}
		sless.drain(tb)
		lat := map[string][]time.Duration{}
		for round := range cfg.latencyRounds {
			for i := range benchPaths {
				p := benchPaths[(i+round)%len(benchPaths)]
				lat[p] = append(lat[p], loadgen.run(tb, urls[p], 1, cfg.latencyRound).Latencies...)
			}
		}
		done := map[string]int64{}
		took := map[string]time.Duration{}
		cpu := map[string]time.Duration{}
		for round := range cfg.throughputRounds {
			for i := range benchPaths {
				p := benchPaths[(i+round)%len(benchPaths)]
				// Records of the previous turn are written first: their
				// writing is part of that turn's cost, not this one's.
				sless.drain(tb)
				before := cpuOf(p)
				r := loadgen.run(tb, urls[p], cfg.callers, cfg.throughputRound)
				sless.drain(tb)
				cpu[p] += cpuOf(p) - before
				done[p] += r.Done
				took[p] += r.Elapsed
			}
		}
		stopQP()
		counts := sless.closeRecorder(tb)
		if counts.Err != "" || counts.Dropped != 0 {
			tb.Fatalf("%s: the sless hop dropped %d records: %s", fn.name, counts.Dropped, counts.Err)
		}
		res := functionResult{Function: fn.name, Paths: map[string]pathResult{}, Written: counts.Written}
		for _, p := range benchPaths {
			slices.Sort(lat[p])
			res.Paths[p] = pathResult{Path: p, Calls: done[p], RPS: float64(done[p]) / took[p].Seconds(),
				CPUPerCall: cpu[p] / time.Duration(max(done[p], 1)), P50: pct(lat[p], .5), P99: pct(lat[p], .99)}
		}
		out = append(out, res)
	}
	return out
}

// migratedDatabase is the test bed's PostgreSQL with the invocation
// table, for the sless hops to record into.
func migratedDatabase(tb testing.TB) string {
	tb.Helper()
	db := testbed.DatabaseURL(tb)
	store, err := postgres.Open(db)
	if err != nil {
		tb.Fatal(err)
	}
	defer store.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := store.Migrate(ctx); err != nil {
		tb.Fatal(err)
	}
	return db
}

// report gives the benchmark's metrics of one function and a table row per
// path: throughput and its ratio to direct, the hop's CPU per call, and the
// latency it adds at p50 and p99.
func (r functionResult) report(b *testing.B) {
	direct := r.Paths[pathDirect]
	for _, p := range benchPaths {
		m := r.Paths[p]
		pre := r.Function + "_" + p + "_"
		b.ReportMetric(m.RPS, pre+"req/s")
		if p == pathDirect {
			b.ReportMetric(ms(m.P50), pre+"p50_ms")
			continue
		}
		b.ReportMetric(m.RPS/direct.RPS, pre+"throughput_ratio")
		b.ReportMetric(float64(m.CPUPerCall.Nanoseconds())/1000, pre+"cpu_us/call")
		b.ReportMetric(ms(m.P50-direct.P50), pre+"added_p50_ms")
		b.ReportMetric(ms(m.P99-direct.P99), pre+"added_p99_ms")
	}
	s, q := r.Paths[pathSless], r.Paths[pathQueueProxy]
	b.ReportMetric(s.RPS/q.RPS, r.Function+"_sless_to_queueproxy_throughput")
	b.ReportMetric(float64(s.CPUPerCall)/float64(q.CPUPerCall), r.Function+"_sless_to_queueproxy_cpu")
}

// table is the results as the README's markdown table.
func table(results []functionResult) string {
	var sb strings.Builder
	sb.WriteString("| function | path | req/s | × direct | hop CPU µs/call | added p50 ms | added p99 ms |\n")
	sb.WriteString("| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range results {
		direct := r.Paths[pathDirect]
		for _, p := range benchPaths {
			m := r.Paths[p]
			if p == pathDirect {
				fmt.Fprintf(&sb, "| %s | %s | %.0f | 1 | – | %.3f (p50) | %.3f (p99) |\n", r.Function, p, m.RPS, ms(m.P50), ms(m.P99))
				continue
			}
			fmt.Fprintf(&sb, "| %s | %s | %.0f | %.2f | %.1f | %.3f | %.3f |\n", r.Function, p, m.RPS, m.RPS/direct.RPS,
				float64(m.CPUPerCall.Nanoseconds())/1000, ms(m.P50-direct.P50), ms(m.P99-direct.P99))
		}
	}
	return sb.String()
}

// BenchmarkProxy compares five paths of a call, on loopback, each part a
// process of its own (the function server, the load generator, each hop):
// straight to the function server; through a relay that copies bytes and
// parses nothing (the floor under any hop on this machine); through
// sless's invoke proxy, recording every call into PostgreSQL; through
// Knative Serving's queue-proxy, the sidecar every Knative revision's calls
// pass; and through net/http's ReverseProxy. Throughput from 32 concurrent
// callers, the hop's CPU per call, and latency one call at a time.
//
// It runs for a function that answers at once (a hop's whole cost shows),
// one that waits 2 ms per call, one that waits 10 ms, as a function that
// calls a database or another service does, and sless's own Python and
// Node.js wrappers serving a hello function: the function servers users'
// code runs in. SLESS_BENCH_PROXY_FUNCTIONS (comma-separated names) runs
// some of them; SLESS_BENCH_PROFILE names a directory for the sless hop's
// pprof CPU and alloc profiles.
//
// On a machine whose cores the caller, the hop and the function share, a
// hop's CPU is taken from the function, so the relay's ratio tells how much
// of the gap is any hop at all.
func BenchmarkProxy(b *testing.B) {
	fns := []benchFunction{
		goFunction("instant", 0),
		goFunction("working", 2*time.Millisecond),
		goFunction("io10ms", 10*time.Millisecond),
		{"python", wrapper("python3", "python3.12/server.py", "main.handler", "main.py",
			"def handler(event, context):\n    return {\"message\": \"hello from the function\"}\n")},
		{"node", wrapper("node", "nodejs22/server.js", "index.handler", "index.js",
			"exports.handler = async () => ({ message: 'hello from the function' });\n")},
	}
	if only := os.Getenv("SLESS_BENCH_PROXY_FUNCTIONS"); only != "" {
		names := strings.Split(only, ",")
		fns = slices.DeleteFunc(fns, func(f benchFunction) bool { return !slices.Contains(names, f.name) })
		if len(fns) == 0 {
			b.Fatalf("SLESS_BENCH_PROXY_FUNCTIONS=%s names none of instant, working, io10ms, python, node", only)
		}
	}
	cfg := proxyBench{functions: fns, latencyRounds: 10, latencyRound: 250 * time.Millisecond,
		throughputRounds: 3, throughputRound: 2 * time.Second, callers: 32, profile: os.Getenv("SLESS_BENCH_PROFILE")}
	for i := 0; i < b.N; i++ {
		results := runProxyBench(b, cfg)
		var written int64
		for _, r := range results {
			r.report(b)
			written += r.Written
		}
		b.ReportMetric(float64(written), "records_written")
		// On stdout: the testing package cuts a benchmark's log at ten lines.
		fmt.Print(table(results))
	}
}

// TestProxyBenchSmoke runs BenchmarkProxy's machinery for a moment on the
// instant function, every path included, so that the benchmark cannot rot:
// each path must have answered, each hop used CPU, and sless recorded
// every call it proxied.
func TestProxyBenchSmoke(t *testing.T) {
	results := runProxyBench(t, proxyBench{functions: []benchFunction{goFunction("instant", 0)},
		latencyRounds: 2, latencyRound: 100 * time.Millisecond,
		throughputRounds: 1, throughputRound: 300 * time.Millisecond, callers: 8})
	if len(results) != 1 {
		t.Fatalf("%d results", len(results))
	}
	r := results[0]
	for _, p := range benchPaths {
		m, ok := r.Paths[p]
		switch {
		case !ok:
			t.Errorf("%s: not measured", p)
		case m.Calls == 0 || m.RPS <= 0:
			t.Errorf("%s: no calls in the throughput turn", p)
		case m.P50 <= 0 || m.P99 < m.P50:
			t.Errorf("%s: p50 %s, p99 %s", p, m.P50, m.P99)
		case p != pathDirect && m.CPUPerCall <= 0:
			t.Errorf("%s: the hop's CPU per call is %s", p, m.CPUPerCall)
		}
	}
	// Warm-up, latency and throughput calls through sless, each recorded.
	if r.Written < r.Paths[pathSless].Calls {
		t.Errorf("sless recorded %d calls, fewer than the %d of its throughput turn", r.Written, r.Paths[pathSless].Calls)
	}
	t.Log("\n" + table(results))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// benchRecords makes n records of fns functions, step apart from start.
// Request ids are random, as the proxy makes them (crypto/rand.Text: 26
// base32 letters), from a fixed seed: ids in order would spare an index
// keyed on them the random inserts production pays.
func benchRecords(n int, fns int, start time.Time, step time.Duration) []invoke.Record {
	out := make([]invoke.Record, n)
	rng := rand.New(rand.NewPCG(uint64(n), uint64(start.UnixNano())))
	const base32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	id := make([]byte, 26)
	for i := range out {
		for k := range id {
			id[k] = base32[rng.IntN(len(base32))]
		}
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
			RequestID: string(id), StartedAt: start.Add(time.Duration(i) * step).Truncate(time.Microsecond),
			Duration: time.Duration(1000+i%5000) * time.Microsecond, Status: status, BytesIn: 120, BytesOut: 2048,
		}
	}
	return out
}

// BenchmarkRecordsPerSecond writes 300,000 records into the invocations
// table (its indexes, the unique one included) in batches of 5,000, through
// the Recorder as the proxy does; the baseline is COPY of the same rows into
// a table of the same columns without indexes.
func BenchmarkRecordsPerSecond(b *testing.B) {
	for i := 0; i < b.N; i++ {
		rate, baseline := recordsPerSecond(b, 300000, 5000)
		b.ReportMetric(rate, "records/s")
		b.ReportMetric(baseline, "baseline_unindexed_copy_rows/s")
		b.ReportMetric(rate/baseline, "ratio_to_unindexed_copy")
	}
}

// recordsPerSecond is BenchmarkRecordsPerSecond's measurement of n records
// in batches of batch (n a multiple of it): the Recorder's rate, and the
// unindexed COPY's.
func recordsPerSecond(tb testing.TB, n, batch int) (rate, baseline float64) {
	tb.Helper()
	records := benchRecords(n, 50, time.Now().Add(-time.Hour), time.Millisecond)
	s := postgrestest.New(tb)
	ctx := context.Background()
	if _, err := s.Pool().Exec(ctx, `CREATE UNLOGGED TABLE plain (namespace text, function text, revision text, trigger text,
		request_id text, started_at timestamptz, duration_us bigint, status smallint, bytes_in bigint, bytes_out bigint,
		cold_start boolean, error text)`); err != nil {
		tb.Fatal(err)
	}
	// Baseline: COPY without indexes, identity or transaction bookkeeping.
	t0 := time.Now()
	for off := 0; off < n; off += batch {
		rows := make([][]any, 0, batch)
		for _, r := range records[off : off+batch] {
			rows = append(rows, []any{r.Namespace, r.Function, r.Revision, r.Trigger, r.RequestID, r.StartedAt,
				r.Duration.Microseconds(), int16(r.Status), r.BytesIn, r.BytesOut, r.ColdStart, r.Error})
		}
		if _, err := s.Pool().CopyFrom(ctx, []string{"plain"}, []string{"namespace", "function", "revision", "trigger",
			"request_id", "started_at", "duration_us", "status", "bytes_in", "bytes_out", "cold_start", "error"}, pgx.CopyFromRows(rows)); err != nil {
			tb.Fatal(err)
		}
	}
	baseline = float64(n) / time.Since(t0).Seconds()

	rec := invoke.NewRecorder(s, invoke.RecorderOptions{QueueSize: n, BatchSize: batch})
	t1 := time.Now()
	for _, r := range records {
		if !rec.Record(r) {
			tb.Fatal("queue full")
		}
	}
	if err := rec.Close(context.Background()); err != nil {
		tb.Fatal(err)
	}
	rate = float64(n) / time.Since(t1).Seconds()
	var stored int
	if err := s.Pool().QueryRow(ctx, "SELECT count(*) FROM invocations").Scan(&stored); err != nil || stored != n {
		tb.Fatalf("stored %d of %d: %v", stored, n, err)
	}
	return rate, baseline
}

// BenchmarkListAtMillionRows lists one function's invocations from a table
// of 1,000,000 rows (ten functions, 100,000 each): first pages, pages deep
// in the history by cursor, 5xx only (1 %), cron only, and a time window.
// The baseline is the same queries against a table of 1,000 rows.
func BenchmarkListAtMillionRows(b *testing.B) {
	for i := 0; i < b.N; i++ {
		l := listAt(b, 1000000, 1000)
		b.ReportMetric(float64(l.p50.Microseconds())/1000, "p50_ms")
		b.ReportMetric(float64(l.p99.Microseconds())/1000, "p99_ms")
		b.ReportMetric(float64(l.baseP99.Microseconds())/1000, "baseline_1k_rows_p99_ms")
		b.ReportMetric(float64(l.baseP50.Microseconds())/1000, "baseline_1k_rows_p50_ms")
		b.ReportMetric(float64(l.p99)/float64(l.baseP99), "p99_ratio_to_1k_rows")
	}
}

// listings are the listing latencies of a big table and of the baseline's.
type listings struct{ p50, p99, baseP50, baseP99 time.Duration }

func listAt(tb testing.TB, big, base int) listings {
	tb.Helper()
	var l listings
	small := postgrestest.New(tb)
	fill(tb, small, base)
	l.baseP50, l.baseP99 = listLatencies(tb, small, base)
	large := postgrestest.New(tb)
	fill(tb, large, big)
	l.p50, l.p99 = listLatencies(tb, large, big)
	return l
}

// TestInvocationsBenchSmoke runs the records and listing benchmarks' code
// on small tables, so that they cannot rot: each number comes out. The
// numbers themselves are for the README, not for a test.
func TestInvocationsBenchSmoke(t *testing.T) {
	rate, baseline := recordsPerSecond(t, 10000, 2000)
	if rate <= 0 || baseline <= 0 {
		t.Errorf("records per second %v, baseline %v", rate, baseline)
	}
	l := listAt(t, 20000, 1000)
	if l.p50 <= 0 || l.p99 < l.p50 || l.baseP50 <= 0 || l.baseP99 < l.baseP50 {
		t.Errorf("listing latencies not measured: %+v", l)
	}
	t.Logf("%.0f records/s (unindexed COPY %.0f/s); list p50/p99 at 20,000 rows %v/%v, at 1,000 rows %v/%v",
		rate, baseline, l.p50, l.p99, l.baseP50, l.baseP99)
}

var listStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func fill(tb testing.TB, s *postgres.Store, n int) {
	tb.Helper()
	ctx := context.Background()
	const batch = 50000
	for off := 0; off < n; off += batch {
		records := benchRecords(min(batch, n-off), 10, listStart.Add(time.Duration(off)*100*time.Millisecond), 100*time.Millisecond)
		if err := s.Write(ctx, invoke.Batch{ID: fmt.Sprint("fill-", off), Records: records}); err != nil {
			tb.Fatal(err)
		}
	}
	if _, err := s.Pool().Exec(ctx, "VACUUM ANALYZE invocations"); err != nil {
		tb.Fatal(err)
	}
}

// listLatencies runs 600 listings of fn-3 (n/10 rows) in a fixed mix and
// returns their p50 and p99.
func listLatencies(tb testing.TB, s *postgres.Store, n int) (time.Duration, time.Duration) {
	tb.Helper()
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
			tb.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		if q%6 == 0 && len(page.Items) != min(50, n/10) {
			tb.Fatalf("newest page has %d items", len(page.Items))
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return pct(lat, .5), pct(lat, .99)
}

// pct is the p quantile of sorted ds.
func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(len(ds)-1, int(float64(len(ds))*p))]
}
