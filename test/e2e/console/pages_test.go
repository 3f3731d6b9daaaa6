package console_test

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/client"
	"github.com/sless-dev/sless/pkg/invoke/stats"
)

// svgChart is the part of a chart the test reads: its series, each with
// its metric and its points.
type svgChart struct {
	Title  string `xml:"title"`
	Desc   string `xml:"desc"`
	Series []struct {
		Metric string `xml:"data-metric,attr"`
		Points []struct {
			X string `xml:"cx,attr"`
		} `xml:"circle"`
	} `xml:"g"`
}

// seedHistory calls the probe function n times through the invoke path,
// each call recorded, and adds a secret and a disabled cron trigger, so
// that every new page has something to show.
func seedHistory(t *testing.T, base, token string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		req, _ := http.NewRequest("POST", base+"/fn/default/probe", strings.NewReader(`{"name":"chart"}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("call %d: %d", i, resp.StatusCode)
		}
	}
	cl, err := client.New(base, token)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := cl.CreateSecret(ctx, "default", "db", map[string][]byte{"password": []byte("hunter2-value")}); err != nil {
		t.Fatal(err)
	}
	off := false
	tr := &slessv1alpha1.Trigger{Spec: slessv1alpha1.TriggerSpec{Function: "probe", Type: "cron", Schedule: "0 3 * * *", Enabled: &off}}
	tr.Name, tr.Namespace = "nightly", "default"
	if _, err := cl.CreateTrigger(ctx, tr); err != nil {
		t.Fatal(err)
	}
}

// apiStats reads the stats the charts are drawn from through the REST API.
func apiStats(t *testing.T, base, token, query string) stats.Series {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/v1/namespaces/default/functions/probe/invocations/stats?"+query, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s stats.Series
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&s) != nil {
		t.Fatalf("stats: %d", resp.StatusCode)
	}
	return s
}

// checkCharts compares the function page's charts, parsed as SVG, with
// the stats the REST API gives for the same window: one series per
// metric, a point per step for the counts and per step with calls for
// the durations.
func checkCharts(t *testing.T, ctx context.Context, base, token string) {
	t.Helper()
	want := apiStats(t, base, token, "window=1h&step=1m")
	withCalls := 0
	for _, p := range want.Points {
		if p.Calls > 0 {
			withCalls++
		}
	}
	if want.Total.Calls == 0 {
		t.Fatal("the API counts no calls for the charts")
	}
	expect := map[string]map[string]int{
		"chart-calls":    {"calls": 60, "errors": 60},
		"chart-duration": {"p50": withCalls, "p95": withCalls, "p99": withCalls},
		"chart-cold":     {"cold starts": 60},
	}
	for id, series := range expect {
		html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("svg#"+id)))
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		var c svgChart
		if err := xml.Unmarshal([]byte(html), &c); err != nil {
			t.Fatalf("%s is not well-formed SVG: %v", id, err)
		}
		if c.Title == "" || c.Desc == "" {
			t.Errorf("%s has no title or desc", id)
		}
		if len(c.Series) != len(series) {
			t.Errorf("%s has %d series, want %d", id, len(c.Series), len(series))
		}
		for _, s := range c.Series {
			if n, ok := series[s.Metric]; !ok || len(s.Points) != n {
				t.Errorf("%s: series %q has %d points, want %d", id, s.Metric, len(s.Points), n)
			}
		}
	}
}

// visitPages signs-in visits of the charts and every other new page,
// each checked for probes and CSP violations; shots saves the charts' card.
func visitPages(t *testing.T, ctx context.Context, base, token, shots string) {
	t.Helper()
	ns := base + "/console/namespaces/default/"
	do(t, ctx, chromedp.Navigate(ns+"functions/probe?charts=1h"), chromedp.WaitVisible(chromedp.CSS(`svg#chart-calls`)))
	checkCharts(t, ctx, base, token)
	checkInert(t, ctx, "charts")
	if shots != "" {
		png, err := chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS(`#charts`)))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(shots, "charts.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The other windows are links, and draw without a script.
	do(t, ctx, chromedp.Click(chromedp.CSS(`nav.windows a[href*="charts=24h"]`)), chromedp.WaitVisible(chromedp.CSS(`svg#chart-duration`)))
	if n := eval[int](t, ctx, `document.querySelectorAll('svg#chart-calls g[data-metric=calls] circle').length`); n != 96 {
		t.Errorf("24 hours: %d points, want 96", n)
	}
	checkInert(t, ctx, "charts, 24h")
	for _, p := range []struct{ path, wait, has string }{
		{"services/", "main h1", "No SlessServices"},
		{"triggers/", "table.functions", "nightly"},
		{"jobs/", "main h1", "No FunctionJobs"},
		{"secrets/", "table.secrets", "password"},
		{"functions/probe/build", "#build-card", "Build of probe"},
	} {
		do(t, ctx, chromedp.Navigate(ns+p.path), chromedp.WaitVisible(chromedp.CSS(p.wait)))
		body := text(t, ctx, "main")
		if !strings.Contains(body, p.has) {
			t.Errorf("%s shows %q, want %q", p.path, body, p.has)
		}
		if strings.Contains(eval[string](t, ctx, `document.documentElement.outerHTML`), "hunter2-value") {
			t.Errorf("%s shows a secret's value", p.path)
		}
		checkInert(t, ctx, p.path)
	}
	// The probe's build log streams in, then the stream ends.
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelectorAll('#build-log .line').length > 0`)); err != nil {
		t.Errorf("no build log lines: %v", err)
	}
	checkInert(t, ctx, "build log")
}
