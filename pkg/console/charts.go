package console

import (
	"fmt"
	"net/http"
	"time"

	"github.com/sless-dev/sless/pkg/console/chart"
	"github.com/sless-dev/sless/pkg/invoke/stats"
)

// chartWindows are the windows the charts offer, each with its step.
var chartWindows = []struct{ Value, Label, Step string }{
	{"1h", "1 hour", "1m"}, {"24h", "24 hours", "15m"}, {"7d", "7 days", "2h"},
}

// chartsData is the charts panel: the window links and the charts.
type chartsData struct {
	Path    string
	Window  string
	Windows []chartLink
	Charts  []chart.Chart
	Total   stats.Total
	Error   string
}

type chartLink struct {
	Label, URL string
	Current    bool
}

// charts reads the ?charts= window's stats of a function (or a service)
// and lays out its charts; nil when the server keeps no records.
func (c *Console) charts(r *http.Request, ns, name, path string, service bool) *chartsData {
	if c.opts.Stats == nil {
		return nil
	}
	d := &chartsData{Path: path, Window: r.URL.Query().Get("charts")}
	if d.Window == "" {
		d.Window = chartWindows[0].Value
	}
	step := ""
	for _, w := range chartWindows {
		if w.Value == d.Window {
			step = w.Step
		}
		d.Windows = append(d.Windows, chartLink{Label: w.Label, URL: path + "?charts=" + w.Value + "#charts", Current: w.Value == d.Window})
	}
	if step == "" {
		d.Error = "charts: choose one of the offered windows"
		return d
	}
	q, errs, err := stats.Parse(ns, name, "window="+d.Window+"&step="+step, time.Now())
	if err != nil || len(errs) > 0 {
		d.Error = "charts: the window cannot be read"
		return d
	}
	q.Service = service
	buckets, err := c.opts.Stats.Stats(r.Context(), q)
	if err != nil {
		c.log.Error("console: invocation stats", "namespace", ns, "name", name, "error", err)
		d.Error = "The invocation history cannot be read now."
		return d
	}
	s := stats.SeriesOf(q, buckets)
	d.Total = s.Total
	d.Charts = chartsOf(s, q.Step)
	return d
}

// chartsOf lays out a series as the three charts of a page: calls and
// errors per minute, the duration's percentiles, and cold starts.
func chartsOf(s stats.Series, step time.Duration) []chart.Chart {
	n := len(s.Points)
	starts := make([]time.Time, n)
	calls, errs, cold := make([]float64, n), make([]float64, n), make([]float64, n)
	p50, p95, p99, has := make([]float64, n), make([]float64, n), make([]float64, n), make([]bool, n)
	perMinute := step.Minutes()
	var peak float64
	for i, p := range s.Points {
		starts[i] = p.Start
		calls[i], errs[i], cold[i] = float64(p.Calls)/perMinute, float64(p.Errors)/perMinute, float64(p.ColdStarts)
		peak = max(peak, calls[i])
		if p.P50Ms != nil {
			p50[i], p95[i], p99[i], has[i] = *p.P50Ms, *p.P95Ms, *p.P99Ms, true
		}
	}
	span := fmt.Sprintf("%d steps of %s from %s to %s UTC", n, s.Step, s.From.Format("Jan 2 15:04"), s.Until.Format("Jan 2 15:04"))
	var worst float64
	for i := range p99 {
		if has[i] {
			worst = max(worst, p99[i])
		}
	}
	return []chart.Chart{
		chart.Lines("chart-calls", "Calls and errors per minute, last "+s.Window,
			fmt.Sprintf("%s: %d calls, %d errors (5xx); at most %.4g calls a minute.", span, s.Total.Calls, s.Total.Errors, peak),
			starts, step, []chart.Input{
				{Name: "calls", Class: "s-calls", Values: calls, Unit: "/min"},
				{Name: "errors", Class: "s-errors", Values: errs, Unit: "/min"},
			}),
		chart.Lines("chart-duration", "Duration p50, p95 and p99 (ms), last "+s.Window,
			fmt.Sprintf("%s: steps with calls only; the slowest p99 %.4g ms.", span, worst),
			starts, step, []chart.Input{
				{Name: "p50", Class: "s-p50", Values: p50, Has: has, Unit: " ms"},
				{Name: "p95", Class: "s-p95", Values: p95, Has: has, Unit: " ms"},
				{Name: "p99", Class: "s-p99", Values: p99, Has: has, Unit: " ms"},
			}),
		chart.Lines("chart-cold", "Cold starts per "+s.Step+", last "+s.Window,
			fmt.Sprintf("%s: %d cold starts.", span, s.Total.ColdStarts),
			starts, step, []chart.Input{{Name: "cold starts", Class: "s-cold", Values: cold}}),
	}
}
