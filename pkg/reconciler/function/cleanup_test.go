package function_test

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sless-dev/sless/pkg/adapter/s3"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// A Function whose stored objects cannot be deleted (object storage
// refuses the controller's credentials) is kept by its finalizer, and says
// why: Ready False with CleanupFailed and the storage error, where before a
// deletion that never ended showed only its deletionTimestamp. Once
// storage answers again the deletion ends.
func TestCleanupFailureIsToldAndRetried(t *testing.T) {
	w := newWorld(t)
	stop := w.startController()
	w.create(pythonFunction(w.ns, "kept", `1`))
	w.waitReady("kept")
	stop()

	good := w.store
	broken, err := s3.New(s3.Config{Endpoint: "http://" + w.s3srv.Endpoint, Region: w.s3srv.Region, Bucket: w.bucket,
		AccessKey: w.s3srv.AccessKey, SecretKey: "not-" + w.s3srv.SecretKey, PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	w.store = broken
	stop = w.startController()
	if err := w.kube.Client.Delete(context.Background(), w.fn("kept")); err != nil {
		t.Fatal(err)
	}
	w.eventually("the deletion's failure told", func() (bool, string) {
		fn := w.fn("kept")
		c := condition(fn, slessv1alpha1.FunctionConditionReady)
		return c.Status == metav1.ConditionFalse && c.Reason == slessv1alpha1.FunctionReasonCleanupFailed &&
			strings.Contains(c.Message, "delete objects of") && c.ObservedGeneration == fn.Generation &&
			fn.Status.ObservedGeneration == fn.Generation && fn.Status.Phase == slessv1alpha1.FunctionPhaseFailed, describe(fn)
	})
	stop()

	w.store = good
	w.startController()
	w.eventually("the Function gone", func() (bool, string) {
		fn := &slessv1alpha1.Function{}
		err := w.kube.Client.Get(context.Background(), types.NamespacedName{Namespace: w.ns, Name: "kept"}, fn)
		return apierrors.IsNotFound(err), describe(fn)
	})
}
