package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FunctionConditionSet is a Function's (and a SlessService's): Ready is True
// only when source, build and service are, for the current generation.
var FunctionConditionSet = ConditionSet{
	Ready: FunctionConditionReady,
	Steps: []string{FunctionConditionSourceReady, FunctionConditionBuildSucceeded, FunctionConditionServiceReady},
}

// Reasons of a Function's conditions that sless itself decides; the
// builder's and server's own reasons (Tekton's, Knative's, local mode's)
// are passed through by the verbs that take a reason.
const (
	FunctionReasonContextStored      = "ContextStored"
	FunctionReasonPrebuiltImage      = "PrebuiltImage"
	FunctionReasonStorageUnavailable = "StorageUnavailable"
	FunctionReasonArchiveMissing     = "ArchiveMissing"
	FunctionReasonArchiveMismatch    = "ArchiveDigestMismatch"
	FunctionReasonArchiveBucket      = "ArchiveBucketMismatch"
	FunctionReasonWaitingForSource   = "WaitingForSource"
	FunctionReasonWaitingForBuild    = "WaitingForBuild"
	FunctionReasonBuilding           = "Building"
	FunctionReasonBuildError         = "BuildError"
	FunctionReasonBuildFailed        = "BuildFailed"
	FunctionReasonBuildSucceeded     = "Succeeded"
	FunctionReasonDeploying          = "Deploying"
	FunctionReasonServiceError       = "ServiceError"
	FunctionReasonServiceRejected    = "ServiceRejected"
	FunctionReasonBuildRejected      = "BuildRejected"
	FunctionReasonCleanupFailed      = "CleanupFailed"
	FunctionReasonReady              = "Ready"
)

// The verbs below describe the generation in s.ObservedGeneration: a
// reconciler sets it to the generation it reconciles before it marks
// anything. Each verb derives Ready and the phase again from the steps.

func (s *FunctionStatus) conditions() conditions {
	return conditions{list: &s.Conditions, generation: s.ObservedGeneration}
}

// MarkPrebuiltImage: the source is an image, so there is nothing to store
// or build.
func (s *FunctionStatus) MarkPrebuiltImage() {
	c := s.conditions()
	c.markTrue(FunctionConditionSourceReady, FunctionReasonPrebuiltImage, "")
	c.markTrue(FunctionConditionBuildSucceeded, FunctionReasonPrebuiltImage, "no build: the source is an image")
	s.derive()
}

// MarkSourceRefused: the source can never be built as it is (bad archive,
// bad files); the build waits for a new spec.
func (s *FunctionStatus) MarkSourceRefused(reason, message string) {
	c := s.conditions()
	c.markFalse(FunctionConditionSourceReady, reason, message)
	c.markUnknown(FunctionConditionBuildSucceeded, FunctionReasonWaitingForSource, "")
	s.derive()
}

// MarkSourceUnavailable: object storage could not be read or written; a
// retry may mend it.
func (s *FunctionStatus) MarkSourceUnavailable(message string) {
	s.conditions().markUnknown(FunctionConditionSourceReady, FunctionReasonStorageUnavailable, message)
	s.derive()
}

// MarkSourceStored: the build context of the source is in object storage.
func (s *FunctionStatus) MarkSourceStored() {
	s.conditions().markTrue(FunctionConditionSourceReady, FunctionReasonContextStored, "")
	s.derive()
}

// MarkBuildRejected: the apiserver or a webhook refused the build as asked.
func (s *FunctionStatus) MarkBuildRejected(message string) {
	s.conditions().markFalse(FunctionConditionBuildSucceeded, FunctionReasonBuildRejected, message)
	s.derive()
}

// MarkBuildError: the build could not be started or read; a retry may
// mend it.
func (s *FunctionStatus) MarkBuildError(message string) {
	s.conditions().markUnknown(FunctionConditionBuildSucceeded, FunctionReasonBuildError, message)
	s.derive()
}

// MarkBuilding: the build goes on, with the builder's reason (Building if
// it gave none).
func (s *FunctionStatus) MarkBuilding(reason, message string) {
	s.conditions().markUnknown(FunctionConditionBuildSucceeded, orDefault(reason, FunctionReasonBuilding), message)
	s.derive()
}

// MarkBuildFailed: the build ended without an image, with the builder's
// reason (BuildFailed if it gave none); the service keeps its last good one.
func (s *FunctionStatus) MarkBuildFailed(reason, message string) {
	s.conditions().markFalse(FunctionConditionBuildSucceeded, orDefault(reason, FunctionReasonBuildFailed), message)
	s.derive()
}

// MarkBuildSucceeded: the image of the source is built.
func (s *FunctionStatus) MarkBuildSucceeded() {
	s.conditions().markTrue(FunctionConditionBuildSucceeded, FunctionReasonBuildSucceeded, "")
	s.derive()
}

// MarkServiceAwaitingImage: nothing is deployed before an image is built;
// said only when the service has no condition yet, as one that served an
// earlier image keeps telling how that goes.
func (s *FunctionStatus) MarkServiceAwaitingImage() {
	if meta.FindStatusCondition(s.Conditions, FunctionConditionServiceReady) == nil {
		s.conditions().markUnknown(FunctionConditionServiceReady, FunctionReasonWaitingForBuild,
			"the service is deployed once the image is built")
	}
	s.derive()
}

// MarkServiceRejected: the apiserver or a webhook refused the service as
// asked (a quota, a policy).
func (s *FunctionStatus) MarkServiceRejected(message string) {
	s.conditions().markFalse(FunctionConditionServiceReady, FunctionReasonServiceRejected, message)
	s.derive()
}

// MarkServiceError: the service could not be written or read; a retry may
// mend it.
func (s *FunctionStatus) MarkServiceError(message string) {
	s.conditions().markUnknown(FunctionConditionServiceReady, FunctionReasonServiceError, message)
	s.derive()
}

// MarkServiceRolling: the service rolls out the current image, with the
// server's reason (Deploying if it gave none).
func (s *FunctionStatus) MarkServiceRolling(reason, message string) {
	s.conditions().markUnknown(FunctionConditionServiceReady, orDefault(reason, FunctionReasonDeploying), message)
	s.derive()
}

// MarkServiceFailed: the current image's revision will not become ready,
// with the server's reason (ServiceError if it gave none).
func (s *FunctionStatus) MarkServiceFailed(reason, message string) {
	s.conditions().markFalse(FunctionConditionServiceReady, orDefault(reason, FunctionReasonServiceError), message)
	s.derive()
}

// MarkServiceReady: the current image serves.
func (s *FunctionStatus) MarkServiceReady() {
	s.conditions().markTrue(FunctionConditionServiceReady, FunctionReasonReady, "")
	s.derive()
}

// MarkCleanupFailed: the object is being deleted and its stored objects
// could not be; it stays until they are. Ready says so directly: no step
// is at fault.
func (s *FunctionStatus) MarkCleanupFailed(message string) {
	s.Phase = FunctionPhaseFailed
	s.conditions().markFalse(FunctionConditionReady, FunctionReasonCleanupFailed,
		"the Function is kept until its stored objects are deleted: "+message)
}

// BuildFinished says whether the build condition tells an end (True or
// False), as opposed to a build going on or not yet known.
func (s *FunctionStatus) BuildFinished() bool {
	c := meta.FindStatusCondition(s.Conditions, FunctionConditionBuildSucceeded)
	return c != nil && c.Status != metav1.ConditionUnknown
}

// SourceCondition is the SourceReady condition, nil before the first.
func (s *FunctionStatus) SourceCondition() *metav1.Condition {
	return meta.FindStatusCondition(s.Conditions, FunctionConditionSourceReady)
}

// BuildCondition is the BuildSucceeded condition, nil before the first.
func (s *FunctionStatus) BuildCondition() *metav1.Condition {
	return meta.FindStatusCondition(s.Conditions, FunctionConditionBuildSucceeded)
}

// derive writes Ready and the phase from the three steps: Ready is True
// only when all are True for the current generation; a False one makes
// the Function Failed with its reason; otherwise the first unfinished step
// names the phase and gives Ready its reason.
func (s *FunctionStatus) derive() {
	c := s.conditions()
	failed, pending, step := FunctionConditionSet.stepsSummary(s.Conditions, s.ObservedGeneration)
	switch {
	case failed != nil:
		s.Phase = FunctionPhaseFailed
		c.markFalse(FunctionConditionReady, failed.Reason, failed.Message)
	case pending != nil:
		switch {
		case step == 0:
			s.Phase = FunctionPhasePending
		case step == 1 && s.BuildRef == "":
			s.Phase = FunctionPhasePending
		case step == 1 || pending.Reason == FunctionReasonWaitingForBuild:
			s.Phase = FunctionPhaseBuilding
		default:
			s.Phase = FunctionPhaseDeploying
		}
		c.markUnknown(FunctionConditionReady, pending.Reason, pending.Message)
	default:
		s.Phase = FunctionPhaseReady
		c.markTrue(FunctionConditionReady, FunctionReasonReady, "")
	}
}
