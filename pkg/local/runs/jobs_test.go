package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/local/apiserver"
	"github.com/sless-dev/sless/pkg/local/localtest"
	"github.com/sless-dev/sless/pkg/local/proc"
	"github.com/sless-dev/sless/pkg/local/serving"
)

// A FunctionJob in local mode reports as docs/triggers.md says and the
// cluster's job reconciler does: FunctionNotFound while its function is
// missing, the run's request id in the record and in the handler's
// context, 504 and DeadlineExceeded past the timeout, Idle for runID 0.
func TestFunctionJobMatchesCluster(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rig := newRunsRig(t, serving.ServerOptions{IdleTimeout: time.Minute})
	store, recs, runs := rig.store, rig.records, rig.runs

	// A job runs the serving revision's build with its settings, as the
	// server holds them and the status names them.
	code := `import os, time

class Timeout(Exception):
    pass

def handler(event, context):
    body = event['body'] or {}
    if body.get('fail') == 'value':
        raise ValueError('no rows for 2026-12-02')
    if body.get('fail') == 'own-timeout':
        raise Timeout('the upstream took too long')
    if body.get('fail') == 'exit':
        os._exit(3)
    if body.get('big'):
        return {'head': 'H' * 6000, 'tail': 'T' * 100}
    time.sleep(body.get('sleep', 0))
    return {'requestId': context.request_id}
`
	rig.serve(ctx, t, localtest.Function("ns", "calc"), code)
	jobLoop := apiserver.NewLoop("job", store, slessv1alpha1.SchemeGroupVersion.WithKind("FunctionJob").GroupKind(), runs.JobReconciler(), nil)
	go jobLoop.Run(ctx, nil, 1)

	// The helpers take the subtest's t: failing the parent from a subtest
	// is not allowed.
	create := func(t *testing.T, name, function string, runID int64, payload string, timeout *int32) {
		t.Helper()
		j := &slessv1alpha1.FunctionJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: slessv1alpha1.FunctionJobSpec{Function: function, RunID: runID, TimeoutSeconds: timeout,
				Payload: &apiextensionsv1.JSON{Raw: []byte(payload)}}}
		if err := store.Create(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	// await polls job name until done says it is there.
	await := func(t *testing.T, name string, done func(*slessv1alpha1.FunctionJob) bool) *slessv1alpha1.FunctionJob {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			j := &slessv1alpha1.FunctionJob{}
			if err := store.Get(ctx, types.NamespacedName{Namespace: "ns", Name: name}, j); err != nil {
				t.Fatal(err)
			}
			if done(j) {
				return j
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %s: status %+v", name, j.Status)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	finished := func(runID int64) func(*slessv1alpha1.FunctionJob) bool {
		return func(j *slessv1alpha1.FunctionJob) bool {
			return j.Status.RunID == runID && (j.Status.Phase == slessv1alpha1.JobPhaseSucceeded || j.Status.Phase == slessv1alpha1.JobPhaseFailed)
		}
	}
	record := func(t *testing.T, requestID string) invoke.Record {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			p, err := recs.List(ctx, invoke.Query{Namespace: "ns", Function: "calc", Trigger: invoke.TriggerJob, Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range p.Items {
				if r.RequestID == requestID {
					return r
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("no job record with request id %q among %+v", requestID, p.Items)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	cond := func(j *slessv1alpha1.FunctionJob, typ string) metav1.Condition {
		if c := meta.FindStatusCondition(j.Status.Conditions, typ); c != nil {
			return *c
		}
		return metav1.Condition{}
	}

	t.Run("function-not-found", func(t *testing.T) {
		create(t, "orphan", "nope", 1, `{}`, nil)
		j := await(t, "orphan", func(j *slessv1alpha1.FunctionJob) bool { return j.Status.RunID == 1 })
		if c := cond(j, slessv1alpha1.JobConditionReady); j.Status.Phase != slessv1alpha1.JobPhasePending ||
			c.Status != metav1.ConditionFalse || c.Reason != slessv1alpha1.JobReasonFunctionNotFound {
			t.Errorf("phase %s, Ready %s/%s; want Pending, False/%s", j.Status.Phase, c.Status, c.Reason, slessv1alpha1.JobReasonFunctionNotFound)
		}
	})

	t.Run("request-id", func(t *testing.T) {
		create(t, "rid", "calc", 1, `{}`, nil)
		j := await(t, "rid", finished(1))
		want := "job-" + string(j.UID) + "-1"
		var out struct {
			RequestID string `json:"requestId"`
		}
		if err := json.Unmarshal([]byte(j.Status.Output), &out); err != nil || out.RequestID != want {
			t.Errorf("handler's context.requestId from output %q: %q, want %q", j.Status.Output, out.RequestID, want)
		}
		if rec := record(t, want); rec.Status != 200 {
			t.Errorf("record %+v, want status 200", rec)
		}
		// The revision the run ran, kept in the status as a cluster keeps
		// it, so a run lost later is recorded with it too.
		if rec := record(t, want); j.Status.Revision == "" || j.Status.Revision != rec.Revision {
			t.Errorf("status.revision %q, record's revision %q; want the same, set", j.Status.Revision, rec.Revision)
		}
		if c := cond(j, slessv1alpha1.JobConditionComplete); c.Status != metav1.ConditionTrue || c.Reason != slessv1alpha1.JobReasonSucceeded {
			t.Errorf("Complete %s/%s", c.Status, c.Reason)
		}
	})

	t.Run("deadline", func(t *testing.T) {
		create(t, "slow", "calc", 1, `{"sleep": 30}`, ptr.To[int32](1))
		j := await(t, "slow", finished(1))
		if c := cond(j, slessv1alpha1.JobConditionComplete); j.Status.Phase != slessv1alpha1.JobPhaseFailed ||
			c.Status != metav1.ConditionFalse || c.Reason != slessv1alpha1.JobReasonDeadlineExceeded {
			t.Errorf("phase %s, Complete %s/%s (%s); want Failed, False/%s", j.Status.Phase, c.Status, c.Reason, c.Message, slessv1alpha1.JobReasonDeadlineExceeded)
		}
		if c := cond(j, slessv1alpha1.JobConditionComplete); !strings.Contains(c.Message, "function exceeded its timeout of 1s") {
			t.Errorf("Complete message %q does not name the timeout", c.Message)
		}
		if rec := record(t, "job-"+string(j.UID)+"-1"); rec.Status != 504 {
			t.Errorf("record status %d, want 504", rec.Status)
		}
	})

	// A handler's error reads as on a cluster: worded from the wrapper's
	// termination message, not the raw JSON; a handler's own exception
	// called Timeout is its failure, not the platform's deadline.
	for _, tc := range []struct{ fail, message string }{
		{"value", "the function failed with exit code 1: ValueError: no rows for 2026-12-02"},
		{"own-timeout", "the function failed with exit code 1: Timeout: the upstream took too long"},
		// No termination message and no output: the code alone, not a
		// dangling "code 3: ".
		{"exit", "the function exited with code 3"},
	} {
		t.Run("fails-"+tc.fail, func(t *testing.T) {
			create(t, "fails-"+tc.fail, "calc", 1, `{"fail": "`+tc.fail+`"}`, nil)
			j := await(t, "fails-"+tc.fail, finished(1))
			c := cond(j, slessv1alpha1.JobConditionComplete)
			if j.Status.Phase != slessv1alpha1.JobPhaseFailed || c.Status != metav1.ConditionFalse || c.Reason != slessv1alpha1.JobReasonFailed ||
				c.Message != tc.message || j.Status.Message != tc.message {
				t.Errorf("phase %s, Complete %s/%s %q, message %q; want Failed, False/%s %q", j.Status.Phase, c.Status, c.Reason, c.Message, j.Status.Message, slessv1alpha1.JobReasonFailed, tc.message)
			}
			if rec := record(t, "job-"+string(j.UID)+"-1"); rec.Status != 500 || rec.Error != tc.message {
				t.Errorf("record status %d error %q, want 500 %q", rec.Status, rec.Error, tc.message)
			}
		})
	}

	// A kubelet keeps the last 4 KiB of a termination message; a result
	// that fits locally but not on a cluster must not look fine here.
	t.Run("output-is-the-last-4KiB", func(t *testing.T) {
		create(t, "big", "calc", 1, `{"big": true}`, nil)
		j := await(t, "big", finished(1))
		full := `{"head": "` + strings.Repeat("H", 6000) + `", "tail": "` + strings.Repeat("T", 100) + `"}`
		if want := full[len(full)-4096:]; j.Status.Phase != slessv1alpha1.JobPhaseSucceeded || j.Status.Output != want {
			t.Errorf("phase %s, output of %d bytes starting %.20q; want Succeeded and the last 4096 bytes of the %d-byte result",
				j.Status.Phase, len(j.Status.Output), j.Status.Output, len(full))
		}
	})

	t.Run("back-to-idle", func(t *testing.T) {
		j := await(t, "rid", finished(1))
		j.Spec.RunID = 0
		if err := store.Update(ctx, j); err != nil {
			t.Fatal(err)
		}
		j = await(t, "rid", func(j *slessv1alpha1.FunctionJob) bool { return j.Status.ObservedGeneration == j.Generation })
		if c := cond(j, slessv1alpha1.JobConditionReady); j.Status.Phase != slessv1alpha1.JobPhaseIdle || j.Status.RunID != 0 ||
			j.Status.Output != "" || c.Status != metav1.ConditionTrue || c.Reason != slessv1alpha1.JobReasonIdle {
			t.Errorf("status %+v; want Idle, run 0, Ready True/%s", j.Status, slessv1alpha1.JobReasonIdle)
		}
		if c := meta.FindStatusCondition(j.Status.Conditions, slessv1alpha1.JobConditionComplete); c != nil {
			t.Errorf("Complete %+v kept for no run", c)
		}
	})
}

// readTermination keeps what a kubelet keeps of a termination file: its
// last 4096 bytes, here without a UTF-8 sequence cut at the front.
func TestReadTermination(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content, want string
	}{
		{"empty", "", ""},
		{"small", `{"ok": true}`, `{"ok": true}`},
		{"exactly the limit", strings.Repeat("a", 4096), strings.Repeat("a", 4096)},
		{"one byte over", "b" + strings.Repeat("a", 4096), strings.Repeat("a", 4096)},
		{"long", strings.Repeat("x", 10000) + "end", strings.Repeat("x", 4093) + "end"},
		// 4096 bytes from the end starts on the second byte of an é: that
		// byte is dropped, not kept to become U+FFFD.
		{"cut inside a sequence", "é" + strings.Repeat("a", 4095), strings.Repeat("a", 4095)},
		{"two-byte text over the limit", strings.Repeat("é", 3000), strings.Repeat("é", 2048)},
		{"three-byte text over the limit", strings.Repeat("€", 2000), strings.Repeat("€", 1365)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			if got := string(readTermination(path)); got != tc.want {
				t.Errorf("got %d bytes %.12q…, want %d bytes %.12q…", len(got), got, len(tc.want), tc.want)
			}
		})
	}
	if got := readTermination(filepath.Join(dir, "missing")); got != nil {
		t.Errorf("missing file: %q, want nothing", got)
	}
}

// Stopping sless dev kills a run in progress with it; the run then fails
// saying so, not as if the function had exited with an error of its own.
func TestFunctionJobStoppedWithSlessDev(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rig := newRunsRig(t, serving.ServerOptions{IdleTimeout: time.Minute})
	rig.serve(ctx, t, localtest.Function("ns", "calc"), `import time

def handler(event, context):
    print("run started", flush=True)
    time.sleep(60)
`)
	jobLoop := apiserver.NewLoop("job", rig.store, slessv1alpha1.SchemeGroupVersion.WithKind("FunctionJob").GroupKind(), rig.runs.JobReconciler(), nil)
	go jobLoop.Run(ctx, nil, 1)
	j := &slessv1alpha1.FunctionJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "long"},
		Spec: slessv1alpha1.FunctionJobSpec{Function: "calc", RunID: 1, TimeoutSeconds: ptr.To[int32](120)}}
	if err := rig.store.Create(ctx, j); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: "ns", Name: "long"}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := rig.store.Get(ctx, key, j); err != nil {
			t.Fatal(err)
		}
		if j.Status.Phase == slessv1alpha1.JobPhaseRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not start: %+v", j.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	rig.runs.Close() // what sless dev does when it stops; it waits for the run's status
	if err := rig.store.Get(ctx, key, j); err != nil {
		t.Fatal(err)
	}
	c := meta.FindStatusCondition(j.Status.Conditions, slessv1alpha1.JobConditionComplete)
	if j.Status.Phase != slessv1alpha1.JobPhaseFailed || j.Status.ExitCode == nil || *j.Status.ExitCode != 137 || c == nil ||
		c.Reason != slessv1alpha1.JobReasonFailed || !strings.Contains(c.Message, "sless dev shut down while it ran") {
		t.Errorf("status %+v; want Failed, exit code 137, Complete False/%s saying sless dev stopped", j.Status, slessv1alpha1.JobReasonFailed)
	}
}

// sless dev killed during a run (SIGKILL, a crash, a closed laptop lid that
// never came back) leaves the FunctionJob Running with no run in process.
// Started again, it marks the run lost — Failed, JobGone, recorded as a 500
// — as a cluster does for a Job deleted mid-run, instead of running the same
// runID a second time as it did.
func TestFunctionJobLostWithSlessDev(t *testing.T) {
	ctx := context.Background()
	rig := newRunsRig(t, serving.ServerOptions{IdleTimeout: time.Minute})
	rig.serve(ctx, t, localtest.Function("ns", "calc"), "def handler(event, context):\n    return {'ran': True}\n")
	j := &slessv1alpha1.FunctionJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "once"},
		Spec: slessv1alpha1.FunctionJobSpec{Function: "calc", RunID: 7}}
	if err := rig.store.Create(ctx, j); err != nil {
		t.Fatal(err)
	}
	started := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
	// What the run's start wrote: the revision it ran.
	j.Status = slessv1alpha1.FunctionJobStatus{Phase: slessv1alpha1.JobPhaseRunning, RunID: 7, JobName: "once-7", StartTime: &started,
		Revision: "calc-00001"}
	if err := rig.store.Status().Update(ctx, j); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: "ns", Name: "once"}
	for range 2 { // the second reconcile, of the status the first wrote, changes nothing
		if _, err := rig.runs.JobReconciler().Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
	}
	rig.runs.Close() // waits for a run, had one started
	if err := rig.store.Get(ctx, key, j); err != nil {
		t.Fatal(err)
	}
	c := meta.FindStatusCondition(j.Status.Conditions, slessv1alpha1.JobConditionComplete)
	if j.Status.Phase != slessv1alpha1.JobPhaseFailed || j.Status.RunID != 7 || !j.Status.StartTime.Equal(&started) ||
		j.Status.CompletionTime == nil || c == nil || c.Reason != slessv1alpha1.JobReasonJobGone || !strings.Contains(j.Status.Message, "set a new runID") {
		t.Errorf("status %+v; want Failed, Complete False/%s, the start kept", j.Status, slessv1alpha1.JobReasonJobGone)
	}
	if err := rig.recorder.Close(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := rig.records.List(ctx, invoke.Query{Namespace: "ns", Function: "calc", Trigger: invoke.TriggerJob, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != 1 || p.Items[0].Status != 500 || !strings.Contains(p.Items[0].RequestID, "-7") || !p.Items[0].StartedAt.Equal(started.Time) {
		t.Fatalf("records %+v; want the lost run once, as a 500", p.Items)
	}
	// As every other run's row, and as a cluster records a Job gone: the
	// revision that ran, and the time from the start to the loss.
	// (completionTime is stored to the second.)
	if got, d := p.Items[0], j.Status.CompletionTime.Sub(started.Time); got.Revision != "calc-00001" || got.Duration < time.Minute ||
		got.Duration < d || got.Duration >= d+time.Second {
		t.Errorf("record %+v; want revision calc-00001 and the duration from the start to %s", got, j.Status.CompletionTime)
	}
}

// Local mode draws the payload line where a cluster does: one byte over
// what the run's environment holds waits with PayloadTooLarge (before, the
// run failed to start, "argument list too long"), and a payload exactly at
// the limit runs and reaches the handler whole.
func TestFunctionJobPayloadAtTheLimit(t *testing.T) {
	ctx := context.Background()
	rig := newRunsRig(t, serving.ServerOptions{IdleTimeout: time.Minute})
	rig.serve(ctx, t, localtest.Function("ns", "calc"), "def handler(event, context):\n    return {'length': len(event['body'])}\n")
	for _, tc := range []struct {
		name   string
		size   int // of the JSON string payload, quotes included
		reason string
		output string
	}{
		{name: "over", size: slessv1alpha1.MaxPayloadBytes + 1, reason: slessv1alpha1.JobReasonPayloadTooLarge},
		{name: "at", size: slessv1alpha1.MaxPayloadBytes, output: fmt.Sprintf(`"length": %d`, slessv1alpha1.MaxPayloadBytes-2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := types.NamespacedName{Namespace: "ns", Name: "payload-" + tc.name}
			j := &slessv1alpha1.FunctionJob{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
				Spec: slessv1alpha1.FunctionJobSpec{Function: "calc", RunID: 1,
					Payload: &apiextensionsv1.JSON{Raw: []byte(`"` + strings.Repeat("a", tc.size-2) + `"`)}}}
			if err := rig.store.Create(ctx, j); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				if _, err := rig.runs.JobReconciler().Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
					t.Fatal(err)
				}
				if err := rig.store.Get(ctx, key, j); err != nil {
					t.Fatal(err)
				}
				ready := meta.FindStatusCondition(j.Status.Conditions, slessv1alpha1.JobConditionReady)
				if tc.reason != "" && ready != nil && ready.Reason == tc.reason && j.Status.Phase == slessv1alpha1.JobPhasePending {
					return
				}
				if tc.reason == "" && j.Status.Phase == slessv1alpha1.JobPhaseSucceeded && strings.Contains(j.Status.Output, tc.output) {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("status %+v", j.Status)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// A run over its function's memoryMB is killed by the kernel and fails
// in a kubelet's words: exit code 137, OOMKilled.
func TestFunctionJobOverMemoryIsOOMKilled(t *testing.T) {
	procs, err := proc.NewSupervisor(t.TempDir(), proc.SupervisorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := procs.Close(); err != nil {
			t.Error(err)
		}
	})
	if strings.Contains(procs.Warning(), "RLIMIT_DATA") {
		t.Skip("no memory cgroup here: " + procs.Warning())
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rig := newRunsRig(t, serving.ServerOptions{IdleTimeout: time.Minute, Procs: procs})
	fn := localtest.Function("ns", "hog")
	fn.Spec.MemoryMB = ptr.To[int32](64)
	rig.serve(ctx, t, fn, `def handler(event, context):
    b = bytearray(200 * 1024 * 1024)
    for i in range(0, len(b), 4096):
        b[i] = 1
    return len(b)
`)
	jobLoop := apiserver.NewLoop("job", rig.store, slessv1alpha1.SchemeGroupVersion.WithKind("FunctionJob").GroupKind(), rig.runs.JobReconciler(), nil)
	go jobLoop.Run(ctx, nil, 1)
	j := &slessv1alpha1.FunctionJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "big"},
		Spec: slessv1alpha1.FunctionJobSpec{Function: "hog", RunID: 1}}
	if err := rig.store.Create(ctx, j); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for j.Status.Phase != slessv1alpha1.JobPhaseFailed && j.Status.Phase != slessv1alpha1.JobPhaseSucceeded {
		if time.Now().After(deadline) {
			t.Fatalf("the run did not end: %+v", j.Status)
		}
		time.Sleep(50 * time.Millisecond)
		if err := rig.store.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "big"}, j); err != nil {
			t.Fatal(err)
		}
	}
	c := meta.FindStatusCondition(j.Status.Conditions, slessv1alpha1.JobConditionComplete)
	if j.Status.Phase != slessv1alpha1.JobPhaseFailed || j.Status.ExitCode == nil || *j.Status.ExitCode != 137 || c == nil ||
		!strings.Contains(c.Message, "exited with code 137 (OOMKilled)") {
		t.Errorf("status %+v; want Failed, exit code 137, a message saying OOMKilled", j.Status)
	}
}
