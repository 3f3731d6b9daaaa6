// Package limits holds a site's resource settings: the defaults each
// Function and SlessService gets for what its spec does not name, and the
// maximums it may ask for, site-wide and per namespace. The same check
// runs in Go (the REST API, local mode) and as a ValidatingAdmissionPolicy
// the apiserver enforces (policy.go), with the same message.
package limits

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// AnnotationMax on a Namespace sets its maximums, as "name=quantity"
// pairs separated by commas ("memory=2Gi,cpu=2,nvidia.com/gpu=1"). A
// resource it names replaces the site's maximum of that resource there.
// It is on the Namespace, which tenants do not write.
const AnnotationMax = "sless.dev/max-resources"

// Entry is one maximum. Value is as written, so that a message quotes it.
type Entry struct {
	Name  corev1.ResourceName
	Value string
}

// Parse reads "name=quantity" pairs separated by commas, in their order.
// An empty string is no entries.
func Parse(s string) ([]Entry, error) {
	var out []Entry
	seen := map[corev1.ResourceName]bool{}
	for _, pair := range strings.Split(s, ",") {
		if pair = strings.TrimSpace(pair); pair == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not name=quantity", pair)
		}
		if _, err := resource.ParseQuantity(v); err != nil {
			return nil, fmt.Errorf("%s=%s: %q is not a quantity (such as 500m, 2 or 256Mi)", k, v, v)
		}
		name := corev1.ResourceName(k)
		if seen[name] {
			return nil, fmt.Errorf("%s is named twice", k)
		}
		seen[name] = true
		out = append(out, Entry{Name: name, Value: v})
	}
	return out, nil
}

// List is entries as a ResourceList; Parse has checked the quantities.
func List(entries []Entry) corev1.ResourceList {
	l := corev1.ResourceList{}
	for _, e := range entries {
		l[e.Name] = resource.MustParse(e.Value)
	}
	return l
}

// Site is a site's resource settings.
type Site struct {
	// Defaults fill each resource a spec names in neither its requests
	// nor its limits; nil leaves memory at DefaultMemoryMB and the rest unset.
	Defaults *slessv1alpha1.ResourceSpec
	// Max is every namespace's maximum of each resource it names, unless
	// the namespace's AnnotationMax names that resource; sorted by name.
	Max []Entry
}

// Setting is one site setting as given, with the name a refusal uses
// ("--max-resources (SLESS_MAX_RESOURCES)").
type Setting struct {
	Name, Value string
}

// ParseSite reads the site settings: default requests, default limits and
// maximums, each Parse's form. Defaults are held to what spec.resources
// takes, and must fit under the maximums.
func ParseSite(defaultRequests, defaultLimits, maximums Setting) (Site, error) {
	var site Site
	req, err := Parse(defaultRequests.Value)
	if err != nil {
		return site, fmt.Errorf("%s: %w", defaultRequests.Name, err)
	}
	lim, err := Parse(defaultLimits.Value)
	if err != nil {
		return site, fmt.Errorf("%s: %w", defaultLimits.Name, err)
	}
	if site.Max, err = Parse(maximums.Value); err != nil {
		return site, fmt.Errorf("%s: %w", maximums.Name, err)
	}
	sort.Slice(site.Max, func(i, j int) bool { return site.Max[i].Name < site.Max[j].Name })
	for _, e := range site.Max {
		if q := resource.MustParse(e.Value); q.Sign() <= 0 {
			return site, fmt.Errorf("%s: %s=%s must be above zero", maximums.Name, e.Name, e.Value)
		}
	}
	if errs := slessv1alpha1.ValidateResourceSpec(&slessv1alpha1.ResourceSpec{Limits: List(site.Max)}, nil); len(errs) > 0 {
		return site, fmt.Errorf("%s: %w", maximums.Name, errs.ToAggregate())
	}
	if len(req) == 0 && len(lim) == 0 {
		return site, nil
	}
	d := &slessv1alpha1.ResourceSpec{}
	if len(req) > 0 {
		d.Requests = List(req)
	}
	if len(lim) > 0 {
		d.Limits = List(lim)
	}
	if errs := slessv1alpha1.ValidateResourceSpec(d, nil); len(errs) > 0 {
		return site, fmt.Errorf("%s and %s: %w", defaultRequests.Name, defaultLimits.Name, errs.ToAggregate())
	}
	// A default over the maximum would refuse every spec that leans on it.
	maxList := List(site.Max)
	for _, l := range []struct {
		s    Setting
		list corev1.ResourceList
	}{{defaultLimits, d.Limits}, {defaultRequests, d.Requests}} {
		for _, k := range slices.Sorted(maps.Keys(l.list)) {
			v := l.list[k]
			if m, ok := maxList[k]; ok && v.Cmp(m) > 0 {
				return site, fmt.Errorf("%s: %s=%s is over %s's %s", l.s.Name, k, v.String(), maximums.Name, m.String())
			}
		}
	}
	site.Defaults = d
	return site, nil
}

// Maximums are what one namespace's workloads may ask for: the entries of
// its annotation in their order, then the site's for the resources the
// annotation does not name. The order decides which of several excesses a
// refusal names; the admission policy keeps the same.
type Maximums struct {
	Namespace string
	Entries   []Entry
}

// For is the maximums of namespace ns, whose AnnotationMax is annotation
// ("" when it has none).
func (s Site) For(ns, annotation string) (Maximums, error) {
	own, err := Parse(annotation)
	if err != nil {
		return Maximums{}, &MalformedError{Namespace: ns}
	}
	m := Maximums{Namespace: ns, Entries: own}
	named := map[corev1.ResourceName]bool{}
	for _, e := range own {
		named[e.Name] = true
	}
	for _, e := range s.Max {
		if !named[e.Name] {
			m.Entries = append(m.Entries, e)
		}
	}
	return m, nil
}

// MalformedError is the refusal of a write in a namespace whose
// annotation cannot be read: the policy refuses it too.
type MalformedError struct {
	Namespace string
}

func (e *MalformedError) Error() string {
	return fmt.Sprintf("namespace %s's annotation %s is malformed: want name=quantity pairs separated by commas", e.Namespace, AnnotationMax)
}

// Static is a site without namespaces' own maximums: local mode's.
type Static Site

// Maximums is the site's maximums, whatever the namespace.
func (s Static) Maximums(_ context.Context, ns string) (Maximums, error) {
	return Site(s).For(ns, "")
}

// Check returns the first value of s over a maximum, or nil: limits, then
// requests, then memoryMB, then cpu, each in the maximums' order. The
// error's detail is the whole sentence the admission policy says.
func (m Maximums) Check(s *slessv1alpha1.WorkloadSpec) *field.Error {
	type asked struct {
		path  *field.Path
		name  corev1.ResourceName
		value string
		q     resource.Quantity
	}
	var r slessv1alpha1.ResourceSpec
	if s.Resources != nil {
		r = *s.Resources
	}
	spec := field.NewPath("spec")
	var all []asked
	for _, l := range []struct {
		name string
		list corev1.ResourceList
	}{{"limits", r.Limits}, {"requests", r.Requests}} {
		for _, e := range m.Entries {
			if v, ok := l.list[e.Name]; ok {
				all = append(all, asked{spec.Child("resources", l.name, string(e.Name)), e.Name, v.String(), v})
			}
		}
	}
	for _, e := range m.Entries {
		if e.Name == corev1.ResourceMemory && s.MemoryMB != nil {
			v := fmt.Sprintf("%dMi", *s.MemoryMB)
			all = append(all, asked{spec.Child("memoryMB"), e.Name, v, resource.MustParse(v)})
		}
	}
	for _, e := range m.Entries {
		if e.Name == corev1.ResourceCPU && s.CPU != nil {
			all = append(all, asked{spec.Child("cpu"), e.Name, s.CPU.String(), *s.CPU})
		}
	}
	maxList := List(m.Entries)
	for _, a := range all {
		if a.q.Cmp(maxList[a.name]) > 0 {
			return field.Forbidden(a.path, Message(a.path.String(), a.value, m.Namespace, value(m.Entries, a.name)))
		}
	}
	return nil
}

func value(entries []Entry, k corev1.ResourceName) string {
	for _, e := range entries {
		if e.Name == k {
			return e.Value
		}
	}
	return ""
}

// Message is the sentence a refusal says, in Go and in the policy alike.
func Message(path, value, ns, max string) string {
	return fmt.Sprintf("%s %s is over namespace %s's maximum %s", path, value, ns, max)
}

// Applies tells whether a write of spec over oldSpec (nil on create) is
// held to the maximums: a create, or a change of spec. An object written
// before a maximum was lowered keeps its metadata and status writable (the
// controller's finalizer, a label), as the policy's match condition says.
func Applies(oldSpec, spec any) bool {
	return oldSpec == nil || !equality.Semantic.DeepEqual(oldSpec, spec)
}
