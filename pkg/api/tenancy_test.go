package api_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/adapter/kube"
	"github.com/sless-dev/sless/pkg/api"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// TestTenantNamespaces: the namespace claim makes a caller a tenant only of
// a namespace sless made (its tenant label) or one whose name has a tenant
// prefix; any other, default and sless-system included, is a 403 unless the
// caller is an admin. Before, a token for default created a function there:
// every namespace but kube-* was taken.
func TestTenantNamespaces(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	suffix := e.ns[len("t-"):]
	made := "made-" + suffix       // labelled as sless labels what it makes
	unlabelled := "team-" + suffix // someone else's
	missing := "nowhere-" + suffix // exists nowhere, has no prefix
	prefixed := "tenant-new-" + suffix
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: made, Labels: map[string]string{kube.TenantLabel: "true"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: unlabelled, Labels: map[string]string{kube.TenantLabel: "false"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "sless-system"}},
	} {
		if err := e.kube.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, ns := range []string{made, unlabelled, prefixed} {
			_ = e.kube.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		}
	})
	tenant := func(ns string) string { return e.token("alice", "sless.dev/namespace", ns) }
	admin := func(ns string) string { return e.token("root", "sless.dev/namespace", ns, "sless.dev/admin", true) }
	fns := func(ns string) string { return "/v1/namespaces/" + ns + "/functions" }

	rows := []struct {
		name   string
		method string
		path   string
		token  string
		body   any
		code   int
		reason string
	}{
		{name: "create in default", method: "POST", path: fns("default"), token: tenant("default"), body: pythonFunction("planted"), code: 403, reason: api.ReasonNotTenantNamespace},
		{name: "list default", method: "GET", path: fns("default"), token: tenant("default"), code: 403, reason: api.ReasonNotTenantNamespace},
		{name: "create in sless-system", method: "POST", path: fns("sless-system"), token: tenant("sless-system"), body: pythonFunction("planted"), code: 403, reason: api.ReasonNotTenantNamespace},
		{name: "trigger in sless-system", method: "POST", path: "/v1/namespaces/sless-system/triggers", token: tenant("sless-system"), body: trgWith("t", map[string]any{"function": "x", "type": "http"}), code: 403, reason: api.ReasonNotTenantNamespace},
		{name: "whoami of sless-system", method: "GET", path: "/v1/whoami", token: tenant("sless-system"), code: 403, reason: api.ReasonNotTenantNamespace},
		{name: "whoami of default", method: "GET", path: "/v1/whoami", token: tenant("default"), code: 403, reason: api.ReasonNotTenantNamespace},
		{name: "create in a namespace sless did not make", method: "POST", path: fns(unlabelled), token: tenant(unlabelled), body: pythonFunction("planted"), code: 403, reason: api.ReasonNotTenantNamespace},
		{name: "upload into a namespace sless did not make", method: "PUT", path: fns(unlabelled) + "/planted/source", token: tenant(unlabelled), body: pythonZip(t, "1"), code: 403, reason: api.ReasonNotTenantNamespace},
		{name: "create in a namespace without a prefix that does not exist", method: "POST", path: fns(missing), token: tenant(missing), body: pythonFunction("planted"), code: 403, reason: api.ReasonNotTenantNamespace},

		{name: "create in a namespace sless made", method: "POST", path: fns(made), token: tenant(made), body: pythonFunction("mine"), code: 201},
		{name: "whoami of a namespace sless made", method: "GET", path: "/v1/whoami", token: tenant(made), code: 200},
		{name: "create in a prefixed namespace", method: "POST", path: fns(e.ns), token: tenant(e.ns), body: pythonFunction("mine"), code: 201},
		{name: "create in a prefixed namespace not made yet", method: "POST", path: fns(prefixed), token: tenant(prefixed), body: pythonFunction("mine"), code: 201},
		{name: "admin lists default", method: "GET", path: fns("default"), token: admin("default"), code: 200},
		{name: "admin creates in a namespace sless did not make", method: "POST", path: fns(unlabelled), token: admin("default"), body: pythonFunction("by-admin"), code: 201},
		{name: "admin whoami of default", method: "GET", path: "/v1/whoami", token: admin("default"), code: 200},
	}
	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			var headers []string
			switch tc.body.(type) {
			case nil:
			case []byte:
				headers = []string{"Content-Type", "application/zip"}
			default:
				headers = []string{"Content-Type", "application/json"}
			}
			r := e.do(tc.method, tc.path, tc.token, tc.body, headers...)
			if r.Code != tc.code {
				t.Fatalf("status %d, want %d: %s", r.Code, tc.code, r.Body)
			}
			if tc.code < 400 {
				return
			}
			if p := r.problem(t); p.Reason != tc.reason || p.Detail == "" {
				t.Fatalf("problem %+v, want reason %s and a detail", p, tc.reason)
			}
		})
	}

	// Nothing was planted, and no namespace was made for a refused caller.
	for _, ns := range []string{"default", "sless-system", missing} {
		var l slessv1alpha1.FunctionList
		if err := e.kube.Client.List(ctx, &l, client.InNamespace(ns)); err != nil || len(l.Items) > 0 {
			t.Errorf("functions in %s: %d, %v", ns, len(l.Items), err)
		}
	}
	if err := e.kube.Client.Get(ctx, client.ObjectKey{Name: missing}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s: %v, want it never made", missing, err)
	}
	var l slessv1alpha1.FunctionList
	if err := e.kube.Client.List(ctx, &l, client.InNamespace(unlabelled)); err != nil || len(l.Items) != 1 || l.Items[0].Name != "by-admin" {
		t.Errorf("functions in %s: %v, %v; want only the admin's", unlabelled, l.Items, err)
	}
	p := &corev1.Namespace{}
	if err := e.kube.Client.Get(ctx, client.ObjectKey{Name: prefixed}, p); err != nil || p.Labels[kube.TenantLabel] != "true" {
		t.Errorf("prefixed namespace: %v %v, want made with the tenant label", err, p.Labels)
	}
}

// TestIsTenant: kube.Tenants takes a namespace for a tenant's by a prefix or
// by the tenant label, and nothing else, an empty prefix included.
func TestIsTenant(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	suffix := e.ns[len("t-"):]
	tn := &kube.Tenants{Client: e.kube.Client, Prefixes: []string{"tenant-", ""}}
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "lab-" + suffix, Labels: map[string]string{kube.TenantLabel: "true"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "plain-" + suffix}},
	} {
		if err := e.kube.Client.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.kube.Client.Delete(context.Background(), ns) })
	}
	for _, tc := range []struct {
		ns   string
		want bool
	}{
		{"tenant-anything", true},
		{"lab-" + suffix, true},
		{"plain-" + suffix, false},
		{"default", false},
		{"kube-system", false},
		{"gone-" + suffix, false},
		// An empty prefix takes in nothing.
		{"x", false},
	} {
		got, err := tn.IsTenant(ctx, tc.ns)
		if err != nil || got != tc.want {
			t.Errorf("IsTenant(%s) = %v, %v; want %v", tc.ns, got, err, tc.want)
		}
	}
}
