package client

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

func TestRolloutAndRollback(t *testing.T) {
	pct := func(n int64) *int64 { return ptr.To(n) }
	latest := ptr.To(true)
	tagged := []slessv1alpha1.TrafficTarget{
		{RevisionName: "f-00001", Percent: pct(90), Tag: "stable"},
		{LatestRevision: latest, Percent: pct(10), Tag: "canary"},
		{RevisionName: "f-00000", Tag: "ancient"},
	}
	tests := []struct {
		name string
		got  []slessv1alpha1.TrafficTarget
		want []slessv1alpha1.TrafficTarget
	}{
		{name: "rollout from no split", got: Rollout(nil, "f-00001", 10), want: []slessv1alpha1.TrafficTarget{
			{RevisionName: "f-00001", Percent: pct(90)}, {LatestRevision: latest, Percent: pct(10)}}},
		{name: "rollout keeps the tags", got: Rollout(tagged, "f-00001", 30), want: []slessv1alpha1.TrafficTarget{
			{RevisionName: "f-00001", Percent: pct(70), Tag: "stable"}, {LatestRevision: latest, Percent: pct(30), Tag: "canary"},
			{RevisionName: "f-00000", Tag: "ancient"}}},
		{name: "promote", got: Rollout(tagged, "f-00001", 100), want: []slessv1alpha1.TrafficTarget{
			{LatestRevision: latest, Percent: pct(100), Tag: "canary"}, {RevisionName: "f-00001", Tag: "stable"},
			{RevisionName: "f-00000", Tag: "ancient"}}},
		{name: "rollback keeps the tags with no share", got: Rollback(tagged, "f-00000"), want: []slessv1alpha1.TrafficTarget{
			{RevisionName: "f-00000", Percent: pct(100), Tag: "ancient"}, {RevisionName: "f-00001", Tag: "stable"},
			{LatestRevision: latest, Tag: "canary"}}},
		{name: "rollback of no split", got: Rollback(nil, "f-00001"), want: []slessv1alpha1.TrafficTarget{
			{RevisionName: "f-00001", Percent: pct(100)}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, tc.got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			if errs := slessv1alpha1.ValidateTraffic("f", "function", tc.got, nil); len(errs) > 0 {
				t.Errorf("the split is invalid: %v", errs.ToAggregate())
			}
		})
	}
}

func TestStableAndPreviousRevision(t *testing.T) {
	revs := []Revision{
		{Name: "f-00004", Ready: false},
		{Name: "f-00003", Ready: true, Percent: 100, Latest: true},
		{Name: "f-00002", Ready: false},
		{Name: "f-00001", Ready: true},
	}
	if got, err := PreviousRevision(revs); err != nil || got != "f-00001" {
		t.Errorf("PreviousRevision = %q, %v; want f-00001 (f-00002 never became ready)", got, err)
	}
	if got, err := StableRevision(revs, "f-00003"); err != nil || got != "f-00001" {
		t.Errorf("StableRevision with all on latest = %q, %v; want f-00001", got, err)
	}
	split := []Revision{{Name: "f-00003", Ready: true, Percent: 10}, {Name: "f-00002", Ready: true, Percent: 90}, {Name: "f-00001", Ready: true}}
	if got, err := StableRevision(split, "f-00003"); err != nil || got != "f-00002" {
		t.Errorf("StableRevision of a split = %q, %v; want f-00002", got, err)
	}
	if got, err := PreviousRevision(split); err != nil || got != "f-00001" {
		t.Errorf("PreviousRevision of a split = %q, %v; want f-00001", got, err)
	}
	if _, err := PreviousRevision([]Revision{{Name: "f-00001", Ready: true, Percent: 100}}); err == nil {
		t.Error("PreviousRevision of a single revision: no error")
	}
}

func TestRollbackTarget(t *testing.T) {
	revs := []Revision{
		{Name: "f-00003", Ready: true, Percent: 100, Latest: true},
		{Name: "f-00002", Ready: false, Reason: "BuildFailed"},
		{Name: "f-00001", Ready: true},
	}
	for _, tc := range []struct{ to, want, err string }{
		{"", "f-00001", ""},
		{"f-00003", "f-00003", ""},
		{"f-00009", "", "no such revision; it has f-00003, f-00002, f-00001"},
		{"f-00002", "", "not ready (BuildFailed)"},
	} {
		got, err := RollbackTarget(revs, tc.to)
		if tc.err == "" && (err != nil || got != tc.want) {
			t.Errorf("RollbackTarget(%q) = %q, %v; want %q", tc.to, got, err, tc.want)
		}
		if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("RollbackTarget(%q) = %q, %v; want an error saying %q", tc.to, got, err, tc.err)
		}
	}
}
