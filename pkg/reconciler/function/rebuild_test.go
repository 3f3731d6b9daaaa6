package function_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/sless-dev/sless/pkg/adapter/resources"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/test/testbed"
)

// A build that failed for a passing reason stays failed for its source —
// reconciling again finds the failed run — until spec.rebuild asks again;
// then the same source is built by a new run and served, the older
// revision serving meanwhile.
func TestRebuildRunsAFailedBuildAgain(t *testing.T) {
	w := newWorld(t)
	defer w.startController()()
	w.create(pythonFunction(w.ns, "flaky", "return 1"))
	served := w.waitReady("flaky")

	w.tekton.SetPolicy(w.ns, testbed.BuildPolicy{Mode: testbed.BuildFail, Message: "error pushing image: registry unavailable"})
	w.update("flaky", withBody("return 2"))
	failed := w.waitPhase("flaky", slessv1alpha1.FunctionPhaseFailed)
	failedRun := failed.Status.BuildRef
	if failed.Status.LatestReadyRevision != served.Status.LatestReadyRevision {
		t.Fatalf("the old revision stopped serving: %+v", failed.Status)
	}

	// The registry is back; a change of anything but spec.rebuild finds
	// the failed run again.
	w.tekton.SetPolicy(w.ns, testbed.BuildPolicy{})
	w.update("flaky", func(fn *slessv1alpha1.Function) { fn.Spec.MemoryMB = ptr.To[int32](256) })
	w.eventually("the failed build kept at the next generation", func() (bool, string) {
		fn := w.fn("flaky")
		c := condition(fn, slessv1alpha1.FunctionConditionBuildSucceeded)
		return fn.Status.ObservedGeneration == fn.Generation && c.Status == metav1.ConditionFalse && fn.Status.BuildRef == failedRun, describe(fn)
	})

	w.update("flaky", func(fn *slessv1alpha1.Function) { fn.Spec.Rebuild = "2026-12-03T12.00.00Z" })
	ready := w.waitReady("flaky")
	if ready.Status.BuildRef == failedRun || ready.Status.SourceDigest != failed.Status.SourceDigest {
		t.Fatalf("rebuilt by %s of %s; want a new run of the same source %s than %s", ready.Status.BuildRef, ready.Status.SourceDigest, failed.Status.SourceDigest, failedRun)
	}
	var found bool
	for _, pr := range w.pipelineRuns("flaky") {
		if pr.Name == ready.Status.BuildRef {
			found = pr.Annotations[resources.AnnotationRebuild] == "2026-12-03T12.00.00Z"
		}
	}
	if !found {
		t.Errorf("run %s not found with the rebuild annotation", ready.Status.BuildRef)
	}
}
