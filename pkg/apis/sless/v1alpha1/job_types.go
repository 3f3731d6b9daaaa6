package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxJobTimeoutSeconds bounds one FunctionJob run.
const MaxJobTimeoutSeconds = 86400

// FunctionJob is a one-shot run of a Function's image on a payload. Changing
// runID runs it again; runID 0 means "do not run".
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=fnjob;fnjobs,categories=sless
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Function",type=string,JSONPath=`.spec.function`
// +kubebuilder:printcolumn:name="Run",type=integer,JSONPath=`.spec.runID`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.status!="True")].reason`,description="Why the run waits (Ready's reason) or has not succeeded (Complete's)"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="name must be a DNS-1123 label"
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 40",message="name must be at most 40 characters"
type FunctionJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec FunctionJobSpec `json:"spec"`
	// +optional
	Status FunctionJobStatus `json:"status,omitempty"`
}

// FunctionJobSpec is what the user asks for.
type FunctionJobSpec struct {
	// Function names the Function in the same namespace whose image runs.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=52
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Function string `json:"function"`
	// RunID identifies a run: a new value runs the job again, 0 runs nothing.
	// +kubebuilder:validation:Minimum=0
	// +optional
	RunID int64 `json:"runID,omitempty"`
	// Payload is the event body of the run.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	Payload *apiextensionsv1.JSON `json:"payload,omitempty"`
	// TimeoutSeconds bounds the run; unset, the timeoutSeconds of the
	// revision the function serves.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	// +optional
	TimeoutSeconds *int32 `json:"timeoutSeconds,omitempty"`
}

// JobPhase is where a run is.
// +kubebuilder:validation:Enum=Idle;Pending;Running;Succeeded;Failed
type JobPhase string

const (
	JobPhaseIdle      JobPhase = "Idle"
	JobPhasePending   JobPhase = "Pending"
	JobPhaseRunning   JobPhase = "Running"
	JobPhaseSucceeded JobPhase = "Succeeded"
	JobPhaseFailed    JobPhase = "Failed"
)

// Condition types of a FunctionJob.
const (
	JobConditionComplete = "Complete"
	JobConditionReady    = "Ready"
)

// FunctionJobStatus is what sless observed of the latest run.
type FunctionJobStatus struct {
	// ObservedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	Phase JobPhase `json:"phase,omitempty"`
	// Conditions are Ready (the run's Job is made, or False with why not
	// yet: FunctionNotFound, FunctionNotBuilt, FunctionNotReady) and
	// Complete (Unknown while the run goes, True when it succeeded, False
	// with DeadlineExceeded or Failed).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// RunID of the run this status describes.
	// +optional
	RunID int64 `json:"runID,omitempty"`
	// JobName of the batch Job of that run.
	// +optional
	JobName string `json:"jobName,omitempty"`
	// Revision is the Function's revision whose image and settings the run
	// runs, set when its Job is made. It stays when the Job is gone, so a
	// lost run is recorded with it as any other.
	// +optional
	Revision string `json:"revision,omitempty"`
	// StartTime is when the run's Job started.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// CompletionTime is when the run ended, in success or failure.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// ExitCode of the function's container.
	// +optional
	ExitCode *int32 `json:"exitCode,omitempty"`
	// Output is the run's result as JSON, from the container's termination message.
	// +optional
	Output string `json:"output,omitempty"`
	// Message explains a failure.
	// +optional
	Message string `json:"message,omitempty"`
}

// FunctionJobList is a list of FunctionJobs.
//
// +kubebuilder:object:root=true
type FunctionJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FunctionJob `json:"items"`
}
