package v1alpha1_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	v1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

func q(s string) resource.Quantity { return resource.MustParse(s) }

func mib(n int64) resource.Quantity { return *resource.NewQuantity(n<<20, resource.BinarySI) }

// How the shorthands, spec.resources and the site's defaults make one
// container's resources.
func TestResourceRequirements(t *testing.T) {
	site := &v1.ResourceSpec{
		Requests: corev1.ResourceList{corev1.ResourceCPU: q("100m")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: mib(256), corev1.ResourceCPU: q("1")},
	}
	tests := []struct {
		name     string
		spec     v1.WorkloadSpec
		defaults *v1.ResourceSpec
		want     corev1.ResourceRequirements
	}{{
		name: "nothing: 128Mi request and limit",
		want: corev1.ResourceRequirements{Requests: corev1.ResourceList{"memory": mib(128)}, Limits: corev1.ResourceList{"memory": mib(128)}},
	}, {
		name: "memoryMB and cpu",
		spec: v1.WorkloadSpec{MemoryMB: ptr.To[int32](512), CPU: ptr.To(q("250m"))},
		want: corev1.ResourceRequirements{Requests: corev1.ResourceList{"memory": mib(512), "cpu": q("250m")}, Limits: corev1.ResourceList{"memory": mib(512)}},
	}, {
		name: "cpu with a limit in resources",
		spec: v1.WorkloadSpec{CPU: ptr.To(q("250m")), Resources: &v1.ResourceSpec{Limits: corev1.ResourceList{"cpu": q("2")}}},
		want: corev1.ResourceRequirements{Requests: corev1.ResourceList{"memory": mib(128), "cpu": q("250m")}, Limits: corev1.ResourceList{"memory": mib(128), "cpu": q("2")}},
	}, {
		name: "a memory request stands for the limit; a gpu limit for its request",
		spec: v1.WorkloadSpec{Resources: &v1.ResourceSpec{Requests: corev1.ResourceList{"memory": q("1Gi")}, Limits: corev1.ResourceList{"nvidia.com/gpu": q("1")}}},
		want: corev1.ResourceRequirements{Requests: corev1.ResourceList{"memory": q("1Gi"), "nvidia.com/gpu": q("1")}, Limits: corev1.ResourceList{"memory": q("1Gi"), "nvidia.com/gpu": q("1")}},
	}, {
		name:     "site defaults fill what the spec names nowhere",
		defaults: site,
		want: corev1.ResourceRequirements{Requests: corev1.ResourceList{"memory": mib(256), "cpu": q("100m")},
			Limits: corev1.ResourceList{"memory": mib(256), "cpu": q("1")}},
	}, {
		name:     "a resource the spec names takes no default at all",
		spec:     v1.WorkloadSpec{MemoryMB: ptr.To[int32](64), Resources: &v1.ResourceSpec{Requests: corev1.ResourceList{"cpu": q("2")}}},
		defaults: site,
		want:     corev1.ResourceRequirements{Requests: corev1.ResourceList{"memory": mib(64), "cpu": q("2")}, Limits: corev1.ResourceList{"memory": mib(64)}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.spec.ResourceRequirements(tc.defaults)
			if d := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); d != "" {
				t.Errorf("ResourceRequirements (-want +got):\n%s", d)
			}
		})
	}
}
