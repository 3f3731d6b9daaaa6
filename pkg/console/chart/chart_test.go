package chart

import (
	"strings"
	"testing"
	"time"
)

func TestLinesBreaksAtGapsAndScales(t *testing.T) {
	from := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	starts := make([]time.Time, 5)
	for i := range starts {
		starts[i] = from.Add(time.Duration(i) * time.Minute)
	}
	c := Lines("c", "T", "D", starts, time.Minute, []Input{
		{Name: "calls", Class: "s-calls", Values: []float64{0, 3, 7, 0, 1}},
		{Name: "p50", Class: "s-p50", Values: []float64{0, 2, 0, 4, 5}, Has: []bool{false, true, false, true, true}, Unit: " ms"},
	})
	if len(c.Series) != 2 || len(c.Series[0].Points) != 5 || len(c.Series[1].Points) != 3 {
		t.Fatalf("series %+v", c.Series)
	}
	if got := strings.Count(c.Series[1].Path, "M"); got != 2 {
		t.Errorf("a gap must start a new segment: %q", c.Series[1].Path)
	}
	if c.YTicks[4].Label != "10" || c.YTicks[0].At != c.Y1 || c.YTicks[4].At != c.Y0 {
		t.Errorf("the axis tops at 10 for a maximum of 7: %+v", c.YTicks)
	}
	if p := c.Series[0].Points[2]; p.Y != round(c.Y1-(c.Y1-c.Y0)*0.7) || !strings.Contains(p.Label, "calls 7 at Jan 1 10:02 UTC") {
		t.Errorf("point %+v", p)
	}
	if c.XTicks[0].Anchor != "start" || c.XTicks[4].Anchor != "end" || c.XTicks[4].Label != "10:04" {
		t.Errorf("x ticks %+v", c.XTicks)
	}
	empty := Lines("e", "T", "D", starts, time.Minute, []Input{{Name: "x", Values: make([]float64, 5)}})
	if empty.YTicks[4].Label != "1" {
		t.Errorf("an empty chart's axis: %+v", empty.YTicks)
	}
}

func TestNiceCeil(t *testing.T) {
	for v, want := range map[float64]float64{0: 1, 0.3: 0.5, 1: 1, 1.2: 2, 3: 5, 7: 10, 45: 50, 120: 200} {
		if got := niceCeil(v); got != want {
			t.Errorf("niceCeil(%v) = %v, want %v", v, got, want)
		}
	}
}
