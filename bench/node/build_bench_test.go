package node

// Builds on the real node: for each runtime, the time from creating a
// Function to its image in status.image, with sless's controller (installed
// from config/), Tekton's controller and kaniko in a TaskRun pod doing the
// work, and the part of it kaniko's step took.
//
//	SLESS_REQUIRE_NODE=1 go test -run '^$' -bench NodeBuild -benchtime 1x -timeout 30m ./bench/node/

import (
	"context"
	"fmt"
	"testing"
	"time"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/test/testbed"
	"github.com/sless-dev/sless/test/testbed/functionctl"
	"github.com/sless-dev/sless/test/testbed/nodeapi"
)

// BenchmarkNodeBuild builds each runtime's Function on the node, one at a
// time so that each build has the cores to itself, b.N times with a changed
// source each time (kaniko caches nothing between builds). It reports, per
// runtime, seconds from create to status.image (s-<runtime>) and of
// kaniko's step alone (s-kaniko-<runtime>), and the bed's start.
func BenchmarkNodeBuild(b *testing.B) {
	s := nodeapi.StartBuilding(b)
	n, ns := s.Node, s.NS
	total := map[string]time.Duration{}
	kaniko := map[string]time.Duration{}
	b.ResetTimer()
	for i := range b.N {
		for _, fn := range functionctl.RuntimeFunctions(ns, fmt.Sprintf("run %d", i)) {
			fn.Name += fmt.Sprintf("-%d", i)
			start := time.Now()
			if err := n.Kube.Client.Create(context.Background(), fn); err != nil {
				b.Fatal(err)
			}
			got := functionctl.AwaitBuilt(b, n.Kube, ns, fn.Name, 15*time.Minute)
			if got.Status.Phase == slessv1alpha1.FunctionPhaseFailed {
				b.Fatalf("Function %s failed: %+v", fn.Name, got.Status.Conditions)
			}
			total[fn.Spec.Runtime] += time.Since(start)
			kaniko[fn.Spec.Runtime] += kanikoStep(b, n, got)
		}
	}
	b.StopTimer()
	// After ResetTimer, which drops the metrics reported before it.
	b.ReportMetric(n.Started.Seconds(), "s-bed-start")
	for runtime, d := range total {
		b.ReportMetric(d.Seconds()/float64(b.N), "s-"+runtime)
		b.ReportMetric(kaniko[runtime].Seconds()/float64(b.N), "s-kaniko-"+runtime)
	}
}

// kanikoStep is how long kaniko's step of fn's build ran, by the kubelet's
// times.
func kanikoStep(tb testing.TB, n *testbed.Node, fn *slessv1alpha1.Function) time.Duration {
	tb.Helper()
	pod := functionctl.BuildPod(tb, n.Kube, fn)
	c := functionctl.BuilderStatus(pod)
	if c == nil || c.State.Terminated == nil {
		tb.Fatalf("build pod %s has no finished kaniko step: %+v", pod.Name, pod.Status.ContainerStatuses)
	}
	return c.State.Terminated.FinishedAt.Sub(c.State.Terminated.StartedAt.Time)
}
