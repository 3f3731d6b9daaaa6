// Package controller benchmarks `sless controller` (the real binary, as its
// own process, with its default settings) against Knative Serving's and
// Tekton Pipelines' real controllers on the test bed: how long a batch of
// Functions takes to become Ready, how much of that is sless's own work,
// and how that work compares with the same apiserver storing as many
// ConfigMaps with the same writers, in the same run.
//
//	go test -run '^$' -bench . -benchtime 1x -timeout 30m ./bench/controller/
//
// SLESS_BENCH_FUNCTIONS changes the batch (default 100, about 6 minutes on
// 2 cores);
// SLESS_BENCH_CONTROLLER_ARGS adds controller flags (space-separated);
// SLESS_BENCH_PPROF=<dir> keeps CPU profiles of the controller there.
// README.md has the method and the numbers.
package controller

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sless-dev/sless/pkg/adapter/resources"
	"github.com/sless-dev/sless/pkg/adapter/s3"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/test/testbed"
)

func TestMain(m *testing.M) {
	// controller-runtime warns on stderr when no logger is set.
	ctrllog.SetLogger(logr.Discard())
	testbed.Main(m)
}

func count() int {
	if n, err := strconv.Atoi(os.Getenv("SLESS_BENCH_FUNCTIONS")); err == nil && n > 0 {
		return n
	}
	return 100
}

// writers is how many clients create the batch at once, for the Functions
// and the ConfigMaps alike.
const writers = 16

// createAll creates n objects with the writers and returns how long it took.
func createAll(ctx context.Context, c client.Client, n int, mk func(i int) client.Object) (time.Duration, error) {
	return each(n, func(i int) error { return c.Create(ctx, mk(i)) })
}

func function(ns string, i int) client.Object {
	return &slessv1alpha1.Function{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("fn-%04d", i)},
		Spec: slessv1alpha1.FunctionSpec{
			WorkloadSpec: slessv1alpha1.WorkloadSpec{
				Runtime:    "python3.12",
				Entrypoint: "main.handler",
				Source: slessv1alpha1.FunctionSource{Inline: &slessv1alpha1.InlineSource{Files: map[string]string{
					"main.py": fmt.Sprintf("def handler(event, context):\n    return %d\n", i)}}},
			},
		},
	}
}

func configMap(ns string, i int) client.Object {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cm-%04d", i)},
		Data: map[string]string{"main.py": fmt.Sprintf("def handler(event, context):\n    return %d\n", i)}}
}

// bed is a control plane with something that builds and serves.
type bed struct {
	kube *testbed.Kube
	// namespace is a fresh namespace as the bed hands them out.
	namespace func(testing.TB) string
	// pause stops the upstream controllers until resume is called, so
	// that sless's batches and the floor are timed without their work on
	// the same cores; nil where they cannot be paused (the simulators).
	pause func() (resume func())
}

func realBed(tb testing.TB) bed {
	p := testbed.SharedPrimitives(tb)
	tb.Cleanup(func() { p.Logs(tb) })
	return bed{kube: p.Kube, namespace: p.Namespace, pause: p.Pause}
}

func simBed(tb testing.TB) bed {
	k := testbed.SharedKube(tb)
	testbed.SharedTekton(tb)
	testbed.SharedKnative(tb)
	return bed{kube: k, namespace: k.Namespace}
}

// result is what one run measured.
type result struct {
	n int
	// configMaps is the baseline: n ConfigMaps created by the writers.
	configMaps time.Duration
	// endToEnd is n Functions created until all are Ready, the controller
	// running throughout; stages are its per-Function stage latencies.
	endToEnd, fnCreate time.Duration
	stages             []latencies
	// gated is sless's own work in three batches, Tekton and Knative
	// paused, and sless paused while they do theirs: created → builds
	// started (with the Functions' creation), builds done → Services asked
	// for, Services Ready → Functions Ready. upstream is the waits between
	// them; startup is the controller's start, before the first batch.
	gated         [3]time.Duration
	upstream      [2]time.Duration
	startup       time.Duration
	e2eUsage      usage
	gatedUsage    usage
	e2eRequests   requests
	cmRequests    requests
	gatedRequests requests
	// floor is the least any controller doing sless's job must write for
	// n Functions, written by the same writers without one (floor_test.go),
	// step by step (floorSteps).
	floor         time.Duration
	floorSteps    []time.Duration
	floorRequests requests
	// floorEvents is the writers recording sless's Events for n Functions
	// (floorEvents), not counted in floor.
	floorEvents time.Duration
	// paused says the upstream controllers were paused during the gated
	// batches and the floor.
	paused bool
}

func (r result) sless() time.Duration { return r.gated[0] + r.gated[1] + r.gated[2] }

// measure runs the baseline, the end-to-end pass and the gated pass on one
// bed, each pass in a namespace of its own.
func measure(tb testing.TB, b bed, n int) result {
	tb.Helper()
	ctx := context.Background()
	k := b.kube
	api, err := newAPIServer(k.Config)
	if err != nil {
		tb.Fatal(err)
	}
	s3srv := testbed.SharedS3(tb)
	setup := controllerSetup{kubeconfig: k.Kubeconfig, s3: s3srv, bucket: s3srv.Bucket(tb),
		args: strings.Fields(os.Getenv("SLESS_BENCH_CONTROLLER_ARGS")), pprofDir: os.Getenv("SLESS_BENCH_PPROF"), logDir: tb.TempDir()}
	if setup.pprofDir != "" {
		if err := os.MkdirAll(setup.pprofDir, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	r := result{n: n, paused: b.pause != nil}
	quiet := func() (resume func()) {
		if b.pause == nil {
			return func() {}
		}
		return b.pause()
	}
	scrapeAPI := func() samples {
		s, err := api.scrape(ctx)
		if err != nil {
			tb.Fatal(err)
		}
		return s
	}
	timeout := time.Duration(n)*time.Second + 5*time.Minute

	// Baseline: the apiserver storing n small objects.
	ns := b.namespace(tb)
	before := scrapeAPI()
	if r.configMaps, err = createAll(ctx, k.Client, n, func(i int) client.Object { return configMap(ns, i) }); err != nil {
		tb.Fatal(err)
	}
	r.cmRequests = requestsBetween(before, scrapeAPI())

	// End to end: the controller running throughout.
	ns = functionNamespace(tb, b)
	w, err := watch(ctx, k, ns)
	if err != nil {
		tb.Fatal(err)
	}
	defer w.stop()
	c := setup.start(tb, "e2e")
	before = scrapeAPI()
	start := time.Now()
	if r.fnCreate, err = createAll(ctx, k.Client, n, func(i int) client.Object { return function(ns, i) }); err != nil {
		tb.Fatal(err)
	}
	last, err := w.await(ctx, ready, n, timeout)
	if err != nil {
		tb.Fatalf("end to end: %v\ncontroller log:\n%s", err, c.tail())
	}
	r.endToEnd = last.Sub(start)
	r.e2eRequests = requestsBetween(before, scrapeAPI())
	r.e2eUsage.add(mustScrape(tb, c))
	c.stop()
	for _, s := range stages {
		r.stages = append(r.stages, w.stage(s))
	}

	// Gated: sless's batches with the upstream controllers paused, and
	// upstream's work with sless's controller paused in between.
	ns = functionNamespace(tb, b)
	gw, err := watch(ctx, k, ns)
	if err != nil {
		tb.Fatal(err)
	}
	defer gw.stop()
	t0 := time.Now()
	gc := setup.start(tb, "gated")
	r.startup = time.Since(t0)
	gc.pause()
	before = scrapeAPI()
	batch := func(i int, name string, until int, do func()) {
		resume := quiet()
		defer resume()
		gc.resume()
		t0 := time.Now()
		if do != nil {
			do()
		}
		last, err := gw.await(ctx, until, n, timeout)
		if err != nil {
			tb.Fatalf("%s: %v\ncontroller log:\n%s", name, err, gc.tail())
		}
		r.gated[i] = last.Sub(t0)
		gc.pause()
	}
	batch(0, "gated-build", buildRef, func() {
		if _, err := createAll(ctx, k.Client, n, func(i int) client.Object { return function(ns, i) }); err != nil {
			tb.Fatal(err)
		}
	})
	wait := func(i int, until int) {
		t0 := time.Now()
		last, err := gw.await(ctx, until, n, timeout)
		if err != nil {
			tb.Fatal(err)
		}
		r.upstream[i] = max(last.Sub(t0), 0)
	}
	wait(0, buildDone)
	batch(1, "gated-serve", deploying, nil)
	wait(1, serviceUp)
	batch(2, "gated-ready", ready, nil)
	gc.resume()
	r.gatedUsage.add(mustScrape(tb, gc))
	gc.stop()
	r.gatedRequests = requestsBetween(before, scrapeAPI())

	// Floor: sless's writes without sless, last, once every controller of
	// sless is stopped; the upstream ones react to it as to sless's.
	store, err := s3.New(s3.Config{Endpoint: "http://" + s3srv.Endpoint, Bucket: setup.bucket,
		AccessKey: s3srv.AccessKey, SecretKey: s3srv.SecretKey, PathStyle: true})
	if err != nil {
		tb.Fatal(err)
	}
	// The controller's configuration with the bench's flags (process_test.go).
	cfg := resources.Config{Registry: "registry.bench.local/sless", S3Endpoint: "http://" + s3srv.Endpoint,
		S3Secret: "sless-s3", RegistrySecret: "sless-registry"}.WithDefaults()
	ns = functionNamespace(tb, b)
	resume := quiet()
	defer resume()
	before = scrapeAPI()
	if r.floorSteps, err = floor(ctx, k.Client, store, cfg, ns, n); err != nil {
		tb.Fatal(err)
	}
	r.floorRequests = requestsBetween(before, scrapeAPI())
	for _, d := range r.floorSteps {
		r.floor += d
	}
	if r.floorEvents, err = recordEvents(ctx, k.Client, ns, n); err != nil {
		tb.Fatal(err)
	}
	return r
}

// functionNamespace is a fresh namespace with the Secrets the controller's
// defaults name (--build-s3-secret, --registry-secret), as an operator
// makes them for each function namespace.
func functionNamespace(tb testing.TB, b bed) string {
	tb.Helper()
	ns := b.namespace(tb)
	for _, sec := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "sless-s3", Namespace: ns},
			StringData: map[string]string{"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench-secret"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "sless-registry", Namespace: ns}, Type: corev1.SecretTypeDockerConfigJson,
			StringData: map[string]string{corev1.DockerConfigJsonKey: `{"auths":{"registry.bench.local":{"auth":"YmVuY2g6YmVuY2g="}}}`}},
	} {
		if err := b.kube.Client.Create(context.Background(), sec); err != nil {
			tb.Fatalf("Secret %s/%s: %v", ns, sec.Name, err)
		}
	}
	return ns
}

func mustScrape(tb testing.TB, c *controller) samples {
	tb.Helper()
	s, err := c.scrape(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// report logs r in full and reports its headline numbers.
func report(b *testing.B, r result) {
	n := float64(r.n)
	ratio := r.sless().Seconds() / r.configMaps.Seconds()
	b.ReportMetric(ratio, "sless/configmap")
	b.ReportMetric(r.sless().Seconds(), "sless-s")
	b.ReportMetric(r.configMaps.Seconds(), "configmap-s")
	b.ReportMetric(r.sless().Seconds()/r.floor.Seconds(), "sless/floor")
	b.ReportMetric(r.floor.Seconds(), "floor-s")
	b.ReportMetric(r.endToEnd.Seconds(), "e2e-s")
	b.ReportMetric(r.endToEnd.Seconds()/r.configMaps.Seconds(), "e2e/configmap")
	b.ReportMetric(1000*r.e2eUsage.cpu/n, "controller-cpu-ms/fn")
	b.ReportMetric(r.e2eUsage.reconciles/n, "reconciles/fn")
	b.ReportMetric(r.e2eUsage.heap/(1<<20), "heap-MiB")
	b.ReportMetric(0, "ns/op")
	// Printed, not logged: the testing package cuts long benchmark logs.
	fmt.Printf("--- %s\n%s", b.Name(), r)
}

func (r result) String() string {
	var s strings.Builder
	n := float64(r.n)
	fmt.Fprintf(&s, "%d Functions; baseline %d ConfigMaps by %d writers: %v\n", r.n, r.n, writers, r.configMaps.Round(time.Millisecond))
	if r.paused {
		fmt.Fprintf(&s, "the gated batches and the floor ran with Knative's and Tekton's controllers paused\n")
	}
	fmt.Fprintf(&s, "floor: sless's writes for %d Functions by %d writers, no controller: %v = %.2f× the baseline\n",
		r.n, writers, r.floor.Round(time.Millisecond), r.floor.Seconds()/r.configMaps.Seconds())
	for i, d := range r.floorSteps {
		fmt.Fprintf(&s, "  %-48s %8v = %6.2f× the baseline\n", floorSteps[i]+":", d.Round(time.Millisecond), d.Seconds()/r.configMaps.Seconds())
	}
	fmt.Fprintf(&s, "  (not in the floor: sless's %d Events per Function, %v = %.2f× the baseline)\n",
		len(floorEvents), r.floorEvents.Round(time.Millisecond), r.floorEvents.Seconds()/r.configMaps.Seconds())
	fmt.Fprintf(&s, "sless's own work, gated: %v = %.2f× the baseline, %.2f× the floor\n", r.sless().Round(time.Millisecond),
		r.sless().Seconds()/r.configMaps.Seconds(), r.sless().Seconds()/r.floor.Seconds())
	fmt.Fprintf(&s, "  created → builds started (Functions created in it): %v\n", r.gated[0].Round(time.Millisecond))
	fmt.Fprintf(&s, "  builds done → Services asked for:                   %v\n", r.gated[1].Round(time.Millisecond))
	fmt.Fprintf(&s, "  Services Ready → Functions Ready:                   %v\n", r.gated[2].Round(time.Millisecond))
	fmt.Fprintf(&s, "  (the controller's start, not counted: %v; upstream's remaining waits: Tekton %v, Knative %v)\n",
		r.startup.Round(time.Millisecond), r.upstream[0].Round(time.Millisecond), r.upstream[1].Round(time.Millisecond))
	fmt.Fprintf(&s, "end to end, controller running throughout: %v = %.2f× the baseline (creating the Functions: %v)\n",
		r.endToEnd.Round(time.Millisecond), r.endToEnd.Seconds()/r.configMaps.Seconds(), r.fnCreate.Round(time.Millisecond))
	for i, st := range stages {
		l := r.stages[i]
		fmt.Fprintf(&s, "  %-62s p50 %7v  p95 %7v  mean %7v (%d)\n", st.name,
			l.quantile(0.5).Round(time.Millisecond), l.quantile(0.95).Round(time.Millisecond), l.mean().Round(time.Millisecond), len(l))
	}
	u := r.e2eUsage
	fmt.Fprintf(&s, "controller, end to end: %.1f reconciles per Function (%.0f errors, %.0f requeues, %.0f retries), mean reconcile %.1f ms, mean queue wait %.1f ms, CPU %.1f ms per Function, heap in use %.1f MiB\n",
		u.reconciles/n, u.errors, u.requeues, u.retries, 1000*u.reconcileSeconds/max(u.reconciles, 1), 1000*u.queueWaitSeconds/max(u.queueAdds, 1), 1000*u.cpu/n, u.heap/(1<<20))
	fmt.Fprintf(&s, "controller's requests, end to end (method code: count): %v\n", u.requestsByMethod)
	g := r.gatedUsage
	fmt.Fprintf(&s, "controller, gated: %.1f reconciles per Function, CPU %.1f ms per Function, %.0f conflicts\n", g.reconciles/n, 1000*g.cpu/n, g.conflicts)
	fmt.Fprintf(&s, "apiserver requests, ConfigMaps (%.0f):\n%s", r.cmRequests.total(), r.cmRequests.table(n, n/10))
	fmt.Fprintf(&s, "apiserver requests, end to end, every client (%.0f):\n%s", r.e2eRequests.total(), r.e2eRequests.table(n, n/10))
	fmt.Fprintf(&s, "apiserver requests, gated, every client (%.0f):\n%s", r.gatedRequests.total(), r.gatedRequests.table(n, n/10))
	fmt.Fprintf(&s, "apiserver requests, floor, every client (%.0f):\n%s", r.floorRequests.total(), r.floorRequests.table(n, n/10))
	return s.String()
}

// BenchmarkFunctionsToReady is the measurement on the real controllers;
// "simulators" repeats it on the Tekton and Knative simulators, whose pace
// is not upstream's, for comparison with the earlier figures.
func BenchmarkFunctionsToReady(b *testing.B) {
	for _, c := range []struct {
		name string
		bed  func(testing.TB) bed
	}{{"real", realBed}, {"simulators", simBed}} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				report(b, measure(b, c.bed(b), count()))
			}
		})
	}
}

// TestBenchSmoke runs the benchmark's code path on a few Functions on the
// real controllers, so that it cannot rot: every number it reports is there
// and sane. The numbers themselves are for the README, not for a test.
func TestBenchSmoke(t *testing.T) {
	const n = 3
	r := measure(t, realBed(t), n)
	t.Log(r.String())
	if r.configMaps <= 0 || r.endToEnd <= 0 || r.fnCreate <= 0 {
		t.Errorf("durations not measured: configMaps %v, endToEnd %v, create %v", r.configMaps, r.endToEnd, r.fnCreate)
	}
	for i, g := range r.gated {
		if g <= 0 {
			t.Errorf("gated batch %d took %v", i, g)
		}
	}
	for i, l := range r.stages {
		if len(l) != n {
			t.Errorf("stage %q measured for %d Functions, want %d", stages[i].name, len(l), n)
		}
	}
	if r.e2eUsage.reconciles < n || r.e2eUsage.cpu <= 0 || r.e2eUsage.heap <= 0 {
		t.Errorf("controller metrics missing: %+v", r.e2eUsage)
	}
	if r.cmRequests["create configmaps"] != n {
		t.Errorf("apiserver counted %v ConfigMap creates, want %d: %v", r.cmRequests["create configmaps"], n, r.cmRequests)
	}
	if got := r.e2eRequests["create functions.sless.dev"]; got != n {
		t.Errorf("apiserver counted %v Function creates end to end, want %d", got, n)
	}
	if len(r.floorSteps) != len(floorSteps) {
		t.Errorf("floor measured %d steps, want %d", len(r.floorSteps), len(floorSteps))
	}
	if r.floorEvents <= 0 {
		t.Errorf("the floor's Events took %v", r.floorEvents)
	}
	for i, d := range r.floorSteps {
		if d <= 0 {
			t.Errorf("floor step %q took %v", floorSteps[i], d)
		}
	}
	for key, want := range map[string]float64{"create functions.sless.dev": n, "update functions.sless.dev": n,
		"update functions.sless.dev/status": 3 * n, "create pipelineruns.tekton.dev": n, "create services.serving.knative.dev": n} {
		if got := r.floorRequests[key]; got != want {
			t.Errorf("floor: apiserver counted %v %q, want %v: %v", got, key, want, r.floorRequests)
		}
	}
	if got := r.e2eRequests["create pipelineruns.tekton.dev"]; got != n {
		t.Errorf("apiserver counted %v PipelineRun creates end to end, want %d", got, n)
	}
}
