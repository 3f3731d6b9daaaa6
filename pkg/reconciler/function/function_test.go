package function_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"

	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/sless-dev/sless/pkg/adapter/resources"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/names"
	"github.com/sless-dev/sless/test/testbed"
)

func TestCreateBuildServeReady(t *testing.T) {
	w := newWorld(t)
	backend := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) { _, _ = rw.Write([]byte("hello")) }))
	defer backend.Close()
	w.tekton.SetPolicy(w.ns, testbed.BuildPolicy{Mode: testbed.BuildHold})
	w.knative.SetPolicy(w.ns, testbed.ServePolicy{Mode: testbed.ServeHold, URL: func(*servingv1.Service) string { return backend.URL }})
	w.startController()
	ctx := context.Background()

	fn := pythonFunction(w.ns, "hello", `"hi"`)
	fn.Spec.Env = []slessv1alpha1.EnvVar{
		{Name: "GREETING", Value: "hi"},
		{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "token"}}},
	}
	fn.Spec.MemoryMB = ptr.To[int32](256)
	cpu := resource.MustParse("250m")
	fn.Spec.CPU = &cpu
	fn.Spec.TimeoutSeconds = ptr.To[int32](120)
	fn.Spec.BuildTimeoutSeconds = ptr.To[int32](600)
	fn.Spec.Scale = &slessv1alpha1.ScaleSpec{Min: ptr.To[int32](0), Max: ptr.To[int32](5), Target: ptr.To[int32](10), ContainerConcurrency: ptr.To[int64](20)}
	w.create(fn)

	// 1. The source becomes a build context in S3 and one PipelineRun.
	got := w.waitPhase("hello", slessv1alpha1.FunctionPhaseBuilding)
	digest := got.Status.SourceDigest
	if len(digest) != len("sha256:")+64 {
		t.Fatalf("sourceDigest %q", digest)
	}
	key := names.ContextKey(w.ns, "hello", digest)
	rc, _, err := w.store.Get(ctx, key)
	if err != nil {
		t.Fatalf("build context %s: %v", key, err)
	}
	tgz, _ := io.ReadAll(rc)
	rc.Close()
	if sum := sha256.Sum256(tgz); "sha256:"+hex.EncodeToString(sum[:]) != digest {
		t.Errorf("stored context's sha256 differs from status.sourceDigest %s", digest)
	}
	if c := condition(got, slessv1alpha1.FunctionConditionSourceReady); c.Status != metav1.ConditionTrue || c.Reason != slessv1alpha1.FunctionReasonContextStored {
		t.Errorf("SourceReady %+v", c)
	}
	if c := condition(got, slessv1alpha1.FunctionConditionReady); c.Status != metav1.ConditionUnknown {
		t.Errorf("Ready %+v while building", c)
	}
	prs := w.pipelineRuns("hello")
	if len(prs) != 1 {
		t.Fatalf("%d PipelineRuns, want 1", len(prs))
	}
	pr := &prs[0]
	wantParams := map[string]string{
		resources.ParamContext:       "s3://" + w.bucket + "/" + key,
		resources.ParamContextDigest: digest,
		resources.ParamImage:         testRegistry + "/" + w.ns + "/hello",
		resources.ParamTag:           names.ImageTag(digest),
	}
	for k, v := range wantParams {
		if got := param(pr, k); got != v {
			t.Errorf("param %s = %q, want %q", k, got, v)
		}
	}
	if pr.Name != names.PipelineRun(fn, digest, 0) || got.Status.BuildRef != pr.Name {
		t.Errorf("PipelineRun %s, buildRef %s", pr.Name, got.Status.BuildRef)
	}
	if pr.Spec.Timeouts == nil || pr.Spec.Timeouts.Pipeline.Duration.Seconds() != 600 {
		t.Errorf("timeouts %+v", pr.Spec.Timeouts)
	}
	if !metav1.IsControlledBy(pr, got) {
		t.Error("PipelineRun is not controlled by the Function")
	}

	// 2. The build succeeds: a Knative Service pinned to the digest.
	if err := w.tekton.Succeed(ctx, w.ns, pr.Name); err != nil {
		t.Fatal(err)
	}
	var svc *servingv1.Service
	w.eventually("Knative Service", func() (bool, string) {
		svc, err = w.service("hello")
		return err == nil, "no service"
	})
	pr = w.pipelineRuns("hello")[0].DeepCopy()
	wantImage := result(pr, resources.ResultImageURL) + "@" + result(pr, resources.ResultImageDigest)
	if wantImage != testRegistry+"/"+w.ns+"/hello@"+testbed.SimDigest(pr) {
		t.Fatalf("image from results %q", wantImage)
	}
	c := svc.Spec.Template.Spec.Containers[0]
	if c.Image != wantImage {
		t.Errorf("service image %q, want %q", c.Image, wantImage)
	}
	if svc.Spec.Template.Name != "hello-00001" {
		t.Errorf("revision name %q", svc.Spec.Template.Name)
	}
	if svc.Labels[resources.LabelVisibility] != resources.VisibilityClusterLocal || svc.Labels[resources.LabelFunction] != "hello" || svc.Labels[resources.LabelTenant] != w.ns {
		t.Errorf("labels %v", svc.Labels)
	}
	if a := svc.Spec.Template.Annotations; a[resources.AnnotationMinScale] != "0" || a[resources.AnnotationMaxScale] != "5" || a[resources.AnnotationTarget] != "10" {
		t.Errorf("annotations %v", a)
	}
	if *svc.Spec.Template.Spec.TimeoutSeconds != 120 || *svc.Spec.Template.Spec.ContainerConcurrency != 20 {
		t.Errorf("timeout %d concurrency %d", *svc.Spec.Template.Spec.TimeoutSeconds, *svc.Spec.Template.Spec.ContainerConcurrency)
	}
	if m := c.Resources.Limits[corev1.ResourceMemory]; m.Value() != 256<<20 {
		t.Errorf("memory limit %v", m.String())
	}
	if q := c.Resources.Requests[corev1.ResourceCPU]; q.String() != "250m" {
		t.Errorf("cpu request %v", q.String())
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/_sless/health" {
		t.Errorf("readiness probe %+v", c.ReadinessProbe)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if env["SLESS_ENTRYPOINT"].Value != "main.handler" || env["SLESS_FUNCTION_NAME"].Value != "hello" || env["SLESS_NAMESPACE"].Value != w.ns ||
		env["SLESS_TIMEOUT_SECONDS"].Value != "120" || env["GREETING"].Value != "hi" || env["TOKEN"].ValueFrom == nil || env["TOKEN"].ValueFrom.SecretKeyRef.Key != "token" {
		t.Errorf("env %+v", c.Env)
	}
	got = w.waitPhase("hello", slessv1alpha1.FunctionPhaseDeploying)
	if got.IsReady() {
		t.Fatal("Ready before Knative said so")
	}

	// 3. Knative says Ready: the Function is Ready with its URL.
	if err := w.knative.Ready(ctx, w.ns, "hello"); err != nil {
		t.Fatal(err)
	}
	got = w.waitReady("hello")
	if got.Status.Phase != slessv1alpha1.FunctionPhaseReady || got.Status.Image != wantImage || got.Status.BuildRef != pr.Name ||
		got.Status.LatestCreatedRevision != "hello-00001" || got.Status.LatestReadyRevision != "hello-00001" ||
		got.Status.URL != testPublic+"/fn/"+w.ns+"/hello" || got.Status.Address != backend.URL || got.Status.ObservedGeneration != got.Generation {
		t.Errorf("status %+v", got.Status)
	}
	for _, typ := range []string{slessv1alpha1.FunctionConditionSourceReady, slessv1alpha1.FunctionConditionBuildSucceeded, slessv1alpha1.FunctionConditionServiceReady, slessv1alpha1.FunctionConditionReady} {
		if c := condition(got, typ); c.Status != metav1.ConditionTrue || c.ObservedGeneration != got.Generation {
			t.Errorf("condition %s: %+v", typ, c)
		}
	}
	resp, err := http.Get(got.Status.Address)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hello" {
		t.Errorf("address answered %q", body)
	}
}

func TestChanges(t *testing.T) {
	w := newWorld(t)
	w.startController()
	ctx := context.Background()
	w.create(pythonFunction(w.ns, "chg", `"v1"`))
	v1 := w.waitReady("chg")
	img1 := v1.Status.Image

	t.Run("env-only change makes a revision without a build", func(t *testing.T) {
		w.update("chg", func(fn *slessv1alpha1.Function) { fn.Spec.Env = []slessv1alpha1.EnvVar{{Name: "A", Value: "1"}} })
		got := w.waitReady("chg")
		if n := len(w.pipelineRuns("chg")); n != 1 {
			t.Errorf("%d PipelineRuns, want 1", n)
		}
		if got.Status.Image != img1 || got.Status.LatestReadyRevision != "chg-00002" {
			t.Errorf("image %s revision %s", got.Status.Image, got.Status.LatestReadyRevision)
		}
	})

	t.Run("build timeout change rolls out nothing", func(t *testing.T) {
		svc, _ := w.service("chg")
		w.update("chg", func(fn *slessv1alpha1.Function) { fn.Spec.BuildTimeoutSeconds = ptr.To[int32](300) })
		got := w.waitReady("chg")
		after, _ := w.service("chg")
		if after.Generation != svc.Generation || got.Status.LatestReadyRevision != "chg-00002" {
			t.Errorf("service generation %d → %d, revision %s", svc.Generation, after.Generation, got.Status.LatestReadyRevision)
		}
	})

	t.Run("source change builds once more, old revision serves meanwhile", func(t *testing.T) {
		w.tekton.SetPolicy(w.ns, testbed.BuildPolicy{Mode: testbed.BuildHold})
		w.update("chg", func(fn *slessv1alpha1.Function) {
			fn.Spec.Source.Inline.Files["main.py"] = "def handler(event, context):\n    return 'v2'\n"
		})
		building := w.waitPhase("chg", slessv1alpha1.FunctionPhaseBuilding)
		if building.Status.LatestReadyRevision != "chg-00002" || building.Status.Image != img1 || building.Status.URL == "" {
			t.Errorf("while building: %+v", building.Status)
		}
		prs := w.pipelineRuns("chg")
		if len(prs) != 2 {
			t.Fatalf("%d PipelineRuns, want 2", len(prs))
		}
		if err := w.tekton.Succeed(ctx, w.ns, building.Status.BuildRef); err != nil {
			t.Fatal(err)
		}
		got := w.waitReady("chg")
		if got.Status.Image == img1 || got.Status.LatestReadyRevision != "chg-00004" || got.Status.SourceDigest == v1.Status.SourceDigest {
			t.Errorf("after rebuild: %+v", got.Status)
		}
	})

	t.Run("failed build, then a fixed source recovers", func(t *testing.T) {
		w.tekton.SetPolicy(w.ns, testbed.BuildPolicy{Mode: testbed.BuildFail})
		w.update("chg", func(fn *slessv1alpha1.Function) { fn.Spec.Source.Inline.Files["requirements.txt"] = "nosuchpkg\n" })
		failed := w.waitPhase("chg", slessv1alpha1.FunctionPhaseFailed)
		b := condition(failed, slessv1alpha1.FunctionConditionBuildSucceeded)
		r := condition(failed, slessv1alpha1.FunctionConditionReady)
		// Tekton's words, and where the cause is: the step's log.
		wantMsg := `step "build-and-push" of PipelineRun ` + failed.Status.BuildRef + ` failed: "step-build-and-push" exited with code 1: Error; ` +
			`its log: kubectl logs -n ` + w.ns + " " + failed.Status.BuildRef + `-build-pod -c step-build-and-push`
		if b.Status != metav1.ConditionFalse || b.Reason != "Failed" || b.Message != wantMsg {
			t.Errorf("BuildSucceeded %+v\nwant message %s", b, wantMsg)
		}
		if r.Status != metav1.ConditionFalse || r.Reason != "Failed" || r.Message != wantMsg {
			t.Errorf("Ready %+v", r)
		}
		if failed.Status.LatestReadyRevision != "chg-00004" {
			t.Errorf("old revision no longer recorded: %s", failed.Status.LatestReadyRevision)
		}
		w.tekton.SetPolicy(w.ns, testbed.BuildPolicy{})
		w.update("chg", func(fn *slessv1alpha1.Function) { delete(fn.Spec.Source.Inline.Files, "requirements.txt") })
		got := w.waitReady("chg")
		// The fixed source equals the one built before: no new build.
		if n := len(w.pipelineRuns("chg")); n != 3 {
			t.Errorf("%d PipelineRuns, want 3", n)
		}
		// ... and the same image and settings as the serving revision: no
		// new revision either.
		if got.Status.LatestReadyRevision != "chg-00004" {
			t.Errorf("revision %s", got.Status.LatestReadyRevision)
		}
	})

	t.Run("Knative Ready=False surfaces", func(t *testing.T) {
		w.knative.SetPolicy(w.ns, testbed.ServePolicy{Mode: testbed.ServeFail, Reason: "RevisionFailed",
			Message: `Revision "chg-00007" failed with message: Unable to fetch image: 401 Unauthorized.`})
		w.update("chg", func(fn *slessv1alpha1.Function) { fn.Spec.MemoryMB = ptr.To[int32](512) })
		got := w.waitPhase("chg", slessv1alpha1.FunctionPhaseFailed)
		s := condition(got, slessv1alpha1.FunctionConditionServiceReady)
		if s.Status != metav1.ConditionFalse || s.Reason != "RevisionFailed" || s.Message != `Revision "chg-00007" failed with message: Unable to fetch image: 401 Unauthorized.` {
			t.Errorf("ServiceReady %+v", s)
		}
		if got.Status.LatestCreatedRevision != "chg-00007" || got.Status.LatestReadyRevision != "chg-00004" {
			t.Errorf("revisions %s/%s", got.Status.LatestCreatedRevision, got.Status.LatestReadyRevision)
		}
		if r := condition(got, slessv1alpha1.FunctionConditionReady); r.Status != metav1.ConditionFalse || r.Reason != "RevisionFailed" {
			t.Errorf("Ready %+v", r)
		}
	})
}

func TestHandDeletedServiceComesBack(t *testing.T) {
	w := newWorld(t)
	w.startController()
	w.create(pythonFunction(w.ns, "phoenix", `1`))
	w.waitReady("phoenix")
	svc, err := w.service("phoenix")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.kube.Client.Delete(context.Background(), svc); err != nil {
		t.Fatal(err)
	}
	w.eventually("a new Service", func() (bool, string) {
		s, err := w.service("phoenix")
		return err == nil && s.UID != svc.UID, "not recreated"
	})
	w.waitReady("phoenix")
	if n := len(w.pipelineRuns("phoenix")); n != 1 {
		t.Errorf("%d PipelineRuns, want 1 (no rebuild)", n)
	}
}

func TestPrebuiltImage(t *testing.T) {
	w := newWorld(t)
	w.startController()
	img := "registry.test.local/prebuilt/app@sha256:" + hex.EncodeToString(make([]byte, 32))
	w.create(&slessv1alpha1.Function{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "pre"},
		Spec:       slessv1alpha1.FunctionSpec{WorkloadSpec: slessv1alpha1.WorkloadSpec{Runtime: slessv1alpha1.RuntimeGo124, Source: slessv1alpha1.FunctionSource{Image: img}}},
	})
	got := w.waitReady("pre")
	svc, _ := w.service("pre")
	if svc.Spec.Template.Spec.Containers[0].Image != img || got.Status.Image != img || got.Status.BuildRef != "" || got.Status.SourceDigest != "" {
		t.Errorf("status %+v, service image %s", got.Status, svc.Spec.Template.Spec.Containers[0].Image)
	}
	if n := len(w.pipelineRuns("pre")); n != 0 {
		t.Errorf("%d PipelineRuns for a prebuilt image", n)
	}
	if c := condition(got, slessv1alpha1.FunctionConditionBuildSucceeded); c.Reason != slessv1alpha1.FunctionReasonPrebuiltImage {
		t.Errorf("BuildSucceeded %+v", c)
	}
}

// A prebuilt image given by tag is served as given (Knative resolves the
// tag when it creates the revision, so the revision's pods all run one
// image); status.image is the digest Knative resolved it to, and a new tag
// in the spec is a new revision with a new digest.
func TestPrebuiltImageByTag(t *testing.T) {
	w := newWorld(t)
	w.startController()
	v1, v2 := "registry.test.local/prebuilt/app:v1", "registry.test.local/prebuilt/app:v2"
	w.create(&slessv1alpha1.Function{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "tagged"},
		Spec:       slessv1alpha1.FunctionSpec{WorkloadSpec: slessv1alpha1.WorkloadSpec{Runtime: slessv1alpha1.RuntimeGo124, Source: slessv1alpha1.FunctionSource{Image: v1}}},
	})
	got := w.waitReady("tagged")
	svc, _ := w.service("tagged")
	want := testbed.ResolvedImage(v1)
	if svc.Spec.Template.Spec.Containers[0].Image != v1 || got.Status.Image != want || !strings.HasPrefix(want, "registry.test.local/prebuilt/app@sha256:") {
		t.Fatalf("status.image %q (want %q), service image %q", got.Status.Image, want, svc.Spec.Template.Spec.Containers[0].Image)
	}

	first := got.Status.LatestReadyRevision
	w.update("tagged", func(fn *slessv1alpha1.Function) { fn.Spec.Source.Image = v2 })
	w.eventually("revision of v2 ready", func() (bool, string) {
		got = w.fn("tagged")
		return got.IsReady() && got.Status.ObservedGeneration == got.Generation && got.Status.LatestReadyRevision != first, describe(got)
	})
	if want := testbed.ResolvedImage(v2); got.Status.Image != want {
		t.Errorf("status.image %q after the new tag, want %q", got.Status.Image, want)
	}
}

func TestDeleteMidBuildLeavesNothing(t *testing.T) {
	w := newWorld(t)
	w.tekton.SetPolicy(w.ns, testbed.BuildPolicy{Mode: testbed.BuildHold})
	w.startController()
	ctx := context.Background()
	w.create(pythonFunction(w.ns, "gone", `0`))
	got := w.waitPhase("gone", slessv1alpha1.FunctionPhaseBuilding)
	if got.Finalizers[0] != names.Finalizer {
		t.Fatalf("finalizers %v", got.Finalizers)
	}
	key := names.ContextKey(w.ns, "gone", got.Status.SourceDigest)
	if ok, err := w.store.Exists(ctx, key); !ok || err != nil {
		t.Fatalf("context not stored: %v %v", ok, err)
	}
	if err := w.kube.Client.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	w.eventually("Function gone", func() (bool, string) {
		err := w.kube.Client.Get(ctx, types.NamespacedName{Namespace: w.ns, Name: "gone"}, &slessv1alpha1.Function{})
		return apierrors.IsNotFound(err), "still there"
	})
	if ok, err := w.store.Exists(ctx, key); ok || err != nil {
		t.Errorf("context still stored after delete: %v %v", ok, err)
	}
	// envtest runs no garbage collector; on a cluster it deletes the run
	// (and its pod) because the Function controlled it.
	for _, pr := range w.pipelineRuns("gone") {
		if ref := metav1.GetControllerOf(&pr); ref == nil || ref.UID != got.UID || ref.Kind != "Function" {
			t.Errorf("PipelineRun %s not controlled by the Function: %+v", pr.Name, ref)
		}
	}
	if _, err := w.service("gone"); !apierrors.IsNotFound(err) {
		t.Errorf("a Service was made for a Function deleted mid-build: %v", err)
	}
}

// A cron trigger's pre-warm hold (knative.MinScale) is an annotation
// on the Service: while it is there the template keeps min-scale at least 1
// under a revision name of its own (Knative refuses a template change that
// keeps the name), across Function changes; without it the generation's
// plain revision comes back.
func TestPrewarmHold(t *testing.T) {
	w := newWorld(t)
	w.startController()
	ctx := context.Background()
	w.create(pythonFunction(w.ns, "warm", `1`))
	w.waitReady("warm")
	hold := func(on bool) {
		for i := 0; ; i++ {
			svc, _ := w.service("warm")
			if on {
				// Added beside Knative's creator annotations, which its
				// webhook refuses to see dropped.
				if svc.Annotations == nil {
					svc.Annotations = map[string]string{}
				}
				svc.Annotations[resources.PrewarmHoldPrefix+"nightly"] = "true"
			} else {
				delete(svc.Annotations, resources.PrewarmHoldPrefix+"nightly")
			}
			err := w.kube.Client.Update(ctx, svc)
			if err == nil {
				return
			}
			if i > 20 {
				t.Fatal(err)
			}
		}
	}
	revision := func(want, minScale string) {
		t.Helper()
		w.eventually("revision "+want, func() (bool, string) {
			fn := w.fn("warm")
			svc, _ := w.service("warm")
			return fn.IsReady() && fn.Status.LatestReadyRevision == want && svc.Spec.Template.Annotations[resources.AnnotationMinScale] == minScale,
				fn.Status.LatestReadyRevision + " min-scale " + svc.Spec.Template.Annotations[resources.AnnotationMinScale]
		})
	}
	hold(true)
	revision("warm-00001-warm", "1")
	w.update("warm", func(fn *slessv1alpha1.Function) { fn.Spec.Env = []slessv1alpha1.EnvVar{{Name: "B", Value: "2"}} })
	revision("warm-00002-warm", "1")
	hold(false)
	revision("warm-00002", "")
	// A function that keeps an instance anyway needs no new revision.
	w.update("warm", func(fn *slessv1alpha1.Function) { fn.Spec.Scale = &slessv1alpha1.ScaleSpec{Min: ptr.To[int32](2)} })
	revision("warm-00003", "2")
	svc, _ := w.service("warm")
	n := reconcileCount(t)
	hold(true)
	w.eventually("a reconcile of the held Service", func() (bool, string) { return reconcileCount(t) > n, "" })
	// The hold itself bumps no generation (it is metadata).
	if after, _ := w.service("warm"); after.Generation != svc.Generation || after.Spec.Template.Name != "warm-00003" {
		t.Errorf("held Service with min-scale 2 rolled: generation %d → %d, template %s", svc.Generation, after.Generation, after.Spec.Template.Name)
	}
}

// A hand edit of the Knative Service in a field sless sets is put right.
func TestServiceDriftRepaired(t *testing.T) {
	w := newWorld(t)
	w.startController()
	w.create(pythonFunction(w.ns, "drift", `1`))
	ready := w.waitReady("drift")
	svc, _ := w.service("drift")
	delete(svc.Labels, resources.LabelVisibility)
	// Knative's webhook lets a changed template through only under a new
	// revision name.
	svc.Spec.Template.Name = "drift-tampered"
	svc.Spec.Template.Spec.Containers[0].Image = "attacker.example/img:latest"
	if err := w.kube.Client.Update(context.Background(), svc); err != nil {
		t.Fatal(err)
	}
	w.eventually("the Service repaired", func() (bool, string) {
		s, err := w.service("drift")
		if err != nil {
			return false, err.Error()
		}
		return s.Labels[resources.LabelVisibility] == resources.VisibilityClusterLocal &&
			s.Spec.Template.Spec.Containers[0].Image == ready.Status.Image, s.Spec.Template.Spec.Containers[0].Image
	})
	w.waitReady("drift")
	if got := w.fn("drift"); got.Status.Image != ready.Status.Image || got.Status.LatestReadyRevision != ready.Status.LatestReadyRevision {
		t.Errorf("status changed: %+v", got.Status)
	}
}

func reconcileCount(t *testing.T) float64 {
	t.Helper()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == "function" {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// A reconcile that finds nothing to change writes neither the Service nor
// the Function's status: a label someone else put on the Service is left,
// and no resourceVersion moves.
func TestNoChangeNoWrite(t *testing.T) {
	w := newWorld(t)
	w.startController()
	w.create(pythonFunction(w.ns, "calm", `1`))
	w.waitReady("calm")
	before := w.fn("calm")
	svc, _ := w.service("calm")
	n := reconcileCount(t)
	svc.Labels["team"] = "blue"
	if err := w.kube.Client.Update(context.Background(), svc); err != nil {
		t.Fatal(err)
	}
	svcRV := ""
	if s, err := w.service("calm"); err == nil {
		svcRV = s.ResourceVersion
	}
	w.eventually("a reconcile caused by the Service change", func() (bool, string) {
		return reconcileCount(t) > n, "no reconcile yet"
	})
	after := w.fn("calm")
	s, _ := w.service("calm")
	if after.ResourceVersion != before.ResourceVersion || s.ResourceVersion != svcRV || s.Labels["team"] != "blue" {
		t.Errorf("Function rv %s → %s, Service rv %s → %s, labels %v", before.ResourceVersion, after.ResourceVersion, svcRV, s.ResourceVersion, s.Labels)
	}
}
