package runs

import (
	"context"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/local/localtest"
	"github.com/sless-dev/sless/pkg/local/serving"
	"github.com/sless-dev/sless/pkg/reconciler/trigger"
)

// latestDue picks what the CronJob controller would start: the latest
// scheduled time since the last run, only within the starting deadline.
func TestLatestDue(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		name, schedule, tz string
		last, now          string
		deadline           time.Duration
		want               string // "" for none
	}{
		{name: "nothing missed", schedule: "* * * * *", last: "2026-12-03T10:00:00Z", now: "2026-12-03T10:00:30Z", deadline: 300 * time.Second},
		{name: "on time", schedule: "* * * * *", last: "2026-12-03T10:00:00Z", now: "2026-12-03T10:01:00Z", deadline: 300 * time.Second, want: "2026-12-03T10:01:00Z"},
		{name: "five missed run once, the latest", schedule: "* * * * *", last: "2026-12-03T10:00:00Z", now: "2026-12-03T10:05:30Z", deadline: 300 * time.Second, want: "2026-12-03T10:05:00Z"},
		{name: "latest missed beyond the deadline", schedule: "*/10 * * * *", last: "2026-12-03T09:00:00Z", now: "2026-12-03T10:06:00Z", deadline: 300 * time.Second},
		{name: "at the deadline exactly", schedule: "*/10 * * * *", last: "2026-12-03T09:00:00Z", now: "2026-12-03T10:05:00Z", deadline: 300 * time.Second, want: "2026-12-03T10:00:00Z"},
		{name: "stopped for days, hourly", schedule: "@hourly", last: "2026-11-28T10:00:00Z", now: "2026-12-03T10:02:00Z", deadline: 300 * time.Second, want: "2026-12-03T10:00:00Z"},
		{name: "day of month or day of week", schedule: "0 0 13 * 5", last: "2026-01-09T00:00:00Z", now: "2026-01-13T00:01:00Z", deadline: 300 * time.Second, want: "2026-01-13T00:00:00Z"},
		// 02:30 does not exist in Berlin on 2027-03-28: that day has no run.
		{name: "spring forward skips the day", schedule: "30 2 * * *", tz: "Europe/Berlin", last: "2027-03-27T01:30:00Z", now: "2027-03-28T02:00:00Z", deadline: 86400 * time.Second},
		// 02:30 happens twice in Berlin on 2026-10-25: both are run.
		{name: "autumn, first 02:30", schedule: "30 2 * * *", tz: "Europe/Berlin", last: "2026-10-24T00:30:00Z", now: "2026-10-25T00:31:00Z", deadline: 300 * time.Second, want: "2026-10-25T00:30:00Z"},
		{name: "autumn, second 02:30", schedule: "30 2 * * *", tz: "Europe/Berlin", last: "2026-10-25T00:30:00Z", now: "2026-10-25T01:31:00Z", deadline: 300 * time.Second, want: "2026-10-25T01:30:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sched, err := trigger.Schedule(tc.schedule, tc.tz)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := latestDue(sched, at(tc.last), at(tc.now), tc.deadline)
			if tc.want == "" {
				if ok {
					t.Errorf("due %s, want none", got.UTC())
				}
				return
			}
			if !ok || !got.Equal(at(tc.want)) {
				t.Errorf("due %s (%v), want %s", got.UTC(), ok, tc.want)
			}
		})
	}
}

// cronRig is a served function whose handler sleeps for the payload's
// "sleep" seconds, and Runs on a clock the test moves.
type cronRig struct {
	*runsRig
	offset atomic.Int64
}

func newCronRig(ctx context.Context, t *testing.T) *cronRig {
	r := &cronRig{runsRig: newRunsRig(t, serving.ServerOptions{IdleTimeout: time.Minute})}
	r.runs.now = func() time.Time { return time.Now().Add(time.Duration(r.offset.Load())) }
	r.runs.cronWake = 20 * time.Millisecond
	r.serve(ctx, t, localtest.Function("ns", "slow"),
		"import time\n\ndef handler(event, context):\n    time.sleep((event['body'] or {}).get('sleep', 0))\n    return {'ok': True}\n")
	return r
}

// setClock makes the runner's clock read at.
func (r *cronRig) setClock(at time.Time) { r.offset.Store(int64(time.Until(at))) }

// trigger creates a cron Trigger on the function with the given status
// lastScheduleTime and reconciles it, which starts its schedule.
func (r *cronRig) trigger(ctx context.Context, t *testing.T, name, schedule string, policy slessv1alpha1.ConcurrencyPolicy, deadline int64, sleep int, last *time.Time) {
	t.Helper()
	tr := &slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: slessv1alpha1.TriggerSpec{Function: "slow", Type: slessv1alpha1.TriggerTypeCron, Schedule: schedule,
			ConcurrencyPolicy: policy, StartingDeadlineSeconds: ptr.To(deadline),
			Payload: &apiextensionsv1.JSON{Raw: []byte(`{"sleep": ` + string(rune('0'+sleep)) + `}`)}}}
	if err := r.store.Create(ctx, tr); err != nil {
		t.Fatal(err)
	}
	if last != nil {
		tr.Status.LastScheduleTime = ptr.To(metav1.NewTime(*last))
		if err := r.store.Status().Update(ctx, tr); err != nil {
			t.Fatal(err)
		}
	}
	reconcileTriggerOnce(t, r.runs, name)
	t.Cleanup(func() {
		_ = r.store.Delete(context.Background(), tr)
		r.runs.unschedule(types.NamespacedName{Namespace: "ns", Name: name})
	})
}

func (r *cronRig) lastSchedule(ctx context.Context, t *testing.T, name string) time.Time {
	t.Helper()
	got := &slessv1alpha1.Trigger{}
	if err := r.store.Get(ctx, types.NamespacedName{Namespace: "ns", Name: name}, got); err != nil {
		t.Fatal(err)
	}
	if got.Status.LastScheduleTime == nil {
		return time.Time{}
	}
	return got.Status.LastScheduleTime.Time
}

// awaitLast waits until the trigger's lastScheduleTime is want.
func (r *cronRig) awaitLast(ctx context.Context, t *testing.T, name string, want time.Time) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for got := r.lastSchedule(ctx, t, name); !got.Equal(want); got = r.lastSchedule(ctx, t, name) {
		if time.Now().After(deadline) {
			t.Fatalf("lastScheduleTime %s, want %s", got.UTC(), want.UTC())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cronRecords waits for n cron records of the function started at or after
// since and returns them, oldest first.
func (r *cronRig) cronRecords(ctx context.Context, t *testing.T, since time.Time, n int) []invoke.Record {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		p, err := r.records.List(ctx, invoke.Query{Namespace: "ns", Function: "slow", Trigger: invoke.TriggerCron, Since: since, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Items) >= n || time.Now().After(deadline) {
			sort.Slice(p.Items, func(i, j int) bool { return p.Items[i].StartedAt.Before(p.Items[j].StartedAt) })
			if len(p.Items) != n {
				t.Fatalf("%d cron records, want %d: %+v", len(p.Items), n, p.Items)
			}
			return p.Items
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Times missed while sless dev was stopped are handled as the CronJob
// controller handles them: the latest is run once, at once, if it is within
// startingDeadlineSeconds, and none otherwise. Before, local mode never
// caught up: a run missed by a restart a second before its time was lost.
func TestCronMissedRuns(t *testing.T) {
	ctx := context.Background()
	rig := newCronRig(ctx, t)
	// A minute boundary well after the triggers' creation times.
	t0 := time.Now().Truncate(time.Minute).Add(10 * time.Minute)
	for i, tc := range []struct {
		name     string
		last     time.Duration // lastScheduleTime before t0
		deadline int64
		now      time.Duration // the clock after t0
		want     bool          // t0 is run
	}{
		{name: "five missed, within the deadline", last: 5 * time.Minute, deadline: 300, now: 30 * time.Second, want: true},
		{name: "missed beyond the deadline", last: 5 * time.Minute, deadline: 20, now: 30 * time.Second},
		{name: "already run", last: 0, deadline: 300, now: 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "missed-" + string(rune('a'+i))
			at := t0.Add(-tc.last)
			rig.setClock(t0.Add(tc.now))
			since := time.Now().Add(time.Duration(rig.offset.Load())).Add(-time.Second)
			rig.trigger(ctx, t, name, "* * * * *", slessv1alpha1.ConcurrencyForbid, tc.deadline, 0, &at)
			if !tc.want {
				// The schedule looks every 20 ms; give it many looks.
				time.Sleep(300 * time.Millisecond)
				if got := rig.lastSchedule(ctx, t, name); !got.Equal(at) {
					t.Fatalf("ran %s, want no run", got.UTC())
				}
				return
			}
			rig.awaitLast(ctx, t, name, t0)
			recs := rig.cronRecords(ctx, t, since, 1)
			if recs[0].Status != 200 || recs[0].Revision == "" {
				t.Errorf("record: %+v", recs[0])
			}
			// Once, not once per missed minute.
			time.Sleep(300 * time.Millisecond)
			rig.cronRecords(ctx, t, since, 1)
		})
	}
}

// A run slower than the schedule's interval meets the next time as a
// CronJob's Job would: Allow overlaps, Forbid holds the next time until the
// run ends and runs it then (it is still within the deadline), Replace
// cancels the run, recorded as 499 with the reason. Before, local mode ran
// Replace like Allow and dropped Forbid's held time.
func TestCronConcurrencyPolicy(t *testing.T) {
	ctx := context.Background()
	rig := newCronRig(ctx, t)
	t0 := time.Now().Truncate(time.Minute).Add(10 * time.Minute)
	for i, policy := range []slessv1alpha1.ConcurrencyPolicy{slessv1alpha1.ConcurrencyAllow, slessv1alpha1.ConcurrencyForbid, slessv1alpha1.ConcurrencyReplace} {
		t.Run(string(policy), func(t *testing.T) {
			base := t0.Add(time.Duration(i) * 10 * time.Minute)
			name := "every-minute-" + string(rune('a'+i))
			last := base.Add(-time.Minute)
			rig.setClock(base.Add(time.Second))
			since := base.Add(-time.Second)
			rig.trigger(ctx, t, name, "* * * * *", policy, 300, 3, &last)
			rig.awaitLast(ctx, t, name, base)
			// The first run takes 3 s; the next time comes during it.
			rig.setClock(base.Add(time.Minute + time.Second))
			rig.awaitLast(ctx, t, name, base.Add(time.Minute))
			recs := rig.cronRecords(ctx, t, since, 2)
			first, second := recs[0], recs[1]
			firstEnd := first.StartedAt.Add(first.Duration)
			switch policy {
			case slessv1alpha1.ConcurrencyAllow:
				if first.Status != 200 || second.Status != 200 || !second.StartedAt.Before(firstEnd) {
					t.Errorf("Allow: runs did not overlap: %+v", recs)
				}
			case slessv1alpha1.ConcurrencyForbid:
				if first.Status != 200 || second.Status != 200 || second.StartedAt.Before(firstEnd) {
					t.Errorf("Forbid: runs overlapped: %+v", recs)
				}
			case slessv1alpha1.ConcurrencyReplace:
				if first.Status != invoke.StatusClientClosed || first.Error == "" || second.Status != 200 {
					t.Errorf("Replace: the first run was not cancelled: %+v", recs)
				}
			}
		})
	}
}

// Local mode refuses a cron payload a cluster's run could not send, so a
// trigger that works under sless dev deploys; one at the limit schedules.
func TestCronPayloadLimitLocally(t *testing.T) {
	for _, tc := range []struct {
		name   string
		size   int
		status metav1.ConditionStatus
		reason string
	}{
		{name: "at-the-limit", size: slessv1alpha1.MaxPayloadBytes, status: metav1.ConditionTrue, reason: slessv1alpha1.TriggerReasonScheduled},
		{name: "one-byte-over", size: slessv1alpha1.MaxPayloadBytes + 1, status: metav1.ConditionFalse, reason: slessv1alpha1.TriggerReasonPayloadTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			store, _ := localtest.OpenStore(t)
			runs := New(store, nil, nil)
			defer runs.Close()
			if err := store.Create(ctx, localtest.Function("ns", "calc")); err != nil {
				t.Fatal(err)
			}
			tr := &slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "bulky"},
				Spec: slessv1alpha1.TriggerSpec{Function: "calc", Type: slessv1alpha1.TriggerTypeCron, Schedule: "@hourly",
					Payload: &apiextensionsv1.JSON{Raw: []byte(`"` + strings.Repeat("a", tc.size-2) + `"`)}}}
			if err := store.Create(ctx, tr); err != nil {
				t.Fatal(err)
			}
			_, got := reconcileTriggerOnce(t, runs, "bulky")
			runs.mu.Lock()
			_, scheduled := runs.crons[types.NamespacedName{Namespace: "ns", Name: "bulky"}]
			runs.mu.Unlock()
			if c := readyOf(got); c.Status != tc.status || c.Reason != tc.reason || scheduled != (tc.status == metav1.ConditionTrue) {
				t.Errorf("Ready %s/%s (%s), scheduled %v", c.Status, c.Reason, c.Message, scheduled)
			}
		})
	}
}
