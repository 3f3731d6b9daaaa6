package v1alpha1

import "k8s.io/apimachinery/pkg/api/resource"

// WorkloadSpec is what a Function and a SlessService ask for alike: the
// code, where it comes from, and what each instance gets. Both specs embed
// it inline, as Knative's Service embeds ConfigurationSpec, so their JSON
// keeps these fields at the top of spec.
type WorkloadSpec struct {
	// Runtime the code runs on. python3.11 and nodejs20 are aliases of
	// python3.12 and nodejs22.
	// +kubebuilder:validation:Enum=python3.12;nodejs22;go1.24;python3.11;nodejs20
	// +required
	Runtime string `json:"runtime"`

	// Entrypoint names what the wrapper loads, as module.attribute: a
	// Function's handler, or a SlessService's web app (a Python WSGI or ASGI
	// app object, a Node.js request listener or an object with one, a Go
	// http.Handler variable). The module is a dotted path for Python, a file
	// path without extension for Node.js, and for Go the package directory
	// (or "main" for the module root).
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z_$][A-Za-z0-9_$-]*([./][A-Za-z_$][A-Za-z0-9_$-]*)*\.[A-Za-z_$][A-Za-z0-9_$]*$`
	// +optional
	Entrypoint string `json:"entrypoint,omitempty"`

	// Source is where the code comes from: exactly one of inline, archive or image.
	// +required
	Source FunctionSource `json:"source"`

	// Env is the code's environment; values may come from Secrets and ConfigMaps.
	// +kubebuilder:validation:MaxItems=100
	// +listType=map
	// +listMapKey=name
	// +optional
	Env []EnvVar `json:"env,omitempty"`

	// MemoryMB is the memory limit (and request) of each instance.
	// +kubebuilder:validation:Minimum=64
	// +kubebuilder:validation:Maximum=4096
	// +kubebuilder:default=128
	// +optional
	MemoryMB *int32 `json:"memoryMB,omitempty"`

	// CPU is the CPU request of each instance, e.g. "250m".
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self > 0 : (isQuantity(self) && quantity(self).isGreaterThan(quantity('0')))",message="cpu must be a quantity greater than zero"
	// +optional
	CPU *resource.Quantity `json:"cpu,omitempty"`

	// BuildTimeoutSeconds bounds one image build.
	// +kubebuilder:validation:Minimum=60
	// +kubebuilder:validation:Maximum=7200
	// +kubebuilder:default=900
	// +optional
	BuildTimeoutSeconds *int32 `json:"buildTimeoutSeconds,omitempty"`

	// Rebuild, set to a value it has not had, runs the build of the current
	// code again if that build failed: a failure that may pass (a registry
	// or package index that was down, a buildTimeoutSeconds since raised)
	// is otherwise kept for that code, as a build's outcome is. A build that
	// succeeded is kept. Any value; a timestamp is usual.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([A-Za-z0-9._:+-]*[A-Za-z0-9])?$`
	// +optional
	Rebuild string `json:"rebuild,omitempty"`
}
