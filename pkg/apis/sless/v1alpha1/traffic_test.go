package v1alpha1_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	v1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// Each bad traffic block is refused on the field at fault, with a message
// like Knative's (the agreement test holds the CRD schema to the same).
func TestValidateTraffic(t *testing.T) {
	pct := func(n int64) *int64 { return ptr.To(n) }
	tests := []struct {
		name    string
		fn      string
		traffic []v1.TrafficTarget
		field   string // "" accepts
		msg     string
	}{
		{name: "none", traffic: nil},
		{name: "latest alone", traffic: []v1.TrafficTarget{{Percent: pct(100)}}},
		{name: "canary", traffic: []v1.TrafficTarget{{RevisionName: "hello-00001", Percent: pct(90), Tag: "stable"}, {LatestRevision: ptr.To(true), Percent: pct(10), Tag: "canary"}}},
		{name: "pinned with a tag on latest", traffic: []v1.TrafficTarget{{RevisionName: "hello-00001", Percent: pct(100)}, {Tag: "next"}}},
		{name: "sum below", traffic: []v1.TrafficTarget{{RevisionName: "hello-00001", Percent: pct(40)}, {Percent: pct(50)}}, field: "spec.traffic", msg: "traffic targets sum to 90, want 100"},
		{name: "sum above", traffic: []v1.TrafficTarget{{RevisionName: "hello-00001", Percent: pct(60)}, {Percent: pct(50)}}, field: "spec.traffic", msg: "traffic targets sum to 110, want 100"},
		{name: "tags alone", traffic: []v1.TrafficTarget{{Tag: "a"}}, field: "spec.traffic", msg: "traffic targets sum to 0, want 100"},
		{name: "percent above", traffic: []v1.TrafficTarget{{Percent: pct(101)}}, field: "spec.traffic[0].percent", msg: "must be between 0 and 100"},
		{name: "percent negative", traffic: []v1.TrafficTarget{{RevisionName: "hello-00001", Percent: pct(-1)}, {Percent: pct(101)}}, field: "spec.traffic[0].percent", msg: "must be between 0 and 100"},
		{name: "two latest", traffic: []v1.TrafficTarget{{LatestRevision: ptr.To(true), Percent: pct(50)}, {Percent: pct(50)}}, field: "spec.traffic[1]", msg: "at most one traffic target may follow the latest revision; spec.traffic[0] also does"},
		{name: "latest and a name", traffic: []v1.TrafficTarget{{LatestRevision: ptr.To(true), RevisionName: "hello-00001", Percent: pct(100)}}, field: "spec.traffic[0].latestRevision", msg: "latestRevision: true takes no revisionName"},
		{name: "pinned without a name", traffic: []v1.TrafficTarget{{LatestRevision: ptr.To(false), Percent: pct(100)}}, field: "spec.traffic[0].latestRevision", msg: "latestRevision: false needs one"},
		{name: "another function's revision", traffic: []v1.TrafficTarget{{RevisionName: "greeter-00001", Percent: pct(100)}}, field: "spec.traffic[0].revisionName", msg: "revisionName must name a revision of this function: hello-…"},
		{name: "a name that only starts alike", traffic: []v1.TrafficTarget{{RevisionName: "helloworld-00001", Percent: pct(100)}}, field: "spec.traffic[0].revisionName", msg: "revision of this function"},
		{name: "revision name not a label", traffic: []v1.TrafficTarget{{RevisionName: "hello-0_1", Percent: pct(100)}}, field: "spec.traffic[0].revisionName", msg: "DNS-1123 label"},
		{name: "tag starts with a digit", traffic: []v1.TrafficTarget{{Percent: pct(100), Tag: "1st"}}, field: "spec.traffic[0].tag", msg: "DNS-1035 label"},
		{name: "tag upper case", traffic: []v1.TrafficTarget{{Percent: pct(100), Tag: "Canary"}}, field: "spec.traffic[0].tag", msg: "DNS-1035 label"},
		{name: "tag twice", traffic: []v1.TrafficTarget{{Percent: pct(100), Tag: "a"}, {RevisionName: "hello-00001", Tag: "a"}}, field: "spec.traffic[1].tag", msg: "spec.traffic[0].tag"},
		{name: "tag too long for the host", fn: strings.Repeat("n", 52), traffic: []v1.TrafficTarget{{Percent: pct(100), Tag: strings.Repeat("t", 11)}}, field: "spec.traffic[0].tag", msg: "at most 63 characters"},
		{name: "url in spec", traffic: []v1.TrafficTarget{{Percent: pct(100), URL: "http://x"}}, field: "spec.traffic[0].url", msg: "status only"},
		{name: "address in spec", traffic: []v1.TrafficTarget{{Percent: pct(100), Address: "http://x"}}, field: "spec.traffic[0].address", msg: "status only"},
		{name: "too many", traffic: func() []v1.TrafficTarget {
			ts := []v1.TrafficTarget{{Percent: pct(100)}}
			for range v1.MaxTrafficTargets {
				ts = append(ts, v1.TrafficTarget{RevisionName: "hello-00001"})
			}
			return ts
		}(), field: "spec.traffic", msg: "must have at most 20 items"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name := tc.fn
			if name == "" {
				name = "hello"
			}
			errs := v1.ValidateTraffic(name, "function", tc.traffic, field.NewPath("spec", "traffic"))
			if tc.field == "" {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs.ToAggregate())
				}
				return
			}
			for _, e := range errs {
				if e.Field == tc.field && strings.Contains(e.Error(), tc.msg) {
					return
				}
			}
			t.Fatalf("want an error on %s saying %q, got %v", tc.field, tc.msg, errs.ToAggregate())
		})
	}
}
