package service_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/sless-dev/sless/pkg/adapter/resources"
	"github.com/sless-dev/sless/pkg/adapter/s3"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/names"
	"github.com/sless-dev/sless/pkg/reconciler/function"
	"github.com/sless-dev/sless/pkg/reconciler/service"
	"github.com/sless-dev/sless/runtimes"
	"github.com/sless-dev/sless/test/testbed"
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	testbed.Main(m)
}

const testPublic = "https://sless.test.local"

type world struct {
	t     *testing.T
	kube  *testbed.Kube
	ns    string
	store *s3.Client
}

// newWorld runs the Function and SlessService controllers on a namespace
// of the shared apiserver, with the Tekton and Knative simulators and a
// real S3 server.
func newWorld(t *testing.T) *world {
	t.Helper()
	k := testbed.SharedKube(t)
	srv := testbed.SharedS3(t)
	bucket := srv.Bucket(t)
	store, err := s3.New(s3.Config{Endpoint: "http://" + srv.Endpoint, Region: srv.Region, Bucket: bucket,
		AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	testbed.SharedTekton(t)
	testbed.SharedKnative(t)
	w := &world{t: t, kube: k, ns: k.Namespace(t), store: store}

	mgr, err := ctrl.NewManager(k.Config, ctrl.Options{
		Scheme:                 k.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{w.ns: {}}, ByObject: function.CacheByObject()},
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	opts := function.Options{
		Config:    function.Config{PublicBaseURL: testPublic},
		Resources: resources.Config{Registry: "registry.test.local/sless", S3Endpoint: "http://" + srv.Endpoint},
		Store:     store,
	}
	if err := function.SetupWithManager(mgr, opts); err != nil {
		t.Fatal(err)
	}
	if err := service.SetupWithManager(mgr, opts); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller: %v", err)
		}
	})
	return w
}

func webApp(ns, name string) *slessv1alpha1.SlessService {
	return &slessv1alpha1.SlessService{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: slessv1alpha1.SlessServiceSpec{
			WorkloadSpec: slessv1alpha1.WorkloadSpec{
				Runtime:    slessv1alpha1.RuntimePython312,
				Entrypoint: "app.app",
				Source: slessv1alpha1.FunctionSource{Inline: &slessv1alpha1.InlineSource{Files: map[string]string{
					"app.py": "def app(environ, start_response):\n    start_response('200 OK', [])\n    return [b'hi']\n",
				}}},
			},
		},
	}
}

func (w *world) get(name string) *slessv1alpha1.SlessService {
	w.t.Helper()
	s := &slessv1alpha1.SlessService{}
	if err := w.kube.Client.Get(context.Background(), types.NamespacedName{Namespace: w.ns, Name: name}, s); err != nil {
		w.t.Fatalf("get SlessService %s: %v", name, err)
	}
	return s
}

func (w *world) eventually(what string, cond func() (bool, string)) {
	w.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		ok, msg := cond()
		if ok {
			return
		}
		last = msg
		time.Sleep(25 * time.Millisecond)
	}
	w.t.Fatalf("timed out waiting for %s; last: %s", what, last)
}

func describe(st *slessv1alpha1.FunctionStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "observed %d phase %s", st.ObservedGeneration, st.Phase)
	for _, c := range st.Conditions {
		fmt.Fprintf(&b, "; %s=%s %s %q", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

func (w *world) waitReady(name string) *slessv1alpha1.SlessService {
	w.t.Helper()
	var s *slessv1alpha1.SlessService
	w.eventually("SlessService "+name+" Ready", func() (bool, string) {
		s = w.get(name)
		return s.IsReady(), describe(&s.Status)
	})
	return s
}

// A SlessService goes source → build → Knative Service → Ready like a
// Function, with a service's own: a build context in service mode, one
// instance kept, its URL under /svc/, children owned and labelled as the
// service's. Its min-scale follows an edit, and deleting it removes its
// objects in storage.
func TestServiceBuildsAndServes(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	if err := w.kube.Client.Create(ctx, webApp(w.ns, "web")); err != nil {
		t.Fatal(err)
	}
	s := w.waitReady("web")
	if s.Status.Phase != slessv1alpha1.FunctionPhaseReady || !strings.Contains(s.Status.Image, "@sha256:") {
		t.Errorf("status: phase %s image %q", s.Status.Phase, s.Status.Image)
	}
	if want := testPublic + "/svc/" + w.ns + "/web/"; s.Status.URL != want {
		t.Errorf("url = %q, want %q", s.Status.URL, want)
	}
	if s.Status.LatestReadyRevision == "" || s.Status.Address == "" {
		t.Errorf("no revision or address: %+v", s.Status)
	}

	// The build: labelled as the service's and owned by it.
	runs := &tektonv1.PipelineRunList{}
	if err := w.kube.Client.List(ctx, runs, client.InNamespace(w.ns), client.MatchingLabels{resources.LabelService: "web"}); err != nil {
		t.Fatal(err)
	}
	if len(runs.Items) != 1 || !metav1.IsControlledBy(&runs.Items[0], s) || runs.Items[0].Name != s.Status.BuildRef {
		t.Fatalf("PipelineRuns of the service: %d, buildRef %s", len(runs.Items), s.Status.BuildRef)
	}

	// The build context is in service mode, under the service's prefix.
	rc, _, err := w.store.Get(ctx, names.WorkloadContextKey(s, s.Status.SourceDigest))
	if err != nil {
		t.Fatalf("build context: %v", err)
	}
	tgz, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	manifest := tarGzFile(t, tgz, runtimes.ManifestFile)
	if !strings.Contains(manifest, `"mode":"service"`) {
		t.Errorf("manifest %s is not in service mode", manifest)
	}

	// The Knative Service keeps one instance and is told its mode.
	ksvc := &servingv1.Service{}
	if err := w.kube.Client.Get(ctx, types.NamespacedName{Namespace: w.ns, Name: "web"}, ksvc); err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(ksvc, s) {
		t.Errorf("Knative Service owners: %+v", ksvc.OwnerReferences)
	}
	if got := ksvc.Spec.Template.Annotations[resources.AnnotationMinScale]; got != "1" {
		t.Errorf("min-scale = %q, want 1", got)
	}
	if got := *ksvc.Spec.Template.Spec.TimeoutSeconds; got != slessv1alpha1.DefaultServiceTimeoutSeconds {
		t.Errorf("timeoutSeconds = %d, want %d", got, slessv1alpha1.DefaultServiceTimeoutSeconds)
	}
	mode := ""
	for _, e := range ksvc.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "SLESS_MODE" {
			mode = e.Value
		}
	}
	if mode != slessv1alpha1.ModeService {
		t.Errorf("SLESS_MODE = %q", mode)
	}

	// An edit of the scale is a new revision with the new bounds.
	for i := 0; ; i++ {
		cur := w.get("web")
		cur.Spec.MinScale, cur.Spec.MaxScale = ptr.To[int32](2), ptr.To[int32](4)
		err := w.kube.Client.Update(ctx, cur)
		if err == nil {
			break
		}
		if !apierrors.IsConflict(err) || i > 20 {
			t.Fatal(err)
		}
	}
	w.eventually("min-scale 2", func() (bool, string) {
		s = w.get("web")
		if err := w.kube.Client.Get(ctx, types.NamespacedName{Namespace: w.ns, Name: "web"}, ksvc); err != nil {
			return false, err.Error()
		}
		a := ksvc.Spec.Template.Annotations
		return s.IsReady() && a[resources.AnnotationMinScale] == "2" && a[resources.AnnotationMaxScale] == "4",
			fmt.Sprintf("annotations %v; %s", a, describe(&s.Status))
	})

	// Deleted, it takes its build contexts with it.
	if err := w.kube.Client.Delete(ctx, s); err != nil {
		t.Fatal(err)
	}
	w.eventually("SlessService gone", func() (bool, string) {
		err := w.kube.Client.Get(ctx, client.ObjectKeyFromObject(s), &slessv1alpha1.SlessService{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	var left []string
	if err := w.store.List(ctx, names.WorkloadPrefix(s), func(o s3.Object) error {
		left = append(left, o.Key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("objects left under %s: %v", names.WorkloadPrefix(s), left)
	}
}

// A Function and a SlessService of one name in one namespace would both
// be served by the Knative Service of that name: the second is refused in
// its status, the first keeps serving, and the builds and stored objects
// of each are left alone by the other.
func TestServiceAndFunctionOfOneName(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	fn := &slessv1alpha1.Function{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "both"},
		Spec: slessv1alpha1.FunctionSpec{
			WorkloadSpec: slessv1alpha1.WorkloadSpec{
				Runtime:    slessv1alpha1.RuntimePython312,
				Entrypoint: "main.handler",
				Source: slessv1alpha1.FunctionSource{Inline: &slessv1alpha1.InlineSource{Files: map[string]string{
					"main.py": "def handler(event, context):\n    return 1\n"}}},
			},
		},
	}
	if err := w.kube.Client.Create(ctx, fn); err != nil {
		t.Fatal(err)
	}
	w.eventually("Function Ready", func() (bool, string) {
		if err := w.kube.Client.Get(ctx, client.ObjectKeyFromObject(fn), fn); err != nil {
			return false, err.Error()
		}
		return fn.IsReady(), describe(&fn.Status)
	})
	if err := w.kube.Client.Create(ctx, webApp(w.ns, "both")); err != nil {
		t.Fatal(err)
	}
	var s *slessv1alpha1.SlessService
	w.eventually("SlessService refused", func() (bool, string) {
		s = w.get("both")
		c := meta.FindStatusCondition(s.Status.Conditions, slessv1alpha1.FunctionConditionReady)
		return s.Status.Phase == slessv1alpha1.FunctionPhaseFailed && c != nil && c.Reason == "NotOwned", describe(&s.Status)
	})
	if !strings.Contains(meta.FindStatusCondition(s.Status.Conditions, slessv1alpha1.FunctionConditionReady).Message, `Knative Service "both"`) {
		t.Errorf("message does not name the Knative Service: %s", describe(&s.Status))
	}
	// The service's build succeeded on its own: a different digest (the
	// mode is in the context) and its own PipelineRun.
	if s.Status.BuildRef == "" || s.Status.BuildRef == fn.Status.BuildRef {
		t.Errorf("buildRefs: service %q, function %q", s.Status.BuildRef, fn.Status.BuildRef)
	}

	// Deleting the service leaves the function serving with its objects.
	if err := w.kube.Client.Delete(ctx, s); err != nil {
		t.Fatal(err)
	}
	w.eventually("SlessService gone", func() (bool, string) {
		err := w.kube.Client.Get(ctx, client.ObjectKeyFromObject(s), &slessv1alpha1.SlessService{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if err := w.kube.Client.Get(ctx, client.ObjectKeyFromObject(fn), fn); err != nil || !fn.IsReady() {
		t.Fatalf("the function after the service's deletion: %v %s", err, describe(&fn.Status))
	}
	if ok, err := w.store.Exists(ctx, names.WorkloadContextKey(fn, fn.Status.SourceDigest)); err != nil || !ok {
		t.Errorf("the function's build context is gone: %v %v", ok, err)
	}
	ksvc := &servingv1.Service{}
	if err := w.kube.Client.Get(ctx, client.ObjectKeyFromObject(fn), ksvc); err != nil || !metav1.IsControlledBy(ksvc, fn) {
		t.Errorf("the function's Knative Service: %v %+v", err, ksvc.OwnerReferences)
	}
}

// tarGzFile is the content of file name in a build context.
func tarGzFile(t *testing.T, tgz []byte, name string) string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s not in the build context: %v", name, err)
		}
		if h.Name == name {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
	}
}
