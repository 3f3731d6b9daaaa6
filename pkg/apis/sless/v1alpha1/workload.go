package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// Kinds of Workload.
const (
	KindFunction     = "Function"
	KindSlessService = "SlessService"
)

// Modes a runtime wrapper runs code in: a function's handler is called
// once per event; a service's web app is handed the whole HTTP request.
const (
	ModeFunction = ""
	ModeService  = "service"
)

// Workload is what sless builds from source and serves with Knative: a
// Function or a SlessService. The path source → build → serve → status is
// written once against it (pkg/reconciler/function and the adapters).
//
// +kubebuilder:object:generate=false
type Workload interface {
	metav1.Object
	runtime.Object
	// WorkloadKind is the object's kind, as owner references name it.
	WorkloadKind() string
	// Mode is the runtime mode the code is built for (ModeFunction or
	// ModeService).
	Mode() string
	// BuildSpec is the spec the build and the Knative Service are made
	// from: a Function's own, a SlessService's mapped onto a Function's
	// fields. It is read, never written.
	BuildSpec() *FunctionSpec
	// WorkloadStatus is the object's status, written in place.
	WorkloadStatus() *FunctionStatus
	// SetDefaults fills what the CRD schema defaults.
	SetDefaults()
	// Timeout bounds one request, in seconds.
	Timeout() int32
	// BuildTimeout bounds one build, in seconds.
	BuildTimeout() int32
}

var (
	_ Workload = (*Function)(nil)
	_ Workload = (*SlessService)(nil)
)

func (fn *Function) WorkloadKind() string            { return KindFunction }
func (fn *Function) Mode() string                    { return ModeFunction }
func (fn *Function) BuildSpec() *FunctionSpec        { return &fn.Spec }
func (fn *Function) WorkloadStatus() *FunctionStatus { return &fn.Status }

func (s *SlessService) WorkloadKind() string            { return KindSlessService }
func (s *SlessService) Mode() string                    { return ModeService }
func (s *SlessService) WorkloadStatus() *FunctionStatus { return &s.Status }

// BuildSpec maps the service onto a Function's spec: minScale, maxScale
// and containerConcurrency become scale's min, max and containerConcurrency.
func (s *SlessService) BuildSpec() *FunctionSpec {
	sp := s.Spec
	out := &FunctionSpec{WorkloadSpec: sp.WorkloadSpec, TimeoutSeconds: sp.TimeoutSeconds}
	min := sp.MinScale
	if min == nil {
		min = ptr.To[int32](DefaultServiceMinScale)
	}
	out.Scale = &ScaleSpec{Min: min, Max: sp.MaxScale, ContainerConcurrency: sp.ContainerConcurrency}
	return out
}

// SetDefaults fills what the CRD schema defaults, so code that builds a
// SlessService in Go sees what the apiserver would store.
func (s *SlessService) SetDefaults() {
	sp := &s.Spec
	if sp.TimeoutSeconds == nil {
		sp.TimeoutSeconds = ptr.To[int32](DefaultServiceTimeoutSeconds)
	}
	if sp.MinScale == nil {
		sp.MinScale = ptr.To[int32](DefaultServiceMinScale)
	}
	if sp.BuildTimeoutSeconds == nil {
		sp.BuildTimeoutSeconds = ptr.To[int32](DefaultBuildTimeoutSeconds)
	}
}

// Timeout is the service's per-request budget in seconds.
func (s *SlessService) Timeout() int32 {
	if s.Spec.TimeoutSeconds == nil {
		return DefaultServiceTimeoutSeconds
	}
	return *s.Spec.TimeoutSeconds
}

// BuildTimeout is the bound of one build of the service, in seconds.
func (s *SlessService) BuildTimeout() int32 {
	if s.Spec.BuildTimeoutSeconds == nil {
		return DefaultBuildTimeoutSeconds
	}
	return *s.Spec.BuildTimeoutSeconds
}

// IsReady says whether the service's Ready condition is True for its current generation.
func (s *SlessService) IsReady() bool {
	if s.Status.ObservedGeneration != s.Generation {
		return false
	}
	for _, c := range s.Status.Conditions {
		if c.Type == FunctionConditionReady {
			return c.Status == "True"
		}
	}
	return false
}
