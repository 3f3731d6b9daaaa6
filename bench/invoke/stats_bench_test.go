package invoke_bench

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/adapter/postgres"
	"github.com/sless-dev/sless/pkg/adapter/postgres/postgrestest"
	"github.com/sless-dev/sless/pkg/invoke/stats"
)

// statsWindows are the console's chart windows.
var statsWindows = []string{"1h", "24h", "7d"}

// BenchmarkStatsAtMillionRows asks for one function's chart stats (the
// console's 1h, 24h and 7d windows) from a table of 1,000,000 rows (ten
// functions, 100,000 each over 28 hours, as BenchmarkListAtMillionRows
// fills it). The baseline, in the same run, is a plain count of the same
// function's rows over the same window: no stats query can read fewer.
func BenchmarkStatsAtMillionRows(b *testing.B) {
	s := postgrestest.New(b)
	fill(b, s, 1000000)
	for i := 0; i < b.N; i++ {
		for _, w := range statsWindows {
			p99, base := statsLatencies(b, s, 1000000, w, 50)
			b.ReportMetric(float64(p99.Microseconds())/1000, "p99_ms_"+w)
			b.ReportMetric(float64(base.Microseconds())/1000, "count_p99_ms_"+w)
			b.ReportMetric(float64(p99)/float64(base), "p99_ratio_to_count_"+w)
		}
	}
}

// statsLatencies runs rounds of the stats query of fn-3 over window, each
// beside a count over the same rows, and returns the p99 of each.
func statsLatencies(tb testing.TB, s *postgres.Store, n int, window string, rounds int) (p99, countP99 time.Duration) {
	tb.Helper()
	ctx := context.Background()
	until := listStart.Add(time.Duration(n) * 100 * time.Millisecond)
	q, errs, err := stats.Parse("tenant-a", "fn-3", "window="+window+"&until="+until.Format(time.RFC3339), time.Now())
	if err != nil || len(errs) > 0 {
		tb.Fatal(errs, err)
	}
	var lat, base []time.Duration
	for range rounds {
		t0 := time.Now()
		var rows int64
		if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM invocations WHERE namespace = $1 AND function = $2
			AND started_at >= $3 AND started_at < $4 AND trigger <> 'service'`, q.Namespace, q.Function, q.From, q.Until).Scan(&rows); err != nil {
			tb.Fatal(err)
		}
		base = append(base, time.Since(t0))
		t0 = time.Now()
		buckets, err := s.Stats(ctx, q)
		if err != nil {
			tb.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		var calls int64
		for _, bk := range buckets {
			calls += bk.Calls
		}
		if calls != rows {
			tb.Fatalf("%s: the stats count %d calls, the count %d", window, calls, rows)
		}
	}
	pct := func(d []time.Duration) time.Duration {
		slices.Sort(d)
		return d[min(len(d)-1, len(d)*99/100)]
	}
	return pct(lat), pct(base)
}

// TestStatsBenchSmoke runs the stats benchmark's code on a small table.
func TestStatsBenchSmoke(t *testing.T) {
	s := postgrestest.New(t)
	fill(t, s, 20000)
	for _, w := range statsWindows {
		p99, base := statsLatencies(t, s, 20000, w, 5)
		if p99 <= 0 || base <= 0 {
			t.Errorf("%s: not measured", w)
		}
		t.Logf("%s: stats p99 %v, count p99 %v", w, p99, base)
	}
}
