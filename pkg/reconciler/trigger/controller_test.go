package trigger_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/sless-dev/sless/pkg/adapter/kube"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/auth/triggertoken"
	"github.com/sless-dev/sless/pkg/reconciler/trigger"
	"github.com/sless-dev/sless/test/testbed"
)

// TestControllerWatches runs the controller in a manager, as `sless
// controller` does, and checks that events, not the test, drive it: a
// Function appearing readies its trigger, and the run's Job finishing ends
// the pre-warm.
func TestControllerWatches(t *testing.T) {
	tb := testbed.SharedKube(t)
	ns := tb.Namespace(t)
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 8, 59, 30, 0, time.UTC))
	e := &env{t: t, c: tb.Client, ns: ns, clock: clk}
	mgr, err := ctrl.NewManager(tb.Config, ctrl.Options{
		Scheme:     tb.Scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Cache:      cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}, ByObject: trigger.CacheByObject()},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := trigger.SetupWithManager(mgr, trigger.Options{
		Config: kube.TriggerConfig{Image: "sless@sha256:0123", InvokeURL: "http://proxy"},
		Tokens: &triggertoken.HS256{Secret: secret, Clock: clk},
		Clock:  clk,
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	wait := func(what string, cond func() (bool, string)) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		last := ""
		for time.Now().Before(deadline) {
			ok, s := cond()
			if ok {
				return
			}
			last = s
			time.Sleep(25 * time.Millisecond)
		}
		t.Fatalf("timed out waiting for %s; last: %s", what, last)
	}
	e.create(cronTrigger("nine", "report", "0 9 * * *", "", 60))
	wait("FunctionNotFound", func() (bool, string) {
		c := meta.FindStatusCondition(e.get("nine").Status.Conditions, "Ready")
		return c != nil && c.Reason == slessv1alpha1.TriggerReasonFunctionNotFound, conditionString(c)
	})
	e.service("report", "")
	e.function("report")
	wait("Ready through the Function watch", func() (bool, string) {
		c := meta.FindStatusCondition(e.get("nine").Status.Conditions, "Ready")
		return c != nil && c.Status == metav1.ConditionTrue, conditionString(c)
	})
	wait("pre-warmed", func() (bool, string) {
		v, _, _ := e.minScale("report")
		return v == "1", "min-scale " + v
	})

	// The run happens (the clock moves on) and its Job completes: the Job's
	// event alone brings the controller back to restore the min-scale.
	run := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	clk.SetTime(run.Add(20 * time.Second))
	finished := time.Now()
	e.finishRun("nine", run)
	wait("restored after the run", func() (bool, string) {
		v, set, ann := e.minScale("report")
		// The status follows the Service's patch in the same reconcile.
		pw := e.get("nine").Status.PreWarmedFor
		return !set && len(ann) == 0 && pw == nil, fmt.Sprintf("min-scale %q, preWarmedFor %v", v, pw)
	})
	// The controller's own wake-up for this trigger is 31 s away (just
	// after 09:00 on the clock as it was): a restore well before that came
	// from the Job's event.
	if took := time.Since(finished); took > 15*time.Second {
		t.Errorf("restored %v after the Job finished: not through the Job watch", took)
	}
	if err := tb.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "nine-trigger-token"}, &corev1.Secret{}); err != nil {
		t.Errorf("credential: %v", err)
	}
}

func conditionString(c *metav1.Condition) string {
	if c == nil {
		return "no Ready condition"
	}
	return string(c.Status) + " " + c.Reason + ": " + c.Message
}

// The controller follows its consumer Deployment's status through the
// Owns watch: the consumer becoming ready, or losing its broker, shows on
// the trigger without anything else bringing the controller back.
func TestControllerFollowsConsumer(t *testing.T) {
	tb := testbed.SharedKube(t)
	ns := tb.Namespace(t)
	sim := testbed.SharedDeployments(t)
	sim.Manage(ns)
	sim.SetReady(ns, "jobs-consumer", false)
	e := &env{t: t, c: tb.Client, ns: ns}
	mgr, err := ctrl.NewManager(tb.Config, ctrl.Options{
		Scheme:     tb.Scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Cache:      cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}, ByObject: trigger.CacheByObject()},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := trigger.SetupWithManager(mgr, trigger.Options{
		Config: kube.TriggerConfig{Image: "sless@sha256:0123", InvokeURL: "http://proxy"},
		Tokens: &triggertoken.HS256{Secret: secret},
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	wait := func(what string, ok func(*metav1.Condition) bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			c := meta.FindStatusCondition(e.get("jobs").Status.Conditions, "Ready")
			if ok(c) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; last: %s", what, conditionString(c))
			}
			time.Sleep(25 * time.Millisecond)
		}
	}
	if err := tb.Client.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "rabbit", Namespace: ns},
		StringData: map[string]string{"url": "amqp://guest:guest@rabbit:5672/"}}); err != nil {
		t.Fatal(err)
	}
	e.function("worker")
	e.create(&slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Name: "jobs"}, Spec: slessv1alpha1.TriggerSpec{
		Function: "worker", Type: slessv1alpha1.TriggerTypeQueue,
		Queue: &slessv1alpha1.QueueSpec{ConnectionSecret: "rabbit", Queue: "jobs"},
	}})
	wait("a consumer not ready", func(c *metav1.Condition) bool {
		return c != nil && c.Reason == slessv1alpha1.TriggerReasonConsumerNotAvailable && strings.Contains(c.Message, "0 of 1 replicas")
	})
	sim.SetReady(ns, "jobs-consumer", true)
	wait("consuming", func(c *metav1.Condition) bool {
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == slessv1alpha1.TriggerReasonConsuming
	})
	sim.SetReady(ns, "jobs-consumer", false)
	wait("the broker lost", func(c *metav1.Condition) bool { return c != nil && c.Status == metav1.ConditionFalse })
}
