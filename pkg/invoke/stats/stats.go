// Package stats is the aggregate of a function's invocation history that
// charts are drawn from: per step of a time window, the calls, the errors,
// the cold starts and the duration's 50th, 95th and 99th percentiles.
// PostgreSQL computes it in SQL, local mode in Go (Aggregate); both answer
// the same Buckets for the same records, which a test holds them to.
package stats

import (
	"context"
	"math"
	"slices"
	"time"

	"github.com/sless-dev/sless/pkg/invoke"
)

// Query selects the records of one function (or service) that started in
// [From, Until) and cuts that window into steps of Step, each starting at
// From plus a whole number of steps.
type Query struct {
	Namespace string
	Function  string
	// Service aggregates the SlessService named Function (records of
	// trigger service) instead of the Function (any other trigger).
	Service bool
	From    time.Time
	Until   time.Time
	Step    time.Duration
}

// Steps is how many steps the window holds.
func (q Query) Steps() int { return int(q.Until.Sub(q.From) / q.Step) }

// Bucket is one step that had calls. Durations are in microseconds, the
// percentiles interpolated between the two nearest records as
// PostgreSQL's percentile_cont does.
type Bucket struct {
	Start      time.Time
	Calls      int64
	Errors     int64
	ColdStarts int64
	P50        float64
	P95        float64
	P99        float64
}

// Source computes a query's buckets, those with calls only, oldest first.
type Source interface {
	Stats(ctx context.Context, q Query) ([]Bucket, error)
}

// Percentiles are the duration percentiles every bucket carries.
var Percentiles = [3]float64{0.5, 0.95, 0.99}

// IsError tells whether a record counts as an error: the function or the
// platform answered 5xx. A 4xx is the caller's mistake, and 499 a caller
// that went away.
func IsError(status int) bool { return status >= 500 }

// Matches tells whether r is one of q's records.
func (q Query) Matches(r *invoke.Record) bool {
	return r.Namespace == q.Namespace && r.Function == q.Function &&
		q.Service == (r.Trigger == invoke.TriggerService) &&
		!r.StartedAt.Before(q.From) && r.StartedAt.Before(q.Until)
}

// Aggregate gathers records into a query's buckets, for a store that
// cannot compute them itself. Add only records q.Matches.
type Aggregate struct {
	q       Query
	buckets map[int64]*gathered
}

type gathered struct {
	Bucket
	durations []float64
}

// NewAggregate starts an aggregate of q.
func NewAggregate(q Query) *Aggregate { return &Aggregate{q: q, buckets: map[int64]*gathered{}} }

// Add counts r into its step.
func (a *Aggregate) Add(r *invoke.Record) {
	i := r.StartedAt.Sub(a.q.From).Microseconds() / a.q.Step.Microseconds()
	g := a.buckets[i]
	if g == nil {
		g = &gathered{Bucket: Bucket{Start: a.q.From.Add(time.Duration(i) * a.q.Step)}}
		a.buckets[i] = g
	}
	g.Calls++
	if IsError(r.Status) {
		g.Errors++
	}
	if r.ColdStart {
		g.ColdStarts++
	}
	g.durations = append(g.durations, float64(r.Duration.Microseconds()))
}

// Buckets are the steps that had calls, oldest first.
func (a *Aggregate) Buckets() []Bucket {
	keys := make([]int64, 0, len(a.buckets))
	for k := range a.buckets {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]Bucket, 0, len(keys))
	for _, k := range keys {
		g := a.buckets[k]
		slices.Sort(g.durations)
		g.P50 = Percentile(g.durations, Percentiles[0])
		g.P95 = Percentile(g.durations, Percentiles[1])
		g.P99 = Percentile(g.durations, Percentiles[2])
		out = append(out, g.Bucket)
	}
	return out
}

// Percentile is the p-th percentile (0 to 1) of sorted values, interpolated
// between the two nearest as PostgreSQL's percentile_cont does it, step
// for step, so that both give the same float.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	at := p * float64(len(sorted)-1)
	lo, hi := math.Floor(at), math.Ceil(at)
	first := sorted[int(lo)]
	if lo == hi {
		return first
	}
	second := sorted[int(hi)]
	return first + (second-first)*(at-lo)
}
