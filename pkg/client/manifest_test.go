package client

import (
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
