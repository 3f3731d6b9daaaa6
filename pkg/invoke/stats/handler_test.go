package stats_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/stats"
	"github.com/sless-dev/sless/pkg/invoke/stats/statstest"
	"github.com/sless-dev/sless/pkg/problems"
)

func TestHandler(t *testing.T) {
	recs := localRecords(t)
	now := time.Date(2026, 12, 7, 12, 30, 0, 0, time.UTC)
	history := statstest.History("ns", "fn", invoke.TriggerHTTP, now.Add(-time.Hour), time.Hour, 300, 9)
	history = append(history, statstest.History("ns", "web", invoke.TriggerService, now.Add(-time.Hour), time.Hour, 40, 10)...)
	if err := recs.Write(context.Background(), invoke.Batch{Records: history}); err != nil {
		t.Fatal(err)
	}
	known := invoke.ResolverFunc(func(_ context.Context, ns, name string) (invoke.Target, error) {
		if ns == "ns" && (name == "fn" || name == "quiet" || name == "web") {
			return invoke.Target{}, nil
		}
		return invoke.Target{}, invoke.ErrNotFound
	})
	h := stats.Handler{Source: recs, Functions: known, Services: known, Now: func() time.Time { return now }}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/") // ns/kind/name
		if parts[1] == "services" {
			h.Service(w, r, parts[0], parts[2])
			return
		}
		h.Function(w, r, parts[0], parts[2])
	}))
	defer srv.Close()
	get := func(method, path string) (*http.Response, []byte) {
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}

	t.Run("a function's hour", func(t *testing.T) {
		resp, body := get("GET", "/ns/functions/fn?window=1h&step=5m")
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		var s stats.Series
		if err := json.Unmarshal(body, &s); err != nil {
			t.Fatal(err)
		}
		if s.Window != "1h" || s.Step != "5m" || len(s.Points) != 12 || s.Total.Calls != 300 || !s.Until.Equal(now) {
			t.Errorf("window %s step %s, %d points, %d calls, until %s", s.Window, s.Step, len(s.Points), s.Total.Calls, s.Until)
		}
		for _, p := range s.Points {
			if p.Calls > 0 && (p.P50Ms == nil || *p.P50Ms > *p.P95Ms || *p.P95Ms > *p.P99Ms) {
				t.Errorf("point %+v: percentiles out of order", p)
			}
		}
	})
	t.Run("a service's calls are its own", func(t *testing.T) {
		_, body := get("GET", "/ns/services/web")
		var s stats.Series
		if err := json.Unmarshal(body, &s); err != nil || s.Total.Calls != 40 || len(s.Points) != 60 {
			t.Errorf("%v: %s", err, body)
		}
		_, body = get("GET", "/ns/functions/web")
		if err := json.Unmarshal(body, &s); err != nil || s.Total.Calls != 0 {
			t.Errorf("the function web has the service's calls: %s", body)
		}
	})
	t.Run("never called is zeros", func(t *testing.T) {
		resp, body := get("GET", "/ns/functions/quiet?window=24h")
		var s stats.Series
		if resp.StatusCode != 200 || json.Unmarshal(body, &s) != nil || len(s.Points) != 96 || s.Points[0].P50Ms != nil {
			t.Errorf("%d %s", resp.StatusCode, body)
		}
	})
	t.Run("HEAD", func(t *testing.T) {
		resp, body := get("HEAD", "/ns/functions/fn")
		if resp.StatusCode != 200 || len(body) != 0 {
			t.Errorf("%d %q", resp.StatusCode, body)
		}
	})
	for _, tc := range []struct {
		name, path string
		status     int
		field      string
	}{
		{"unknown function", "/ns/functions/nobody", 404, ""},
		{"a name no function can have", "/ns/functions/No_Such", 404, ""},
		{"bad window", "/ns/functions/fn?window=ever", 400, "window"},
		{"window too long", "/ns/functions/fn?window=60d", 400, "window"},
		{"too many steps", "/ns/functions/fn?window=7d&step=1m", 400, "step"},
		{"uneven step", "/ns/functions/fn?window=1h&step=7m", 400, "step"},
		{"bad until", "/ns/functions/fn?until=soon", 400, "until"},
		{"unknown parameter", "/ns/functions/fn?status=5xx", 400, "status"},
		{"unparsable query", "/ns/functions/fn?window=%zz", 400, "query"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := get("GET", tc.path)
			if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != problems.ContentType {
				t.Fatalf("%d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
			var p problems.Details
			if err := json.Unmarshal(body, &p); err != nil {
				t.Fatal(err)
			}
			if tc.field != "" && (len(p.Errors) != 1 || p.Errors[0].Field != tc.field || p.Errors[0].Detail == "") {
				t.Errorf("errors %+v, want one for %s", p.Errors, tc.field)
			}
		})
	}
	resp, _ := get("POST", "/ns/functions/fn")
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST: %d %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
}
