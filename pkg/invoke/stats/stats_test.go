package stats

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/invoke"
)

var now = time.Date(2026, 12, 7, 12, 34, 56, 0, time.UTC)

func TestParseDefaultsAndAlignment(t *testing.T) {
	for _, tc := range []struct {
		raw         string
		from, until string
		step        time.Duration
	}{
		{"", "2026-12-07T11:35:00Z", "2026-12-07T12:35:00Z", time.Minute},
		{"window=24h", "2026-12-06T12:45:00Z", "2026-12-07T12:45:00Z", 15 * time.Minute},
		{"window=7d", "2026-11-30T14:00:00Z", "2026-12-07T14:00:00Z", 2 * time.Hour},
		{"window=1h&step=5m", "2026-12-07T11:35:00Z", "2026-12-07T12:35:00Z", 5 * time.Minute},
		{"window=90m&step=30s&until=2026-01-02T03:04:05Z", "2026-01-02T01:34:30Z", "2026-01-02T03:04:30Z", 30 * time.Second},
		{"window=1m&step=1s", "2026-12-07T12:33:56Z", "2026-12-07T12:34:56Z", time.Second},
	} {
		q, errs, err := Parse("ns", "fn", tc.raw, now)
		if err != nil || len(errs) > 0 {
			t.Errorf("%q: %v %v", tc.raw, errs, err)
			continue
		}
		if got := q.From.Format(time.RFC3339) + " " + q.Until.Format(time.RFC3339); got != tc.from+" "+tc.until || q.Step != tc.step {
			t.Errorf("%q: window %s step %s, want %s %s step %s", tc.raw, got, q.Step, tc.from, tc.until, tc.step)
		}
	}
}

func TestParseRefusesBadInput(t *testing.T) {
	for _, tc := range []struct{ raw, field, detail string }{
		{"window=forever", "window", "must be a duration"},
		{"window=30s", "window", "from 1m to 31d"},
		{"window=32d", "window", "from 1m to 31d"},
		{"window=-1h", "window", "from 1m"},
		{"window=1500ms", "window", "from 1m"},
		{"window=61500ms", "window", "whole number of seconds"},
		{"window=1.5d", "window", "must be a duration"},
		{"step=0s", "step", "1s or more"},
		{"step=500ms", "step", "1s or more"},
		{"step=1500ms", "step", "whole number of seconds"},
		{"step=x", "step", "must be a duration"},
		{"window=1h&step=2h", "step", "not be longer than the window (1h)"},
		{"window=1h&step=7m", "step", "whole steps"},
		{"window=7d&step=1m", "step", "10080 steps, at most 1440: use a step of 7m or more"},
		{"window=7h13m", "step", "give a step"},
		{"until=yesterday", "until", "RFC 3339"},
		{"limit=5", "limit", "unknown query parameter"},
		{"window=1h&window=2h", "window", "give it once"},
	} {
		_, errs, err := Parse("ns", "fn", tc.raw, now)
		if err != nil {
			t.Errorf("%q: %v", tc.raw, err)
			continue
		}
		if len(errs) != 1 || errs[0].Field != tc.field || !strings.Contains(errs[0].Detail, tc.detail) {
			t.Errorf("%q: errors %+v, want one for %s saying %q", tc.raw, errs, tc.field, tc.detail)
		}
	}
	if _, _, err := Parse("ns", "fn", "window=%zz", now); err == nil {
		t.Error("a query that does not parse was taken")
	}
	// Every bad value at once, each named.
	_, errs, _ := Parse("ns", "fn", "window=x&step=y&until=z", now)
	if len(errs) != 3 {
		t.Errorf("three bad values give %+v", errs)
	}
}

func TestPercentileInterpolatesAsPostgreSQL(t *testing.T) {
	v := []float64{1000, 2000, 3000, 4000}
	for _, tc := range []struct{ p, want float64 }{{0.5, 2500}, {0.95, 3850}, {0.99, 3970}, {0, 1000}, {1, 4000}} {
		if got := Percentile(v, tc.p); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("p%v = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := Percentile([]float64{7}, 0.99); got != 7 {
		t.Errorf("one value: %v", got)
	}
	if !math.IsNaN(Percentile(nil, 0.5)) {
		t.Error("no values give a number")
	}
}

func TestAggregateAndSeries(t *testing.T) {
	from := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	q := Query{Namespace: "ns", Function: "fn", From: from, Until: from.Add(5 * time.Minute), Step: time.Minute}
	rec := func(at time.Duration, ms int, status int, cold bool, trigger string) invoke.Record {
		return invoke.Record{Namespace: "ns", Function: "fn", Trigger: trigger, StartedAt: from.Add(at),
			Duration: time.Duration(ms) * time.Millisecond, Status: status, ColdStart: cold}
	}
	recs := []invoke.Record{
		rec(0, 1, 200, true, invoke.TriggerHTTP),
		rec(10*time.Second, 2, 500, false, invoke.TriggerCron),
		rec(59*time.Second+999*time.Microsecond, 3, 404, false, invoke.TriggerHTTP),
		rec(time.Minute+30*time.Second, 4, 200, false, invoke.TriggerService), // the service's
		rec(3*time.Minute, 10, 503, true, invoke.TriggerHTTP),
		rec(5*time.Minute, 9, 200, false, invoke.TriggerHTTP),     // at until: out
		rec(-time.Microsecond, 9, 200, false, invoke.TriggerHTTP), // before from: out
	}
	agg := NewAggregate(q)
	for i := range recs {
		if q.Matches(&recs[i]) {
			agg.Add(&recs[i])
		}
	}
	b := agg.Buckets()
	if len(b) != 2 || !b[0].Start.Equal(from) || b[0].Calls != 3 || b[0].Errors != 1 || b[0].ColdStarts != 1 ||
		b[0].P50 != 2000 || b[0].P99 != 2980 || !b[1].Start.Equal(from.Add(3*time.Minute)) || b[1].Calls != 1 || b[1].P95 != 10000 {
		t.Fatalf("buckets %+v", b)
	}
	s := SeriesOf(q, b)
	if s.Window != "5m" || s.Step != "1m" || len(s.Points) != 5 || s.Total != (Total{Calls: 4, Errors: 2, ColdStarts: 2}) {
		t.Fatalf("series %+v", s)
	}
	if s.Points[1].Calls != 0 || s.Points[1].P50Ms != nil || *s.Points[0].P50Ms != 2 || !s.Points[4].Start.Equal(from.Add(4*time.Minute)) {
		t.Errorf("points %+v", s.Points)
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{7 * 24 * time.Hour: "7d", 24 * time.Hour: "1d", 90 * time.Minute: "90m",
		45 * time.Second: "45s", 2 * time.Hour: "2h", 1500 * time.Millisecond: "1.5s"} {
		if got := FormatDuration(d); got != want {
			t.Errorf("%v: %q, want %q", d, got, want)
		}
	}
}
