package function_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
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
	"github.com/sless-dev/sless/pkg/reconciler/function"
	"github.com/sless-dev/sless/test/testbed"
)

func TestMain(m *testing.M) {
	// controller-runtime warns on stderr when no logger is set.
	ctrllog.SetLogger(logr.Discard())
	testbed.Main(m)
}

const (
	testRegistry = "registry.test.local/sless"
	testPublic   = "https://fn.test.local"
)

// world is one test's namespace with the simulators, a bucket and the
// means to start controllers on it.
type world struct {
	t       *testing.T
	kube    *testbed.Kube
	ns      string
	tekton  *testbed.TektonSim
	knative *testbed.KnativeSim
	store   *s3.Client
	bucket  string
	s3srv   *testbed.S3Server
	// recorder is the running controller's; set by startController.
	recorder *countingRecorder
	// configure, when set, changes the controller's resources.Config, as
	// an operator changes its settings.
	configure func(*resources.Config)
}

// countingRecorder is the manager's real recorder with a count of the
// Events handed to it: a reconcile's Events are handed over before the
// reconcile ends, so a test can tell that one recorded nothing without
// waiting for an apiserver write that should never come.
type countingRecorder struct {
	events.EventRecorder
	n atomic.Int64
}

func (c *countingRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	c.n.Add(1)
	c.EventRecorder.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

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
	return &world{t: t, kube: k, ns: k.Namespace(t), tekton: testbed.SharedTekton(t), knative: testbed.SharedKnative(t),
		store: store, bucket: bucket, s3srv: srv}
}

func (w *world) resourcesConfig() resources.Config {
	c := resources.Config{
		Registry:       testRegistry,
		RegistrySecret: "registry-push",
		S3Endpoint:     "http://" + w.s3srv.Endpoint,
		S3Secret:       "sless-s3",
	}
	if w.configure != nil {
		w.configure(&c)
	}
	return c
}

// startController runs a Function controller whose cache sees only the
// test's namespace, and returns a function that stops it.
func (w *world) startController() (stop func()) {
	w.t.Helper()
	mgr, err := ctrl.NewManager(w.kube.Config, ctrl.Options{
		Scheme:                 w.kube.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{w.ns: {}}, ByObject: function.CacheByObject()},
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		w.t.Fatal(err)
	}
	w.recorder = &countingRecorder{EventRecorder: mgr.GetEventRecorder(function.RecorderName)}
	err = function.SetupWithManager(mgr, function.Options{
		Config:                  function.Config{PublicBaseURL: testPublic},
		Resources:               w.resourcesConfig(),
		Store:                   w.store,
		MaxConcurrentReconciles: 2,
		Recorder:                w.recorder,
	})
	if err != nil {
		w.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			w.t.Errorf("controller: %v", err)
		}
	}
	w.t.Cleanup(stop)
	return stop
}

func pythonFunction(ns, name, body string) *slessv1alpha1.Function {
	return &slessv1alpha1.Function{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: slessv1alpha1.FunctionSpec{
			WorkloadSpec: slessv1alpha1.WorkloadSpec{
				Runtime:    slessv1alpha1.RuntimePython312,
				Entrypoint: "main.handler",
				Source: slessv1alpha1.FunctionSource{Inline: &slessv1alpha1.InlineSource{Files: map[string]string{
					"main.py": "def handler(event, context):\n    return " + body + "\n",
				}}},
			},
		},
	}
}

func (w *world) create(obj client.Object) {
	w.t.Helper()
	if err := w.kube.Client.Create(context.Background(), obj); err != nil {
		w.t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

func (w *world) fn(name string) *slessv1alpha1.Function {
	w.t.Helper()
	fn := &slessv1alpha1.Function{}
	if err := w.kube.Client.Get(context.Background(), types.NamespacedName{Namespace: w.ns, Name: name}, fn); err != nil {
		w.t.Fatalf("get Function %s: %v", name, err)
	}
	return fn
}

// update changes a Function with retries on conflict (the controller
// writes its status meanwhile).
func (w *world) update(name string, mutate func(*slessv1alpha1.Function)) {
	w.t.Helper()
	for i := 0; ; i++ {
		fn := w.fn(name)
		mutate(fn)
		err := w.kube.Client.Update(context.Background(), fn)
		if err == nil {
			return
		}
		if i > 20 {
			w.t.Fatalf("update Function %s: %v", name, err)
		}
	}
}

func (w *world) pipelineRuns(fnName string) []tektonv1.PipelineRun {
	w.t.Helper()
	l := &tektonv1.PipelineRunList{}
	if err := w.kube.Client.List(context.Background(), l, client.InNamespace(w.ns), client.MatchingLabels{resources.LabelFunction: fnName}); err != nil {
		w.t.Fatal(err)
	}
	return l.Items
}

func (w *world) service(name string) (*servingv1.Service, error) {
	svc := &servingv1.Service{}
	err := w.kube.Client.Get(context.Background(), types.NamespacedName{Namespace: w.ns, Name: name}, svc)
	return svc, err
}

// eventually polls cond until it holds or 60 s pass, then fails with the
// last thing cond said.
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

func (w *world) waitPhase(name string, phase slessv1alpha1.FunctionPhase) *slessv1alpha1.Function {
	w.t.Helper()
	var fn *slessv1alpha1.Function
	w.eventually(fmt.Sprintf("Function %s %s", name, phase), func() (bool, string) {
		fn = w.fn(name)
		return fn.Status.ObservedGeneration == fn.Generation && fn.Status.Phase == phase, describe(fn)
	})
	return fn
}

func (w *world) waitReady(name string) *slessv1alpha1.Function {
	w.t.Helper()
	var fn *slessv1alpha1.Function
	w.eventually("Function "+name+" Ready", func() (bool, string) {
		fn = w.fn(name)
		return fn.IsReady(), describe(fn)
	})
	return fn
}

func describe(fn *slessv1alpha1.Function) string {
	var b strings.Builder
	fmt.Fprintf(&b, "gen %d observed %d phase %s", fn.Generation, fn.Status.ObservedGeneration, fn.Status.Phase)
	for _, c := range fn.Status.Conditions {
		fmt.Fprintf(&b, "; %s=%s %s %q", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

func condition(fn *slessv1alpha1.Function, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(fn.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func param(pr *tektonv1.PipelineRun, name string) string {
	for _, p := range pr.Spec.Params {
		if p.Name == name {
			return p.Value.StringVal
		}
	}
	return ""
}

func result(pr *tektonv1.PipelineRun, name string) string {
	for _, r := range pr.Status.Results {
		if r.Name == name {
			return r.Value.StringVal
		}
	}
	return ""
}
