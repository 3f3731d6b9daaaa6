package stats

import (
	"time"
)

// Series is the body of GET …/invocations/stats: every step of the
// window, oldest first, those without calls too.
type Series struct {
	Window string    `json:"window"`
	Step   string    `json:"step"`
	From   time.Time `json:"from"`
	Until  time.Time `json:"until"`
	Points []Point   `json:"points"`
	Total  Total     `json:"total"`
}

// Point is one step. The percentiles are in milliseconds and absent for a
// step without calls.
type Point struct {
	Start      time.Time `json:"start"`
	Calls      int64     `json:"calls"`
	Errors     int64     `json:"errors"`
	ColdStarts int64     `json:"coldStarts"`
	P50Ms      *float64  `json:"p50Ms,omitempty"`
	P95Ms      *float64  `json:"p95Ms,omitempty"`
	P99Ms      *float64  `json:"p99Ms,omitempty"`
}

// Total sums the window's steps.
type Total struct {
	Calls      int64 `json:"calls"`
	Errors     int64 `json:"errors"`
	ColdStarts int64 `json:"coldStarts"`
}

// SeriesOf lays a query's buckets over every step of its window.
func SeriesOf(q Query, buckets []Bucket) Series {
	s := Series{Window: FormatDuration(q.Until.Sub(q.From)), Step: FormatDuration(q.Step),
		From: q.From.UTC(), Until: q.Until.UTC(), Points: make([]Point, q.Steps())}
	for i := range s.Points {
		s.Points[i].Start = q.From.Add(time.Duration(i) * q.Step).UTC()
	}
	ms := func(us float64) *float64 { v := us / 1000; return &v }
	for _, b := range buckets {
		i := int(b.Start.Sub(q.From) / q.Step)
		if i < 0 || i >= len(s.Points) {
			continue
		}
		p := &s.Points[i]
		p.Calls, p.Errors, p.ColdStarts = b.Calls, b.Errors, b.ColdStarts
		p.P50Ms, p.P95Ms, p.P99Ms = ms(b.P50), ms(b.P95), ms(b.P99)
		s.Total.Calls += b.Calls
		s.Total.Errors += b.Errors
		s.Total.ColdStarts += b.ColdStarts
	}
	return s
}
