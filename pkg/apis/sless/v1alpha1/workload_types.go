package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

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

	// MemoryMB is the memory limit and request of each instance, in MiB: a
	// shorthand for resources' memory. Unset with no memory in resources,
	// the site's default (128 unless configured).
	// +kubebuilder:validation:Minimum=64
	// +kubebuilder:validation:Maximum=4096
	// +optional
	MemoryMB *int32 `json:"memoryMB,omitempty"`

	// CPU is the CPU request of each instance, e.g. "250m": a shorthand for
	// resources.requests.cpu.
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self > 0 : (isQuantity(self) && quantity(self).isGreaterThan(quantity('0')))",message="cpu must be a quantity greater than zero"
	// +optional
	CPU *resource.Quantity `json:"cpu,omitempty"`

	// Resources are each instance's requests and limits: cpu, memory,
	// ephemeral-storage and extended resources (nvidia.com/gpu).
	// +optional
	Resources *ResourceSpec `json:"resources,omitempty"`

	// NodeSelector keeps instances on nodes with these labels.
	// Knative's kubernetes.podspec-nodeselector feature must be on. Keys
	// and values are label keys and values.
	// +kubebuilder:validation:MaxProperties=32
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Tolerations let instances run on nodes with matching taints.
	// Knative's kubernetes.podspec-tolerations feature must be on.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.operator) || t.operator in ['Exists', 'Equal'])",message="a toleration's operator is Exists or Equal"
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.operator) || t.operator != 'Exists' || !has(t.value) || size(t.value) == 0)",message="a toleration with operator Exists takes no value"
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.effect) || t.effect in ['', 'NoSchedule', 'PreferNoSchedule', 'NoExecute'])",message="a toleration's effect is NoSchedule, PreferNoSchedule or NoExecute"
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.tolerationSeconds) || (has(t.effect) && t.effect == 'NoExecute'))",message="tolerationSeconds is for the NoExecute effect only"
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// Affinity is node affinity, as a pod's.
	// Knative's kubernetes.podspec-affinity feature must be on.
	// +optional
	Affinity *Affinity `json:"affinity,omitempty"`

	// PriorityClassName names the PriorityClass of the instances.
	// Knative's kubernetes.podspec-priorityclassname feature must be on.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// RuntimeClassName names the RuntimeClass the instances run with
	// (gVisor's runsc, Kata). Knative's kubernetes.podspec-runtimeclassname
	// feature must be on.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	RuntimeClassName *string `json:"runtimeClassName,omitempty"`

	// Volumes are directories each instance sees at a path of its own:
	// Secrets and ConfigMaps as files, emptyDir scratch space, and
	// PersistentVolumeClaims. Mount paths may not overlap.
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(v, self.exists_one(w, w.mountPath == v.mountPath || w.mountPath.startsWith(v.mountPath + '/') || v.mountPath.startsWith(w.mountPath + '/')))",message="volumes' mount paths must not overlap: none may be another's or under it"
	// +listType=map
	// +listMapKey=name
	// +optional
	Volumes []Volume `json:"volumes,omitempty"`

	// Network is what instances may reach: spec.network.egress (all,
	// none, or listed destinations). Enforced by NetworkPolicies, where
	// the cluster's network plugin enforces them.
	// +optional
	Network *NetworkSpec `json:"network,omitempty"`

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

	// Traffic splits calls among the revisions, as a Knative Service's
	// traffic block does: the percents sum to 100, at most one target
	// follows the latest ready revision, tags are unique. Unset, every call
	// goes to the latest ready revision. A change of traffic alone makes
	// no new revision and starts no build.
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:XValidation:rule="size(self) == 0 || self.map(t, has(t.percent) ? t.percent : 0).sum() == 100",message="traffic targets must sum to 100: their percents add up to another total, want 100"
	// +kubebuilder:validation:XValidation:rule="self.filter(t, !has(t.revisionName)).size() <= 1",message="at most one traffic target may follow the latest revision"
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.tag) || self.filter(u, has(u.tag) && u.tag == t.tag).size() == 1)",message="each tag may name one traffic target only"
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.url) && !has(t.address))",message="url and address are set in status only"
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.latestRevision) || t.latestRevision != has(t.revisionName))",message="latestRevision: true takes no revisionName, and latestRevision: false needs one"
	// +optional
	Traffic []TrafficTarget `json:"traffic,omitempty"`
}

// MaxTrafficTargets bounds spec.traffic, as its CRD marker does.
const MaxTrafficTargets = 20

// TrafficTarget is one entry of a Function's or a SlessService's traffic
// split, as in a Knative Service's traffic block: a revision (named, or the
// latest ready one) takes Percent of the calls, and a Tag gives it a URL of
// its own. In status it also carries the revision the latest entry
// resolved to and the tag's URL.
type TrafficTarget struct {
	// Tag names the target: it answers at {tag}-{name}.{namespace}.<domain>
	// and /fn/{namespace}/{name}@{tag} (/svc/… for a service). A DNS-1035 label.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	Tag string `json:"tag,omitempty"`
	// RevisionName pins the target to one of the workload's revisions
	// (sless revisions NAME lists them); unset means the latest ready one.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	RevisionName string `json:"revisionName,omitempty"`
	// LatestRevision, true, makes the target follow the latest ready
	// revision; it is true when RevisionName is unset.
	// +optional
	LatestRevision *bool `json:"latestRevision,omitempty"`
	// Percent of the calls the target takes; unset is 0 (a tag alone).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	Percent *int64 `json:"percent,omitempty"`
	// URL is where a tagged target answers through sless; status only.
	// +optional
	URL string `json:"url,omitempty"`
	// Address is the cluster-local address of a tagged target, where the
	// invoke proxy forwards its calls; status only.
	// +optional
	Address string `json:"address,omitempty"`
}

// IsLatest tells a target that follows the latest ready revision.
func (t *TrafficTarget) IsLatest() bool {
	if t.LatestRevision != nil {
		return *t.LatestRevision
	}
	return t.RevisionName == ""
}

// PercentOf is the target's percent, 0 when unset.
func (t *TrafficTarget) PercentOf() int64 {
	if t.Percent == nil {
		return 0
	}
	return *t.Percent
}
