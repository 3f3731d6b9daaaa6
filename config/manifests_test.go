// Package config_test checks the install manifests against a real apiserver
// with the real kubectl.
package config_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sless-dev/sless/test/testbed"
)

func TestMain(m *testing.M) { testbed.Main(m) }

func kubectl(t *testing.T, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(testbed.Kubectl(t), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func configDir(t *testing.T) string {
	root, err := testbed.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "config")
}

func ensureNamespace(t *testing.T, k *testbed.Kube, name string) {
	err := k.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func TestManifestsApplyOnServer(t *testing.T) {
	k := testbed.SharedKube(t)
	dir := configDir(t)

	rendered, err := kubectl(t, k.Kubeconfig, "kustomize", dir)
	if err != nil {
		t.Fatalf("kubectl kustomize: %v\n%s", err, rendered)
	}
	for _, want := range []string{
		"kind: Namespace", "kind: CustomResourceDefinition", "kind: ClusterRole", "kind: Role",
		"name: sless-controller", "name: sless-api", "kind: Deployment", "kind: Service", "kind: ConfigMap",
		"image: ghcr.io/sless-dev/sless:latest",
	} {
		if !strings.Contains(rendered, want) {
			t.Errorf("rendered manifests lack %q", want)
		}
	}

	// A server-side dry run creates nothing, so the namespace the
	// namespaced objects go to must exist already.
	// knative-serving is Knative's, which sless requires installed.
	ensureNamespace(t, k, "sless-system")
	ensureNamespace(t, k, "knative-serving")
	out, err := kubectl(t, k.Kubeconfig, "apply", "--dry-run=server", "-k", dir)
	if err != nil {
		t.Fatalf("kubectl apply --dry-run=server -k config: %v\n%s", err, out)
	}
	for _, obj := range []string{
		"deployment.apps/sless-controller", "deployment.apps/sless-api", "service/sless-api", "service/sless-api-public",
		"clusterrole.rbac.authorization.k8s.io/sless-controller", "role.rbac.authorization.k8s.io/sless-controller",
		"customresourcedefinition.apiextensions.k8s.io/functions.sless.dev",
	} {
		if !strings.Contains(out, obj) || !strings.Contains(out, "(server dry run)") {
			t.Errorf("dry run output lacks %s:\n%s", obj, out)
		}
	}

	// The dry run validates: a broken Deployment is refused by the server.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	b, err := os.ReadFile(filepath.Join(dir, "manager", "controller.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(string(b), "replicas: 2", "replicas: -2", 1)
	if err := os.WriteFile(bad, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := kubectl(t, k.Kubeconfig, "apply", "--dry-run=server", "-f", bad); err == nil || !strings.Contains(out, "replicas") {
		t.Errorf("a Deployment with replicas -2 passed the server dry run: %v\n%s", err, out)
	}
}

// The generated RBAC grants the controller what its reconcilers use and no
// more: asked with the real kubectl as the controller's service account.
func TestControllerRBACIsLeastPrivilege(t *testing.T) {
	k := testbed.SharedKube(t)
	dir := configDir(t)
	ensureNamespace(t, k, "sless-system")
	// The Role that reads Knative's config-features lives there.
	ensureNamespace(t, k, "knative-serving")
	for _, f := range []string{"rbac/role.yaml", "manager/controller.yaml", "api/api.yaml"} {
		if out, err := kubectl(t, k.Kubeconfig, "apply", "-f", filepath.Join(dir, f)); err != nil {
			t.Fatalf("apply %s: %v\n%s", f, err, out)
		}
	}
	tests := []struct {
		as, verb, resource, ns string
		allowed                bool
	}{
		{"sless-controller", "create", "pipelineruns.tekton.dev", "tenant-a", true},
		// A superseded build is cancelled by a patch of its spec.status.
		{"sless-controller", "patch", "pipelineruns.tekton.dev", "tenant-a", true},
		{"sless-controller", "get", "taskruns.tekton.dev", "tenant-a", true},
		{"sless-controller", "update", "services.serving.knative.dev", "tenant-a", true},
		{"sless-controller", "update", "functions.sless.dev/status", "tenant-a", true},
		{"sless-controller", "update", "functions.sless.dev/finalizers", "tenant-a", true},
		{"sless-controller", "create", "leases.coordination.k8s.io", "sless-system", true},
		// Function Events (events.k8s.io, series by patch) and leader
		// election's (core/v1); never read or deleted.
		{"sless-controller", "create", "events.events.k8s.io", "tenant-a", true},
		{"sless-controller", "patch", "events.events.k8s.io", "tenant-a", true},
		{"sless-controller", "create", "events", "sless-system", true},
		{"sless-controller", "delete", "events.events.k8s.io", "tenant-a", false},
		{"sless-controller", "list", "events", "tenant-a", false},
		{"sless-controller", "create", "leases.coordination.k8s.io", "tenant-a", false},
		{"sless-controller", "delete", "pipelineruns.tekton.dev", "tenant-a", false},
		{"sless-controller", "delete", "pods", "tenant-a", false},
		{"sless-controller", "create", "functions.sless.dev", "tenant-a", false},
		{"sless-controller", "delete", "services.serving.knative.dev", "tenant-a", false},
		// Revisions are read one at a time for a tag's resolved digest.
		{"sless-controller", "get", "revisions.serving.knative.dev", "tenant-a", true},
		{"sless-controller", "list", "revisions.serving.knative.dev", "tenant-a", false},
		{"sless-controller", "update", "slessservices.sless.dev/status", "tenant-a", true},
		{"sless-controller", "update", "slessservices.sless.dev/finalizers", "tenant-a", true},
		{"sless-controller", "create", "slessservices.sless.dev", "tenant-a", false},
		{"sless-api", "create", "slessservices.sless.dev", "tenant-a", true},
		{"sless-api", "update", "slessservices.sless.dev/status", "tenant-a", false},
		{"sless-api", "create", "functions.sless.dev", "tenant-a", true},
		{"sless-api", "watch", "revisions.serving.knative.dev", "tenant-a", true},
		{"sless-api", "create", "pipelineruns.tekton.dev", "tenant-a", false},
		{"sless-api", "update", "functions.sless.dev/status", "tenant-a", false},
		// The logs routes read pods and their logs, and nothing more of them.
		{"sless-api", "get", "pods/log", "tenant-a", true},
		{"sless-api", "list", "pods", "tenant-a", true},
		{"sless-api", "delete", "pods", "tenant-a", false},
		{"sless-api", "create", "pods/exec", "tenant-a", false},
		// Ingress backends are dialled at their endpoints.
		{"sless-api", "watch", "endpointslices.discovery.k8s.io", "tenant-a", true},
		{"sless-api", "update", "endpointslices.discovery.k8s.io", "tenant-a", false},
		// The admission policy of resource maximums, written at start.
		{"sless-controller", "create", "validatingadmissionpolicies.admissionregistration.k8s.io", "", true},
		{"sless-controller", "update", "validatingadmissionpolicybindings.admissionregistration.k8s.io", "", true},
		{"sless-controller", "delete", "validatingadmissionpolicies.admissionregistration.k8s.io", "", false},
		{"sless-controller", "create", "validatingwebhookconfigurations.admissionregistration.k8s.io", "", false},
		{"sless-api", "create", "validatingadmissionpolicies.admissionregistration.k8s.io", "", false},
	}
	for _, tc := range tests {
		// "functions.sless.dev/status" would read as a resource named
		// "status"; subresources go in their own flag.
		resource, sub, _ := strings.Cut(tc.resource, "/")
		args := []string{"auth", "can-i", tc.verb, resource, "--as=system:serviceaccount:sless-system:" + tc.as}
		if tc.ns != "" {
			args = append(args, "-n", tc.ns)
		}
		if sub != "" {
			args = append(args, "--subresource="+sub)
		}
		out, _ := kubectl(t, k.Kubeconfig, args...)
		// The answer is the last line: a cluster-scoped resource comes with
		// a warning about namespaces before it.
		lines := strings.Split(strings.TrimSpace(out), "\n")
		got := strings.TrimSpace(lines[len(lines)-1]) == "yes"
		if got != tc.allowed {
			t.Errorf("%s can %s %s in %s: %q, want allowed=%v", tc.as, tc.verb, tc.resource, tc.ns, strings.TrimSpace(out), tc.allowed)
		}
	}
}
