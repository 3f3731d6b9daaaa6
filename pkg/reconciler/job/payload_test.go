package job_test

import (
	"context"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// A payload too large for the run's environment (the apiserver takes up to
// about 1.5 MiB) makes no Job, whose Pod could never start, and says so;
// making it smaller starts the same runID. Before, the Job was made and its
// container failed with "argument list too long".
func TestFunctionJobPayloadTooLarge(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	e.createFunction("hello", image)
	big := []byte(`{"rows": "` + strings.Repeat("x", slessv1alpha1.MaxPayloadBytes) + `"}`)
	fj := &slessv1alpha1.FunctionJob{ObjectMeta: metav1.ObjectMeta{Name: "bulky", Namespace: e.ns},
		Spec: slessv1alpha1.FunctionJobSpec{Function: "hello", RunID: 1, Payload: &apiextensionsv1.JSON{Raw: big}}}
	if err := e.c.Create(ctx, fj); err != nil {
		t.Fatal(err)
	}
	e.eventually("PayloadTooLarge", func() (bool, string) {
		got := e.get("bulky")
		c := condition(got, "Ready")
		return c.Status == metav1.ConditionFalse && c.Reason == slessv1alpha1.JobReasonPayloadTooLarge && strings.Contains(c.Message, "SLESS_PAYLOAD") &&
			got.Status.Phase == slessv1alpha1.JobPhasePending && got.Status.ObservedGeneration == got.Generation, describe(got)
	})
	if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "bulky-1"}, &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a Job was made for a payload no run can get: %v", err)
	}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := e.get("bulky")
		cur.Spec.Payload = &apiextensionsv1.JSON{Raw: []byte(`{"rows": "ref:s3://bucket/rows.json"}`)}
		return e.c.Update(ctx, cur)
	}); err != nil {
		t.Fatal(err)
	}
	e.waitJob("bulky-1")
}
