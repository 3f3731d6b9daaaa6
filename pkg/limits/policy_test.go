package limits_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/limits"
	"github.com/sless-dev/sless/test/testbed"
)

func TestMain(m *testing.M) { testbed.Main(m) }

const files = `
  source:
    inline:
      files:
        main.py: "def handler(event, context):\n    return 1\n"`

func doc(kind, name, extra string) string {
	entry := "main.handler"
	if kind == "SlessService" {
		entry = "main.app"
	}
	return "apiVersion: sless.dev/v1alpha1\nkind: " + kind + "\nmetadata:\n  name: " + name +
		"\nspec:\n  runtime: python3.12\n  entrypoint: " + entry + "\n" + extra + files
}

// Install applies Policy to the test apiserver and waits until it refuses.
func install(t *testing.T, k *testbed.Kube, site limits.Site, probeNS string) {
	t.Helper()
	ctx := context.Background()
	p, b := limits.Policy(site)
	for _, o := range []client.Object{p, b} {
		if err := k.Client.Create(ctx, o); err != nil {
			t.Fatalf("create %s: %v", o.GetName(), err)
		}
		t.Cleanup(func() { _ = k.Client.Delete(context.Background(), o) })
	}
	// The apiserver loads policies through an informer: wait for the first refusal.
	probe := decode(t, doc("Function", "probe", "  memoryMB: 4096\n"))
	probe.SetNamespace(probeNS)
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := k.Client.Create(ctx, probe.DeepCopy())
		if err != nil && strings.Contains(err.Error(), "is over namespace") {
			return
		}
		if err == nil {
			_ = k.Client.Delete(ctx, probe.DeepCopy())
		}
		if time.Now().After(deadline) {
			t.Fatalf("the policy refuses nothing after 30 s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func decode(t *testing.T, s string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(s), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func namespace(t *testing.T, k *testbed.Kube, annotation string) string {
	t.Helper()
	ns := k.Namespace(t)
	if annotation != "" {
		setAnnotation(t, k, ns, annotation)
	}
	return ns
}

func setAnnotation(t *testing.T, k *testbed.Kube, ns, annotation string) {
	t.Helper()
	var o corev1.Namespace
	ctx := context.Background()
	if err := k.Client.Get(ctx, client.ObjectKey{Name: ns}, &o); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(o.DeepCopy())
	metav1.SetMetaDataAnnotation(&o.ObjectMeta, limits.AnnotationMax, annotation)
	if err := k.Client.Patch(ctx, &o, patch); err != nil {
		t.Fatal(err)
	}
}

// admit creates u and wants the apiserver to refuse it with want, or to
// accept it when want is empty. The apiserver reads namespaces from its
// cache, which may lag a patch of their annotation: an outcome is awaited,
// and a create that was wrong is undone before the next try.
func admit(t *testing.T, k *testbed.Kube, u *unstructured.Unstructured, want string) {
	t.Helper()
	ctx := context.Background()
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		o := u.DeepCopy()
		err = k.Client.Create(ctx, o)
		switch {
		case want == "" && err == nil:
			u.SetResourceVersion(o.GetResourceVersion())
			return
		case want != "" && err != nil && strings.Contains(err.Error(), want):
			return
		case err == nil:
			_ = k.Client.Delete(ctx, o)
		}
	}
	if want == "" {
		t.Fatalf("the apiserver refused: %v", err)
	}
	t.Fatalf("the apiserver said %v, want %q", err, want)
}

// goCheck is what the REST API and local mode refuse for the same object.
func goCheck(t *testing.T, site limits.Site, ns, annotation, kind, y string) string {
	t.Helper()
	var spec *slessv1alpha1.WorkloadSpec
	if kind == "Function" {
		var fn slessv1alpha1.Function
		if err := yaml.Unmarshal([]byte(y), &fn); err != nil {
			t.Fatal(err)
		}
		spec = &fn.Spec.WorkloadSpec
	} else {
		var svc slessv1alpha1.SlessService
		if err := yaml.Unmarshal([]byte(y), &svc); err != nil {
			t.Fatal(err)
		}
		spec = &svc.Spec.WorkloadSpec
	}
	m, err := site.For(ns, annotation)
	if err != nil {
		return err.Error()
	}
	if e := m.Check(spec); e != nil {
		return e.Detail
	}
	return ""
}

// TestPolicyAgreesWithCheck holds the apiserver's refusals to Check's:
// the same objects refused, each with the same sentence.
func TestPolicyAgreesWithCheck(t *testing.T) {
	k := testbed.SharedKube(t)
	site, err := limits.ParseSite(limits.Setting{}, limits.Setting{}, limits.Setting{Name: "m", Value: "memory=1Gi,cpu=2"})
	if err != nil {
		t.Fatal(err)
	}
	plain := namespace(t, k, "")
	install(t, k, site, plain)
	teamA := namespace(t, k, "memory=2Gi, nvidia.com/gpu=1")
	broken := namespace(t, k, "memory=lots")
	annotations := map[string]string{plain: "", teamA: "memory=2Gi, nvidia.com/gpu=1", broken: "memory=lots"}

	for i, c := range []struct {
		name, ns, kind, extra, want string
	}{
		{name: "under", ns: plain, kind: "Function", extra: "  memoryMB: 512\n"},
		{name: "nothing asked", ns: plain, kind: "Function"},
		{name: "limit over the site's", ns: plain, kind: "Function", extra: "  resources:\n    limits:\n      memory: 4Gi\n",
			want: "spec.resources.limits.memory 4Gi is over namespace " + plain + "'s maximum 1Gi"},
		{name: "the namespace's replaces the site's", ns: teamA, kind: "Function", extra: "  resources:\n    limits:\n      memory: 1536Mi\n"},
		{name: "over the namespace's", ns: teamA, kind: "Function", extra: "  resources:\n    limits:\n      memory: 4Gi\n",
			want: "spec.resources.limits.memory 4Gi is over namespace " + teamA + "'s maximum 2Gi"},
		{name: "extended resource", ns: teamA, kind: "SlessService", extra: "  resources:\n    limits:\n      nvidia.com/gpu: 2\n",
			want: "spec.resources.limits.nvidia.com/gpu 2 is over namespace " + teamA + "'s maximum 1"},
		{name: "no maximum for a resource", ns: plain, kind: "Function", extra: "  resources:\n    limits:\n      nvidia.com/gpu: 4\n"},
		{name: "request", ns: plain, kind: "SlessService", extra: "  resources:\n    requests:\n      cpu: \"3\"\n",
			want: "spec.resources.requests.cpu 3 is over namespace " + plain + "'s maximum 2"},
		{name: "memoryMB", ns: plain, kind: "Function", extra: "  memoryMB: 2048\n",
			want: "spec.memoryMB 2048Mi is over namespace " + plain + "'s maximum 1Gi"},
		{name: "cpu", ns: plain, kind: "Function", extra: "  cpu: 2500m\n",
			want: "spec.cpu 2500m is over namespace " + plain + "'s maximum 2"},
		{name: "first excess named", ns: plain, kind: "Function",
			extra: "  resources:\n    requests:\n      cpu: \"3\"\n    limits:\n      memory: 4Gi\n      cpu: \"3\"\n",
			want:  "spec.resources.limits.cpu 3 is over namespace " + plain + "'s maximum 2"},
		{name: "the namespace's entries first", ns: teamA, kind: "Function",
			extra: "  resources:\n    limits:\n      memory: 4Gi\n      cpu: \"3\"\n",
			want:  "spec.resources.limits.memory 4Gi is over namespace " + teamA + "'s maximum 2Gi"},
		{name: "malformed annotation", ns: broken, kind: "Function", extra: "  memoryMB: 128\n",
			want: "namespace " + broken + "'s annotation sless.dev/max-resources is malformed: want name=quantity pairs separated by commas"},
	} {
		t.Run(c.name, func(t *testing.T) {
			y := doc(c.kind, fmt.Sprintf("f%d", i), c.extra)
			if got := goCheck(t, site, c.ns, annotations[c.ns], c.kind, y); got != c.want {
				t.Errorf("Go's check = %q, want %q", got, c.want)
			}
			u := decode(t, y)
			u.SetNamespace(c.ns)
			admit(t, k, u, c.want)
		})
	}

	t.Run("kubectl apply", func(t *testing.T) {
		y := doc("Function", "by-kubectl", "  resources:\n    limits:\n      memory: 4Gi\n")
		cmd := exec.Command(testbed.Kubectl(t), "--kubeconfig", k.Kubeconfig, "apply", "-n", teamA, "-f", "-")
		cmd.Stdin = strings.NewReader(y)
		out, err := cmd.CombinedOutput()
		want := "spec.resources.limits.memory 4Gi is over namespace " + teamA + "'s maximum 2Gi"
		if err == nil || !strings.Contains(string(out), want) {
			t.Fatalf("kubectl apply: %v\n%s\nwant a refusal saying %q", err, out, want)
		}
	})

	t.Run("a maximum lowered keeps metadata writable", func(t *testing.T) {
		ns := namespace(t, k, "memory=2Gi")
		fn := decode(t, doc("Function", "big", "  resources:\n    limits:\n      memory: 1536Mi\n"))
		fn.SetNamespace(ns)
		ctx := context.Background()
		admit(t, k, fn, "")
		setAnnotation(t, k, ns, "memory=1Gi")
		fn.SetLabels(map[string]string{"team": "a"})
		if err := k.Client.Update(ctx, fn); err != nil {
			t.Fatalf("a label on a Function over a lowered maximum: %v", err)
		}
		if err := unstructured.SetNestedField(fn.Object, "1500Mi", "spec", "resources", "limits", "memory"); err != nil {
			t.Fatal(err)
		}
		want := "spec.resources.limits.memory 1500Mi is over namespace " + ns + "'s maximum 1Gi"
		// The apiserver reads the namespace from its cache, which may lag the patch.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			err := k.Client.Update(ctx, fn.DeepCopy())
			if err != nil && strings.Contains(err.Error(), want) {
				break
			}
			if err == nil || time.Now().After(deadline) {
				t.Fatalf("a spec change over the lowered maximum: %v, want %q", err, want)
			}
		}
	})
}
