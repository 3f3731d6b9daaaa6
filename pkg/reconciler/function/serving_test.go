package function_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/test/testbed"
)

// status.servingImage is the image of the revision that serves: the latest
// one's once it is ready, and the last ready revision's while a newer one
// has failed (Knative keeps the older one serving). It is read from that
// Revision, so it holds for an image given by tag too, pinned as Knative
// resolved it; status.image keeps naming the latest revision's image.
func TestServingImageFollowsTheReadyRevision(t *testing.T) {
	w := newWorld(t)
	w.startController()
	v1, v2, v3 := "registry.test.local/prebuilt/app:v1", "registry.test.local/prebuilt/app:v2", "registry.test.local/prebuilt/app:v3"
	w.create(&slessv1alpha1.Function{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "served"},
		Spec:       slessv1alpha1.FunctionSpec{WorkloadSpec: slessv1alpha1.WorkloadSpec{Runtime: slessv1alpha1.RuntimeGo124, Source: slessv1alpha1.FunctionSource{Image: v1}}},
	})
	got := w.waitReady("served")
	first := got.Status.LatestReadyRevision
	if want := testbed.ResolvedImage(v1); got.Status.ServingImage != want || got.Status.Image != want {
		t.Fatalf("ready: servingImage %q, image %q; want both %q", got.Status.ServingImage, got.Status.Image, want)
	}

	// A bad deploy: the new revision fails, the first keeps serving.
	w.knative.SetPolicy(w.ns, testbed.ServePolicy{Mode: testbed.ServeFail, Message: "Unable to fetch image: 401 Unauthorized."})
	w.update("served", func(fn *slessv1alpha1.Function) { fn.Spec.Source.Image = v2 })
	w.eventually("the v2 revision failed", func() (bool, string) {
		got = w.fn("served")
		return got.Status.ObservedGeneration == got.Generation && got.Status.Phase == slessv1alpha1.FunctionPhaseFailed &&
			got.Status.LatestCreatedRevision != first, describe(got)
	})
	if got.Status.LatestReadyRevision != first || got.Status.Image != testbed.ResolvedImage(v2) || got.Status.ServingImage != testbed.ResolvedImage(v1) {
		t.Errorf("after the failed deploy: latestReadyRevision %q (want %q), image %q (want %q), servingImage %q (want %q)",
			got.Status.LatestReadyRevision, first, got.Status.Image, testbed.ResolvedImage(v2), got.Status.ServingImage, testbed.ResolvedImage(v1))
	}

	// A good deploy: the new revision serves, and so does its image.
	w.knative.SetPolicy(w.ns, testbed.ServePolicy{})
	w.update("served", func(fn *slessv1alpha1.Function) { fn.Spec.Source.Image = v3 })
	w.eventually("the v3 revision ready", func() (bool, string) {
		got = w.fn("served")
		return got.IsReady() && got.Status.ObservedGeneration == got.Generation && got.Status.LatestReadyRevision != first, describe(got)
	})
	if want := testbed.ResolvedImage(v3); got.Status.ServingImage != want || got.Status.Image != want {
		t.Errorf("after the good deploy: servingImage %q, image %q; want both %q", got.Status.ServingImage, got.Status.Image, want)
	}
}

// A revision that becomes ready while a newer generation is still building
// is what serves from then on, and the status says so before that build
// ends: deploy v2, then v3 before v2 is ready, then v2 becomes ready.
func TestStatusFollowsTheServiceDuringABuild(t *testing.T) {
	w := newWorld(t)
	w.startController()
	ctx := context.Background()
	w.create(pythonFunction(w.ns, "busy", `"v1"`))
	v1 := w.waitReady("busy")

	w.knative.SetPolicy(w.ns, testbed.ServePolicy{Mode: testbed.ServeHold})
	w.update("busy", func(fn *slessv1alpha1.Function) {
		fn.Spec.Source.Inline.Files["main.py"] = "def handler(e, c):\n    return \"v2\"\n"
	})
	var v2 *slessv1alpha1.Function
	w.eventually("v2 built and deploying", func() (bool, string) {
		v2 = w.fn("busy")
		return v2.Status.ObservedGeneration == v2.Generation && v2.Status.Image != v1.Status.Image &&
			v2.Status.LatestCreatedRevision != v1.Status.LatestReadyRevision, describe(v2)
	})

	w.tekton.SetPolicy(w.ns, testbed.BuildPolicy{Mode: testbed.BuildHold})
	w.update("busy", func(fn *slessv1alpha1.Function) {
		fn.Spec.Source.Inline.Files["main.py"] = "def handler(e, c):\n    return \"v3\"\n"
	})
	w.eventually("v3 building", func() (bool, string) {
		got := w.fn("busy")
		return got.Status.ObservedGeneration == got.Generation && got.Status.Phase == slessv1alpha1.FunctionPhaseBuilding, describe(got)
	})

	if err := w.knative.Ready(ctx, w.ns, "busy"); err != nil {
		t.Fatal(err)
	}
	w.eventually("v2 serving while v3 builds", func() (bool, string) {
		got := w.fn("busy")
		return got.Status.Phase == slessv1alpha1.FunctionPhaseBuilding &&
				got.Status.LatestReadyRevision == v2.Status.LatestCreatedRevision && got.Status.ServingImage == v2.Status.Image, describe(got) +
				" servingImage " + got.Status.ServingImage + " latestReady " + got.Status.LatestReadyRevision
	})
}
