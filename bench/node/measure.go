// Package node benchmarks serving on the real node (testbed.Node), in one
// run, for a 10 ms function of each runtime (Python, Node.js, Go): its
// cold start from zero pods through sless-api and Knative's activator, and
// its warm calls through sless-api against the same calls straight to its
// pod (queue-proxy's port, as Knative's Services reach it).
//
//	SLESS_REQUIRE_NODE=1 go test -run '^$' -bench NodeServing -benchtime 1x -timeout 30m ./bench/node/
//
// SLESS_BENCH_WAKES (default 10) and SLESS_BENCH_CALLS (default 300)
// change the counts. The measuring is in measure.go, which test/e2e/node
// runs with one wake on its shared node, so that it cannot rot.
package node

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/source"
	"github.com/sless-dev/sless/runtimes"
	"github.com/sless-dev/sless/test/testbed/nodeapi"
)

// sleepers take 10 ms, the function the goal for warm calls names: one
// per runtime, named after it, as a build of its generated context on the
// runtime's base stand-in makes it (nodeapi.Serving.Image).
var sleepers = []struct {
	name string
	in   source.Input
}{
	{"py", source.Input{Runtime: runtimes.Python312, Entrypoint: "main.handler", Files: source.Files{
		"main.py": []byte("import time\n\ndef handler(event, context):\n    time.sleep(0.01)\n    return {\"slept\": 10}\n")}}},
	{"js", source.Input{Runtime: runtimes.NodeJS22, Entrypoint: "index.handler", Files: source.Files{
		"index.js": []byte("exports.handler = async () => {\n  await new Promise((r) => setTimeout(r, 10));\n  return {slept: 10};\n};\n")}}},
	{"golang", source.Input{Runtime: runtimes.Go124, Entrypoint: "sleeper.Handle", Files: source.Files{
		"go.mod": []byte("module example.com/sleeper\n\ngo 1.24\n"),
		"sleeper.go": []byte("package sleeper\n\nimport (\n\t\"context\"\n\t\"time\"\n)\n\n" +
			"func Handle(ctx context.Context, ev map[string]any) (map[string]int, error) {\n" +
			"\ttime.Sleep(10 * time.Millisecond)\n\treturn map[string]int{\"slept\": 10}, nil\n}\n")}}},
}

// Measured are the figures of one Measure.
type Measured struct {
	Runtimes []RuntimeFigures
	// Setup is the sleepers' deploy, ToIdle the median time for all
	// three to be at zero again after a wake.
	Setup, ToIdle time.Duration
}

// RuntimeFigures are one runtime's: cold starts' p50 and p95, warm calls'
// medians through sless-api and straight to the pod.
type RuntimeFigures struct {
	Runtime                  string
	Cold50, Cold95, API, Pod time.Duration
}

// Ratio is pod/api, 1 when sless-api adds nothing.
func (r RuntimeFigures) Ratio() float64 { return r.Pod.Seconds() / r.API.Seconds() }

// Measure deploys the sleepers in s's namespace and measures, for each in
// turn, calls alternating through sless-api's /fn/ and straight to the
// pod's queue-proxy, median of each; then wakes rounds: each waits until
// Knative has scaled every sleeper's revision to zero and then wakes them
// one after the other, timing each call through sless-api until it
// answered.
func Measure(tb testing.TB, s *nodeapi.Serving, wakes, calls int) Measured {
	var m Measured
	start := time.Now()
	revs := map[string]string{}
	for _, f := range sleepers {
		revs[f.name] = s.DeploySource(f.name, f.in).Status.LatestReadyRevision
	}
	m.Setup = time.Since(start)
	c := &http.Client{Timeout: 2 * time.Minute}
	call := func(url string) time.Duration {
		t0 := time.Now()
		if status, body := s.Call(c, url, ""); status != http.StatusOK {
			tb.Fatalf("%s: %d %s", url, status, body)
		}
		return time.Since(t0)
	}
	viaAPI := func(name string) string { return s.API.URL + "/fn/" + s.NS + "/" + name }

	for _, f := range sleepers {
		// Up, and known up to sless-api: the sleepers deployed earlier may
		// be at zero by now.
		call(viaAPI(f.name))
		s.AwaitWarm(f.name)
		pods := s.RevisionPods(revs[f.name])
		if len(pods) != 1 || pods[0].Status.PodIP == "" {
			tb.Fatalf("revision %s has pods %v", revs[f.name], pods)
		}
		direct := "http://" + pods[0].Status.PodIP + ":8012/"
		for range 20 { // connections and the runtime warm
			call(viaAPI(f.name))
			call(direct)
		}
		var api, pod []time.Duration
		for range calls {
			api = append(api, call(viaAPI(f.name)))
			pod = append(pod, call(direct))
		}
		m.Runtimes = append(m.Runtimes, RuntimeFigures{Runtime: f.in.Runtime,
			API: percentile(api, 50), Pod: percentile(pod, 50)})
	}

	cold := map[string][]time.Duration{}
	var toIdle []time.Duration
	for range wakes {
		t0 := time.Now()
		for _, f := range sleepers {
			awaitIdle(tb, s, f.name, revs[f.name])
		}
		toIdle = append(toIdle, time.Since(t0))
		for _, f := range sleepers {
			cold[f.name] = append(cold[f.name], call(viaAPI(f.name)))
		}
	}
	m.ToIdle = percentile(toIdle, 50)
	for i, f := range sleepers {
		m.Runtimes[i].Cold50, m.Runtimes[i].Cold95 = percentile(cold[f.name], 50), percentile(cold[f.name], 95)
		recs := s.AwaitRecords(f.name, 1+20+calls+wakes)
		for _, r := range recs[:wakes] {
			if !r.ColdStart {
				tb.Errorf("%s: a wake's record is not a cold start: %+v", f.name, r)
			}
		}
	}
	return m
}

// awaitIdle waits until Knative has scaled function name's revision rev to
// zero (no replica, no pod but terminating ones) and that has held for a
// second, time for sless-api's resolver, which reads the Revision, to see
// it: the next call is then a cold start through the activator. A pod
// still draining (queue-proxy's 30 s) serves nothing: waiting for it to go
// too would triple each round and measure nothing more.
func awaitIdle(tb testing.TB, s *nodeapi.Serving, name, rev string) {
	tb.Helper()
	var since time.Time
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		r := &servingv1.Revision{}
		if err := s.Node.Kube.Client.Get(ctx, client.ObjectKey{Namespace: s.NS, Name: rev}, r); err != nil {
			return false, err
		}
		if r.Status.ActualReplicas == nil || *r.Status.ActualReplicas != 0 || len(s.RevisionPods(rev)) != 0 {
			since = time.Time{}
			return false, nil
		}
		if since.IsZero() {
			since = time.Now()
		}
		return time.Since(since) >= time.Second, nil
	})
	if err != nil {
		tb.Fatalf("revision %s of %s not at zero: %v", rev, name, err)
	}
}

// percentile is the nearest-rank p-th percentile of d.
func percentile(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(i-1, 0)]
}
