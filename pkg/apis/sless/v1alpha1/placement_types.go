package v1alpha1

import corev1 "k8s.io/api/core/v1"

// ResourceSpec is what each instance asks of a node and may use, as a
// container's resources: cpu, memory, ephemeral-storage and extended
// resources such as nvidia.com/gpu. spec.memoryMB and spec.cpu are
// shorthands for the memory request and limit and the CPU request; where
// both name one value they must agree.
//
// +kubebuilder:validation:XValidation:rule="!has(self.requests) || self.requests.all(k, k in ['cpu', 'memory', 'ephemeral-storage'] || (has(self.limits) && k in self.limits && quantity(string(self.requests[k])).compareTo(quantity(string(self.limits[k]))) == 0))",message="extended resources are set in limits; a request, if given, must equal the limit",fieldPath=".requests"
// +kubebuilder:validation:XValidation:rule="!has(self.requests) || !has(self.limits) || self.requests.all(k, !(k in self.limits) || quantity(string(self.requests[k])).compareTo(quantity(string(self.limits[k]))) <= 0)",message="a request must not exceed its limit",fieldPath=".requests"
type ResourceSpec struct {
	// Requests is what the scheduler reserves for each instance.
	// +kubebuilder:validation:MaxProperties=6
	// +kubebuilder:validation:XValidation:rule="self.all(k, k in ['cpu', 'memory', 'ephemeral-storage'] || (k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?\\\\.)+[a-z0-9]([-a-z0-9]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$') && !k.split('/')[0].endsWith('kubernetes.io') && size(k) <= 253))",message="resource names are cpu, memory, ephemeral-storage or an extended resource such as nvidia.com/gpu"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !quantity(string(self[k])).isLessThan(quantity('0')))",message="resource quantities must not be negative"
	// +optional
	Requests corev1.ResourceList `json:"requests,omitempty"`
	// Limits caps each instance: over its memory limit it is killed
	// (OOMKilled), over its CPU limit throttled. Extended resources are
	// asked for here.
	// +kubebuilder:validation:MaxProperties=6
	// +kubebuilder:validation:XValidation:rule="self.all(k, k in ['cpu', 'memory', 'ephemeral-storage'] || (k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?\\\\.)+[a-z0-9]([-a-z0-9]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$') && !k.split('/')[0].endsWith('kubernetes.io') && size(k) <= 253))",message="resource names are cpu, memory, ephemeral-storage or an extended resource such as nvidia.com/gpu"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !quantity(string(self[k])).isLessThan(quantity('0')))",message="resource quantities must not be negative"
	// +kubebuilder:validation:XValidation:rule="!('memory' in self) || !quantity(string(self['memory'])).isLessThan(quantity('64Mi'))",message="a memory limit must be at least 64Mi"
	// +kubebuilder:validation:XValidation:rule="self.all(k, k in ['cpu', 'memory', 'ephemeral-storage'] || quantity(string(self[k])).isInteger())",message="extended resources are whole numbers"
	// +optional
	Limits corev1.ResourceList `json:"limits,omitempty"`
}

// Affinity is the part of a pod's affinity a function may set: node
// affinity. Pod (anti-)affinity between tenants' pods is not offered.
type Affinity struct {
	// NodeAffinity picks the nodes an instance may run on, as a pod's.
	// +kubebuilder:validation:XValidation:rule="!has(self.requiredDuringSchedulingIgnoredDuringExecution) || size(self.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms) > 0",message="requiredDuringSchedulingIgnoredDuringExecution needs at least one nodeSelectorTerm"
	// +optional
	NodeAffinity *corev1.NodeAffinity `json:"nodeAffinity,omitempty"`
}
