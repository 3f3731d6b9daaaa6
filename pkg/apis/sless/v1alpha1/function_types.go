package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Runtimes a Function may name. The aliases are accepted for compatibility and
// build on the runtime they map to (see CanonicalRuntime).
const (
	RuntimePython312 = "python3.12"
	RuntimeNodeJS22  = "nodejs22"
	RuntimeGo124     = "go1.24"

	RuntimePython311 = "python3.11"
	RuntimeNodeJS20  = "nodejs20"
)

// Bounds of a Function's spec; the CRD markers below carry the same numbers.
const (
	MinMemoryMB                = 64
	MaxMemoryMB                = 4096
	DefaultMemoryMB            = 128
	MinTimeoutSeconds          = 1
	MaxTimeoutSeconds          = 900
	DefaultTimeoutSeconds      = 30
	MinBuildTimeoutSeconds     = 60
	MaxBuildTimeoutSeconds     = 7200
	DefaultBuildTimeoutSeconds = 900
	MaxInlineBytes             = 256 * 1024
	MaxInlineFiles             = 256
	MaxEnvVars                 = 100
	MaxContainerConcurrency    = 1000
	MaxNameLength              = 52
)

// Function is source code (inline files, an uploaded archive or a prebuilt
// image) that sless builds with Tekton and serves as a Knative Service that
// scales to zero.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=fn;fns,categories=sless
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
// +kubebuilder:validation:XValidation:rule="!has(self.spec.traffic) || self.spec.traffic.all(t, !has(t.revisionName) || (size(t.revisionName) > size(self.metadata.name) && t.revisionName.startsWith(self.metadata.name) && t.revisionName.charAt(size(self.metadata.name)) == '-'))",message="revisionName must name a revision of this function: <name>-…",fieldPath=".spec.traffic"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.traffic) || self.spec.traffic.all(t, !has(t.tag) || size(t.tag) + size(self.metadata.name) < 63)",message="a tag and the name, joined by '-', must make a DNS label of at most 63 characters",fieldPath=".spec.traffic"
type Function struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec FunctionSpec `json:"spec"`
	// +optional
	Status FunctionStatus `json:"status,omitempty"`
}

// FunctionSpec is what the user asks for.
//
// +kubebuilder:validation:XValidation:rule="has(self.source.image) || has(self.entrypoint)",message="entrypoint is required when building from source",fieldPath=".entrypoint",reason="FieldValueRequired"
// +kubebuilder:validation:XValidation:rule="!has(self.source.image) || !has(self.rebuild)",message="rebuild retries a build, and a function whose source is an image has none",fieldPath=".rebuild"
// +kubebuilder:validation:XValidation:rule="!has(self.memoryMB) || !has(self.resources) || ((!has(self.resources.requests) || !('memory' in self.resources.requests)) && (!has(self.resources.limits) || !('memory' in self.resources.limits)))",message="memoryMB and resources' memory are one setting: set memory in one place only",fieldPath=".memoryMB"
// +kubebuilder:validation:XValidation:rule="!has(self.cpu) || !has(self.resources) || ((!has(self.resources.requests) || !('cpu' in self.resources.requests) || quantity(string(self.resources.requests['cpu'])).compareTo(quantity(string(self.cpu))) == 0) && (!has(self.resources.limits) || !('cpu' in self.resources.limits) || quantity(string(self.resources.limits['cpu'])).compareTo(quantity(string(self.cpu))) >= 0))",message="cpu sets the CPU request: resources.requests.cpu must equal it and resources.limits.cpu must not be below it",fieldPath=".cpu"
type FunctionSpec struct {
	WorkloadSpec `json:",inline"`

	// TimeoutSeconds bounds one invocation; every hop derives its timeout from it.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=900
	// +kubebuilder:default=30
	// +optional
	TimeoutSeconds *int32 `json:"timeoutSeconds,omitempty"`

	// Scale bounds the instance count and sets the autoscaling target.
	// +optional
	Scale *ScaleSpec `json:"scale,omitempty"`

	// Async governs calls made with Prefer: respond-async.
	// +optional
	Async *AsyncSpec `json:"async,omitempty"`
}

// Bounds and defaults of AsyncSpec.
const (
	DefaultAsyncConcurrency        = 10
	MaxAsyncConcurrency            = 1000
	DefaultAsyncMaxRetries         = 2
	MaxAsyncMaxRetries             = 10
	MinAsyncMaxEventAgeSeconds     = 60
	MaxAsyncMaxEventAgeSeconds     = 21600
	DefaultAsyncMaxEventAgeSeconds = 21600
)

// AsyncSpec governs a function's asynchronous calls: how many run at once,
// how long a failing one is retried before it is dead-lettered, and where
// results are posted.
type AsyncSpec struct {
	// Concurrency is how many asynchronous calls of the function run at once.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +kubebuilder:default=10
	// +optional
	Concurrency *int32 `json:"concurrency,omitempty"`
	// MaxRetries is how many times a call answered 5xx or timed out is
	// tried again.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10
	// +kubebuilder:default=2
	// +optional
	MaxRetries *int32 `json:"maxRetries,omitempty"`
	// MaxEventAgeSeconds is how long after its acceptance a call may still
	// be tried; an older one is dead-lettered.
	// +kubebuilder:validation:Minimum=60
	// +kubebuilder:validation:Maximum=21600
	// +kubebuilder:default=21600
	// +optional
	MaxEventAgeSeconds *int32 `json:"maxEventAgeSeconds,omitempty"`
	// OnSuccess receives a signed POST with the result of each call that
	// succeeded, unless the call named its own X-Callback-Url.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://[^/?#@\s]+([/?#]\S*)?$`
	// +optional
	OnSuccess string `json:"onSuccess,omitempty"`
	// OnFailure receives a signed POST with the result of each call that
	// failed or was dead-lettered, unless the call named its own
	// X-Callback-Url.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://[^/?#@\s]+([/?#]\S*)?$`
	// +optional
	OnFailure string `json:"onFailure,omitempty"`
}

// MaxCallbackURLLength bounds a callback URL, as the CRD's maxLength does.
const MaxCallbackURLLength = 2048

// MaxRebuildLength bounds FunctionSpec.Rebuild, as its CRD marker does.
const MaxRebuildLength = 63

// FunctionSource holds exactly one of its fields.
//
// +kubebuilder:validation:XValidation:rule="(has(self.inline) ? 1 : 0) + (has(self.archive) ? 1 : 0) + (has(self.image) ? 1 : 0) == 1",message="exactly one of inline, archive or image must be set"
type FunctionSource struct {
	// Inline is the code itself, file name to content.
	// +optional
	Inline *InlineSource `json:"inline,omitempty"`
	// Archive is an uploaded zip in S3; the upload API sets it.
	// +optional
	Archive *ArchiveSource `json:"archive,omitempty"`
	// Image is a prebuilt image reference, [registry[:port]/]path[:tag][@sha256:digest]
	// with a lower-case path; no build runs. A tag is resolved to a digest
	// when Knative creates the revision (status.image).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^(?:(?:localhost(?::[0-9]+)?|(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))+(?::[0-9]+)?|(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]):[0-9]+)/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$`
	// +optional
	Image string `json:"image,omitempty"`
}

// InlineSource is code carried in the Function itself, at most 256 KiB in all.
//
// +kubebuilder:validation:XValidation:rule="self.files.all(k, !k.startsWith('/') && !k.contains('\\\\') && !k.split('/').exists(p, p == '..' || p == '.' || size(p) == 0))",message="file names must be relative paths without '.', '..' or empty segments",fieldPath=".files"
// +kubebuilder:validation:XValidation:rule="self.files.map(k, size(self.files[k]) + size(k)).sum() <= 262144",message="inline files must total at most 262144 bytes",fieldPath=".files"
type InlineSource struct {
	// Files maps a relative path to the file's content.
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=256
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 255)",message="file names must be at most 255 characters"
	// +required
	Files map[string]string `json:"files"`
}

// ArchiveSource points at an uploaded zip, content-addressed by its sha256.
type ArchiveSource struct {
	// Bucket holds the archive; it must be the bucket sless is configured with.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +required
	Bucket string `json:"bucket"`
	// Key of the archive in the bucket.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +required
	Key string `json:"key"`
	// SHA256 of the zip, lower-case hex.
	// +kubebuilder:validation:Pattern=`^[a-f0-9]{64}$`
	// +required
	SHA256 string `json:"sha256"`
}

// EnvVar is one environment variable: a literal value or one taken from a
// Secret, ConfigMap or field (Kubernetes' EnvVarSource). valueFrom takes
// exactly one source, as a Pod's env does; fileKeyRef is refused, since a
// function has no volumes and Knative refuses it.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.value) && has(self.valueFrom))",message="env entries take value or valueFrom, not both"
// +kubebuilder:validation:XValidation:rule="!has(self.valueFrom) || (!has(self.valueFrom.fileKeyRef) && (has(self.valueFrom.secretKeyRef) ? 1 : 0) + (has(self.valueFrom.configMapKeyRef) ? 1 : 0) + (has(self.valueFrom.fieldRef) ? 1 : 0) + (has(self.valueFrom.resourceFieldRef) ? 1 : 0) == 1)",message="valueFrom takes exactly one of secretKeyRef, configMapKeyRef, fieldRef or resourceFieldRef",fieldPath=".valueFrom"
// +kubebuilder:validation:XValidation:rule="!has(self.valueFrom) || !has(self.valueFrom.secretKeyRef) || (has(self.valueFrom.secretKeyRef.name) && size(self.valueFrom.secretKeyRef.name) > 0)",message="secretKeyRef must name a Secret",fieldPath=".valueFrom.secretKeyRef.name",reason="FieldValueRequired"
// +kubebuilder:validation:XValidation:rule="!has(self.valueFrom) || !has(self.valueFrom.configMapKeyRef) || (has(self.valueFrom.configMapKeyRef.name) && size(self.valueFrom.configMapKeyRef.name) > 0)",message="configMapKeyRef must name a ConfigMap",fieldPath=".valueFrom.configMapKeyRef.name",reason="FieldValueRequired"
type EnvVar struct {
	// Name of the variable, a C identifier; PORT, K_SERVICE,
	// K_CONFIGURATION, K_REVISION and SLESS_* are reserved.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_]*$`
	// +kubebuilder:validation:XValidation:rule="!(self in ['PORT', 'K_SERVICE', 'K_CONFIGURATION', 'K_REVISION']) && !self.startsWith('SLESS_')",message="env names PORT, K_SERVICE, K_CONFIGURATION, K_REVISION and SLESS_* are reserved"
	// +required
	Name string `json:"name"`
	// Value is the variable's literal value.
	// +kubebuilder:validation:MaxLength=32768
	// +optional
	Value string `json:"value,omitempty"`
	// +optional
	ValueFrom *corev1.EnvVarSource `json:"valueFrom,omitempty"`
}

// ScaleSpec maps onto Knative's autoscaling annotations.
//
// +kubebuilder:validation:XValidation:rule="!has(self.min) || !has(self.max) || self.max >= self.min",message="max must be greater than or equal to min",fieldPath=".max"
type ScaleSpec struct {
	// Min instances; 0 lets the function scale to zero.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	Min *int32 `json:"min,omitempty"`
	// Max instances; unset means no limit.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +optional
	Max *int32 `json:"max,omitempty"`
	// Target concurrent requests per instance the autoscaler aims for.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +optional
	Target *int32 `json:"target,omitempty"`
	// ContainerConcurrency is the hard limit of concurrent requests per
	// instance; 0 means no limit.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	ContainerConcurrency *int64 `json:"containerConcurrency,omitempty"`
}

// FunctionPhase summarises where a Function is in its life.
// +kubebuilder:validation:Enum=Pending;Building;Deploying;Ready;Failed
type FunctionPhase string

const (
	FunctionPhasePending   FunctionPhase = "Pending"
	FunctionPhaseBuilding  FunctionPhase = "Building"
	FunctionPhaseDeploying FunctionPhase = "Deploying"
	FunctionPhaseReady     FunctionPhase = "Ready"
	FunctionPhaseFailed    FunctionPhase = "Failed"
)

// Condition types of a Function. Ready is true only when all the others are.
const (
	FunctionConditionSourceReady    = "SourceReady"
	FunctionConditionBuildSucceeded = "BuildSucceeded"
	FunctionConditionServiceReady   = "ServiceReady"
	FunctionConditionReady          = "Ready"
)

// FunctionStatus is what sless observed and did.
type FunctionStatus struct {
	// ObservedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	Phase FunctionPhase `json:"phase,omitempty"`
	// Conditions are SourceReady (the build context is stored),
	// BuildSucceeded (the image is built), ServiceReady (Knative serves the
	// current generation) and Ready (all three are True), each with the
	// reason and message of its latest change.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// SourceDigest is the sha256 of the build context built from the source.
	// +optional
	SourceDigest string `json:"sourceDigest,omitempty"`
	// Image is the image of the current revision, always pinned by digest:
	// the one built, or the digest a prebuilt tag resolved to (empty until
	// it is resolved). That revision may not serve yet (see ServingImage).
	// +optional
	Image string `json:"image,omitempty"`
	// BuildRef names the PipelineRun of the current source: the one
	// building, the one that failed, or the one that built Image.
	// +optional
	BuildRef string `json:"buildRef,omitempty"`
	// LatestCreatedRevision is the newest Knative revision.
	// +optional
	LatestCreatedRevision string `json:"latestCreatedRevision,omitempty"`
	// LatestReadyRevision is the revision that serves traffic.
	// +optional
	LatestReadyRevision string `json:"latestReadyRevision,omitempty"`
	// ServingImage is the image LatestReadyRevision runs, pinned by digest.
	// It differs from Image while a newer revision is deploying or has
	// failed to become ready; FunctionJob runs use it, so that they run the
	// code calls reach. Empty until a revision is ready.
	// +optional
	ServingImage string `json:"servingImage,omitempty"`
	// URL is where the function is invoked through sless.
	// +optional
	URL string `json:"url,omitempty"`
	// Address is the cluster-local address of the Knative Service the invoke
	// proxy forwards to.
	// +optional
	Address string `json:"address,omitempty"`
	// Traffic is the split that serves, each target with the revision it
	// resolved to and, when tagged, its URL (Knative's status.traffic).
	// +kubebuilder:validation:MaxItems=20
	// +optional
	Traffic []TrafficTarget `json:"traffic,omitempty"`
}

// FunctionList is a list of Functions.
//
// +kubebuilder:object:root=true
type FunctionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Function `json:"items"`
}

// CoreEnv is the Function's environment as Kubernetes containers take it.
func (s *FunctionSpec) CoreEnv() []corev1.EnvVar {
	if len(s.Env) == 0 {
		return nil
	}
	out := make([]corev1.EnvVar, len(s.Env))
	for i, e := range s.Env {
		out[i] = corev1.EnvVar{Name: e.Name, Value: e.Value, ValueFrom: e.ValueFrom.DeepCopy()}
	}
	return out
}
