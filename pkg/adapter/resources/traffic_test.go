package resources

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
	"knative.dev/pkg/apis"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

func TestMakeTraffic(t *testing.T) {
	tests := []struct {
		name    string
		traffic []slessv1alpha1.TrafficTarget
		want    []servingv1.TrafficTarget
	}{{
		name: "none: Knative's default",
	}, {
		name: "a canary beside a pinned revision, both tagged",
		traffic: []slessv1alpha1.TrafficTarget{
			{RevisionName: "hello-00001", Percent: ptr.To[int64](90), Tag: "stable"},
			{LatestRevision: ptr.To(true), Percent: ptr.To[int64](10), Tag: "canary"},
		},
		want: []servingv1.TrafficTarget{
			{RevisionName: "hello-00001", LatestRevision: ptr.To(false), Percent: ptr.To[int64](90), Tag: "stable"},
			{LatestRevision: ptr.To(true), Percent: ptr.To[int64](10), Tag: "canary"},
		},
	}, {
		name: "latest implied, percent unset on a tag alone",
		traffic: []slessv1alpha1.TrafficTarget{
			{RevisionName: "hello-00002", Percent: ptr.To[int64](100)},
			{Tag: "next"},
		},
		want: []servingv1.TrafficTarget{
			{RevisionName: "hello-00002", LatestRevision: ptr.To(false), Percent: ptr.To[int64](100)},
			{LatestRevision: ptr.To(true), Percent: ptr.To[int64](0), Tag: "next"},
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fn := testFunction(func(fn *slessv1alpha1.Function) { fn.Spec.Traffic = tc.traffic })
			if d := cmp.Diff(tc.want, MakeTraffic(fn)); d != "" {
				t.Errorf("MakeTraffic (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.want, MakeService(fn, "img@"+digest, Config{}).Spec.Traffic); d != "" {
				t.Errorf("MakeService's traffic (-want +got):\n%s", d)
			}
		})
	}
}

func TestTrafficDiffers(t *testing.T) {
	split := []servingv1.TrafficTarget{
		{RevisionName: "f-00001", LatestRevision: ptr.To(false), Percent: ptr.To[int64](50)},
		{LatestRevision: ptr.To(true), Percent: ptr.To[int64](50), Tag: "b"},
	}
	tests := []struct {
		name       string
		want, have []servingv1.TrafficTarget
		diff       bool
	}{
		{name: "none and Knative's default", have: DefaultTraffic()},
		{name: "none and nothing"},
		{name: "split as written", want: split, have: split},
		{name: "split as Knative defaults it", want: split, have: []servingv1.TrafficTarget{
			{RevisionName: "f-00001", Percent: ptr.To[int64](50)},
			{Percent: ptr.To[int64](50), Tag: "b"},
		}},
		{name: "split removed", have: split, diff: true},
		{name: "split added", want: split, have: DefaultTraffic(), diff: true},
		{name: "percent moved", want: split, have: []servingv1.TrafficTarget{split[0], {LatestRevision: ptr.To(true), Percent: ptr.To[int64](40), Tag: "b"}}, diff: true},
		{name: "tag changed", want: split, have: []servingv1.TrafficTarget{split[0], {LatestRevision: ptr.To(true), Percent: ptr.To[int64](50), Tag: "c"}}, diff: true},
		{name: "revision changed", want: split, have: []servingv1.TrafficTarget{{RevisionName: "f-00002", Percent: ptr.To[int64](50)}, split[1]}, diff: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := TrafficDiffers(tc.want, tc.have); got != tc.diff {
				t.Errorf("TrafficDiffers = %v, want %v", got, tc.diff)
			}
		})
	}
}

func TestTrafficStatus(t *testing.T) {
	svc := &servingv1.Service{}
	if got := TrafficStatus(svc); got != nil {
		t.Errorf("no status.traffic: %v", got)
	}
	u := apis.HTTP("canary-hello.team-a.svc.cluster.local")
	svc.Status.Traffic = []servingv1.TrafficTarget{
		{RevisionName: "hello-00001", LatestRevision: ptr.To(false), Percent: ptr.To[int64](90)},
		{RevisionName: "hello-00002", LatestRevision: ptr.To(true), Percent: ptr.To[int64](10), Tag: "canary", URL: u},
	}
	want := []slessv1alpha1.TrafficTarget{
		{RevisionName: "hello-00001", LatestRevision: ptr.To(false), Percent: ptr.To[int64](90)},
		{RevisionName: "hello-00002", LatestRevision: ptr.To(true), Percent: ptr.To[int64](10), Tag: "canary", Address: "http://canary-hello.team-a.svc.cluster.local"},
	}
	if d := cmp.Diff(want, TrafficStatus(svc)); d != "" {
		t.Errorf("TrafficStatus (-want +got):\n%s", d)
	}
}
