package invoke_bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The sless hops BenchmarkProxyTracing compares: tracing off (no OTEL_*
// variable, the default), on with every trace sampled out, and on with
// every trace sampled and exported in batches to a loopback OTLP sink.
const (
	tracingOff        = "off"
	tracingSampledOut = "sampled_out"
	tracingOn         = "on"
)

var tracingModes = []string{tracingOff, tracingSampledOut, tracingOn}

// sinkCounts is what the OTLP sink took.
type sinkCounts struct{ Requests, Bytes int64 }

// serveOTLPSink takes OTLP/HTTP exports as a collector would (reads the
// body, answers an empty ExportTraceServiceResponse) and keeps nothing but
// counts; it prints its address, and its counts for each "count" line.
func serveOTLPSink() {
	var n sinkCounts
	var reqs, bytes atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr().String())
	go func() {
		_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.Copy(io.Discard, r.Body)
			reqs.Add(1)
			bytes.Add(b)
			w.Header().Set("Content-Type", "application/x-protobuf")
			w.WriteHeader(http.StatusOK) // an empty message is a whole one
		}))
	}()
	out := json.NewEncoder(os.Stdout)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		n.Requests, n.Bytes = reqs.Load(), bytes.Load()
		_ = out.Encode(n)
	}
	os.Exit(0)
}

func (c *child) sinkCounts(tb testing.TB) sinkCounts {
	tb.Helper()
	var n sinkCounts
	c.ask(tb, "count", &n)
	return n
}

// tracingResult is one function's throughput and CPU per call by mode.
type tracingResult struct {
	Function   string
	RPS        map[string]float64
	CPUPerCall map[string]time.Duration
	Exported   sinkCounts
}

// runTracingBench measures each function through the three sless hops, in
// rounds that take turns as runProxyBench's do.
func runTracingBench(tb testing.TB, fns []benchFunction, rounds int, round time.Duration, callers int) []tracingResult {
	tb.Helper()
	db := migratedDatabase(tb)
	loadgen := startChild(tb, "load")
	var out []tracingResult
	for _, fn := range fns {
		addr := fn.start(tb)
		sink := startChild(tb, "otlpsink")
		sinkURL := "http://" + sink.line(tb)
		base := []string{dbEnv + "=" + db, targetEnv + "=" + addr, fnEnv + "=" + fn.name}
		env := map[string][]string{
			tracingOff:        base,
			tracingSampledOut: append([]string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + sinkURL, "OTEL_TRACES_SAMPLER=always_off"}, base...),
			tracingOn:         append([]string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + sinkURL, "OTEL_TRACES_SAMPLER=always_on"}, base...),
		}
		hops, urls := map[string]*child{}, map[string]string{}
		for _, m := range tracingModes {
			hops[m] = startChild(tb, "sless", env[m]...)
			urls[m] = "http://" + hops[m].line(tb) + "/fn/bench/" + fn.name
		}
		for _, m := range tracingModes {
			loadgen.run(tb, urls[m], callers, 300*time.Millisecond) // open the connections
			hops[m].drain(tb)
		}
		done, took, cpu := map[string]int64{}, map[string]time.Duration{}, map[string]time.Duration{}
		for r := range rounds {
			for i := range tracingModes {
				m := tracingModes[(i+r)%len(tracingModes)]
				hops[m].drain(tb)
				before := processCPU(tb, hops[m].cmd.Process.Pid)
				res := loadgen.run(tb, urls[m], callers, round)
				hops[m].drain(tb)
				cpu[m] += processCPU(tb, hops[m].cmd.Process.Pid) - before
				done[m] += res.Done
				took[m] += res.Elapsed
			}
		}
		res := tracingResult{Function: fn.name, RPS: map[string]float64{}, CPUPerCall: map[string]time.Duration{}}
		for _, m := range tracingModes {
			if n := hops[m].closeRecorder(tb); n.Err != "" || n.Dropped != 0 {
				tb.Fatalf("%s/%s: the sless hop dropped %d records: %s", fn.name, m, n.Dropped, n.Err)
			}
			res.RPS[m] = float64(done[m]) / took[m].Seconds()
			res.CPUPerCall[m] = cpu[m] / time.Duration(max(done[m], 1))
		}
		// The hops flushed their spans on close.
		res.Exported = sink.sinkCounts(tb)
		out = append(out, res)
	}
	return out
}

func tracingTable(results []tracingResult) string {
	var sb strings.Builder
	sb.WriteString("| function | tracing | req/s | × off | hop CPU µs/call | × off |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, r := range results {
		off, offCPU := r.RPS[tracingOff], r.CPUPerCall[tracingOff]
		for _, m := range tracingModes {
			fmt.Fprintf(&sb, "| %s | %s | %.0f | %.3f | %.1f | %.3f |\n", r.Function, m, r.RPS[m], r.RPS[m]/off,
				float64(r.CPUPerCall[m].Nanoseconds())/1000, float64(r.CPUPerCall[m])/float64(offCPU))
		}
	}
	return sb.String()
}

// BenchmarkProxyTracing measures what tracing costs the invoke path, as
// BenchmarkProxy measures the path itself: three sless hops, each a process
// recording into PostgreSQL, one with tracing off (the default), one on
// with every trace sampled out (spans made, none kept: the cost of
// propagation), one on with every trace sampled and batch-exported over
// OTLP/HTTP to a loopback sink. Throughput from 32 callers and the hop's
// CPU per call, each as a ratio to tracing off in the same run.
func BenchmarkProxyTracing(b *testing.B) {
	fns := []benchFunction{goFunction("instant", 0), goFunction("io2ms", 2*time.Millisecond)}
	for range b.N {
		results := runTracingBench(b, fns, 4, 2*time.Second, 32)
		for _, r := range results {
			for _, m := range tracingModes {
				b.ReportMetric(r.RPS[m], r.Function+"_"+m+"_req/s")
				if m != tracingOff {
					b.ReportMetric(r.RPS[m]/r.RPS[tracingOff], r.Function+"_"+m+"_throughput_ratio")
					b.ReportMetric(float64(r.CPUPerCall[m])/float64(r.CPUPerCall[tracingOff]), r.Function+"_"+m+"_cpu_ratio")
				}
			}
		}
		fmt.Print(tracingTable(results))
	}
}

// TestTracingBenchSmoke runs BenchmarkProxyTracing's machinery for a
// moment: every hop answered, and the traced one exported its spans.
func TestTracingBenchSmoke(t *testing.T) {
	results := runTracingBench(t, []benchFunction{goFunction("instant", 0)}, 1, 300*time.Millisecond, 8)
	r := results[0]
	for _, m := range tracingModes {
		if r.RPS[m] <= 0 || r.CPUPerCall[m] <= 0 {
			t.Errorf("%s: %.0f req/s, %s CPU per call", m, r.RPS[m], r.CPUPerCall[m])
		}
	}
	// Only the sampled hop exports: the sink saw its batches.
	if r.Exported.Requests == 0 || r.Exported.Bytes == 0 {
		t.Errorf("the OTLP sink took %+v, want the sampled hop's spans", r.Exported)
	}
	t.Log("\n" + tracingTable(results))
}
