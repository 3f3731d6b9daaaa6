// Package node benchmarks serving on the real node (testbed.Node), in one
// run: a Python function's cold start from zero pods through sless-api and
// Knative's activator, and its warm calls through sless-api against the
// same calls straight to its pod (queue-proxy's port, as Knative's
// Services reach it).
//
//	go test -run '^$' -bench . -benchtime 1x -timeout 30m ./bench/node/
//
// SLESS_BENCH_WAKES (default 10) and SLESS_BENCH_CALLS (default 300)
// change the counts.
package node

import (
	"net/http"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sless-dev/sless/test/testbed/nodeapi"
)

// handler takes 10 ms, the function the goal for warm calls names.
const handler = `import time

def handler(event, context):
    time.sleep(0.01)
    return {"slept": 10}
`

func env(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// BenchmarkNodeServing reports the cold start's p50 and p95 over the wakes,
// and the warm calls' median through sless-api and straight to the pod,
// with their ratio (pod/api: 1 means sless-api adds nothing).
func BenchmarkNodeServing(b *testing.B) {
	for range b.N {
		m := measure(b, env("SLESS_BENCH_WAKES", 10), env("SLESS_BENCH_CALLS", 300))
		b.ReportMetric(m.cold50.Seconds(), "s-cold-p50")
		b.ReportMetric(m.cold95.Seconds(), "s-cold-p95")
		b.ReportMetric(float64(m.api.Microseconds())/1000, "ms-warm-api")
		b.ReportMetric(float64(m.pod.Microseconds())/1000, "ms-warm-pod")
		b.ReportMetric(m.pod.Seconds()/m.api.Seconds(), "pod/api")
		b.Logf("bed and function up in %v; scale to zero took %v (median)", m.setup.Round(time.Millisecond), m.toZero.Round(time.Millisecond))
	}
}

type measured struct {
	cold50, cold95, api, pod, setup, toZero time.Duration
}

// measure deploys the 10 ms function on a fresh node and measures: calls
// alternating through sless-api's /fn/ and straight to the pod's
// queue-proxy, median of each; then wakes times, each after Knative scaled
// the revision to zero, the time until the call through sless-api answered.
func measure(tb testing.TB, wakes, calls int) measured {
	var m measured
	start := time.Now()
	s := nodeapi.StartServing(tb)
	rev := s.Deploy("sleeper", handler).Status.LatestReadyRevision
	m.setup = time.Since(start)
	pods := s.RevisionPods(rev)
	if len(pods) != 1 || pods[0].Status.PodIP == "" {
		tb.Fatalf("revision %s has pods %v", rev, pods)
	}
	viaAPI := s.API.URL + "/fn/" + s.NS + "/sleeper"
	direct := "http://" + pods[0].Status.PodIP + ":8012/"
	c := &http.Client{Timeout: 2 * time.Minute}
	call := func(url string) time.Duration {
		t0 := time.Now()
		if status, body := s.Call(c, url, ""); status != http.StatusOK {
			tb.Fatalf("%s: %d %s", url, status, body)
		}
		return time.Since(t0)
	}
	for range 20 { // connections and the interpreter warm
		call(viaAPI)
		call(direct)
	}
	var api, pod []time.Duration
	for range calls {
		api = append(api, call(viaAPI))
		pod = append(pod, call(direct))
	}
	m.api, m.pod = percentile(api, 50), percentile(pod, 50)

	var cold, toZero []time.Duration
	for range wakes {
		toZero = append(toZero, s.AwaitScaledToZero("sleeper", rev))
		cold = append(cold, call(viaAPI))
	}
	m.cold50, m.cold95, m.toZero = percentile(cold, 50), percentile(cold, 95), percentile(toZero, 50)
	if recs := s.AwaitRecords("sleeper", 20+calls+wakes); !recs[0].ColdStart {
		tb.Errorf("the last wake's record is not a cold start: %+v", recs[0])
	}
	return m
}

// percentile is the nearest-rank p-th percentile of d.
func percentile(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(i-1, 0)]
}

// TestNodeBenchSmoke runs the benchmark's code path with one wake and a few
// calls, so that it cannot rot; the numbers are for the README, not for a
// test.
func TestNodeBenchSmoke(t *testing.T) {
	m := measure(t, 1, 5)
	t.Logf("%+v", m)
	for _, d := range []time.Duration{m.cold50, m.cold95, m.api, m.pod, m.setup} {
		if d <= 0 {
			t.Errorf("not every number measured: %+v", m)
		}
	}
}
