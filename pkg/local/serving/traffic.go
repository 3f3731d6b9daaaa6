package serving

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/sless-dev/sless/pkg/adapter"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/invoke"
)

// MaxPastRevisions bounds the revisions a function keeps the specs of, so
// that its traffic may name them again (a rollback) without a build.
const MaxPastRevisions = 20

// ReasonRevisionMissing is Knative's reason for a traffic block that names
// a revision that does not exist.
const ReasonRevisionMissing = "RevisionMissing"

// route is one target of a function's traffic split, as spec.traffic
// names it: latest follows the active revision.
type route struct {
	name    string
	latest  bool
	percent int64
	tag     string
}

// pastRevision is a revision that served once: what it runs, so that it
// can run again, and when it was made.
type pastRevision struct {
	name    string
	spec    revisionSpec
	created time.Time
}

// setTraffic installs the split spec asks for, with svc's lock holder's
// s.mu held. A split that names a revision the function never served is
// not installed: the one before keeps serving, as Knative keeps a Route's
// last good traffic, and the reason is returned. The revisions it names
// besides the active one are kept (pinned), idle until called; those no
// longer named are retired.
func (s *Server) setTraffic(svc *service, spec []slessv1alpha1.TrafficTarget) (reason, message string) {
	routes := make([]route, 0, len(spec))
	for _, t := range spec {
		routes = append(routes, route{name: t.RevisionName, latest: t.IsLatest(), percent: t.PercentOf(), tag: t.Tag})
	}
	keep := map[string]*revision{}
	for _, rt := range routes {
		if rt.latest || (svc.active != nil && rt.name == svc.active.name) {
			continue
		}
		if r := svc.pinned[rt.name]; r != nil {
			keep[rt.name] = r
			continue
		}
		i := slices.IndexFunc(svc.past, func(p pastRevision) bool { return p.name == rt.name })
		switch {
		case i >= 0:
		case svc.latest != nil && svc.latest.name == rt.name:
			return ReasonDeploying, fmt.Sprintf("revision %s, which traffic names, is not ready yet", rt.name)
		default:
			return ReasonRevisionMissing, fmt.Sprintf("Revision %q referenced in traffic not found.", rt.name)
		}
		keep[rt.name] = newRevision(s, svc.key, rt.name, svc.past[i].spec)
	}
	for name, r := range svc.pinned {
		if keep[name] != r {
			go s.retire(r, s.opts.DrainGrace)
		}
	}
	svc.pinned, svc.routes = keep, routes
	if len(spec) == 0 {
		svc.routes = nil
	}
	return "", ""
}

// named tells whether svc's traffic names revision name.
func (svc *service) named(name string) bool {
	return slices.ContainsFunc(svc.routes, func(rt route) bool { return !rt.latest && rt.name == name })
}

// revisionOf is the revision rt sends calls to, nil when none serves it.
func (svc *service) revisionOf(rt route) *revision {
	if rt.latest || (svc.active != nil && svc.active.name == rt.name) {
		return svc.active
	}
	return svc.pinned[rt.name]
}

// pick draws the revision of one call by the split's weights: the active
// revision without a split.
func (svc *service) pick() *revision {
	if len(svc.routes) == 0 {
		return svc.active
	}
	n := rand.Int64N(100)
	for _, rt := range svc.routes {
		if n < rt.percent {
			return svc.revisionOf(rt)
		}
		n -= rt.percent
	}
	return svc.active
}

// tagged is the revision of the target tagged tag; ok is false when no
// target has the tag.
func (svc *service) tagged(tag string) (r *revision, ok bool) {
	for _, rt := range svc.routes {
		if rt.tag == tag {
			return svc.revisionOf(rt), true
		}
	}
	return nil, false
}

// remember records r, which serves now, among svc's past revisions.
func (svc *service) remember(r *revision) {
	svc.past = slices.DeleteFunc(svc.past, func(p pastRevision) bool { return p.name == r.name })
	svc.past = append(svc.past, pastRevision{name: r.name, spec: r.spec, created: r.created})
	if n := len(svc.past) - MaxPastRevisions; n > 0 {
		svc.past = slices.Delete(svc.past, 0, n)
	}
}

// trafficState is the split as it serves, each target with the revision
// it resolves to now; with no split, every call to the active revision.
func (svc *service) trafficState() []slessv1alpha1.TrafficTarget {
	if len(svc.routes) == 0 {
		if svc.active == nil {
			return nil
		}
		return []slessv1alpha1.TrafficTarget{{RevisionName: svc.active.name, LatestRevision: ptr.To(true), Percent: ptr.To[int64](100)}}
	}
	out := make([]slessv1alpha1.TrafficTarget, 0, len(svc.routes))
	for _, rt := range svc.routes {
		name := rt.name
		if rt.latest {
			if svc.active == nil {
				continue
			}
			name = svc.active.name
		}
		out = append(out, slessv1alpha1.TrafficTarget{RevisionName: name, LatestRevision: ptr.To(rt.latest),
			Percent: ptr.To(rt.percent), Tag: rt.tag})
	}
	return out
}

// ActivateTag is Activate for the traffic target tagged tag.
func (s *Server) ActivateTag(ctx context.Context, namespace, name, tag string) (*Call, error) {
	return s.activate(ctx, types.NamespacedName{Namespace: namespace, Name: name}, func(svc *service) (*revision, error) {
		r, ok := svc.tagged(tag)
		if !ok {
			return nil, fmt.Errorf("%w: %s/%s has no traffic target tagged %s", invoke.ErrNotFound, namespace, name, tag)
		}
		return r, nil
	})
}

// HasTag tells whether the function's traffic has a target tagged tag.
func (s *Server) HasTag(namespace, name, tag string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	svc := s.fns[types.NamespacedName{Namespace: namespace, Name: name}]
	if svc == nil {
		return false
	}
	r, ok := svc.tagged(tag)
	return ok && r != nil
}

// ListRevisions implements adapter.RevisionLister: the revisions that
// served, oldest first, then the latest when it has not (yet).
func (s *Server) ListRevisions(_ context.Context, w slessv1alpha1.Workload) ([]adapter.RevisionInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	svc := s.fns[types.NamespacedName{Namespace: w.GetNamespace(), Name: w.GetName()}]
	if svc == nil {
		return nil, nil
	}
	out := make([]adapter.RevisionInfo, 0, len(svc.past)+1)
	for _, p := range svc.past {
		out = append(out, adapter.RevisionInfo{Name: p.name, Created: p.created, Image: pinnedOrNone(p.spec.image),
			SourceDigest: p.spec.sourceDigest, Ready: true})
	}
	if l := svc.latest; l != nil && !slices.ContainsFunc(svc.past, func(p pastRevision) bool { return p.name == l.name }) {
		l.mu.Lock()
		failure := l.failure
		l.mu.Unlock()
		info := adapter.RevisionInfo{Name: l.name, Created: l.created, Image: pinnedOrNone(l.spec.image), SourceDigest: l.spec.sourceDigest}
		if failure != "" {
			info.Reason, info.Message = ReasonRevisionFailed, failure
		} else {
			info.Reason = ReasonDeploying
		}
		out = append(out, info)
	}
	return out, nil
}
