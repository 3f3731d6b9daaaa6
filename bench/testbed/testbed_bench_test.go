// Package testbed benchmarks what the real Knative Serving and Tekton
// controllers cost the tests against the simulators they replace: the time
// to start each bed, and the time for a batch of Functions to become Ready
// through sless's Function controller on each, in the same run.
//
//	go test -run '^$' -bench . -benchtime 1x -timeout 20m ./bench/testbed/
//
// SLESS_BENCH_FUNCTIONS changes the batch (default 20).
package testbed

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/test/testbed"
	"github.com/sless-dev/sless/test/testbed/functionctl"
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	testbed.Main(m)
}

func count() int {
	if n, err := strconv.Atoi(os.Getenv("SLESS_BENCH_FUNCTIONS")); err == nil && n > 0 {
		return n
	}
	return 20
}

// BenchmarkBedStart starts a control plane with the simulators, then one
// with the real controllers; each has its own etcd, as the tests' do.
func BenchmarkBedStart(b *testing.B) {
	var sim, real time.Duration
	for range b.N {
		s, r := bedStarts(b)
		sim, real = sim+s, real+r
	}
	b.ReportMetric(sim.Seconds()/float64(b.N), "s-sim-bed")
	b.ReportMetric(real.Seconds()/float64(b.N), "s-real-bed")
	b.ReportMetric(real.Seconds()/sim.Seconds(), "real/sim")
}

// bedStarts starts and stops each bed once and returns how long each took
// to start.
func bedStarts(tb testing.TB) (sim, real time.Duration) {
	start := time.Now()
	k, err := testbed.StartKube(nil)
	if err != nil {
		tb.Fatal(err)
	}
	tk, err := testbed.StartTektonSim(k)
	if err != nil {
		tb.Fatal(err)
	}
	kn, err := testbed.StartKnativeSim(k)
	if err != nil {
		tb.Fatal(err)
	}
	sim = time.Since(start)
	kn.Stop()
	tk.Stop()
	_ = k.Stop()

	start = time.Now()
	if k, err = testbed.StartKube(nil); err != nil {
		tb.Fatal(err)
	}
	p, err := testbed.StartPrimitives(k)
	if err != nil {
		_ = k.Stop()
		tb.Fatal(err)
	}
	real = time.Since(start)
	p.Stop()
	_ = k.Stop()
	return sim, real
}

// BenchmarkFunctionsToReady creates a batch of Functions at once on each
// bed and waits until all are Ready: built by Tekton (or its simulator)
// and served by Knative (or its simulator).
func BenchmarkFunctionsToReady(b *testing.B) {
	n := count()
	var sim, real time.Duration
	for range b.N {
		k := testbed.SharedKube(b)
		testbed.SharedTekton(b)
		testbed.SharedKnative(b)
		sim += functionsToReady(b, k, k.Namespace(b), n)

		p := testbed.SharedPrimitives(b)
		real += functionsToReady(b, p.Kube, p.Namespace(b), n)
	}
	b.ReportMetric(sim.Seconds()/float64(b.N*n), "s/fn-sim")
	b.ReportMetric(real.Seconds()/float64(b.N*n), "s/fn-real")
	b.ReportMetric(real.Seconds()/sim.Seconds(), "real/sim")
}

func functionsToReady(b testing.TB, k *testbed.Kube, ns string, n int) time.Duration {
	b.Helper()
	functionctl.Run(b, k, ns)
	ctx := context.Background()
	start := time.Now()
	for i := range n {
		fn := &slessv1alpha1.Function{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("fn-%03d", i), Namespace: ns}}
		fn.Spec.Runtime = "python3.12"
		fn.Spec.Entrypoint = "main.handler"
		fn.Spec.Source.Inline = &slessv1alpha1.InlineSource{Files: map[string]string{
			"main.py": fmt.Sprintf("def handler(event, context):\n    return %d\n", i)}}
		if err := k.Client.Create(ctx, fn); err != nil {
			b.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var list slessv1alpha1.FunctionList
		if err := k.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			b.Fatal(err)
		}
		ready := 0
		for _, fn := range list.Items {
			switch fn.Status.Phase {
			case slessv1alpha1.FunctionPhaseReady:
				ready++
			case slessv1alpha1.FunctionPhaseFailed:
				b.Fatalf("Function %s failed: %+v", fn.Name, fn.Status.Conditions)
			}
		}
		if ready == n {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d Functions Ready after 5 min", ready, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestBenchSmoke runs both benchmarks' code paths once, with two Functions
// on each bed, so that they cannot rot; the numbers are for the README,
// not for a test.
func TestBenchSmoke(t *testing.T) {
	simStart, realStart := bedStarts(t)
	k := testbed.SharedKube(t)
	testbed.SharedTekton(t)
	testbed.SharedKnative(t)
	sim := functionsToReady(t, k, k.Namespace(t), 2)
	p := testbed.SharedPrimitives(t)
	real := functionsToReady(t, p.Kube, p.Namespace(t), 2)
	t.Logf("bed start: simulators %v, real %v; 2 Functions to Ready: simulators %v, real %v", simStart, realStart, sim, real)
	for _, d := range []time.Duration{simStart, realStart, sim, real} {
		if d <= 0 {
			t.Errorf("not every number measured: %v %v %v %v", simStart, realStart, sim, real)
		}
	}
}
