package trigger_test

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"knative.dev/serving/pkg/apis/serving"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"

	"github.com/sless-dev/sless/pkg/adapter/knative"
	"github.com/sless-dev/sless/pkg/adapter/kube"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/auth/triggertoken"
	"github.com/sless-dev/sless/pkg/reconciler/trigger"
	"github.com/sless-dev/sless/test/testbed"
)

func TestMain(m *testing.M) { testbed.Main(m) }

var secret = []byte("0123456789abcdef0123456789abcdef-trigger-tests")

type env struct {
	t     *testing.T
	c     client.Client
	ns    string
	clock *clocktesting.FakeClock
	r     *trigger.Reconciler
	kube  *kube.Carrier
	toks  *triggertoken.HS256
}

// setup gives a fresh namespace and a Reconciler on an injectable clock;
// tests call Reconcile themselves, as the controller's queue would, so every
// step happens at a time the test chose.
func setup(t *testing.T, now time.Time) *env {
	t.Helper()
	tb := testbed.SharedKube(t)
	clk := clocktesting.NewFakeClock(now)
	toks := &triggertoken.HS256{Secret: secret, Clock: clk}
	e := &env{t: t, c: tb.Client, ns: tb.Namespace(t), clock: clk, toks: toks}
	e.kube = &kube.Carrier{
		Client:    tb.Client,
		Config:    kube.TriggerConfig{Image: "ghcr.io/sless-dev/sless@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", InvokeURL: "http://sless-api.sless-system.svc"},
		PublicURL: "https://fn.example.com",
		Tokens:    toks,
		MinScale:  &knative.MinScale{Client: tb.Client},
		Clock:     clk,
	}
	e.r = &trigger.Reconciler{Client: tb.Client, Carrier: e.kube, Clock: clk}
	return e
}

func (e *env) function(name string) *slessv1alpha1.Function {
	e.t.Helper()
	fn := &slessv1alpha1.Function{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: slessv1alpha1.FunctionSpec{
			WorkloadSpec: slessv1alpha1.WorkloadSpec{
				Runtime:    "python3.12",
				Entrypoint: "main.handler",
				Source:     slessv1alpha1.FunctionSource{Inline: &slessv1alpha1.InlineSource{Files: map[string]string{"main.py": "def handler(e, c): return e"}}},
			},
			TimeoutSeconds: ptr.To[int32](45),
		},
	}
	if err := e.c.Create(context.Background(), fn); err != nil {
		e.t.Fatal(err)
	}
	return fn
}

// service plays the Function reconciler's Knative Service of the function.
func (e *env) service(name string, minScale string) {
	e.t.Helper()
	ksvc := &servingv1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}}
	ksvc.Spec.Template.Name = name + "-00001"
	ksvc.Spec.Template.Annotations = map[string]string{"autoscaling.knative.dev/max-scale": "5"}
	if minScale != "" {
		ksvc.Spec.Template.Annotations["autoscaling.knative.dev/min-scale"] = minScale
	}
	ksvc.Spec.Template.Spec.Containers = []corev1.Container{{Image: "registry.example.com/team/f@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}}
	if err := e.c.Create(context.Background(), ksvc); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) minScale(name string) (value string, set bool, ann map[string]string) {
	e.t.Helper()
	ksvc := &servingv1.Service{}
	if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: e.ns, Name: name}, ksvc); err != nil {
		e.t.Fatal(err)
	}
	v, ok := ksvc.Spec.Template.Annotations["autoscaling.knative.dev/min-scale"]
	// A changed template needs a new revision name (Knative's rule): held
	// while min-scale was raised from below 1, plain otherwise.
	wantRev := name + "-00001"
	if _, held := ksvc.Annotations["sless.dev/prewarm-saved-min-scale"]; held && ksvc.Annotations["sless.dev/prewarm-saved-min-scale"] != "3" {
		wantRev += "-warm"
	}
	if ksvc.Spec.Template.Name != wantRev {
		e.t.Errorf("template revision name %q, want %q", ksvc.Spec.Template.Name, wantRev)
	}
	if ksvc.Spec.Template.Annotations["autoscaling.knative.dev/max-scale"] != "5" {
		e.t.Errorf("the pre-warm lost the template's other annotations: %v", ksvc.Spec.Template.Annotations)
	}
	// Knative's webhook adds the creator and last modifier; the tests
	// count the pre-warm's own annotations.
	ann = map[string]string{}
	for key, val := range ksvc.Annotations {
		if !strings.HasPrefix(key, serving.GroupName+"/") {
			ann[key] = val
		}
	}
	return v, ok, ann
}

func (e *env) create(tr *slessv1alpha1.Trigger) {
	e.t.Helper()
	tr.Namespace = e.ns
	if err := e.c.Create(context.Background(), tr); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) reconcile(name string) reconcile.Result {
	e.t.Helper()
	res, err := e.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: e.ns, Name: name}})
	if err != nil {
		e.t.Fatalf("reconcile %s: %v", name, err)
	}
	return res
}

func (e *env) get(name string) *slessv1alpha1.Trigger {
	e.t.Helper()
	tr := &slessv1alpha1.Trigger{}
	if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: e.ns, Name: name}, tr); err != nil {
		e.t.Fatal(err)
	}
	return tr
}

func (e *env) update(name string, mut func(*slessv1alpha1.Trigger)) {
	e.t.Helper()
	tr := e.get(name)
	mut(tr)
	if err := e.c.Update(context.Background(), tr); err != nil {
		e.t.Fatal(err)
	}
}

// awaitReady reconciles name until its Ready condition satisfies ok, as
// the Deployment's status events would bring the controller back.
func (e *env) awaitReady(name, what string, ok func(metav1.Condition) bool) metav1.Condition {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		e.reconcile(name)
		c := ready(e.get(name))
		if ok(c) {
			return c
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s: Ready %s %s: %s", what, c.Status, c.Reason, c.Message)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ready(tr *slessv1alpha1.Trigger) metav1.Condition {
	if c := meta.FindStatusCondition(tr.Status.Conditions, "Ready"); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func TestCronTriggerCronJob(t *testing.T) {
	e := setup(t, time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	ctx := context.Background()
	e.function("report")
	e.create(&slessv1alpha1.Trigger{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly"},
		Spec: slessv1alpha1.TriggerSpec{
			Function: "report", Type: slessv1alpha1.TriggerTypeCron, Schedule: "30 2 * * *", TimeZone: "Europe/Berlin",
			Payload: &apiextensionsv1.JSON{Raw: []byte(`{"kind": "daily"}`)},
		},
	})
	e.reconcile("nightly")
	tr := e.get("nightly")

	cj := &batchv1.CronJob{}
	if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "nightly"}, cj); err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(cj, tr) {
		t.Errorf("CronJob owner references %+v do not name the Trigger as controller", cj.OwnerReferences)
	}
	s := cj.Spec
	if s.Schedule != "30 2 * * *" || ptr.Deref(s.TimeZone, "") != "Europe/Berlin" || s.ConcurrencyPolicy != batchv1.ForbidConcurrent ||
		ptr.Deref(s.StartingDeadlineSeconds, 0) != slessv1alpha1.DefaultStartingDeadlineSeconds || ptr.Deref(s.Suspend, true) ||
		ptr.Deref(s.SuccessfulJobsHistoryLimit, 0) != 3 || ptr.Deref(s.FailedJobsHistoryLimit, 0) != 3 {
		t.Errorf("CronJob spec: schedule %q tz %v policy %s deadline %v suspend %v history %v/%v",
			s.Schedule, s.TimeZone, s.ConcurrencyPolicy, s.StartingDeadlineSeconds, s.Suspend, s.SuccessfulJobsHistoryLimit, s.FailedJobsHistoryLimit)
	}
	c := s.JobTemplate.Spec.Template.Spec.Containers[0]
	wantArgs := []string{"cron-call", "--url=http://sless-api.sless-system.svc/fn/" + e.ns + "/report", "--trigger=cron", "--timeout=105s"}
	if strings.Join(c.Args, " ") != strings.Join(wantArgs, " ") {
		t.Errorf("args %q, want %q", c.Args, wantArgs)
	}
	if c.Image != e.kube.Config.Image {
		t.Errorf("image %q", c.Image)
	}
	var tokenRef *corev1.SecretKeySelector
	payload := ""
	for _, ev := range c.Env {
		switch ev.Name {
		case kube.EnvToken:
			tokenRef = ev.ValueFrom.SecretKeyRef
		case kube.EnvPayload:
			payload = ev.Value
		}
	}
	if payload != `{"kind":"daily"}` {
		t.Errorf("payload env %q", payload)
	}
	if tokenRef == nil || tokenRef.Name != "nightly-trigger-token" || tokenRef.Key != "token" {
		t.Fatalf("token env from %+v", tokenRef)
	}

	// The credential: owned, and a token the proxy accepts for this trigger.
	sec := &corev1.Secret{}
	if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: tokenRef.Name}, sec); err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(sec, tr) {
		t.Errorf("Secret not owned by the Trigger")
	}
	claims, err := e.toks.VerifyTriggerToken(string(sec.Data["token"]))
	if err != nil {
		t.Fatal(err)
	}
	if claims.Namespace != e.ns || claims.Trigger != "nightly" || claims.Type != "cron" || claims.Function != "report" || claims.UID != string(tr.UID) {
		t.Errorf("token claims %+v", claims)
	}

	// Status: Ready, next run at 02:30 Berlin (01:30 UTC) tomorrow.
	if c := ready(tr); c.Status != metav1.ConditionTrue || c.Reason != slessv1alpha1.TriggerReasonScheduled {
		t.Errorf("Ready %+v", c)
	}
	if want := time.Date(2026, 12, 3, 1, 30, 0, 0, time.UTC); tr.Status.NextScheduleTime == nil || !tr.Status.NextScheduleTime.Time.Equal(want) {
		t.Errorf("nextScheduleTime %v, want %v", tr.Status.NextScheduleTime, want)
	}

	// Reconciling again changes nothing: no update of the CronJob or the token.
	rv, srv := cj.ResourceVersion, sec.ResourceVersion
	e.reconcile("nightly")
	_ = e.c.Get(ctx, client.ObjectKeyFromObject(cj), cj)
	_ = e.c.Get(ctx, client.ObjectKeyFromObject(sec), sec)
	if cj.ResourceVersion != rv || sec.ResourceVersion != srv {
		t.Errorf("an unchanged trigger rewrote its children (CronJob %s→%s, Secret %s→%s)", rv, cj.ResourceVersion, srv, sec.ResourceVersion)
	}

	// Disabled: the CronJob is suspended, not deleted.
	e.update("nightly", func(tr *slessv1alpha1.Trigger) { tr.Spec.Enabled = ptr.To(false) })
	e.reconcile("nightly")
	if err := e.c.Get(ctx, client.ObjectKeyFromObject(cj), cj); err != nil {
		t.Fatal(err)
	}
	if !ptr.Deref(cj.Spec.Suspend, false) {
		t.Errorf("disabled trigger: CronJob not suspended")
	}
	tr = e.get("nightly")
	if c := ready(tr); c.Status != metav1.ConditionFalse || c.Reason != slessv1alpha1.TriggerReasonDisabled || tr.Status.NextScheduleTime != nil {
		t.Errorf("disabled: Ready %+v next %v", c, tr.Status.NextScheduleTime)
	}
	// Enabled again: resumed.
	e.update("nightly", func(tr *slessv1alpha1.Trigger) { tr.Spec.Enabled = ptr.To(true) })
	e.reconcile("nightly")
	_ = e.c.Get(ctx, client.ObjectKeyFromObject(cj), cj)
	if ptr.Deref(cj.Spec.Suspend, true) {
		t.Errorf("re-enabled trigger: CronJob still suspended")
	}

	// A changed schedule and payload reach the CronJob; a removed payload too.
	e.update("nightly", func(tr *slessv1alpha1.Trigger) {
		tr.Spec.Schedule = "*/15 * * * *"
		tr.Spec.Payload = nil
		tr.Spec.ConcurrencyPolicy = slessv1alpha1.ConcurrencyReplace
	})
	e.reconcile("nightly")
	_ = e.c.Get(ctx, client.ObjectKeyFromObject(cj), cj)
	if cj.Spec.Schedule != "*/15 * * * *" || cj.Spec.ConcurrencyPolicy != batchv1.ReplaceConcurrent {
		t.Errorf("CronJob not updated: %q %s", cj.Spec.Schedule, cj.Spec.ConcurrencyPolicy)
	}
	for _, ev := range cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Env {
		if ev.Name == kube.EnvPayload {
			t.Errorf("removed payload still in the CronJob: %q", ev.Value)
		}
	}

	// The type changes to http: CronJob and credential go.
	e.update("nightly", func(tr *slessv1alpha1.Trigger) {
		tr.Spec.Type = slessv1alpha1.TriggerTypeHTTP
		tr.Spec.Schedule, tr.Spec.TimeZone, tr.Spec.ConcurrencyPolicy = "", "", ""
	})
	e.reconcile("nightly")
	if err := e.c.Get(ctx, client.ObjectKeyFromObject(cj), &batchv1.CronJob{}); !apierrors.IsNotFound(err) {
		t.Errorf("CronJob of a trigger that is now http: %v", err)
	}
	if err := e.c.Get(ctx, client.ObjectKeyFromObject(sec), &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("credential of a trigger that is now http: %v", err)
	}
}

// A CronJob an older controller wrote runs `sless invoke --url=…` (which
// the binary still accepts); the next reconcile rewrites it to cron-call.
func TestCronJobOfAnOlderControllerIsRewritten(t *testing.T) {
	e := setup(t, time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	ctx := context.Background()
	e.function("report")
	e.create(&slessv1alpha1.Trigger{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly"},
		Spec:       slessv1alpha1.TriggerSpec{Function: "report", Type: slessv1alpha1.TriggerTypeCron, Schedule: "@daily"},
	})
	e.reconcile("nightly")
	key := types.NamespacedName{Namespace: e.ns, Name: "nightly"}
	cj := &batchv1.CronJob{}
	if err := e.c.Get(ctx, key, cj); err != nil {
		t.Fatal(err)
	}
	cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args[0] = "invoke"
	cj.Annotations[kube.SpecHashAnnotation] = "hash-of-an-older-controller"
	if err := e.c.Update(ctx, cj); err != nil {
		t.Fatal(err)
	}
	e.reconcile("nightly")
	if err := e.c.Get(ctx, key, cj); err != nil {
		t.Fatal(err)
	}
	if args := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args; args[0] != "cron-call" {
		t.Fatalf("after a reconcile the CronJob runs %q, want cron-call", args)
	}
}

func TestHTTPTrigger(t *testing.T) {
	e := setup(t, time.Now())
	e.create(&slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: slessv1alpha1.TriggerSpec{Function: "site", Type: slessv1alpha1.TriggerTypeHTTP}})
	e.reconcile("web")
	tr := e.get("web")
	if c := ready(tr); c.Reason != slessv1alpha1.TriggerReasonFunctionNotFound || tr.Status.URL != "" {
		t.Errorf("missing function: Ready %+v url %q", c, tr.Status.URL)
	}
	e.function("site")
	e.reconcile("web")
	tr = e.get("web")
	if c := ready(tr); c.Status != metav1.ConditionTrue || tr.Status.URL != "https://fn.example.com/fn/"+e.ns+"/site" {
		t.Errorf("public: Ready %+v url %q", c, tr.Status.URL)
	}
	e.update("web", func(tr *slessv1alpha1.Trigger) { tr.Spec.Enabled = ptr.To(false) })
	e.reconcile("web")
	tr = e.get("web")
	if c := ready(tr); c.Reason != slessv1alpha1.TriggerReasonDisabled || tr.Status.URL != "" {
		t.Errorf("disabled: Ready %+v url %q", c, tr.Status.URL)
	}
	if tr.Status.ObservedGeneration != tr.Generation {
		t.Errorf("observedGeneration %d, generation %d", tr.Status.ObservedGeneration, tr.Generation)
	}
}

func TestQueueTriggerDeployment(t *testing.T) {
	e := setup(t, time.Now())
	ctx := context.Background()
	sim := testbed.SharedDeployments(t)
	sim.Manage(e.ns)
	// The consumer cannot reach its broker until the test says it can.
	sim.SetReady(e.ns, "orders-consumer", false)
	e.function("worker")
	e.create(&slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Name: "orders"}, Spec: slessv1alpha1.TriggerSpec{
		Function: "worker", Type: slessv1alpha1.TriggerTypeQueue,
		Queue: &slessv1alpha1.QueueSpec{ConnectionSecret: "rabbit", Queue: "orders", Delivery: slessv1alpha1.Delivery{MaxRetries: ptr.To[int32](5)}},
	}})
	res := e.reconcile("orders")
	tr := e.get("orders")
	if c := ready(tr); c.Reason != slessv1alpha1.TriggerReasonConnectionSecretNotFound || res.RequeueAfter <= 0 || res.RequeueAfter > time.Minute {
		t.Errorf("missing connection Secret: Ready %+v, requeue after %v", c, res.RequeueAfter)
	}
	d := &appsv1.Deployment{}
	if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "orders-consumer"}, d); err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(d, tr) || ptr.Deref(d.Spec.Replicas, 0) != 1 {
		t.Errorf("Deployment owner %v replicas %v", d.OwnerReferences, d.Spec.Replicas)
	}
	args := strings.Join(d.Spec.Template.Spec.Containers[0].Args, " ")
	for _, want := range []string{"consume", "--queue=orders", "--dead-letter-queue=orders.dlq", "--max-retries=5", "--prefetch=10", "--concurrency=1", "--backoff=1s"} {
		if !strings.Contains(args, want) {
			t.Errorf("consumer args %q lack %q", args, want)
		}
	}
	if err := e.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "rabbit", Namespace: e.ns}, StringData: map[string]string{"url": "amqp://guest:guest@rabbit:5672/"}}); err != nil {
		t.Fatal(err)
	}
	e.awaitReady("orders", "no ready consumer", func(c metav1.Condition) bool {
		return c.Status != metav1.ConditionTrue && c.Reason == slessv1alpha1.TriggerReasonConsumerNotAvailable && strings.Contains(c.Message, "0 of 1 replicas")
	})
	sim.SetReady(e.ns, "orders-consumer", true)
	e.awaitReady("orders", "consuming", func(c metav1.Condition) bool {
		return c.Status == metav1.ConditionTrue && c.Reason == slessv1alpha1.TriggerReasonConsuming
	})
	// Disabled: scaled to zero, kept.
	e.update("orders", func(tr *slessv1alpha1.Trigger) { tr.Spec.Enabled = ptr.To(false) })
	e.reconcile("orders")
	_ = e.c.Get(ctx, client.ObjectKeyFromObject(d), d)
	if ptr.Deref(d.Spec.Replicas, -1) != 0 {
		t.Errorf("disabled queue trigger: replicas %v", d.Spec.Replicas)
	}
	if c := ready(e.get("orders")); c.Reason != slessv1alpha1.TriggerReasonDisabled {
		t.Errorf("disabled: Ready %+v", c)
	}
}

func TestTriggerRefusesForeignChildren(t *testing.T) {
	e := setup(t, time.Now())
	ctx := context.Background()
	e.function("report")
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "x-trigger-token", Namespace: e.ns}, StringData: map[string]string{"token": "mine"}}
	if err := e.c.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	e.create(&slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: slessv1alpha1.TriggerSpec{Function: "report", Type: slessv1alpha1.TriggerTypeCron, Schedule: "@hourly"}})
	_, err := e.r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: e.ns, Name: "x"}})
	if err == nil {
		t.Fatal("reconcile took over a Secret it does not own")
	}
	if c := ready(e.get("x")); c.Reason != slessv1alpha1.TriggerReasonConflict {
		t.Errorf("Ready %+v, want Conflict", c)
	}
	_ = e.c.Get(ctx, client.ObjectKeyFromObject(foreign), foreign)
	if string(foreign.Data["token"]) != "mine" {
		t.Errorf("foreign Secret overwritten")
	}
}

func TestCredentialFollowsTypeAndFunction(t *testing.T) {
	e := setup(t, time.Now())
	ctx := context.Background()
	e.function("a")
	e.function("b")
	e.create(&slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Name: "t"}, Spec: slessv1alpha1.TriggerSpec{Function: "a", Type: slessv1alpha1.TriggerTypeCron, Schedule: "@hourly"}})
	claims := func() triggertoken.Claims {
		t.Helper()
		e.reconcile("t")
		s := &corev1.Secret{}
		if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "t-trigger-token"}, s); err != nil {
			t.Fatal(err)
		}
		c, err := e.toks.VerifyTriggerToken(string(s.Data["token"]))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if c := claims(); c.Type != "cron" || c.Function != "a" {
		t.Fatalf("claims %+v", c)
	}
	e.update("t", func(tr *slessv1alpha1.Trigger) {
		tr.Spec.Type, tr.Spec.Schedule = slessv1alpha1.TriggerTypeQueue, ""
		tr.Spec.Queue = &slessv1alpha1.QueueSpec{ConnectionSecret: "rabbit", Queue: "q"}
	})
	if c := claims(); c.Type != "queue" || c.Function != "a" {
		t.Errorf("after the type changed: claims %+v", c)
	}
	e.update("t", func(tr *slessv1alpha1.Trigger) { tr.Spec.Function = "b" })
	if c := claims(); c.Type != "queue" || c.Function != "b" {
		t.Errorf("after the function changed: claims %+v", c)
	}
	if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "t"}, &batchv1.CronJob{}); !apierrors.IsNotFound(err) {
		t.Errorf("the cron trigger's CronJob outlived its type: %v", err)
	}
	// Renewal: a token with a quarter of its life left is replaced.
	e.clock.Step(triggertoken.DefaultLifetime*3/4 + time.Minute)
	claims()
	s := &corev1.Secret{}
	_ = e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "t-trigger-token"}, s)
	exp, err := time.Parse(time.RFC3339, s.Annotations[kube.ExpiresAnnotation])
	if err != nil || exp.Sub(e.clock.Now()) < triggertoken.DefaultLifetime-time.Minute {
		t.Errorf("token not renewed: expires %v (%v), now %v", exp, err, e.clock.Now())
	}
}

// A trigger whose Function is deleted keeps its children but stops calling
// (CronJob suspended, consumer scaled to zero, no writes while it stays
// missing), and works again when a Function of that name is created.
func TestTriggerPausedWhileFunctionMissing(t *testing.T) {
	for _, tc := range []struct {
		name    string
		spec    slessv1alpha1.TriggerSpec
		child   client.Object
		calling func(client.Object) bool
	}{
		{
			name:  "cron",
			spec:  slessv1alpha1.TriggerSpec{Type: slessv1alpha1.TriggerTypeCron, Schedule: "*/5 * * * *"},
			child: &batchv1.CronJob{},
			calling: func(o client.Object) bool {
				return !ptr.Deref(o.(*batchv1.CronJob).Spec.Suspend, false)
			},
		},
		{
			name:  "queue",
			spec:  slessv1alpha1.TriggerSpec{Type: slessv1alpha1.TriggerTypeQueue, Queue: &slessv1alpha1.QueueSpec{ConnectionSecret: "rabbit", Queue: "orders"}},
			child: &appsv1.Deployment{},
			calling: func(o client.Object) bool {
				return ptr.Deref(o.(*appsv1.Deployment).Spec.Replicas, 0) > 0
			},
		},
		{
			name:  "disabled cron stays suspended when the function returns",
			spec:  slessv1alpha1.TriggerSpec{Type: slessv1alpha1.TriggerTypeCron, Schedule: "*/5 * * * *", Enabled: ptr.To(false)},
			child: &batchv1.CronJob{},
			calling: func(o client.Object) bool {
				return !ptr.Deref(o.(*batchv1.CronJob).Spec.Suspend, false)
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t, time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
			ctx := context.Background()
			enabled := ptr.Deref(tc.spec.Enabled, true)
			fn := e.function("worker")
			tc.spec.Function = "worker"
			e.create(&slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Name: "tr"}, Spec: tc.spec})
			e.reconcile("tr")
			name := "tr"
			if tc.spec.Type == slessv1alpha1.TriggerTypeQueue {
				name = "tr-consumer"
			}
			child := func() client.Object {
				t.Helper()
				o := tc.child.DeepCopyObject().(client.Object)
				if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: name}, o); err != nil {
					t.Fatal(err)
				}
				return o
			}
			if got := tc.calling(child()); got != enabled {
				t.Fatalf("with the function there: calling %v, want %v", got, enabled)
			}

			if err := e.c.Delete(ctx, fn); err != nil {
				t.Fatal(err)
			}
			e.reconcile("tr")
			tr := e.get("tr")
			if c := ready(tr); c.Status != metav1.ConditionFalse || c.Reason != slessv1alpha1.TriggerReasonFunctionNotFound {
				t.Errorf("function gone: Ready %+v", c)
			}
			if tr.Status.NextScheduleTime != nil {
				t.Errorf("function gone: next schedule time %v", tr.Status.NextScheduleTime)
			}
			paused := child()
			if tc.calling(paused) {
				t.Fatal("function gone: the child still calls it")
			}
			e.reconcile("tr")
			if rv := child().GetResourceVersion(); rv != paused.GetResourceVersion() {
				t.Errorf("a second reconcile with the function still gone wrote the child (resourceVersion %s -> %s)", paused.GetResourceVersion(), rv)
			}

			e.function("worker")
			e.reconcile("tr")
			if got := tc.calling(child()); got != enabled {
				t.Errorf("function back: calling %v, want %v", got, enabled)
			}
			if c := ready(e.get("tr")); c.Reason == slessv1alpha1.TriggerReasonFunctionNotFound {
				t.Errorf("function back: Ready %+v", c)
			}
		})
	}
}

// TestScheduleTimeZone holds the controller's reading of a stored trigger's
// time zone to what its CronJob takes: a Trigger stored before the schema
// refused Local must not get next run times in the controller's own zone.
func TestScheduleTimeZone(t *testing.T) {
	from := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		tz   string
		next time.Time // zero: refused
	}{
		{tz: "", next: time.Date(2026, 12, 3, 2, 30, 0, 0, time.UTC)},
		{tz: "UTC", next: time.Date(2026, 12, 3, 2, 30, 0, 0, time.UTC)},
		{tz: "Europe/Berlin", next: time.Date(2026, 12, 3, 1, 30, 0, 0, time.UTC)},
		{tz: "Local"},
		{tz: "local"},
		{tz: "Mars/Olympus_Mons"},
	} {
		s, err := trigger.Schedule("30 2 * * *", tc.tz)
		if tc.next.IsZero() {
			if err == nil {
				t.Errorf("time zone %q accepted, next run %v", tc.tz, s.Next(from))
			}
			continue
		}
		if err != nil {
			t.Errorf("time zone %q: %v", tc.tz, err)
		} else if got := s.Next(from); !got.Equal(tc.next) {
			t.Errorf("time zone %q: next run %v, want %v", tc.tz, got.UTC(), tc.next)
		}
	}
}

// A child the apiserver or a webhook refuses (a policy of the cluster, a
// quota) is refused again on every retry: the trigger says so on its Ready
// condition, with the refusal, instead of keeping no status at all while
// the error is only in the controller's log. The reconcile still fails, so
// the write is retried with backoff.
func TestTriggerRejectedChild(t *testing.T) {
	probeJob := batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}}
	labels := map[string]string{"app": "probe"}
	for _, tc := range []struct {
		name    string
		refusal testbed.Refusal
		spec    slessv1alpha1.TriggerSpec
		child   string
	}{{
		name: "CronJob",
		refusal: testbed.Refusal{Group: "batch", Version: "v1", Resource: "cronjobs",
			Expression: "!object.metadata.name.startsWith('nightly')", Message: "no CronJobs called nightly here",
			Probe: &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "nightly-probe"}, Spec: batchv1.CronJobSpec{Schedule: "@daily", JobTemplate: probeJob}}},
		spec:  slessv1alpha1.TriggerSpec{Function: "report", Type: slessv1alpha1.TriggerTypeCron, Schedule: "@daily"},
		child: "CronJob nightly",
	}, {
		name: "consumer Deployment",
		refusal: testbed.Refusal{Group: "apps", Version: "v1", Resource: "deployments",
			Expression: "!object.metadata.name.startsWith('nightly')", Message: "no Deployments called nightly here",
			Probe: &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "nightly-probe"}, Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: probeJob.Spec.Template.Spec.Containers}}}}},
		spec:  slessv1alpha1.TriggerSpec{Function: "report", Type: slessv1alpha1.TriggerTypeQueue, Queue: &slessv1alpha1.QueueSpec{ConnectionSecret: "rabbit", Queue: "orders"}},
		child: "Deployment nightly-consumer",
	}, {
		name: "credential Secret",
		refusal: testbed.Refusal{Group: "", Version: "v1", Resource: "secrets",
			Expression: "!object.metadata.name.startsWith('nightly')", Message: "no Secrets called nightly here",
			Probe: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "nightly-probe"}}},
		spec:  slessv1alpha1.TriggerSpec{Function: "report", Type: slessv1alpha1.TriggerTypeCron, Schedule: "@daily"},
		child: "Secret nightly-trigger-token",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t, time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
			testbed.SharedKube(t).Refuse(t, e.ns, tc.refusal)
			e.function("report")
			e.create(&slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Name: "nightly"}, Spec: tc.spec})
			_, err := e.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: e.ns, Name: "nightly"}})
			if err == nil {
				t.Fatalf("reconcile succeeded though the apiserver refused a child: %+v", e.get("nightly").Status)
			}
			tr := e.get("nightly")
			c := ready(tr)
			if c.Status != metav1.ConditionFalse || c.Reason != slessv1alpha1.TriggerReasonRejected || !strings.Contains(c.Message, tc.child) ||
				!strings.Contains(c.Message, tc.refusal.Message) || c.ObservedGeneration != tr.Generation || tr.Status.ObservedGeneration != tr.Generation {
				t.Errorf("Ready %+v (observed generation %d of %d), want False %s naming %s and the refusal %q",
					c, tr.Status.ObservedGeneration, tr.Generation, slessv1alpha1.TriggerReasonRejected, tc.child, tc.refusal.Message)
			}
		})
	}
}

// A schedule that becomes one the controller cannot run (a time zone the
// database does not know passes the schema) pauses the trigger: its
// CronJob, made of the earlier spec, must not go on calling on the old
// schedule while Ready says the trigger does not call, nor keep a next run
// time; fixing the spec brings it back.
func TestInvalidSchedulePausesTheCronJob(t *testing.T) {
	e := setup(t, time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	ctx := context.Background()
	e.function("report")
	e.create(&slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Name: "nightly"}, Spec: slessv1alpha1.TriggerSpec{
		Function: "report", Type: slessv1alpha1.TriggerTypeCron, Schedule: "30 2 * * *", TimeZone: "Europe/Berlin"}})
	e.reconcile("nightly")
	cronJob := func() *batchv1.CronJob {
		cj := &batchv1.CronJob{}
		if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "nightly"}, cj); err != nil {
			t.Fatal(err)
		}
		return cj
	}
	if cj := cronJob(); ptr.Deref(cj.Spec.Suspend, false) || e.get("nightly").Status.NextScheduleTime == nil {
		t.Fatalf("a valid trigger: suspend %v, next run %v", cj.Spec.Suspend, e.get("nightly").Status.NextScheduleTime)
	}

	e.update("nightly", func(tr *slessv1alpha1.Trigger) { tr.Spec.TimeZone = "Mars/Olympus_Mons" })
	e.reconcile("nightly")
	tr := e.get("nightly")
	if c := ready(tr); c.Status != metav1.ConditionFalse || c.Reason != slessv1alpha1.TriggerReasonInvalidSchedule || c.ObservedGeneration != tr.Generation {
		t.Errorf("unknown time zone: Ready %+v, want False InvalidSchedule of generation %d", c, tr.Generation)
	}
	if tr.Status.NextScheduleTime != nil {
		t.Errorf("unknown time zone: next run %v, want none", tr.Status.NextScheduleTime)
	}
	if cj := cronJob(); !ptr.Deref(cj.Spec.Suspend, false) {
		t.Errorf("unknown time zone: the CronJob of the old spec still runs (suspend %v, schedule %q in %v)", ptr.Deref(cj.Spec.Suspend, false), cj.Spec.Schedule, ptr.Deref(cj.Spec.TimeZone, ""))
	}

	e.update("nightly", func(tr *slessv1alpha1.Trigger) { tr.Spec.TimeZone = "Europe/Lisbon" })
	e.reconcile("nightly")
	if c := ready(e.get("nightly")); c.Status != metav1.ConditionTrue {
		t.Errorf("fixed time zone: Ready %+v", c)
	}
	if cj := cronJob(); ptr.Deref(cj.Spec.Suspend, false) || ptr.Deref(cj.Spec.TimeZone, "") != "Europe/Lisbon" {
		t.Errorf("fixed time zone: suspend %v, time zone %v", ptr.Deref(cj.Spec.Suspend, false), ptr.Deref(cj.Spec.TimeZone, ""))
	}
}
