package e2e_test

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"

	"github.com/sless-dev/sless/pkg/adapter/resources"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// TestTrafficOnRealKnative: a Function's spec.traffic becomes its Knative
// Service's traffic block, which Knative's own webhook accepts and its
// Route serves; status.traffic is Knative's, with the tags' URLs; a
// rollback of traffic alone makes no revision; and a block Knative would
// refuse is refused at admission with a message like Knative's.
func TestTrafficOnRealKnative(t *testing.T) {
	s := newRealSlice(t)
	const name = "split"
	s.apply(name, "v1", 30)
	first := s.settle(name, 1)
	s.ready(first)
	s.apply(name, "v2", 30)
	second := s.settle(name, 2)
	s.ready(second)
	old, latest := first.Status.LatestReadyRevision, second.Status.LatestReadyRevision
	if old == latest {
		t.Fatalf("no second revision: %s", old)
	}

	// equal holds the Knative Service's traffic to the Function's, spec
	// and status.
	equal := func(fn *slessv1alpha1.Function) {
		t.Helper()
		ksvc := &servingv1.Service{}
		s.get(name, ksvc)
		if resources.TrafficDiffers(resources.MakeTraffic(fn), ksvc.Spec.Traffic) {
			t.Fatalf("Knative Service traffic %+v, the Function asks for %+v", ksvc.Spec.Traffic, fn.Spec.Traffic)
		}
		if len(ksvc.Status.Traffic) != len(fn.Status.Traffic) {
			t.Fatalf("Knative's status.traffic %+v, the Function's %+v", ksvc.Status.Traffic, fn.Status.Traffic)
		}
		for i, kt := range ksvc.Status.Traffic {
			ft := fn.Status.Traffic[i]
			if kt.RevisionName != ft.RevisionName || ptr.Deref(kt.Percent, 0) != ft.PercentOf() || kt.Tag != ft.Tag {
				t.Errorf("status.traffic[%d]: Knative's %+v, the Function's %+v", i, kt, ft)
			}
			if kt.Tag != "" && (kt.URL == nil || kt.URL.String() != ft.Address || !strings.HasSuffix(ft.URL, "/fn/"+s.ns+"/"+name+"@"+kt.Tag)) {
				t.Errorf("status.traffic[%d] tag %s: Knative's URL %v, the Function's address %q and URL %q", i, kt.Tag, kt.URL, ft.Address, ft.URL)
			}
		}
	}

	s.mustKubectl("patch", "function", name, "--type", "merge", "-p",
		`{"spec":{"traffic":[{"revisionName":"`+old+`","percent":50,"tag":"old"},{"latestRevision":true,"percent":50,"tag":"new"}]}}`)
	split := s.settle(name, 3)
	s.ready(split)
	equal(split)
	if split.Status.LatestCreatedRevision != latest {
		t.Errorf("a traffic change made revision %s", split.Status.LatestCreatedRevision)
	}
	shares := map[string]int64{}
	for _, tt := range split.Status.Traffic {
		shares[tt.RevisionName] += tt.PercentOf()
	}
	if shares[old] != 50 || shares[latest] != 50 {
		t.Errorf("status.traffic shares %v, want 50 each of %s and %s", shares, old, latest)
	}

	// Rollback: traffic alone, no new revision.
	s.mustKubectl("patch", "function", name, "--type", "merge", "-p", `{"spec":{"traffic":[{"revisionName":"`+old+`","percent":100}]}}`)
	back := s.settle(name, 4)
	s.ready(back)
	equal(back)
	if back.Status.LatestCreatedRevision != latest || len(back.Status.Traffic) != 1 || back.Status.Traffic[0].RevisionName != old {
		t.Errorf("after the rollback: latest created %s, traffic %+v", back.Status.LatestCreatedRevision, back.Status.Traffic)
	}

	// Admission refuses what Knative would.
	out, err := s.kubectl("patch", "function", name, "--type", "merge", "-p", `{"spec":{"traffic":[{"revisionName":"`+old+`","percent":60}]}}`)
	if err == nil || !strings.Contains(out, "traffic targets must sum to 100") {
		t.Errorf("a split that sums to 60: %v\n%s", err, out)
	}
}
