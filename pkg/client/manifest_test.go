package client

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// A service's scale is patched at the top of its spec, and only where the
// service differs from the manifest.
func TestManifestServicePatch(t *testing.T) {
	m := Manifest{Kind: KindService, MinScale: ptr.To[int32](0), MaxScale: ptr.To[int32](2), ContainerConcurrency: ptr.To[int64](5)}
	svc := &slessv1alpha1.SlessService{Spec: m.ServiceSpec(slessv1alpha1.FunctionSource{})}
	if p := m.Patch(svc.BuildSpec()); p != nil {
		t.Errorf("patch %v for a service with the manifest's scale", p)
	}
	svc.Spec.MaxScale = ptr.To[int32](4)
	svc.Spec.MinScale = nil // the default, 1
	p := m.Patch(svc.BuildSpec())
	spec, _ := p["spec"].(map[string]any)
	if len(spec) != 2 || spec["maxScale"] != int32(2) || spec["minScale"] != int32(0) {
		t.Errorf("patch %v, want minScale 0 and maxScale 2", p)
	}
}

// sless.yaml's volumes are the spec's: read strictly, checked by the CRD's
// rules before an upload, set on a new workload and patched onto one that
// differs.
func TestManifestVolumes(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) Manifest {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "sless.yaml"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := ReadManifest(dir)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	base := "name: hi\nruntime: python3.12\nentrypoint: main.handler\n"
	m := write(base + "volumes:\n- name: db\n  mountPath: /etc/db\n  secret:\n    secretName: db-creds\n- name: tmp\n  mountPath: /scratch\n  emptyDir:\n    sizeLimit: 64Mi\n")
	if err := m.Check(dir); err != nil {
		t.Fatal(err)
	}
	spec := m.Spec(slessv1alpha1.FunctionSource{})
	if len(spec.Volumes) != 2 || spec.Volumes[0].Secret.SecretName != "db-creds" || spec.Volumes[1].EmptyDir.SizeLimit.String() != "64Mi" {
		t.Fatalf("spec volumes %+v", spec.Volumes)
	}
	if p := m.Patch(&spec); p != nil {
		t.Errorf("patch %v for a function with the manifest's volumes", p)
	}
	cur := spec.DeepCopy()
	cur.Volumes = cur.Volumes[:1]
	if p := m.Patch(cur); p == nil || len(p["spec"].(map[string]any)["volumes"].([]slessv1alpha1.Volume)) != 2 {
		t.Errorf("patch %v, want the manifest's two volumes", p)
	}
	bad := write(base + "volumes:\n- name: code\n  mountPath: /sless/function\n  emptyDir: {}\n")
	if err := bad.Check(dir); err == nil || !strings.Contains(err.Error(), "volumes[0].mountPath") || !strings.Contains(err.Error(), "runtime's own paths") {
		t.Errorf("Check of a mount over the code: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sless.yaml"), []byte(base+"volumes:\n- name: a\n  mountPath: /a\n  hostPath: {path: /}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadManifest(dir); err == nil || !strings.Contains(err.Error(), "hostPath") {
		t.Errorf("an unknown volume kind read without error: %v", err)
	}
}
