package runs

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/local/apiserver"
	"github.com/sless-dev/sless/pkg/local/localtest"
	"github.com/sless-dev/sless/pkg/local/serving"
	"github.com/sless-dev/sless/pkg/reconciler/function"
)

// A FunctionJob runs the code the function serves, as on a cluster. The
// function's latest revision fails to start — its code raises at import,
// except in job mode, so running it as a job would succeed and hide the
// mix-up — and the previous revision keeps serving: a run then executes
// the previous revision's code and is named and recorded after it. The
// Function's status comes from the real Function reconciler on the local
// adapters, as sless dev runs it.
func TestFunctionJobRunsTheServingRevision(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rig := newRunsRig(t, serving.ServerOptions{IdleTimeout: time.Minute, DrainGrace: 50 * time.Millisecond})
	store, blobs, builder, server, recs, runs := rig.store, rig.blobs, rig.builder, rig.server, rig.records, rig.runs
	fnRec := &function.Reconciler{Client: store, Builder: builder, Server: server, Store: blobs,
		Config: function.Config{PublicBaseURL: "http://127.0.0.1:8080"}}

	key := types.NamespacedName{Namespace: "ns", Name: "calc"}
	get := func() *slessv1alpha1.Function {
		t.Helper()
		fn := &slessv1alpha1.Function{}
		if err := store.Get(ctx, key, fn); err != nil {
			t.Fatal(err)
		}
		return fn
	}
	// reconcileUntil plays the Function loop until the status says done.
	reconcileUntil := func(what string, done func(*slessv1alpha1.Function) bool) *slessv1alpha1.Function {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			if _, err := fnRec.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
				t.Fatal(err)
			}
			fn := get()
			if fn.Status.ObservedGeneration == fn.Generation && done(fn) {
				return fn
			}
			if time.Now().After(deadline) {
				t.Fatalf("function not %s: %+v", what, fn.Status)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	good := "import os\n\ndef handler(event, context):\n    return {'version': 'good', 'revision': context.revision, " +
		"'greeting': os.environ.get('GREETING'), 'onlyNew': os.environ.get('ONLY_NEW'), 'timeout': os.environ.get('SLESS_TIMEOUT_SECONDS')}\n"
	bad := "import os\nif os.environ.get('SLESS_MODE') != 'job':\n    raise RuntimeError('broken at import')\n\n" +
		"def handler(event, context):\n    return {'version': 'bad', 'revision': context.revision}\n"
	fn := localtest.Function("ns", "calc")
	fn.Spec.Source.Inline.Files = map[string]string{"main.py": good}
	fn.Spec.Env = []slessv1alpha1.EnvVar{{Name: "GREETING", Value: "old"}}
	fn.Spec.TimeoutSeconds = ptr.To[int32](45)
	if err := store.Create(ctx, fn); err != nil {
		t.Fatal(err)
	}
	v1 := reconcileUntil("ready", (*slessv1alpha1.Function).IsReady)
	if v1.Status.ServingImage != v1.Status.Image || v1.Status.LatestReadyRevision == "" {
		t.Errorf("ready function: servingImage %q, image %q, revision %q", v1.Status.ServingImage, v1.Status.Image, v1.Status.LatestReadyRevision)
	}

	fn = get()
	fn.Spec.Source.Inline.Files = map[string]string{"main.py": bad}
	// The bad deploy changes the settings too; the run must not take them
	// to the old code.
	fn.Spec.Env = []slessv1alpha1.EnvVar{{Name: "GREETING", Value: "new"}, {Name: "ONLY_NEW", Value: "1"}}
	fn.Spec.TimeoutSeconds = ptr.To[int32](900)
	if err := store.Update(ctx, fn); err != nil {
		t.Fatal(err)
	}
	failed := reconcileUntil("failed", func(fn *slessv1alpha1.Function) bool {
		return fn.Status.Phase == slessv1alpha1.FunctionPhaseFailed && fn.Status.LatestCreatedRevision != v1.Status.LatestReadyRevision
	})
	if failed.Status.Image == v1.Status.Image || failed.Status.LatestReadyRevision != v1.Status.LatestReadyRevision {
		t.Fatalf("after the bad update: image %q (was %q), latest ready %q (was %q)", failed.Status.Image, v1.Status.Image,
			failed.Status.LatestReadyRevision, v1.Status.LatestReadyRevision)
	}
	if failed.Status.ServingImage != v1.Status.Image {
		t.Errorf("servingImage %q after the bad update, want the serving revision's %q", failed.Status.ServingImage, v1.Status.Image)
	}

	jobLoop := apiserver.NewLoop("job", store, slessv1alpha1.SchemeGroupVersion.WithKind("FunctionJob").GroupKind(), runs.JobReconciler(), nil)
	go jobLoop.Run(ctx, nil, 1)
	j := &slessv1alpha1.FunctionJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "after-bad-deploy"},
		Spec: slessv1alpha1.FunctionJobSpec{Function: "calc", RunID: 1, Payload: &apiextensionsv1.JSON{Raw: []byte(`{}`)}}}
	if err := store.Create(ctx, j); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if err := store.Get(ctx, types.NamespacedName{Namespace: "ns", Name: j.Name}, j); err != nil {
			t.Fatal(err)
		}
		if j.Status.RunID == 1 && (j.Status.Phase == slessv1alpha1.JobPhaseSucceeded || j.Status.Phase == slessv1alpha1.JobPhaseFailed) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job did not finish: %+v", j.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	want := v1.Status.LatestReadyRevision
	if j.Status.Phase != slessv1alpha1.JobPhaseSucceeded || !strings.Contains(j.Status.Output, `"version": "good"`) ||
		!strings.Contains(j.Status.Output, `"revision": "`+want+`"`) {
		t.Errorf("run: phase %s output %s; want the serving revision %s's code (version good)", j.Status.Phase, j.Status.Output, want)
	}
	if !strings.Contains(j.Status.Output, `"greeting": "old"`) || !strings.Contains(j.Status.Output, `"onlyNew": null`) ||
		!regexp.MustCompile(`"timeout": "45(\.0)?"`).MatchString(j.Status.Output) {
		t.Errorf("run output %s; want the serving revision's env (GREETING old, no ONLY_NEW) and timeout 45", j.Status.Output)
	}
	requestID := "job-" + string(j.UID) + "-1"
	deadline = time.Now().Add(10 * time.Second)
	for {
		p, err := recs.List(ctx, invoke.Query{Namespace: "ns", Function: "calc", Trigger: invoke.TriggerJob, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Items) == 1 && p.Items[0].RequestID == requestID {
			if r := p.Items[0]; r.Revision != want || r.Status != 200 {
				t.Errorf("record %+v, want revision %s, status 200", r, want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no record of the run among %+v", p.Items)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
