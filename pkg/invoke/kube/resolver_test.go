package kube_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	servingv1 "knative.dev/serving/pkg/apis/serving/v1"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/kube"
	"github.com/sless-dev/sless/test/testbed"
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	testbed.Main(m)
}

func startResolver(t *testing.T) (*kube.Resolver, *testbed.Kube) {
	t.Helper()
	k := testbed.SharedKube(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r, err := kube.Start(ctx, k.Config, k.Scheme, kube.Options{WatchRevisions: true, SyncTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return r, k
}

func newFunction(ns, name string) *slessv1alpha1.Function {
	return &slessv1alpha1.Function{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: slessv1alpha1.FunctionSpec{
			WorkloadSpec: slessv1alpha1.WorkloadSpec{
				Runtime:    "python3.12",
				Entrypoint: "main.handler",
				Source:     slessv1alpha1.FunctionSource{Inline: &slessv1alpha1.InlineSource{Files: map[string]string{"main.py": "def handler(e, c):\n    return 1\n"}}},
			},
		},
	}
}

// serve marks fn as the Function reconciler would once Knative serves it.
func serve(t *testing.T, c client.Client, fn *slessv1alpha1.Function, address, revision string) {
	t.Helper()
	fn.Status.ObservedGeneration = fn.Generation
	fn.Status.Address = address
	fn.Status.LatestReadyRevision = revision
	fn.Status.LatestCreatedRevision = revision
	fn.Status.MarkPrebuiltImage()
	fn.Status.MarkServiceReady()
	if err := c.Status().Update(context.Background(), fn); err != nil {
		t.Fatal(err)
	}
}

func trigger(ns, name, fn string, typ slessv1alpha1.TriggerType, enabled *bool) *slessv1alpha1.Trigger {
	tr := &slessv1alpha1.Trigger{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       slessv1alpha1.TriggerSpec{Function: fn, Type: typ, Enabled: enabled},
	}
	if typ == slessv1alpha1.TriggerTypeCron {
		tr.Spec.Schedule = "*/5 * * * *"
	}
	return tr
}

// eventually polls Resolve until check passes.
func eventually(t *testing.T, r *kube.Resolver, ns, name string, what string, check func(invoke.Target, error) bool) invoke.Target {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		tg, err := r.Resolve(context.Background(), ns, name)
		if check(tg, err) {
			return tg
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: last resolve %+v, %v", what, tg, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestResolverFollowsFunctionsAndTriggers(t *testing.T) {
	r, k := startResolver(t)
	ctx := context.Background()
	ns := k.Namespace(t)

	if _, err := r.Resolve(ctx, ns, "hello"); !errors.Is(err, invoke.ErrNotFound) {
		t.Fatalf("unknown function: %v", err)
	}
	fn := newFunction(ns, "hello")
	fn.Spec.TimeoutSeconds = ptr.To[int32](70)
	if err := k.Client.Create(ctx, fn); err != nil {
		t.Fatal(err)
	}
	tg := eventually(t, r, ns, "hello", "created", func(tg invoke.Target, err error) bool { return err == nil })
	if tg.Ready || tg.Address != nil || tg.Public || tg.Timeout != 70*time.Second {
		t.Fatalf("new function resolves to %+v", tg)
	}

	// Its build fails: not ready, and the proxy is told why.
	fn.Status.ObservedGeneration = fn.Generation
	fn.Status.MarkBuildFailed("BuildFailed", "step build exited 1")
	if err := k.Client.Status().Update(ctx, fn); err != nil {
		t.Fatal(err)
	}
	tg = eventually(t, r, ns, "hello", "failed", func(tg invoke.Target, err error) bool { return err == nil && tg.Failed != "" })
	if tg.Ready || tg.Failed != "BuildFailed" {
		t.Fatalf("failed function resolves to %+v", tg)
	}

	fn.Status.Phase = slessv1alpha1.FunctionPhaseReady
	serve(t, k.Client, fn, "http://hello."+ns+".svc.cluster.local", "hello-00001")
	tg = eventually(t, r, ns, "hello", "served", func(tg invoke.Target, err error) bool { return err == nil && tg.Ready })
	if tg.Address.String() != "http://hello."+ns+".svc.cluster.local" || tg.Revision != "hello-00001" || tg.Public {
		t.Fatalf("served function resolves to %+v", tg)
	}

	// A new generation rolling out: Ready is for an older generation, but
	// the last ready revision still serves.
	fn.Spec.MemoryMB = ptr.To[int32](256)
	if err := k.Client.Update(ctx, fn); err != nil {
		t.Fatal(err)
	}
	tg = eventually(t, r, ns, "hello", "rolling out", func(tg invoke.Target, err error) bool { return err == nil })
	if !tg.Ready {
		t.Fatalf("a function whose previous revision serves resolves as not ready: %+v", tg)
	}

	// Triggers: only enabled http ones make it public.
	cron := trigger(ns, "nightly", "hello", slessv1alpha1.TriggerTypeCron, nil)
	if err := k.Client.Create(ctx, cron); err != nil {
		t.Fatal(err)
	}
	web := trigger(ns, "web", "hello", slessv1alpha1.TriggerTypeHTTP, nil)
	if err := k.Client.Create(ctx, web); err != nil {
		t.Fatal(err)
	}
	eventually(t, r, ns, "hello", "public", func(tg invoke.Target, err error) bool { return err == nil && tg.Public })
	web2 := trigger(ns, "web2", "hello", slessv1alpha1.TriggerTypeHTTP, ptr.To(true))
	if err := k.Client.Create(ctx, web2); err != nil {
		t.Fatal(err)
	}
	web.Spec.Enabled = ptr.To(false)
	if err := k.Client.Update(ctx, web); err != nil {
		t.Fatal(err)
	}
	// One enabled http trigger is left: still public. Wait for the
	// disabling to be seen, then delete the other.
	if err := k.Client.Delete(ctx, web2); err != nil {
		t.Fatal(err)
	}
	eventually(t, r, ns, "hello", "private again", func(tg invoke.Target, err error) bool { return err == nil && !tg.Public })
	web.Spec.Enabled = ptr.To(true)
	if err := k.Client.Update(ctx, web); err != nil {
		t.Fatal(err)
	}
	eventually(t, r, ns, "hello", "public again", func(tg invoke.Target, err error) bool { return err == nil && tg.Public })

	// The same names in another namespace are another function.
	if _, err := r.Resolve(ctx, k.Namespace(t), "hello"); !errors.Is(err, invoke.ErrNotFound) {
		t.Fatalf("other namespace: %v", err)
	}

	// Idle: the serving revision reports no replicas.
	rev := &servingv1.Revision{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hello-00001"},
		Spec:       servingv1.RevisionSpec{PodSpec: corev1.PodSpec{Containers: []corev1.Container{{Image: "registry.example/hello@sha256:" + fmt.Sprintf("%064d", 1)}}}},
	}
	if err := k.Client.Create(ctx, rev); err != nil {
		t.Fatal(err)
	}
	rev.Status.ActualReplicas = ptr.To[int32](0)
	if err := k.Client.Status().Update(ctx, rev); err != nil {
		t.Fatal(err)
	}
	eventually(t, r, ns, "hello", "idle", func(tg invoke.Target, err error) bool { return err == nil && tg.Idle })
	rev.Status.ActualReplicas = ptr.To[int32](2)
	if err := k.Client.Status().Update(ctx, rev); err != nil {
		t.Fatal(err)
	}
	eventually(t, r, ns, "hello", "warm", func(tg invoke.Target, err error) bool { return err == nil && !tg.Idle })

	if err := k.Client.Delete(ctx, fn); err != nil {
		t.Fatal(err)
	}
	eventually(t, r, ns, "hello", "deleted", func(tg invoke.Target, err error) bool { return errors.Is(err, invoke.ErrNotFound) })
}

// The policy end to end on the cluster path: the proxy over the informer
// resolver, a disabled trigger closing the public route.
func TestProxyOverResolverAppliesTriggers(t *testing.T) {
	r, k := startResolver(t)
	ctx := context.Background()
	ns := k.Namespace(t)
	fnSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { io.WriteString(w, "from the function") }))
	t.Cleanup(fnSrv.Close)
	fn := newFunction(ns, "api")
	if err := k.Client.Create(ctx, fn); err != nil {
		t.Fatal(err)
	}
	serve(t, k.Client, fn, fnSrv.URL, "api-00001")
	proxy, err := invoke.NewProxy(invoke.Options{Resolver: r, Authenticator: invoke.AuthenticatorFunc(func(req *http.Request) (invoke.Identity, error) {
		if req.Header.Get("Authorization") == "Bearer "+ns {
			return invoke.Identity{Subject: "tenant", Namespace: ns}, nil
		}
		return invoke.Identity{}, errors.New("no valid token")
	})})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)
	status := func(token string) int {
		req, _ := http.NewRequest("GET", front.URL+"/fn/"+ns+"/api/x", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	waitStatus := func(what, token string, want int) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			got := status(token)
			if got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: status %d, want %d", what, got, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitStatus("private, no token", "", 401)
	waitStatus("private, tenant token", ns, 200)
	tr := trigger(ns, "public", "api", slessv1alpha1.TriggerTypeHTTP, nil)
	if err := k.Client.Create(ctx, tr); err != nil {
		t.Fatal(err)
	}
	waitStatus("public trigger", "", 200)
	tr.Spec.Enabled = ptr.To(false)
	if err := k.Client.Update(ctx, tr); err != nil {
		t.Fatal(err)
	}
	waitStatus("disabled trigger", "", 401)
	waitStatus("disabled trigger, tenant token", ns, 200)
}

// TargetOf tells a failure apart from a function on its way, and never
// answers a failure while a revision serves.
func TestTargetOfFailedFunctions(t *testing.T) {
	failed := func(gen, observed int64, revision string) *slessv1alpha1.Function {
		fn := newFunction("ns", "f")
		fn.Generation = gen
		fn.Status.ObservedGeneration = observed
		fn.Status.Phase = slessv1alpha1.FunctionPhaseFailed
		fn.Status.Address = "http://f.ns.svc.cluster.local"
		fn.Status.LatestReadyRevision = revision
		fn.Status.Conditions = []metav1.Condition{{Type: slessv1alpha1.FunctionConditionReady, Status: metav1.ConditionFalse,
			Reason: "ServiceRejected", Message: "admission webhook said no", ObservedGeneration: observed}}
		return fn
	}
	for _, tc := range []struct {
		name   string
		fn     *slessv1alpha1.Function
		ready  bool
		failed string
	}{
		{"failed, nothing serves", failed(2, 2, ""), false, "ServiceRejected"},
		{"failed, an older revision serves", failed(2, 2, "f-00001"), true, ""},
		{"failed generation replaced by a newer spec", failed(3, 2, ""), false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg, ok := kube.TargetOf(tc.fn)
			if !ok || tg.Ready != tc.ready || tg.Failed != tc.failed {
				t.Fatalf("TargetOf = %+v, %v; want ready %v, failed %q", tg, ok, tc.ready, tc.failed)
			}
		})
	}
}
