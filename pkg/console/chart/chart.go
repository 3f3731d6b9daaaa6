// Package chart lays out line charts as SVG geometry for the console's
// templates: pure functions from numbers to coordinates, so the server
// draws the chart and the browser needs no script to show it. Colours and
// strokes are the stylesheet's, by class: the console's CSP forbids
// inline styles.
package chart

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// Size of every chart's view box; the stylesheet scales it to the card.
const (
	Width   = 600
	Height  = 180
	padLeft = 48
	padTop  = 10
	padBot  = 22
	padRt   = 8
)

// Input is one series to draw: Values[i] at the i-th step, drawn only
// where Has[i] (nil Has: everywhere).
type Input struct {
	// Name is the metric (calls, p95 …), Class the stylesheet's class.
	Name   string
	Class  string
	Values []float64
	Has    []bool
	// Unit follows each value in its point's tooltip.
	Unit string
}

// Chart is what the template draws.
type Chart struct {
	ID     string
	Title  string
	Desc   string
	Width  int
	Height int
	// Plot is the plotting area: X0..X1 and Y0 (top)..Y1 (bottom).
	X0, X1, Y0, Y1 float64
	Series         []Series
	YTicks         []Tick
	XTicks         []Tick
}

// Series is one metric's line: Path draws it (a new segment after each
// step without a value), Points mark each value.
type Series struct {
	Name   string
	Class  string
	Path   string
	Points []Point
}

// Point is one value, Label its tooltip.
type Point struct {
	X, Y  float64
	Label string
}

// Tick is an axis label at a position; Anchor is its SVG text-anchor.
type Tick struct {
	At     float64
	Label  string
	Anchor string
}

// Lines lays out series over steps starting at starts (one per step, in
// order), each step step long.
func Lines(id, title, desc string, starts []time.Time, step time.Duration, in []Input) Chart {
	c := Chart{ID: id, Title: title, Desc: desc, Width: Width, Height: Height,
		X0: padLeft, X1: Width - padRt, Y0: padTop, Y1: Height - padBot}
	top := 0.0
	for _, s := range in {
		for i, v := range s.Values {
			if has(s, i) && v > top {
				top = v
			}
		}
	}
	top = niceCeil(top)
	n := len(starts)
	x := func(i int) float64 {
		if n <= 1 {
			return c.X0
		}
		return c.X0 + (c.X1-c.X0)*float64(i)/float64(n-1)
	}
	y := func(v float64) float64 { return c.Y1 - (c.Y1-c.Y0)*v/top }
	for k := 0; k <= 4; k++ {
		v := top * float64(k) / 4
		c.YTicks = append(c.YTicks, Tick{At: round(y(v)), Label: number(v)})
	}
	layout := "15:04"
	if time.Duration(n)*step > 36*time.Hour {
		layout = "Jan 2"
	}
	for k := 0; k < 5 && n > 1; k++ {
		i := k * (n - 1) / 4
		// The first and last labels stay inside the box.
		anchor := map[int]string{0: "start", 4: "end"}[k]
		if anchor == "" {
			anchor = "middle"
		}
		c.XTicks = append(c.XTicks, Tick{At: round(x(i)), Label: starts[i].UTC().Format(layout), Anchor: anchor})
	}
	for _, s := range in {
		out := Series{Name: s.Name, Class: s.Class}
		var d strings.Builder
		pen := false
		for i, v := range s.Values {
			if !has(s, i) || i >= n {
				pen = false
				continue
			}
			px, py := round(x(i)), round(y(v))
			if pen {
				d.WriteString(" L")
			} else {
				if d.Len() > 0 {
					d.WriteByte(' ')
				}
				d.WriteString("M")
			}
			d.WriteString(number(px) + " " + number(py))
			pen = true
			out.Points = append(out.Points, Point{X: px, Y: py,
				Label: s.Name + " " + number(v) + s.Unit + " at " + starts[i].UTC().Format("Jan 2 15:04") + " UTC"})
		}
		out.Path = d.String()
		c.Series = append(c.Series, out)
	}
	return c
}

func has(s Input, i int) bool { return s.Has == nil || (i < len(s.Has) && s.Has[i]) }

// niceCeil is the axis top for a maximum: 1, 2 or 5 times a power of ten
// at or above it, and 1 for an empty chart.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func round(v float64) float64 { return math.Round(v*10) / 10 }

// number is v short: no trailing zeros, at most two decimals.
func number(v float64) string {
	return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
}
