package function

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"knative.dev/pkg/apis"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"

	"github.com/sless-dev/sless/pkg/adapter"
	"github.com/sless-dev/sless/pkg/adapter/resources"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// TestTrafficMapping follows a workload's spec.traffic to its Knative
// Service's traffic block, and the Service's status.traffic (as Knative
// reports it) back to the workload's status.traffic, with sless's tag URLs.
func TestTrafficMapping(t *testing.T) {
	const ns = "team-a"
	pct := ptr.To[int64]
	yes, no := ptr.To(true), ptr.To(false)
	tagAddr := func(tag, name string) *apis.URL { return apis.HTTP(tag + "-" + name + "." + ns + ".svc.cluster.local") }
	tests := []struct {
		name    string
		service bool   // a SlessService, else a Function
		domain  string // Config.FunctionDomain
		spec    []slessv1alpha1.TrafficTarget
		// ksvc is the Knative Service's spec.traffic sless writes.
		ksvc []servingv1.TrafficTarget
		// served is the Knative Service's status.traffic; status the
		// workload's status.traffic made of it.
		served []servingv1.TrafficTarget
		status []slessv1alpha1.TrafficTarget
	}{{
		name:   "none: Knative's default, every call to the latest",
		served: []servingv1.TrafficTarget{{RevisionName: "hello-00002", LatestRevision: yes, Percent: pct(100)}},
		status: []slessv1alpha1.TrafficTarget{{RevisionName: "hello-00002", LatestRevision: yes, Percent: pct(100)}},
	}, {
		name:   "latest with a tag",
		spec:   []slessv1alpha1.TrafficTarget{{Percent: pct(100), Tag: "cur"}},
		ksvc:   []servingv1.TrafficTarget{{LatestRevision: yes, Percent: pct(100), Tag: "cur"}},
		served: []servingv1.TrafficTarget{{RevisionName: "hello-00002", LatestRevision: yes, Percent: pct(100), Tag: "cur", URL: tagAddr("cur", "hello")}},
		status: []slessv1alpha1.TrafficTarget{{RevisionName: "hello-00002", LatestRevision: yes, Percent: pct(100), Tag: "cur",
			Address: "http://cur-hello.team-a.svc.cluster.local", URL: "https://fn.example.com/fn/team-a/hello@cur"}},
	}, {
		name:   "latest with a tag, functions on their own hosts",
		domain: "fn.example.com",
		spec:   []slessv1alpha1.TrafficTarget{{LatestRevision: yes, Percent: pct(100), Tag: "cur"}},
		ksvc:   []servingv1.TrafficTarget{{LatestRevision: yes, Percent: pct(100), Tag: "cur"}},
		served: []servingv1.TrafficTarget{{RevisionName: "hello-00002", LatestRevision: yes, Percent: pct(100), Tag: "cur", URL: tagAddr("cur", "hello")}},
		status: []slessv1alpha1.TrafficTarget{{RevisionName: "hello-00002", LatestRevision: yes, Percent: pct(100), Tag: "cur",
			Address: "http://cur-hello.team-a.svc.cluster.local", URL: "https://cur-hello.team-a.fn.example.com"}},
	}, {
		name: "latest without a tag beside a pinned revision",
		spec: []slessv1alpha1.TrafficTarget{{RevisionName: "hello-00001", Percent: pct(90)}, {Percent: pct(10)}},
		ksvc: []servingv1.TrafficTarget{{RevisionName: "hello-00001", LatestRevision: no, Percent: pct(90)}, {LatestRevision: yes, Percent: pct(10)}},
		served: []servingv1.TrafficTarget{{RevisionName: "hello-00001", LatestRevision: no, Percent: pct(90)},
			{RevisionName: "hello-00002", LatestRevision: yes, Percent: pct(10)}},
		status: []slessv1alpha1.TrafficTarget{{RevisionName: "hello-00001", LatestRevision: no, Percent: pct(90)},
			{RevisionName: "hello-00002", LatestRevision: yes, Percent: pct(10)}},
	}, {
		// Knative refuses to route it and keeps serving the split it had:
		// status tells what serves, not what was asked.
		name:   "a named revision that does not exist yet",
		spec:   []slessv1alpha1.TrafficTarget{{RevisionName: "hello-00009", Percent: pct(100)}},
		ksvc:   []servingv1.TrafficTarget{{RevisionName: "hello-00009", LatestRevision: no, Percent: pct(100)}},
		served: []servingv1.TrafficTarget{{RevisionName: "hello-00002", LatestRevision: yes, Percent: pct(100)}},
		status: []slessv1alpha1.TrafficTarget{{RevisionName: "hello-00002", LatestRevision: yes, Percent: pct(100)}},
	}, {
		name: "percent 0 with a tag: a URL and no share",
		spec: []slessv1alpha1.TrafficTarget{{RevisionName: "hello-00001", Percent: pct(100)}, {Tag: "next"}},
		ksvc: []servingv1.TrafficTarget{{RevisionName: "hello-00001", LatestRevision: no, Percent: pct(100)}, {LatestRevision: yes, Percent: pct(0), Tag: "next"}},
		served: []servingv1.TrafficTarget{{RevisionName: "hello-00001", LatestRevision: no, Percent: pct(100)},
			{RevisionName: "hello-00002", LatestRevision: yes, Percent: pct(0), Tag: "next", URL: tagAddr("next", "hello")}},
		status: []slessv1alpha1.TrafficTarget{{RevisionName: "hello-00001", LatestRevision: no, Percent: pct(100)},
			{RevisionName: "hello-00002", LatestRevision: yes, Percent: pct(0), Tag: "next",
				Address: "http://next-hello.team-a.svc.cluster.local", URL: "https://fn.example.com/fn/team-a/hello@next"}},
	}, {
		name:    "a SlessService's split, its tag under /svc/",
		service: true,
		domain:  "fn.example.com",
		spec:    []slessv1alpha1.TrafficTarget{{RevisionName: "hello-00001", Percent: pct(50), Tag: "a"}, {Percent: pct(50)}},
		ksvc:    []servingv1.TrafficTarget{{RevisionName: "hello-00001", LatestRevision: no, Percent: pct(50), Tag: "a"}, {LatestRevision: yes, Percent: pct(50)}},
		served: []servingv1.TrafficTarget{{RevisionName: "hello-00001", LatestRevision: no, Percent: pct(50), Tag: "a", URL: tagAddr("a", "hello")},
			{RevisionName: "hello-00002", LatestRevision: yes, Percent: pct(50)}},
		status: []slessv1alpha1.TrafficTarget{{RevisionName: "hello-00001", LatestRevision: no, Percent: pct(50), Tag: "a",
			Address: "http://a-hello.team-a.svc.cluster.local", URL: "https://fn.example.com/svc/team-a/hello@a/"},
			{RevisionName: "hello-00002", LatestRevision: yes, Percent: pct(50)}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			meta := metav1.ObjectMeta{Namespace: ns, Name: "hello", Generation: 3}
			ws := slessv1alpha1.WorkloadSpec{Runtime: slessv1alpha1.RuntimePython312, Entrypoint: "main.handler", Traffic: tc.spec}
			var w slessv1alpha1.Workload = &slessv1alpha1.Function{ObjectMeta: meta, Spec: slessv1alpha1.FunctionSpec{WorkloadSpec: ws}}
			if tc.service {
				w = &slessv1alpha1.SlessService{ObjectMeta: meta, Spec: slessv1alpha1.SlessServiceSpec{WorkloadSpec: ws}}
			}
			if errs := slessv1alpha1.ValidateTraffic(w.GetName(), "function", tc.spec, field.NewPath("spec", "traffic")); len(errs) > 0 {
				t.Fatalf("the row's spec.traffic is invalid: %v", errs)
			}
			svc := resources.MakeService(w, "registry.test/hello@sha256:"+strings.Repeat("a", 64), resources.Config{})
			if d := cmp.Diff(tc.ksvc, svc.Spec.Traffic); d != "" {
				t.Errorf("Knative Service traffic (-want +got):\n%s", d)
			}
			svc.Status.Traffic = tc.served
			r := &Reconciler{Config: Config{PublicBaseURL: "https://fn.example.com", FunctionDomain: tc.domain}}
			r.copyServing(w, adapter.ServeState{LatestReadyRevision: "hello-00002", Traffic: resources.TrafficStatus(svc)})
			if d := cmp.Diff(tc.status, w.WorkloadStatus().Traffic); d != "" {
				t.Errorf("status.traffic (-want +got):\n%s", d)
			}
		})
	}
}
