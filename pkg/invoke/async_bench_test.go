package invoke_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/async"
)

// BenchmarkAsyncAccept measures the 202 of asynchronous calls kept in a
// real bbolt file (fsynced per call) and how fast the runner drains them
// into a function that answers at once: p50 and p99 of the accept, calls
// drained per second.
func BenchmarkAsyncAccept(b *testing.B) {
	fn := function(b, func(w http.ResponseWriter, r *http.Request) {})
	a := newAsyncRig(b, invoke.Options{})
	a.policy.Store(&async.Policy{Concurrency: 50, MaxRetries: 2, MaxEventAge: time.Hour})
	a.targets.set("team-a", "fast", invoke.Target{Address: fn, Ready: true, Public: true})
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	began := time.Now()
	for range b.N {
		req, _ := http.NewRequest("POST", a.url+"/fn/team-a/fast", nil)
		req.Header.Set("Prefer", "respond-async")
		t0 := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		lat = append(lat, time.Since(t0))
		if resp.StatusCode != http.StatusAccepted {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	for {
		page, err := a.store.List(context.Background(), async.ListQuery{Namespace: "team-a", Function: "fast", State: async.StateSucceeded, Limit: b.N + 1})
		if err != nil {
			b.Fatal(err)
		}
		if len(page.Items) == b.N {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	drained := time.Since(began)
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(b.N)/drained.Seconds(), "drained/s")
}
