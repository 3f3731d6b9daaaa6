package resources

import (
	"k8s.io/utils/ptr"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// MakeTraffic is the Knative Service's traffic block for w's spec.traffic:
// nil when w sets none, which Knative defaults to every call to the latest
// ready revision. latestRevision is always spelt out, as Knative's
// defaulting would, so what is written is what is read back.
func MakeTraffic(w slessv1alpha1.Workload) []servingv1.TrafficTarget {
	spec := w.BuildSpec().Traffic
	if len(spec) == 0 {
		return nil
	}
	out := make([]servingv1.TrafficTarget, len(spec))
	for i, t := range spec {
		out[i] = servingv1.TrafficTarget{
			Tag:            t.Tag,
			RevisionName:   t.RevisionName,
			LatestRevision: ptr.To(t.IsLatest()),
			Percent:        ptr.To(t.PercentOf()),
		}
	}
	return out
}

// DefaultTraffic is what Knative makes of a Service that sets no traffic.
func DefaultTraffic() []servingv1.TrafficTarget {
	return []servingv1.TrafficTarget{{LatestRevision: ptr.To(true), Percent: ptr.To[int64](100)}}
}

// TrafficDiffers says whether a Service's traffic block have must become
// want (MakeTraffic's): nil stands for Knative's default, an unset percent
// for 0, an unset latestRevision for the sense of revisionName.
func TrafficDiffers(want, have []servingv1.TrafficTarget) bool {
	if len(want) == 0 {
		want = DefaultTraffic()
	}
	if len(have) == 0 {
		have = DefaultTraffic()
	}
	if len(want) != len(have) {
		return true
	}
	for i := range want {
		w, h := want[i], have[i]
		if w.Tag != h.Tag || w.RevisionName != h.RevisionName || latest(w) != latest(h) ||
			ptr.Deref(w.Percent, 0) != ptr.Deref(h.Percent, 0) {
			return true
		}
	}
	return false
}

func latest(t servingv1.TrafficTarget) bool {
	if t.LatestRevision != nil {
		return *t.LatestRevision
	}
	return t.RevisionName == ""
}

// TrafficStatus is a Service's status.traffic as sless reports it: each
// target with the revision it resolved to, its percent and tag, and a
// tagged target's cluster-local address (Knative's URL of the tag).
func TrafficStatus(svc *servingv1.Service) []slessv1alpha1.TrafficTarget {
	if len(svc.Status.Traffic) == 0 {
		return nil
	}
	out := make([]slessv1alpha1.TrafficTarget, len(svc.Status.Traffic))
	for i, t := range svc.Status.Traffic {
		out[i] = slessv1alpha1.TrafficTarget{
			Tag:            t.Tag,
			RevisionName:   t.RevisionName,
			LatestRevision: ptr.To(latest(t)),
			Percent:        ptr.To(ptr.Deref(t.Percent, 0)),
		}
		if t.Tag != "" && t.URL != nil {
			out[i].Address = t.URL.String()
		}
	}
	return out
}
