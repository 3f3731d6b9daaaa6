package v1alpha1

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// want is one condition a verb should leave, by type.
type want struct {
	typ    string
	status metav1.ConditionStatus
	reason string
	msg    string
}

func checkConditions(t *testing.T, got []metav1.Condition, gen int64, wants []want) {
	t.Helper()
	for _, w := range wants {
		c := meta.FindStatusCondition(got, w.typ)
		if c == nil {
			t.Errorf("no %s condition in %+v", w.typ, got)
			continue
		}
		if c.Status != w.status || c.Reason != w.reason || c.Message != w.msg || c.ObservedGeneration != gen {
			t.Errorf("%s = %s %s %q gen %d, want %s %s %q gen %d", w.typ, c.Status, c.Reason, c.Message, c.ObservedGeneration,
				w.status, w.reason, w.msg, gen)
		}
	}
}

// stepsTrue is a status of generation gen whose three steps are True.
func stepsTrue(gen int64) *FunctionStatus {
	s := &FunctionStatus{ObservedGeneration: gen, BuildRef: "b1"}
	s.MarkSourceStored()
	s.MarkBuildSucceeded()
	s.MarkServiceReady()
	return s
}

func TestFunctionVerbs(t *testing.T) {
	const gen = 3
	cases := []struct {
		name  string
		from  func() *FunctionStatus
		mark  func(*FunctionStatus)
		phase FunctionPhase
		want  []want
	}{
		{name: "prebuilt image", mark: (*FunctionStatus).MarkPrebuiltImage, phase: FunctionPhaseDeploying, want: []want{
			{FunctionConditionSourceReady, metav1.ConditionTrue, FunctionReasonPrebuiltImage, ""},
			{FunctionConditionBuildSucceeded, metav1.ConditionTrue, FunctionReasonPrebuiltImage, "no build: the source is an image"},
			{FunctionConditionReady, metav1.ConditionUnknown, "Pending", ""},
		}},
		{name: "source refused", mark: func(s *FunctionStatus) { s.MarkSourceRefused("BadZip", "not a zip") }, phase: FunctionPhaseFailed, want: []want{
			{FunctionConditionSourceReady, metav1.ConditionFalse, "BadZip", "not a zip"},
			{FunctionConditionBuildSucceeded, metav1.ConditionUnknown, FunctionReasonWaitingForSource, ""},
			{FunctionConditionReady, metav1.ConditionFalse, "BadZip", "not a zip"},
		}},
		{name: "storage unavailable", mark: func(s *FunctionStatus) { s.MarkSourceUnavailable("s3 down") }, phase: FunctionPhasePending, want: []want{
			{FunctionConditionSourceReady, metav1.ConditionUnknown, FunctionReasonStorageUnavailable, "s3 down"},
			{FunctionConditionReady, metav1.ConditionUnknown, FunctionReasonStorageUnavailable, "s3 down"},
		}},
		{name: "stored, no build yet", mark: (*FunctionStatus).MarkSourceStored, phase: FunctionPhasePending, want: []want{
			{FunctionConditionSourceReady, metav1.ConditionTrue, FunctionReasonContextStored, ""},
			{FunctionConditionReady, metav1.ConditionUnknown, "Pending", ""},
		}},
		{name: "building", from: func() *FunctionStatus {
			s := &FunctionStatus{ObservedGeneration: gen, BuildRef: "b1"}
			s.MarkSourceStored()
			return s
		}, mark: func(s *FunctionStatus) { s.MarkBuilding("", "step 2") }, phase: FunctionPhaseBuilding, want: []want{
			{FunctionConditionBuildSucceeded, metav1.ConditionUnknown, FunctionReasonBuilding, "step 2"},
			{FunctionConditionReady, metav1.ConditionUnknown, FunctionReasonBuilding, "step 2"},
		}},
		{name: "build started without a name is pending", from: func() *FunctionStatus {
			s := &FunctionStatus{ObservedGeneration: gen}
			s.MarkSourceStored()
			return s
		}, mark: func(s *FunctionStatus) { s.MarkBuilding("Queued", "") }, phase: FunctionPhasePending, want: []want{
			{FunctionConditionBuildSucceeded, metav1.ConditionUnknown, "Queued", ""},
		}},
		{name: "build error", mark: func(s *FunctionStatus) { s.MarkBuildError("apiserver down") }, phase: FunctionPhasePending, want: []want{
			{FunctionConditionBuildSucceeded, metav1.ConditionUnknown, FunctionReasonBuildError, "apiserver down"},
		}},
		{name: "build rejected", mark: func(s *FunctionStatus) { s.MarkBuildRejected("quota") }, phase: FunctionPhaseFailed, want: []want{
			{FunctionConditionBuildSucceeded, metav1.ConditionFalse, FunctionReasonBuildRejected, "quota"},
			{FunctionConditionReady, metav1.ConditionFalse, FunctionReasonBuildRejected, "quota"},
		}},
		{name: "build failed, builder's reason", mark: func(s *FunctionStatus) { s.MarkBuildFailed("BuildTimeout", "too slow") }, phase: FunctionPhaseFailed, want: []want{
			{FunctionConditionBuildSucceeded, metav1.ConditionFalse, "BuildTimeout", "too slow"},
			{FunctionConditionReady, metav1.ConditionFalse, "BuildTimeout", "too slow"},
		}},
		{name: "build failed, no reason", mark: func(s *FunctionStatus) { s.MarkBuildFailed("", "exit 1") }, phase: FunctionPhaseFailed, want: []want{
			{FunctionConditionBuildSucceeded, metav1.ConditionFalse, FunctionReasonBuildFailed, "exit 1"},
		}},
		{name: "awaiting image", from: func() *FunctionStatus {
			s := &FunctionStatus{ObservedGeneration: gen, BuildRef: "b1"}
			s.MarkSourceStored()
			s.MarkBuildSucceeded()
			return s
		}, mark: (*FunctionStatus).MarkServiceAwaitingImage, phase: FunctionPhaseBuilding, want: []want{
			{FunctionConditionServiceReady, metav1.ConditionUnknown, FunctionReasonWaitingForBuild, "the service is deployed once the image is built"},
			{FunctionConditionReady, metav1.ConditionUnknown, FunctionReasonWaitingForBuild, "the service is deployed once the image is built"},
		}},
		{name: "awaiting image keeps a service's condition", from: func() *FunctionStatus { return stepsTrue(gen) },
			mark: (*FunctionStatus).MarkServiceAwaitingImage, phase: FunctionPhaseReady, want: []want{
				{FunctionConditionServiceReady, metav1.ConditionTrue, FunctionReasonReady, ""},
			}},
		{name: "service rolling", from: func() *FunctionStatus { return stepsTrue(gen) },
			mark: func(s *FunctionStatus) { s.MarkServiceRolling("", "revision r2") }, phase: FunctionPhaseDeploying, want: []want{
				{FunctionConditionServiceReady, metav1.ConditionUnknown, FunctionReasonDeploying, "revision r2"},
				{FunctionConditionReady, metav1.ConditionUnknown, FunctionReasonDeploying, "revision r2"},
			}},
		{name: "service failed", from: func() *FunctionStatus { return stepsTrue(gen) },
			mark: func(s *FunctionStatus) { s.MarkServiceFailed("", "crash") }, phase: FunctionPhaseFailed, want: []want{
				{FunctionConditionServiceReady, metav1.ConditionFalse, FunctionReasonServiceError, "crash"},
				{FunctionConditionReady, metav1.ConditionFalse, FunctionReasonServiceError, "crash"},
			}},
		{name: "service rejected", mark: func(s *FunctionStatus) { s.MarkServiceRejected("policy") }, phase: FunctionPhaseFailed, want: []want{
			{FunctionConditionServiceReady, metav1.ConditionFalse, FunctionReasonServiceRejected, "policy"},
		}},
		{name: "service error", mark: func(s *FunctionStatus) { s.MarkServiceError("timeout") }, phase: FunctionPhasePending, want: []want{
			{FunctionConditionServiceReady, metav1.ConditionUnknown, FunctionReasonServiceError, "timeout"},
		}},
		{name: "all steps true", from: func() *FunctionStatus {
			s := &FunctionStatus{ObservedGeneration: gen, BuildRef: "b1"}
			s.MarkSourceStored()
			s.MarkBuildSucceeded()
			return s
		}, mark: (*FunctionStatus).MarkServiceReady, phase: FunctionPhaseReady, want: []want{
			{FunctionConditionServiceReady, metav1.ConditionTrue, FunctionReasonReady, ""},
			{FunctionConditionReady, metav1.ConditionTrue, FunctionReasonReady, ""},
		}},
		{name: "a step of an older generation is pending", from: func() *FunctionStatus {
			s := stepsTrue(gen - 1)
			s.ObservedGeneration = gen
			return s
		}, mark: (*FunctionStatus).MarkSourceStored, phase: FunctionPhaseBuilding, want: []want{
			{FunctionConditionSourceReady, metav1.ConditionTrue, FunctionReasonContextStored, ""},
			{FunctionConditionReady, metav1.ConditionUnknown, FunctionReasonBuildSucceeded, ""},
		}},
		{name: "cleanup failed", from: func() *FunctionStatus { return stepsTrue(gen) },
			mark: func(s *FunctionStatus) { s.MarkCleanupFailed("s3 down") }, phase: FunctionPhaseFailed, want: []want{
				{FunctionConditionReady, metav1.ConditionFalse, FunctionReasonCleanupFailed, "the Function is kept until its stored objects are deleted: s3 down"},
				{FunctionConditionServiceReady, metav1.ConditionTrue, FunctionReasonReady, ""},
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &FunctionStatus{ObservedGeneration: gen}
			if tc.from != nil {
				s = tc.from()
			}
			tc.mark(s)
			if s.Phase != tc.phase {
				t.Errorf("phase %s, want %s", s.Phase, tc.phase)
			}
			checkConditions(t, s.Conditions, gen, tc.want)
		})
	}
}

// A failed step speaks for Ready before a pending one, whatever their order.
func TestFunctionReadyFailedBeforePending(t *testing.T) {
	s := &FunctionStatus{ObservedGeneration: 1}
	s.MarkSourceUnavailable("s3 down")
	s.MarkServiceFailed("RevisionFailed", "crash loop")
	checkConditions(t, s.Conditions, 1, []want{{FunctionConditionReady, metav1.ConditionFalse, "RevisionFailed", "crash loop"}})
	if s.BuildFinished() {
		t.Error("no build condition, yet BuildFinished")
	}
	s.MarkBuildFailed("", "exit 1")
	if !s.BuildFinished() || s.BuildCondition().Reason != FunctionReasonBuildFailed || s.SourceCondition().Reason != FunctionReasonStorageUnavailable {
		t.Errorf("accessors: finished %v build %+v source %+v", s.BuildFinished(), s.BuildCondition(), s.SourceCondition())
	}
}

func TestJobVerbs(t *testing.T) {
	const gen = 2
	running := func() *FunctionJobStatus {
		s := &FunctionJobStatus{ObservedGeneration: gen}
		s.BeginRun(7)
		s.MarkRunCreated("Job j-7")
		s.MarkRunRunning()
		return s
	}
	cases := []struct {
		name    string
		from    func() *FunctionJobStatus
		mark    func(*FunctionJobStatus)
		phase   JobPhase
		message string
		want    []want
		absent  []string
	}{
		{name: "idle", from: running, mark: (*FunctionJobStatus).MarkIdle, phase: JobPhaseIdle,
			want:   []want{{JobConditionReady, metav1.ConditionTrue, JobReasonIdle, "runID is 0: nothing runs"}},
			absent: []string{JobConditionComplete}},
		{name: "new run forgets the last", from: func() *FunctionJobStatus {
			s := running()
			s.MarkRunFailed("boom")
			return s
		}, mark: func(s *FunctionJobStatus) { s.BeginRun(8) }, phase: JobPhasePending,
			want:   []want{{JobConditionReady, metav1.ConditionTrue, JobReasonJobCreated, "run 7 runs in Job j-7"}},
			absent: []string{JobConditionComplete}},
		{name: "same run kept", from: running, mark: func(s *FunctionJobStatus) { s.BeginRun(7) }, phase: JobPhaseRunning,
			want: []want{{JobConditionComplete, metav1.ConditionUnknown, JobReasonRunning, "the function runs"}}},
		{name: "payload too large", mark: func(s *FunctionJobStatus) { s.MarkPayloadTooLarge("too big") }, phase: JobPhasePending,
			want: []want{{JobConditionReady, metav1.ConditionFalse, JobReasonPayloadTooLarge, "too big"}}},
		{name: "function not found", mark: func(s *FunctionJobStatus) { s.MarkFunctionNotFound("f") }, phase: JobPhasePending,
			want: []want{{JobConditionReady, metav1.ConditionFalse, JobReasonFunctionNotFound, "Function f does not exist"}}},
		{name: "function not runnable", mark: func(s *FunctionJobStatus) { s.MarkFunctionNotRunnable(JobReasonFunctionNotBuilt, "no image") },
			phase: JobPhasePending, want: []want{{JobConditionReady, metav1.ConditionFalse, JobReasonFunctionNotBuilt, "no image"}}},
		{name: "revision not serving", mark: func(s *FunctionJobStatus) { s.MarkRevisionNotServing("f", "f-00002") }, phase: JobPhasePending,
			want: []want{{JobConditionReady, metav1.ConditionFalse, JobReasonFunctionNotReady, "revision f-00002 of Function f does not serve"}}},
		{name: "job conflict", mark: func(s *FunctionJobStatus) { s.MarkJobConflict("j-7") }, phase: JobPhasePending,
			want: []want{{JobConditionReady, metav1.ConditionFalse, JobReasonJobConflict, "a Job named j-7 exists and is not owned by this FunctionJob"}}},
		{name: "create failed", mark: func(s *FunctionJobStatus) { s.MarkCreateFailed("quota") },
			want: []want{{JobConditionReady, metav1.ConditionFalse, JobReasonCreateFailed, "the run could not be started: quota"}}},
		{name: "created and pending", from: func() *FunctionJobStatus {
			s := &FunctionJobStatus{ObservedGeneration: gen}
			s.BeginRun(3)
			return s
		}, mark: func(s *FunctionJobStatus) { s.MarkRunCreated("sless dev's process"); s.MarkRunPending() }, phase: JobPhasePending,
			want: []want{
				{JobConditionReady, metav1.ConditionTrue, JobReasonJobCreated, "run 3 runs in sless dev's process"},
				{JobConditionComplete, metav1.ConditionUnknown, JobReasonPending, "the run has not started yet"},
			}},
		{name: "succeeded", from: running, mark: (*FunctionJobStatus).MarkRunSucceeded, phase: JobPhaseSucceeded,
			want: []want{{JobConditionComplete, metav1.ConditionTrue, JobReasonSucceeded, "the run succeeded"}}},
		{name: "failed", from: running, mark: func(s *FunctionJobStatus) { s.MarkRunFailed("exit 1") }, phase: JobPhaseFailed, message: "exit 1",
			want: []want{{JobConditionComplete, metav1.ConditionFalse, JobReasonFailed, "exit 1"}}},
		{name: "timed out", from: running, mark: func(s *FunctionJobStatus) { s.MarkRunTimedOut("too slow") }, phase: JobPhaseFailed, message: "too slow",
			want: []want{{JobConditionComplete, metav1.ConditionFalse, JobReasonDeadlineExceeded, "too slow"}}},
		{name: "lost", from: running, mark: func(s *FunctionJobStatus) { s.MarkRunLost("its Job j-7 was deleted") }, phase: JobPhaseFailed,
			message: "the run was lost: its Job j-7 was deleted; set a new runID to run again",
			want: []want{{JobConditionComplete, metav1.ConditionFalse, JobReasonJobGone,
				"the run was lost: its Job j-7 was deleted; set a new runID to run again"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &FunctionJobStatus{ObservedGeneration: gen}
			if tc.from != nil {
				s = tc.from()
			}
			tc.mark(s)
			if s.Phase != tc.phase || s.Message != tc.message {
				t.Errorf("phase %s message %q, want %s %q", s.Phase, s.Message, tc.phase, tc.message)
			}
			if s.ObservedGeneration != gen {
				t.Errorf("observedGeneration %d, want %d", s.ObservedGeneration, gen)
			}
			checkConditions(t, s.Conditions, gen, tc.want)
			for _, typ := range tc.absent {
				if c := meta.FindStatusCondition(s.Conditions, typ); c != nil {
					t.Errorf("%s condition left: %+v", typ, c)
				}
			}
		})
	}
}

func TestJobFinished(t *testing.T) {
	s := &FunctionJobStatus{ObservedGeneration: 1}
	s.BeginRun(1)
	if s.IsFinished() || s.TimedOut() {
		t.Fatal("a pending run is finished")
	}
	s.MarkRunTimedOut("late")
	if !s.IsFinished() || !s.TimedOut() {
		t.Fatal("a timed-out run is not finished and timed out")
	}
	s.MarkRunFailed("exit 1")
	if !s.IsFinished() || s.TimedOut() {
		t.Fatal("a failed run is told as timed out")
	}
}

func TestTriggerVerbs(t *testing.T) {
	const gen = 5
	cases := []struct {
		name string
		mark func(*TriggerStatus)
		want want
	}{
		{"public", (*TriggerStatus).MarkPublic, want{status: metav1.ConditionTrue, reason: TriggerReasonPublic, msg: "anyone may call the function at its URL"}},
		{"scheduled, UTC", func(s *TriggerStatus) { s.MarkScheduled("*/5 * * * *", "") },
			want{status: metav1.ConditionTrue, reason: TriggerReasonScheduled, msg: "runs on schedule */5 * * * * (UTC)"}},
		{"scheduled, zone", func(s *TriggerStatus) { s.MarkScheduled("0 9 * * *", "Europe/Paris") },
			want{status: metav1.ConditionTrue, reason: TriggerReasonScheduled, msg: "runs on schedule 0 9 * * * (Europe/Paris)"}},
		{"consuming", func(s *TriggerStatus) { s.MarkConsuming("queue orders") },
			want{status: metav1.ConditionTrue, reason: TriggerReasonConsuming, msg: "consuming queue orders"}},
		{"consumer starting", func(s *TriggerStatus) { s.MarkConsumerStarting("connecting") },
			want{status: metav1.ConditionUnknown, reason: TriggerReasonConsumerNotAvailable, msg: "connecting"}},
		{"consumer failed", func(s *TriggerStatus) { s.MarkConsumerFailed("refused") },
			want{status: metav1.ConditionFalse, reason: TriggerReasonConsumerNotAvailable, msg: "refused"}},
		{"disabled http", func(s *TriggerStatus) { s.MarkDisabled(TriggerTypeHTTP) },
			want{status: metav1.ConditionFalse, reason: TriggerReasonDisabled, msg: "the trigger is disabled: the function is private"}},
		{"disabled cron", func(s *TriggerStatus) { s.MarkDisabled(TriggerTypeCron) },
			want{status: metav1.ConditionFalse, reason: TriggerReasonDisabled, msg: "the trigger is disabled: it is not scheduled"}},
		{"disabled queue", func(s *TriggerStatus) { s.MarkDisabled(TriggerTypeQueue) },
			want{status: metav1.ConditionFalse, reason: TriggerReasonDisabled, msg: "the trigger is disabled: messages wait in the queue"}},
		{"disabled mqtt", func(s *TriggerStatus) { s.MarkDisabled(TriggerTypeMQTT) },
			want{status: metav1.ConditionFalse, reason: TriggerReasonDisabled, msg: "the trigger is disabled: QoS 1 messages wait in the consumer's session on the broker, up to its queue limit"}},
		{"function not found", func(s *TriggerStatus) { s.MarkFunctionNotFound("f") },
			want{status: metav1.ConditionFalse, reason: TriggerReasonFunctionNotFound, msg: "Function f does not exist: the trigger is paused until it does"}},
		{"invalid schedule", func(s *TriggerStatus) { s.MarkInvalidSchedule(errors.New("bad field")) },
			want{status: metav1.ConditionFalse, reason: TriggerReasonInvalidSchedule, msg: "bad field: the trigger is paused until its schedule is fixed"}},
		{"payload too large", func(s *TriggerStatus) { s.MarkPayloadTooLarge("too big") },
			want{status: metav1.ConditionFalse, reason: TriggerReasonPayloadTooLarge, msg: "too big: the trigger is paused until it is smaller"}},
		{"no caller image", func(s *TriggerStatus) { s.MarkNoCallerImage(TriggerTypeCron) },
			want{status: metav1.ConditionFalse, reason: TriggerReasonNoCallerImage, msg: "the controller has no sless image configured (SLESS_IMAGE, --sless-image) to run cron triggers with"}},
		{"secret missing", func(s *TriggerStatus) { s.MarkConnectionSecretNotFound("amqp", "url", false) },
			want{status: metav1.ConditionFalse, reason: TriggerReasonConnectionSecretNotFound, msg: "Secret amqp (key url) does not exist"}},
		{"secret key missing", func(s *TriggerStatus) { s.MarkConnectionSecretNotFound("amqp", "url", true) },
			want{status: metav1.ConditionFalse, reason: TriggerReasonConnectionSecretNotFound, msg: "Secret amqp has no key url"}},
		{"credential failed", func(s *TriggerStatus) { s.MarkCredentialFailed("no key") },
			want{status: metav1.ConditionFalse, reason: TriggerReasonCredentialFailed, msg: "no key"}},
		{"pre-warm failed", func(s *TriggerStatus) { s.MarkPreWarmFailed("patch refused") },
			want{status: metav1.ConditionFalse, reason: TriggerReasonPreWarmFailed, msg: "patch refused"}},
		{"conflict", func(s *TriggerStatus) { s.MarkConflict("CronJob", "t-cron") },
			want{status: metav1.ConditionFalse, reason: TriggerReasonConflict, msg: "CronJob t-cron exists and is not owned by this trigger"}},
		{"rejected", func(s *TriggerStatus) { s.MarkRejected("Deployment", "t-consumer", errors.New("quota")) },
			want{status: metav1.ConditionFalse, reason: TriggerReasonRejected, msg: "Deployment t-consumer was refused: quota"}},
		{"queue not supported", func(s *TriggerStatus) { s.MarkQueueNotSupported(TriggerTypeQueue) },
			want{status: metav1.ConditionFalse, reason: TriggerReasonQueueNotSupported, msg: "sless dev consumes queues only from a broker it is given (-amqp-url or SLESS_AMQP_URL)"}},
		{"mqtt not supported", func(s *TriggerStatus) { s.MarkQueueNotSupported(TriggerTypeMQTT) },
			want{status: metav1.ConditionFalse, reason: TriggerReasonQueueNotSupported, msg: "sless dev consumes mqtt triggers only from a broker it is given (-mqtt-url or SLESS_MQTT_URL)"}},
		{"invalid queue", func(s *TriggerStatus) { s.MarkInvalidQueue(errors.New("no queue name")) },
			want{status: metav1.ConditionFalse, reason: TriggerReasonInvalidQueue, msg: "no queue name"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &TriggerStatus{ObservedGeneration: gen}
			s.MarkPublic() // a verb replaces what Ready said before
			tc.mark(s)
			tc.want.typ = TriggerConditionReady
			checkConditions(t, s.Conditions, gen, []want{tc.want})
			if len(s.Conditions) != 1 {
				t.Errorf("%d conditions, want Ready alone", len(s.Conditions))
			}
		})
	}
}
