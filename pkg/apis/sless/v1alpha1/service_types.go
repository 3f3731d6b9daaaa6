package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Bounds of a SlessService's spec beyond a Function's; the CRD markers below
// carry the same numbers.
const (
	// DefaultServiceMinScale keeps one instance up: a web app holds
	// connections and warm state, so it scales to zero only when asked.
	DefaultServiceMinScale = 1
	// DefaultServiceTimeoutSeconds bounds one request to a service; longer
	// than a function's, as a page load or a stream is.
	DefaultServiceTimeoutSeconds = 300
	MaxScale                     = 1000
)

// SlessService is a long-running web app built from source like a Function
// (a Python WSGI or ASGI app, a Node.js request handler, a Go http.Handler)
// and served by a Knative Service that keeps minScale instances up. Calls
// reach it at /svc/{namespace}/{name}/ with the whole path passed through.
// It is named so as not to clash with Knative's Service in kubectl.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=ssvc,categories=sless
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Runtime",type=string,JSONPath=`.spec.runtime`,priority=1
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.status.latestReadyRevision`,priority=1
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.url`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="name must be a DNS-1035 label: lower-case letters, digits and '-', starting with a letter"
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 52",message="name must be at most 52 characters"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.traffic) || self.spec.traffic.all(t, !has(t.revisionName) || (size(t.revisionName) > size(self.metadata.name) && t.revisionName.startsWith(self.metadata.name) && t.revisionName.charAt(size(self.metadata.name)) == '-'))",message="revisionName must name a revision of this service: <name>-…",fieldPath=".spec.traffic"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.traffic) || self.spec.traffic.all(t, !has(t.tag) || size(t.tag) + size(self.metadata.name) < 63)",message="a tag and the name, joined by '-', must make a DNS label of at most 63 characters",fieldPath=".spec.traffic"
type SlessService struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec SlessServiceSpec `json:"spec"`
	// +optional
	Status FunctionStatus `json:"status,omitempty"`
}

// SlessServiceSpec is what the user asks for.
//
// +kubebuilder:validation:XValidation:rule="has(self.source.image) || has(self.entrypoint)",message="entrypoint is required when building from source",fieldPath=".entrypoint",reason="FieldValueRequired"
// +kubebuilder:validation:XValidation:rule="!has(self.source.image) || !has(self.rebuild)",message="rebuild retries a build, and a service whose source is an image has none",fieldPath=".rebuild"
// +kubebuilder:validation:XValidation:rule="!has(self.maxScale) || !has(self.minScale) || self.maxScale >= self.minScale",message="maxScale must be greater than or equal to minScale",fieldPath=".maxScale"
// +kubebuilder:validation:XValidation:rule="!has(self.memoryMB) || !has(self.resources) || ((!has(self.resources.requests) || !('memory' in self.resources.requests)) && (!has(self.resources.limits) || !('memory' in self.resources.limits)))",message="memoryMB and resources' memory are one setting: set memory in one place only",fieldPath=".memoryMB"
// +kubebuilder:validation:XValidation:rule="!has(self.cpu) || !has(self.resources) || ((!has(self.resources.requests) || !('cpu' in self.resources.requests) || quantity(string(self.resources.requests['cpu'])).compareTo(quantity(string(self.cpu))) == 0) && (!has(self.resources.limits) || !('cpu' in self.resources.limits) || quantity(string(self.resources.limits['cpu'])).compareTo(quantity(string(self.cpu))) >= 0))",message="cpu sets the CPU request: resources.requests.cpu must equal it and resources.limits.cpu must not be below it",fieldPath=".cpu"
type SlessServiceSpec struct {
	WorkloadSpec `json:",inline"`

	// TimeoutSeconds bounds one request, a WebSocket or an event stream
	// included.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=900
	// +kubebuilder:default=300
	// +optional
	TimeoutSeconds *int32 `json:"timeoutSeconds,omitempty"`

	// MinScale is the fewest instances kept running; 0 lets the service
	// scale to zero when idle.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +kubebuilder:default=1
	// +optional
	MinScale *int32 `json:"minScale,omitempty"`

	// MaxScale is the most instances; unset means no limit.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +optional
	MaxScale *int32 `json:"maxScale,omitempty"`

	// ContainerConcurrency is the hard limit of concurrent requests per
	// instance; 0 or unset means no limit.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	ContainerConcurrency *int64 `json:"containerConcurrency,omitempty"`
}

// SlessServiceList is a list of SlessServices.
//
// +kubebuilder:object:root=true
type SlessServiceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SlessService `json:"items"`
}
