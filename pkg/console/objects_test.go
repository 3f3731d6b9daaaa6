package console_test

import (
	"context"
	"encoding/xml"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/local/apiserver"
	"github.com/sless-dev/sless/pkg/secrets"
)

// probe is markup a user may write into any name or message; pages must
// show it as text.
const probe = `<img src=x onerror=alert(9)>`

// seedObjects adds tenant-a's service, trigger, job and secret, each with
// the probe where a user's text goes.
func seedObjects(t *testing.T, store *apiserver.Store) {
	t.Helper()
	ctx := context.Background()
	exit := int32(3)
	enabled := false
	svc := &slessv1alpha1.SlessService{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "web"},
		Spec: slessv1alpha1.SlessServiceSpec{WorkloadSpec: slessv1alpha1.WorkloadSpec{Runtime: "python3.12", Entrypoint: "main.app",
			Source: slessv1alpha1.FunctionSource{Inline: &slessv1alpha1.InlineSource{Files: map[string]string{"main.py": "app = None\n"}}}}}}
	trig := &slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "nightly"},
		Spec: slessv1alpha1.TriggerSpec{Function: "hello", Type: slessv1alpha1.TriggerType("cron"), Schedule: "0 3 * * *", Enabled: &enabled}}
	job := &slessv1alpha1.FunctionJob{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "backfill"},
		Spec: slessv1alpha1.FunctionJobSpec{Function: "batch", RunID: 2}}
	for _, o := range []client.Object{svc, trig, job} {
		if err := store.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	svc.Status.Phase, svc.Status.BuildRef = slessv1alpha1.FunctionPhaseReady, "web-xyz"
	svc.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Probe", Message: probe, LastTransitionTime: metav1.Now()}}
	job.Status = slessv1alpha1.FunctionJobStatus{Phase: slessv1alpha1.JobPhaseFailed, RunID: 2, ExitCode: &exit, Output: probe, Message: "exited 3"}
	for _, o := range []client.Object{svc, job} {
		if err := store.Status().Update(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.Create(ctx, secrets.Make("tenant-a", "db", map[string][]byte{"password": []byte("hunter2-value"), "user": []byte("app")}, time.Now())); err != nil {
		t.Fatal(err)
	}
}

// seedRecords adds the service's calls and the job's runs.
func seedRecords(t *testing.T, recs *apiserver.Records, now time.Time) {
	t.Helper()
	var batch []invoke.Record
	for i := 0; i < 30; i++ {
		batch = append(batch, invoke.Record{Namespace: "tenant-a", Function: "web", Trigger: invoke.TriggerService,
			RequestID: "svc-" + string(rune('a'+i)), StartedAt: now.Add(-time.Duration(i) * 2 * time.Minute),
			Duration: time.Duration(i+1) * time.Millisecond, Status: 200, ColdStart: i == 0})
	}
	batch = append(batch, invoke.Record{Namespace: "tenant-a", Function: "batch", Trigger: invoke.TriggerJob,
		RequestID: "job-run-2", StartedAt: now.Add(-time.Minute), Duration: time.Second, Status: 500})
	if err := recs.Write(context.Background(), invoke.Batch{ID: "seed-objects", Records: batch}); err != nil {
		t.Fatal(err)
	}
}

// svgDoc is the part of a chart the tests read.
type svgDoc struct {
	Title  string `xml:"title"`
	Desc   string `xml:"desc"`
	Series []struct {
		Class  string `xml:"class,attr"`
		Metric string `xml:"data-metric,attr"`
		Path   struct {
			D string `xml:"d,attr"`
		} `xml:"path"`
		Points []struct {
			Title string `xml:"title"`
		} `xml:"circle"`
	} `xml:"g"`
}

// charts parses a page's SVG charts by id.
func charts(t *testing.T, html string) map[string]svgDoc {
	t.Helper()
	out := map[string]svgDoc{}
	for _, m := range regexp.MustCompile(`(?s)<svg [^>]*id="(chart-[a-z]+)".*?</svg>`).FindAllStringSubmatch(html, -1) {
		var d svgDoc
		if err := xml.Unmarshal([]byte(m[0]), &d); err != nil {
			t.Fatalf("chart %s is not well-formed: %v", m[1], err)
		}
		out[m[1]] = d
	}
	return out
}

// metrics is each series' metric and its number of points.
func metrics(d svgDoc) map[string]int {
	out := map[string]int{}
	for _, s := range d.Series {
		out[s.Metric] = len(s.Points)
	}
	return out
}

func TestObjectPages(t *testing.T) {
	e := newEnv(t)
	a, b := tenant(t, "tenant-a"), tenant(t, "tenant-b")
	for _, tc := range []struct {
		path string
		want []string
	}{
		{"/console/namespaces/tenant-a/services/", []string{`href="/console/namespaces/tenant-a/services/web"`, "Ready"}},
		{"/console/namespaces/tenant-a/services/web", []string{`id="chart-calls"`, "web-xyz", `href="/console/namespaces/tenant-a/services/web/build"`, "&lt;img src=x"}},
		{"/console/namespaces/tenant-a/triggers/", []string{"nightly", "0 3 * * *", "cron", ">no<"}},
		{"/console/namespaces/tenant-a/jobs/", []string{"backfill", `exit">3<`, "job-run-2", "exited 3", "&lt;img src=x"}},
		{"/console/namespaces/tenant-a/secrets/", []string{">db<", ">password<", ">user<"}},
		{"/console/namespaces/tenant-a/services/web/build", []string{`sse-connect="/console/namespaces/tenant-a/services/web/build/stream"`, `sse-close="end"`}},
		{"/console/namespaces/tenant-a/functions/hello/build", []string{"has no build yet"}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			w := e.do(req{method: "GET", path: tc.path, session: a})
			body := w.Body.String()
			if w.Code != http.StatusOK {
				t.Fatalf("%d: %s", w.Code, body)
			}
			checkHeaders(t, w)
			for _, want := range tc.want {
				if !strings.Contains(body, want) {
					t.Errorf("the page lacks %q", want)
				}
			}
			for _, never := range []string{probe, "hunter2-value", "aHVudGVyMi12YWx1ZQ", " style="} {
				if strings.Contains(body, never) {
					t.Errorf("the page holds %q", never)
				}
			}
			if w := e.do(req{method: "GET", path: tc.path, session: b}); w.Code != http.StatusForbidden {
				t.Errorf("another tenant gets %d", w.Code)
			}
		})
	}
	for _, p := range []string{"/console/namespaces/tenant-a/services/nobody", "/console/namespaces/tenant-a/services/nobody/build",
		"/console/namespaces/tenant-a/functions/hello/build/stream"} {
		if w := e.do(req{method: "GET", path: p, session: a}); w.Code != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", p, w.Code)
		}
	}
	// The build is gone: the stream says so in a line, then ends.
	w := e.do(req{method: "GET", path: "/console/namespaces/tenant-a/services/web/build/stream", session: a})
	if w.Code != 200 || !strings.Contains(w.Body.String(), "This build&#39;s log is gone.") {
		t.Errorf("%d %q", w.Code, w.Body.String())
	}
}

func TestCharts(t *testing.T) {
	e := newEnv(t)
	a := tenant(t, "tenant-a")
	w := e.do(req{method: "GET", path: "/console/namespaces/tenant-a/functions/hello", session: a})
	if w.Code != http.StatusOK {
		t.Fatalf("%d: %s", w.Code, w.Body.String())
	}
	c := charts(t, w.Body.String())
	// hello's one call of the last hour: a 503 a minute ago.
	want := map[string]map[string]int{
		"chart-calls":    {"calls": 60, "errors": 60},
		"chart-duration": {"p50": 1, "p95": 1, "p99": 1},
		"chart-cold":     {"cold starts": 60},
	}
	for id, series := range want {
		got := metrics(c[id])
		if len(got) != len(series) {
			t.Errorf("%s: series %v, want %v", id, got, series)
		}
		for m, n := range series {
			if got[m] != n {
				t.Errorf("%s: %s has %d points, want %d", id, m, got[m], n)
			}
		}
		if c[id].Title == "" || c[id].Desc == "" {
			t.Errorf("%s has no title or desc", id)
		}
	}
	if !strings.Contains(c["chart-calls"].Desc, "1 calls, 1 errors") {
		t.Errorf("desc %q", c["chart-calls"].Desc)
	}
	// The service's 30 calls, one every two minutes, over a day in 15m steps.
	w = e.do(req{method: "GET", path: "/console/namespaces/tenant-a/services/web?charts=24h", session: a})
	c = charts(t, w.Body.String())
	if got := metrics(c["chart-calls"]); got["calls"] != 96 {
		t.Errorf("a day: %v", got)
	}
	if got := metrics(c["chart-duration"]); got["p99"] < 4 || got["p99"] > 5 {
		t.Errorf("60 minutes of calls fill 4 or 5 quarter hours: %v", got)
	}
	if !strings.Contains(c["chart-calls"].Desc, "30 calls, 0 errors") || !strings.Contains(c["chart-cold"].Desc, "1 cold starts") {
		t.Errorf("desc %q / %q", c["chart-calls"].Desc, c["chart-cold"].Desc)
	}
	w = e.do(req{method: "GET", path: "/console/namespaces/tenant-a/functions/hello?charts=forever", session: a})
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "choose one of the offered windows") {
		t.Errorf("a bad window: %d", w.Code)
	}
}
