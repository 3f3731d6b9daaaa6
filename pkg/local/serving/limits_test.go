package serving

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/local/proc"
)

// What a process of a revision may use, from the shorthands, resources and
// the defaults, as the Knative Service's container asks for it.
func TestLimitsOf(t *testing.T) {
	s := &Server{opts: ServerOptions{PidsLimit: 64}}
	tests := []struct {
		name string
		spec slessv1alpha1.WorkloadSpec
		want proc.Limits
	}{
		{"defaults", slessv1alpha1.WorkloadSpec{}, proc.Limits{MemoryBytes: 128 << 20, Pids: 64}},
		{"shorthands", slessv1alpha1.WorkloadSpec{MemoryMB: ptr.To[int32](256), CPU: ptr.To(resource.MustParse("250m"))},
			proc.Limits{MemoryBytes: 256 << 20, CPURequestMilli: 250, Pids: 64}},
		{"resources: a CPU limit caps the process", slessv1alpha1.WorkloadSpec{Resources: &slessv1alpha1.ResourceSpec{
			Requests: corev1.ResourceList{"cpu": resource.MustParse("100m")},
			Limits:   corev1.ResourceList{"cpu": resource.MustParse("500m"), "memory": resource.MustParse("1Gi")}}},
			proc.Limits{MemoryBytes: 1 << 30, CPURequestMilli: 100, CPULimitMilli: 500, Pids: 64}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.limitsOf(&slessv1alpha1.FunctionSpec{WorkloadSpec: tc.spec})
			if err != nil || got != tc.want {
				t.Errorf("limitsOf = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	gpu := &slessv1alpha1.FunctionSpec{WorkloadSpec: slessv1alpha1.WorkloadSpec{Resources: &slessv1alpha1.ResourceSpec{
		Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}}
	if _, err := s.limitsOf(gpu); err == nil {
		t.Error("limitsOf took a GPU")
	}
}
