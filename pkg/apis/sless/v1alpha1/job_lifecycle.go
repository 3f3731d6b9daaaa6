package v1alpha1

import (
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"
)

// JobConditionSet is a FunctionJob's: Ready says whether the current run
// could start (and why not), Complete how it ended. Neither is derived
// from the other.
var JobConditionSet = ConditionSet{Ready: JobConditionReady}

// Reasons of a FunctionJob's conditions, the same on a cluster and in
// local mode.
const (
	JobReasonIdle             = "Idle"
	JobReasonFunctionNotFound = "FunctionNotFound"
	JobReasonFunctionNotBuilt = "FunctionNotBuilt"
	JobReasonFunctionNotReady = "FunctionNotReady"
	JobReasonJobCreated       = "JobCreated"
	JobReasonJobConflict      = "JobConflict"
	JobReasonJobGone          = "JobGone"
	JobReasonPayloadTooLarge  = "PayloadTooLarge"
	JobReasonPending          = "Pending"
	JobReasonRunning          = "Running"
	JobReasonSucceeded        = "Succeeded"
	JobReasonFailed           = "Failed"
	JobReasonDeadlineExceeded = "DeadlineExceeded"
	JobReasonCreateFailed     = "CreateFailed"
)

// The verbs below describe the generation in s.ObservedGeneration: a
// reconciler sets it to the generation it reconciles before it marks
// anything.

func (s *FunctionJobStatus) conditions() conditions {
	return conditions{list: &s.Conditions, generation: s.ObservedGeneration}
}

// MarkIdle: runID is 0. Nothing of the last run is shown any more; a run
// in flight is not cut off.
func (s *FunctionJobStatus) MarkIdle() {
	*s = FunctionJobStatus{ObservedGeneration: s.ObservedGeneration, Phase: JobPhaseIdle, Conditions: s.Conditions}
	c := s.conditions()
	c.remove(JobConditionComplete)
	c.markTrue(JobConditionReady, JobReasonIdle, "runID is 0: nothing runs")
}

// BeginRun: the spec asks for run runID. When it is a new run, nothing of
// the last one describes it and it is Pending; the same run is left as it is.
func (s *FunctionJobStatus) BeginRun(runID int64) {
	if s.RunID == runID {
		return
	}
	*s = FunctionJobStatus{ObservedGeneration: s.ObservedGeneration, Conditions: s.Conditions, RunID: runID, Phase: JobPhasePending}
	s.conditions().remove(JobConditionComplete)
}

// MarkPayloadTooLarge: the run's environment cannot hold the payload; a
// smaller one starts the same runID.
func (s *FunctionJobStatus) MarkPayloadTooLarge(message string) {
	s.Phase = JobPhasePending
	s.conditions().markFalse(JobConditionReady, JobReasonPayloadTooLarge, message)
}

// MarkFunctionNotFound: the run's Function does not exist.
func (s *FunctionJobStatus) MarkFunctionNotFound(function string) {
	s.Phase = JobPhasePending
	s.conditions().markFalse(JobConditionReady, JobReasonFunctionNotFound, "Function "+function+" does not exist")
}

// MarkFunctionNotRunnable: the Function has no built image or no ready
// revision yet (reason FunctionNotBuilt or FunctionNotReady), as
// WaitReason words it.
func (s *FunctionJobStatus) MarkFunctionNotRunnable(reason, message string) {
	s.Phase = JobPhasePending
	s.conditions().markFalse(JobConditionReady, reason, message)
}

// MarkRevisionNotServing: the Function's status names a serving revision
// that cannot be found; it is looked at again.
func (s *FunctionJobStatus) MarkRevisionNotServing(function, revision string) {
	s.Phase = JobPhasePending
	s.conditions().markFalse(JobConditionReady, JobReasonFunctionNotReady,
		"revision "+revision+" of Function "+function+" does not serve")
}

// MarkJobConflict: something else of the run's name is in the way.
func (s *FunctionJobStatus) MarkJobConflict(jobName string) {
	s.Phase = JobPhasePending
	s.conditions().markFalse(JobConditionReady, JobReasonJobConflict,
		"a Job named "+jobName+" exists and is not owned by this FunctionJob")
}

// MarkCreateFailed: the run could not be started; it is tried again.
func (s *FunctionJobStatus) MarkCreateFailed(message string) {
	s.conditions().markFalse(JobConditionReady, JobReasonCreateFailed, "the run could not be started: "+message)
}

// MarkRunCreated: the run was handed to runner (its Job, or sless dev's
// process), which starts it.
func (s *FunctionJobStatus) MarkRunCreated(runner string) {
	s.conditions().markTrue(JobConditionReady, JobReasonJobCreated, "run "+strconv.FormatInt(s.RunID, 10)+" runs in "+runner)
}

// MarkRunPending: the run is handed over and has not started.
func (s *FunctionJobStatus) MarkRunPending() {
	s.Phase = JobPhasePending
	s.conditions().markUnknown(JobConditionComplete, JobReasonPending, "the run has not started yet")
}

// MarkRunRunning: the function runs.
func (s *FunctionJobStatus) MarkRunRunning() {
	s.Phase = JobPhaseRunning
	s.conditions().markUnknown(JobConditionComplete, JobReasonRunning, "the function runs")
}

// MarkRunSucceeded: the run ended well.
func (s *FunctionJobStatus) MarkRunSucceeded() {
	s.Phase, s.Message = JobPhaseSucceeded, ""
	s.conditions().markTrue(JobConditionComplete, JobReasonSucceeded, "the run succeeded")
}

// MarkRunFailed: the run ended in the function's failure, told by message.
func (s *FunctionJobStatus) MarkRunFailed(message string) {
	s.fail(JobReasonFailed, message)
}

// MarkRunTimedOut: the run outlived its timeout.
func (s *FunctionJobStatus) MarkRunTimedOut(message string) {
	s.fail(JobReasonDeadlineExceeded, message)
}

// MarkRunLost: what ran the run went away before it finished (cause says
// what); starting it again would run the same runID twice, so it failed.
func (s *FunctionJobStatus) MarkRunLost(cause string) {
	s.fail(JobReasonJobGone, "the run was lost: "+cause+"; set a new runID to run again")
}

func (s *FunctionJobStatus) fail(reason, message string) {
	// status.message says it too: it is what the run's record shows as its error.
	s.Phase, s.Message = JobPhaseFailed, message
	s.conditions().markFalse(JobConditionComplete, reason, message)
}

// IsFinished says whether the run of the status ended.
func (s *FunctionJobStatus) IsFinished() bool {
	return s.Phase == JobPhaseSucceeded || s.Phase == JobPhaseFailed
}

// TimedOut says whether the run ended for outliving its timeout.
func (s *FunctionJobStatus) TimedOut() bool {
	c := meta.FindStatusCondition(s.Conditions, JobConditionComplete)
	return s.Phase == JobPhaseFailed && c != nil && c.Reason == JobReasonDeadlineExceeded
}

// RunTimeout is a run's budget in seconds: the FunctionJob's own, else
// revisionTimeout, the function's timeout as its serving revision has it.
func (j *FunctionJob) RunTimeout(revisionTimeout int32) int32 {
	if j.Spec.TimeoutSeconds != nil {
		return *j.Spec.TimeoutSeconds
	}
	return revisionTimeout
}

// RunRequestID is run runID's request id: the handler's context.requestId
// and the run's invocation record's, so the two can be matched.
func (j *FunctionJob) RunRequestID(runID int64) string {
	return "job-" + string(j.UID) + "-" + strconv.FormatInt(runID, 10)
}
