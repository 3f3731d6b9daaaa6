package client

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"k8s.io/utils/ptr"

	"github.com/sless-dev/sless/pkg/api/wire"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// Revision and RevisionTag are what GET …/revisions lists.
type (
	Revision    = wire.Revision
	RevisionTag = wire.RevisionTag
)

// ListRevisions lists the revisions of a Function, or of a SlessService
// when service is true, newest first.
func (c *Client) ListRevisions(ctx context.Context, ns, name string, service bool) ([]Revision, error) {
	plural := functions.plural
	if service {
		plural = services.plural
	}
	var out List[Revision]
	path := "/v1/namespaces/" + url.PathEscape(ns) + "/" + plural + "/" + url.PathEscape(name) + "/revisions"
	if err := c.getJSON(ctx, path, nil, &out); err != nil {
		return nil, err
	}
	return out.Items, nil
}

// Rollout is spec.traffic that sends percent of the calls to the latest
// revision and the rest to stable, keeping the tags of spec: a tag on the
// latest target stays on it, a tag on stable's target stays on stable,
// any other tag stays where it was with no share.
func Rollout(spec []slessv1alpha1.TrafficTarget, stable string, percent int64) []slessv1alpha1.TrafficTarget {
	out := []slessv1alpha1.TrafficTarget{
		{RevisionName: stable, Percent: ptr.To(100 - percent)},
		{LatestRevision: ptr.To(true), Percent: ptr.To(percent)},
	}
	if percent == 100 {
		out = out[1:]
	}
	return keepTags(out, spec)
}

// Rollback is spec.traffic that sends every call to revision to, keeping
// the tags of spec with no share (a tag on to's target stays on it).
func Rollback(spec []slessv1alpha1.TrafficTarget, to string) []slessv1alpha1.TrafficTarget {
	return keepTags([]slessv1alpha1.TrafficTarget{{RevisionName: to, Percent: ptr.To[int64](100)}}, spec)
}

// keepTags adds the tags of old to split: onto the target of split that
// points where the tagged one did, while it has no tag, else as a target
// of its own with no share.
func keepTags(split, old []slessv1alpha1.TrafficTarget) []slessv1alpha1.TrafficTarget {
	for _, t := range old {
		if t.Tag == "" {
			continue
		}
		placed := false
		for i := range split {
			s := &split[i]
			if s.Tag == "" && s.IsLatest() == t.IsLatest() && s.RevisionName == t.RevisionName {
				s.Tag, placed = t.Tag, true
				break
			}
		}
		if placed {
			continue
		}
		if t.IsLatest() {
			// Only one target may follow the latest revision: one that
			// does takes the tag, else the tag follows it with no share.
			if i := latestIndex(split); i >= 0 {
				if split[i].Tag == "" {
					split[i].Tag = t.Tag
				}
				continue
			}
			split = append(split, slessv1alpha1.TrafficTarget{LatestRevision: ptr.To(true), Tag: t.Tag})
			continue
		}
		split = append(split, slessv1alpha1.TrafficTarget{RevisionName: t.RevisionName, Tag: t.Tag})
	}
	return split
}

func latestIndex(ts []slessv1alpha1.TrafficTarget) int {
	for i := range ts {
		if ts[i].IsLatest() {
			return i
		}
	}
	return -1
}

// StableRevision is the revision a rollout keeps the rest of the calls on:
// the one other than latest that takes the most of them now, else the
// newest ready one before latest. revs are newest first.
func StableRevision(revs []Revision, latest string) (string, error) {
	best, share := "", int64(0)
	for _, r := range revs {
		if r.Name != latest && r.Percent > share {
			best, share = r.Name, r.Percent
		}
	}
	if best != "" {
		return best, nil
	}
	return previousReady(revs, latest)
}

// PreviousRevision is the revision a rollback goes to: the newest ready
// revision older than the one that takes the most calls now (the newest
// of them on a tie). revs are newest first.
func PreviousRevision(revs []Revision) (string, error) {
	serving, share := "", int64(-1)
	for _, r := range revs {
		if r.Percent > share {
			serving, share = r.Name, r.Percent
		}
	}
	if serving == "" {
		return "", fmt.Errorf("no revision yet")
	}
	return previousReady(revs, serving)
}

// RollbackTarget is the revision a rollback goes to: to, which must be
// a ready revision of revs, or when to is empty PreviousRevision's.
func RollbackTarget(revs []Revision, to string) (string, error) {
	if to == "" {
		return PreviousRevision(revs)
	}
	i := slices.IndexFunc(revs, func(r Revision) bool { return r.Name == to })
	if i < 0 {
		names := make([]string, len(revs))
		for i, r := range revs {
			names[i] = r.Name
		}
		return "", fmt.Errorf("no such revision; it has %s", strings.Join(names, ", "))
	}
	if !revs[i].Ready {
		return "", fmt.Errorf("the revision is not ready (%s)", revs[i].Reason)
	}
	return to, nil
}

func previousReady(revs []Revision, than string) (string, error) {
	seen := false
	for _, r := range revs {
		if r.Name == than {
			seen = true
			continue
		}
		if seen && r.Ready {
			return r.Name, nil
		}
	}
	return "", fmt.Errorf("no ready revision older than %s", than)
}

// getWorkload reads the Function, or the SlessService when kind is
// KindService, named name in ns.
func (c *Client) getWorkload(ctx context.Context, ns, kind, name string) (Workload, []slessv1alpha1.TrafficTarget, error) {
	if kind == KindService {
		svc, err := c.GetService(ctx, ns, name)
		if err != nil {
			return nil, nil, err
		}
		return svc, svc.Spec.Traffic, nil
	}
	fn, err := c.GetFunction(ctx, ns, name)
	if err != nil {
		return nil, nil, err
	}
	return fn, fn.Spec.Traffic, nil
}

// Traffic reads the spec.traffic and the status of a Function, or of a
// SlessService when kind is KindService.
func (c *Client) Traffic(ctx context.Context, ns, kind, name string) ([]slessv1alpha1.TrafficTarget, *slessv1alpha1.FunctionStatus, error) {
	w, spec, err := c.getWorkload(ctx, ns, kind, name)
	if err != nil {
		return nil, nil, err
	}
	return spec, w.WorkloadStatus(), nil
}

// SetTraffic replaces spec.traffic (nil removes it: every call to the
// latest ready revision) and waits until the generation that asks for it
// is Ready, or Failed.
func (c *Client) SetTraffic(ctx context.Context, ns, kind, name string, traffic []slessv1alpha1.TrafficTarget) (Workload, error) {
	p := map[string]any{"spec": map[string]any{"traffic": traffic}}
	get := func(ctx context.Context) (Workload, error) {
		w, _, err := c.getWorkload(ctx, ns, kind, name)
		return w, err
	}
	var err error
	if kind == KindService {
		_, err = c.PatchService(ctx, ns, name, p)
	} else {
		_, err = c.PatchFunction(ctx, ns, name, p)
	}
	if err != nil {
		return nil, err
	}
	return waitReady(ctx, kind, name, get, func(Workload) {})
}
