package sandbox_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/reconciler/sandbox"
	"github.com/sless-dev/sless/pkg/reconciler/sandbox/resources"
	"github.com/sless-dev/sless/test/testbed"
)

func TestMain(m *testing.M) { testbed.Main(m) }

var apiSelector = map[string]string{"app.kubernetes.io/name": "sless", "app.kubernetes.io/component": "api"}

// apiService makes a namespace of the test's with sless api's Service in it.
func apiService(t *testing.T, tb *testbed.Kube) types.NamespacedName {
	ns := tb.Namespace(t)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "sless-api", Namespace: ns},
		Spec: corev1.ServiceSpec{Selector: apiSelector, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
	if err := tb.Client.Create(context.Background(), svc); err != nil {
		t.Fatal(err)
	}
	return types.NamespacedName{Namespace: ns, Name: "sless-api"}
}

func siteConfig(api types.NamespacedName) sandbox.Config {
	return sandbox.Config{
		Config: resources.Config{KnativeNamespace: "knative-serving",
			BuildEgress: resources.BuildEgressFor("registry.example.com/sless", "http://minio.minio.svc:9000")},
		APIService: api, NetworkPolicies: true, PodSecurity: true,
	}
}

func tenantNamespace(t *testing.T, tb *testbed.Kube, labels map[string]string) string {
	ns := tb.Namespace(t)
	o := &corev1.Namespace{}
	if err := tb.Client.Get(context.Background(), client.ObjectKey{Name: ns}, o); err != nil {
		t.Fatal(err)
	}
	o.Labels["sless.dev/tenant"] = "true"
	for k, v := range labels {
		o.Labels[k] = v
	}
	if err := tb.Client.Update(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	return ns
}

func pyFunction(ns, name string, n *slessv1alpha1.NetworkSpec) *slessv1alpha1.Function {
	fn := &slessv1alpha1.Function{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	fn.Spec.Runtime, fn.Spec.Entrypoint = "python3.12", "main.handler"
	fn.Spec.Source.Inline = &slessv1alpha1.InlineSource{Files: map[string]string{"main.py": "def handler(e, c):\n    return 1\n"}}
	fn.Spec.Network = n
	return fn
}

// TestSandboxOnTheAPIServer runs the reconciler in a manager, as `sless
// controller` does, against a real apiserver: the policies appear, follow
// the workloads' spec.network, come back when deleted, the tenant gets Pod
// Security labels that the apiserver's own admission then enforces, and
// the namespace's status says so.
func TestSandboxOnTheAPIServer(t *testing.T) {
	tb := testbed.SharedKube(t)
	ctx := context.Background()
	api := apiService(t, tb)
	cfg := siteConfig(api)
	ns := tenantNamespace(t, tb, nil)
	mgr, err := ctrl.NewManager(tb.Config, ctrl.Options{
		Scheme:     tb.Scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Cache:      cache.Options{ByObject: sandbox.CacheByObject()},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := sandbox.SetupWithManager(mgr, cfg); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})

	c := tb.Client
	policy := func(name string) (*networkingv1.NetworkPolicy, error) {
		p := &networkingv1.NetworkPolicy{}
		return p, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p)
	}
	matches := func(want *networkingv1.NetworkPolicy) func() (bool, string) {
		return func() (bool, string) {
			p, err := policy(want.Name)
			if err != nil {
				return false, err.Error()
			}
			d := cmp.Diff(want.Spec, p.Spec)
			return d == "", d
		}
	}
	gone := func(name string) func() (bool, string) {
		return func() (bool, string) {
			_, err := policy(name)
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		}
	}
	wcfg := cfg.Config
	wcfg.API = resources.Peer{Namespace: api.Namespace, Selector: apiSelector}

	closed := pyFunction(ns, "closed", &slessv1alpha1.NetworkSpec{Egress: "none"})
	listed := pyFunction(ns, "listed", &slessv1alpha1.NetworkSpec{Egress: "listed", Allow: []slessv1alpha1.EgressRule{
		{CIDR: "10.20.0.0/16", Ports: []slessv1alpha1.EgressPort{{Port: 5432}}}}})
	open := pyFunction(ns, "open", nil)
	for _, fn := range []*slessv1alpha1.Function{closed, listed, open} {
		if err := c.Create(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	testbed.Eventually(t, "the ingress policy", matches(resources.MakeIngressPolicy(ns, wcfg)))
	testbed.Eventually(t, "the build policy", matches(resources.MakeBuildPolicy(ns, wcfg)))
	testbed.Eventually(t, "closed's egress policy", matches(resources.MakeEgressPolicy(closed, "")))
	testbed.Eventually(t, "listed's egress policy", matches(resources.MakeEgressPolicy(listed, "")))
	if _, err := policy("sless-egress-function-open"); !apierrors.IsNotFound(err) {
		t.Errorf("a function of egress all has a policy (err %v)", err)
	}
	p, _ := policy("sless-egress-function-closed")
	if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].UID != closed.UID {
		t.Errorf("closed's policy is owned by %+v, want the Function", p.OwnerReferences)
	}

	// A spec change follows: listed opens up, open closes.
	listed.Spec.Network = &slessv1alpha1.NetworkSpec{Egress: "all"}
	if err := c.Update(ctx, listed); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, "listed's policy removed", gone("sless-egress-function-listed"))
	open.Spec.Network = &slessv1alpha1.NetworkSpec{Egress: "none"}
	if err := c.Update(ctx, open); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, "open's policy", matches(resources.MakeEgressPolicy(open, "")))

	// A policy deleted or edited by hand comes back.
	ing, _ := policy("sless-ingress")
	if err := c.Delete(ctx, ing); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, "the ingress policy back", matches(resources.MakeIngressPolicy(ns, wcfg)))
	b, _ := policy("sless-builds")
	b.Spec.Egress = nil
	if err := c.Update(ctx, b); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, "the build policy restored", matches(resources.MakeBuildPolicy(ns, wcfg)))

	// The tenant namespace is labelled and reports both halves.
	nsObj := &corev1.Namespace{}
	testbed.Eventually(t, "labels and conditions", func() (bool, string) {
		if err := c.Get(ctx, client.ObjectKey{Name: ns}, nsObj); err != nil {
			return false, err.Error()
		}
		st := sandbox.Status{NamespaceStatus: &nsObj.Status}
		np, ps := st.Condition(sandbox.ConditionNetworkPolicies), st.Condition(sandbox.ConditionPodSecurity)
		ok := nsObj.Labels[resources.LabelEnforce] == "baseline" && nsObj.Labels[resources.LabelWarn] == "restricted" &&
			np != nil && np.Status == corev1.ConditionTrue && strings.Contains(np.Message, "2 workload(s) with limited egress") &&
			ps != nil && ps.Status == corev1.ConditionTrue
		return ok, fmt.Sprintf("labels %v, conditions %+v", nsObj.Labels, nsObj.Status.Conditions)
	})

	// The apiserver's Pod Security admission enforces the level: a
	// privileged pod is refused, a root one (as kaniko runs) admitted.
	pod := func(name string, sc *corev1.SecurityContext) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "busybox", SecurityContext: sc}}}}
	}
	err = c.Create(ctx, pod("privileged", &corev1.SecurityContext{Privileged: ptr.To(true)}))
	if err == nil || !strings.Contains(err.Error(), `violates PodSecurity "baseline:v1.33"`) {
		t.Errorf("a privileged pod: err %v, want PodSecurity baseline:v1.33's refusal", err)
	}
	if err := c.Create(ctx, pod("root", &corev1.SecurityContext{RunAsUser: ptr.To[int64](0)})); err != nil {
		t.Errorf("a pod running as root, as kaniko's: %v", err)
	}

	// The last workload gone from a namespace that is no tenant's takes
	// the namespace's policies with it.
	plain := tb.Namespace(t)
	fn := pyFunction(plain, "f", &slessv1alpha1.NetworkSpec{Egress: "none"})
	if err := c.Create(ctx, fn); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, "policies in a namespace of workloads", func() (bool, string) {
		var l networkingv1.NetworkPolicyList
		err := c.List(ctx, &l, client.InNamespace(plain))
		return err == nil && len(l.Items) == 3, fmt.Sprintf("%d policies, err %v", len(l.Items), err)
	})
	plainNS := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: plain}, plainNS); err != nil {
		t.Fatal(err)
	}
	if _, ok := plainNS.Labels[resources.LabelEnforce]; ok {
		t.Errorf("a namespace that is no tenant's was labelled for Pod Security: %v", plainNS.Labels)
	}
	if err := c.Delete(ctx, fn); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, "policies removed", func() (bool, string) {
		var l networkingv1.NetworkPolicyList
		err := c.List(ctx, &l, client.InNamespace(plain))
		return err == nil && len(l.Items) == 0, fmt.Sprintf("%d policies, err %v", len(l.Items), err)
	})
}

// TestSandboxReportsWhatItCannotDo: without sless api's Service the
// ingress policy cannot name its pods, and an admin's own Pod Security
// level stays.
func TestSandboxReportsWhatItCannotDo(t *testing.T) {
	tb := testbed.SharedKube(t)
	ctx := context.Background()
	ns := tenantNamespace(t, tb, map[string]string{resources.LabelEnforce: "privileged"})
	cfg := siteConfig(types.NamespacedName{Namespace: tb.Namespace(t), Name: "no-such-service"})
	r := &sandbox.Reconciler{Client: tb.Client, APIReader: tb.Client, Config: cfg}
	_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: ns}})
	if err == nil || !strings.Contains(err.Error(), "no-such-service") {
		t.Errorf("reconcile: %v, want the missing Service named", err)
	}
	o := &corev1.Namespace{}
	if err := tb.Client.Get(ctx, client.ObjectKey{Name: ns}, o); err != nil {
		t.Fatal(err)
	}
	st := sandbox.Status{NamespaceStatus: &o.Status}
	if c := st.Condition(sandbox.ConditionNetworkPolicies); c == nil || c.Status != corev1.ConditionFalse || c.Reason != sandbox.ReasonAPIServiceMissing {
		t.Errorf("network policies condition %+v, want False APIServiceMissing", c)
	}
	if o.Labels[resources.LabelEnforce] != "privileged" || o.Labels[resources.LabelAudit] != "restricted" {
		t.Errorf("labels %v: want the admin's enforce level kept and audit added", o.Labels)
	}
	if c := st.Condition(sandbox.ConditionPodSecurity); c == nil || c.Status != corev1.ConditionTrue || !strings.Contains(c.Message, "enforce privileged") {
		t.Errorf("pod security condition %+v, want True naming the admin's level", c)
	}

	cfg.NetworkPolicies, cfg.PodSecurity = false, false
	r.Config = cfg
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	if err := tb.Client.Get(ctx, client.ObjectKey{Name: ns}, o); err != nil {
		t.Fatal(err)
	}
	for _, ct := range []corev1.NamespaceConditionType{sandbox.ConditionNetworkPolicies, sandbox.ConditionPodSecurity} {
		if c := st.Condition(ct); c == nil || c.Reason != sandbox.ReasonTurnedOff {
			t.Errorf("%s: %+v, want TurnedOff", ct, c)
		}
	}
}
