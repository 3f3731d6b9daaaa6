package node

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/sless-dev/sless/test/testbed/nodeapi"
)

func env(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// BenchmarkNodeServing reports, per runtime, the cold start's p50 and p95
// over the wakes, and the warm calls' median through sless-api and
// straight to the pod, with their ratio (pod/api: 1 means sless-api adds
// nothing).
func BenchmarkNodeServing(b *testing.B) {
	for range b.N {
		start := time.Now()
		s := nodeapi.StartServing(b)
		bed := time.Since(start)
		m := Measure(b, s, env("SLESS_BENCH_WAKES", 10), env("SLESS_BENCH_CALLS", 300))
		for _, r := range m.Runtimes {
			b.ReportMetric(r.Cold50.Seconds(), "s-cold-p50-"+r.Runtime)
			b.ReportMetric(r.Cold95.Seconds(), "s-cold-p95-"+r.Runtime)
			b.ReportMetric(float64(r.API.Microseconds())/1000, "ms-warm-api-"+r.Runtime)
			b.ReportMetric(float64(r.Pod.Microseconds())/1000, "ms-warm-pod-"+r.Runtime)
			b.ReportMetric(r.Ratio(), "pod/api-"+r.Runtime)
		}
		b.ReportMetric((bed + m.Setup).Seconds(), "s-setup")
		b.Logf("bed up in %v, functions in %v more; revisions idle again after a wake in %v (median)",
			bed.Round(time.Millisecond), m.Setup.Round(time.Millisecond), m.ToIdle.Round(time.Millisecond))
	}
}
