package function_test

import (
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
		Spec:       slessv1alpha1.FunctionSpec{Runtime: slessv1alpha1.RuntimeGo124, Source: slessv1alpha1.FunctionSource{Image: v1}},
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
