package stats_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/sless-dev/sless/pkg/adapter/postgres/postgrestest"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/stats"
	"github.com/sless-dev/sless/pkg/invoke/stats/statstest"
	"github.com/sless-dev/sless/pkg/local/apiserver"
)

// localRecords is local mode's record store in a temporary directory.
func localRecords(t *testing.T) *apiserver.Records {
	st, err := apiserver.Open(filepath.Join(t.TempDir(), "sless.db"), runtime.NewScheme())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	recs, err := st.Records()
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestStoresAgree seeds one history into PostgreSQL and into local mode's
// store and asks both for the same windows: the buckets must be equal to
// the last bit, and right where a hand count tells.
func TestStoresAgree(t *testing.T) {
	ctx := context.Background()
	pg, local := postgrestest.New(t), localRecords(t)
	from := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	var history []invoke.Record
	history = append(history, statstest.History("ns", "fn", invoke.TriggerHTTP, from, 7*24*time.Hour, 4000, 1)...)
	history = append(history, statstest.History("ns", "fn", invoke.TriggerCron, from, 24*time.Hour, 500, 2)...)
	history = append(history, statstest.History("ns", "fn", invoke.TriggerService, from, 24*time.Hour, 700, 3)...)
	history = append(history, statstest.History("ns", "other", invoke.TriggerHTTP, from, 24*time.Hour, 300, 4)...)
	// Three calls on a step's edges, with a known answer.
	edge := from.Add(2 * time.Hour)
	for i, at := range []time.Time{edge, edge.Add(time.Minute - time.Microsecond), edge.Add(-time.Microsecond)} {
		history = append(history, invoke.Record{Namespace: "ns", Function: "edge", Trigger: invoke.TriggerHTTP,
			RequestID: "edge-" + string(rune('a'+i)), StartedAt: at, Duration: time.Duration(i+1) * time.Millisecond, Status: 200 + 300*(i%2)})
	}
	for _, s := range []invoke.Sink{pg, local} {
		for i := 0; i < len(history); i += 500 {
			if err := s.Write(ctx, invoke.Batch{Records: history[i:min(i+500, len(history))]}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name    string
		raw     string
		service bool
		fn      string
	}{
		{"a week in 2h steps", "window=7d&until=2026-12-07T00:00:00Z", false, "fn"},
		{"a day in 15m steps", "window=24h&until=2026-12-01T00:00:00Z", false, "fn"},
		{"an hour in minutes", "window=1h&until=2026-11-30T13:00:00Z", false, "fn"},
		{"odd step", "window=3h&step=7m30s&until=2026-11-30T05:00:00Z", false, "fn"},
		{"the service", "window=24h&until=2026-12-01T00:00:00Z", true, "fn"},
		{"nothing there", "window=1h&until=2025-01-01T00:00:00Z", false, "fn"},
		{"edges", "window=1h&until=2026-11-30T02:30:00Z", false, "edge"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, errs, err := stats.Parse("ns", tc.fn, tc.raw, time.Now())
			if err != nil || len(errs) > 0 {
				t.Fatal(errs, err)
			}
			q.Service = tc.service
			a, err := pg.Stats(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			b, err := local.Stats(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if len(a) != len(b) {
				t.Fatalf("PostgreSQL gives %d buckets, local mode %d", len(a), len(b))
			}
			for i := range a {
				if !a[i].Start.Equal(b[i].Start) || a[i].Calls != b[i].Calls || a[i].Errors != b[i].Errors ||
					a[i].ColdStarts != b[i].ColdStarts || a[i].P50 != b[i].P50 || a[i].P95 != b[i].P95 || a[i].P99 != b[i].P99 {
					t.Fatalf("bucket %d: PostgreSQL %+v, local mode %+v", i, a[i], b[i])
				}
			}
			// The hand count: every record of the window is in one bucket.
			var want stats.Total
			for i := range history {
				if q.Matches(&history[i]) {
					want.Calls++
					if history[i].Status >= 500 {
						want.Errors++
					}
					if history[i].ColdStart {
						want.ColdStarts++
					}
				}
			}
			if got := stats.SeriesOf(q, a).Total; got != want {
				t.Errorf("totals %+v, want %+v", got, want)
			}
			if tc.name == "edges" {
				// The call a microsecond before 02:00 is in the 01:59 step;
				// the other two, 1 ms and 2 ms, in the 02:00 step.
				if len(a) != 2 || a[0].Calls != 1 || a[1].Calls != 2 || a[1].Errors != 1 || a[1].P50 != 1500 || a[1].P99 != 1990 {
					t.Errorf("edges: %+v", a)
				}
			}
		})
	}
}
