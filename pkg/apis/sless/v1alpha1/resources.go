package v1alpha1

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Resource names with a meaning of their own; any other is extended.
var standardResources = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage}

// MaxResourceNames bounds requests and limits, as their CRD markers do
// (which CEL's cost budget needs).
const MaxResourceNames = 6

// MinMemoryLimit is the least memory an instance may be capped at, as memoryMB's minimum.
var MinMemoryLimit = resource.MustParse("64Mi")

var (
	extendedResourceRE = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?\.)+[a-z0-9]([-a-z0-9]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	labelKeyRE         = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	labelValueRE       = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)
	subdomainRE        = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// IsExtendedResource tells a resource name that is neither cpu, memory nor
// ephemeral-storage: a device plugin's, such as nvidia.com/gpu.
func IsExtendedResource(name corev1.ResourceName) bool {
	for _, s := range standardResources {
		if name == s {
			return false
		}
	}
	return true
}

// ResourceRequirements is what each instance asks for, as its container's
// resources: spec.resources with memoryMB and cpu folded in, then
// defaults for each resource the spec names nowhere. Memory always has a
// request and a limit (a function that outgrows it is killed, not the
// node): the one given stands for the other, and with neither it is
// defaults' or DefaultMemoryMB. Any other limit without a request
// gets the limit as request, as Kubernetes does.
func (s *WorkloadSpec) ResourceRequirements(defaults *ResourceSpec) corev1.ResourceRequirements {
	req, lim := corev1.ResourceList{}, corev1.ResourceList{}
	if r := s.Resources; r != nil {
		for k, v := range r.Requests {
			req[k] = v.DeepCopy()
		}
		for k, v := range r.Limits {
			lim[k] = v.DeepCopy()
		}
	}
	if s.MemoryMB != nil {
		m := *resource.NewQuantity(int64(*s.MemoryMB)<<20, resource.BinarySI)
		req[corev1.ResourceMemory], lim[corev1.ResourceMemory] = m, m.DeepCopy()
	}
	if s.CPU != nil {
		req[corev1.ResourceCPU] = s.CPU.DeepCopy()
	}
	if defaults != nil {
		// Both lists are judged against the spec's own names before either is filled.
		named := func(k corev1.ResourceName) bool {
			_, inReq := req[k]
			_, inLim := lim[k]
			return inReq || inLim
		}
		dreq, dlim := corev1.ResourceList{}, corev1.ResourceList{}
		for k, v := range defaults.Requests {
			if !named(k) {
				dreq[k] = v.DeepCopy()
			}
		}
		for k, v := range defaults.Limits {
			if !named(k) {
				dlim[k] = v.DeepCopy()
			}
		}
		for k, v := range dreq {
			req[k] = v
		}
		for k, v := range dlim {
			lim[k] = v
		}
	}
	memReq, hasReq := req[corev1.ResourceMemory]
	memLim, hasLim := lim[corev1.ResourceMemory]
	switch {
	case !hasReq && !hasLim:
		m := *resource.NewQuantity(DefaultMemoryMB<<20, resource.BinarySI)
		req[corev1.ResourceMemory], lim[corev1.ResourceMemory] = m, m.DeepCopy()
	case !hasLim:
		lim[corev1.ResourceMemory] = memReq.DeepCopy()
	case !hasReq:
		req[corev1.ResourceMemory] = memLim.DeepCopy()
	}
	for k, v := range lim {
		if _, ok := req[k]; !ok {
			req[k] = v.DeepCopy()
		}
	}
	return corev1.ResourceRequirements{Requests: req, Limits: lim}
}

// ExtendedResources lists the extended resources rr limits, sorted.
func ExtendedResources(rr corev1.ResourceRequirements) []string {
	var out []string
	for k := range rr.Limits {
		if IsExtendedResource(k) {
			out = append(out, string(k))
		}
	}
	sort.Strings(out)
	return out
}

// validateResources holds spec.resources to what a container takes, and
// to the shorthands memoryMB and cpu where they name the same values; the
// messages are the CRD rules'.
func validateResources(s *WorkloadSpec, p *field.Path) field.ErrorList {
	r := s.Resources
	if r == nil {
		return nil
	}
	errs := ValidateResourceSpec(r, p.Child("resources"))
	_, memReq := r.Requests[corev1.ResourceMemory]
	_, memLim := r.Limits[corev1.ResourceMemory]
	if s.MemoryMB != nil && (memReq || memLim) {
		errs = append(errs, field.Invalid(p.Child("memoryMB"), *s.MemoryMB, "memoryMB and resources' memory are one setting: set memory in one place only"))
	}
	if s.CPU != nil {
		v, inReq := r.Requests[corev1.ResourceCPU]
		l, inLim := r.Limits[corev1.ResourceCPU]
		if (inReq && v.Cmp(*s.CPU) != 0) || (inLim && l.Cmp(*s.CPU) < 0) {
			errs = append(errs, field.Invalid(p.Child("cpu"), s.CPU.String(), "cpu sets the CPU request: resources.requests.cpu must equal it and resources.limits.cpu must not be below it"))
		}
	}
	return errs
}

func sortedNames(l corev1.ResourceList) []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(l))
	for k := range l {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// validatePlacement checks the scheduling fields as the CRD rules do.
func validatePlacement(s *WorkloadSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	np := p.Child("nodeSelector")
	if len(s.NodeSelector) > 32 {
		errs = append(errs, field.TooMany(np, len(s.NodeSelector), 32))
	}
	keys := make([]string, 0, len(s.NodeSelector))
	for k := range s.NodeSelector {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := s.NodeSelector[k]
		if len(k) > 317 || !labelKeyRE.MatchString(k) {
			errs = append(errs, field.Invalid(np.Key(k), k, "nodeSelector keys must be label keys: [prefix/]name"))
		}
		if len(v) > 63 || !labelValueRE.MatchString(v) {
			errs = append(errs, field.Invalid(np.Key(k), v, "nodeSelector values must be label values: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"))
		}
	}
	tp := p.Child("tolerations")
	if len(s.Tolerations) > 32 {
		errs = append(errs, field.TooMany(tp, len(s.Tolerations), 32))
	}
	for i, t := range s.Tolerations {
		ip := tp.Index(i)
		switch t.Operator {
		case "", corev1.TolerationOpEqual:
		case corev1.TolerationOpExists:
			if t.Value != "" {
				errs = append(errs, field.Invalid(ip.Child("value"), t.Value, "a toleration with operator Exists takes no value"))
			}
		default:
			errs = append(errs, field.Invalid(ip.Child("operator"), t.Operator, "a toleration's operator is Exists or Equal"))
		}
		switch t.Effect {
		case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			errs = append(errs, field.Invalid(ip.Child("effect"), t.Effect, "a toleration's effect is NoSchedule, PreferNoSchedule or NoExecute"))
		}
		if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
			errs = append(errs, field.Invalid(ip.Child("tolerationSeconds"), *t.TolerationSeconds, "tolerationSeconds is for the NoExecute effect only"))
		}
	}
	if a := s.Affinity; a != nil && a.NodeAffinity != nil {
		if r := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution; r != nil && len(r.NodeSelectorTerms) == 0 {
			errs = append(errs, field.Required(p.Child("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"),
				"requiredDuringSchedulingIgnoredDuringExecution needs at least one nodeSelectorTerm"))
		}
	}
	for _, n := range []struct {
		name, value string
	}{{"priorityClassName", s.PriorityClassName}, {"runtimeClassName", deref(s.RuntimeClassName)}} {
		if n.value != "" && (len(n.value) > 253 || !subdomainRE.MatchString(n.value)) {
			errs = append(errs, field.Invalid(p.Child(n.name), n.value, "must be a DNS-1123 subdomain: lower-case letters, digits, '-' and '.'"))
		}
	}
	if s.RuntimeClassName != nil && *s.RuntimeClassName == "" {
		errs = append(errs, field.Invalid(p.Child("runtimeClassName"), "", "must be a DNS-1123 subdomain: lower-case letters, digits, '-' and '.'"))
	}
	return errs
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// HasPlacement tells whether s asks where its instances run.
func (s *WorkloadSpec) HasPlacement() bool {
	return len(s.NodeSelector) > 0 || len(s.Tolerations) > 0 || (s.Affinity != nil && s.Affinity.NodeAffinity != nil) ||
		s.PriorityClassName != "" || s.RuntimeClassName != nil
}

// ValidateResourceSpec checks requests and limits on their own, as
// spec.resources is checked; site defaults, which no spec carries, too.
func ValidateResourceSpec(r *ResourceSpec, rp *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, l := range []struct {
		name string
		list corev1.ResourceList
	}{{"requests", r.Requests}, {"limits", r.Limits}} {
		lp := rp.Child(l.name)
		if len(l.list) > MaxResourceNames {
			errs = append(errs, field.TooMany(lp, len(l.list), MaxResourceNames))
		}
		for _, k := range sortedNames(l.list) {
			v := l.list[k]
			kp := lp.Key(string(k))
			if IsExtendedResource(k) && (!extendedResourceRE.MatchString(string(k)) || len(k) > 253 ||
				strings.HasSuffix(strings.SplitN(string(k), "/", 2)[0], "kubernetes.io")) {
				errs = append(errs, field.Invalid(kp, string(k), "resource names are cpu, memory, ephemeral-storage or an extended resource such as nvidia.com/gpu"))
				continue
			}
			if v.Sign() < 0 {
				errs = append(errs, field.Invalid(kp, v.String(), "resource quantities must not be negative"))
			}
			if l.name != "limits" {
				continue
			}
			if k == corev1.ResourceMemory && v.Cmp(MinMemoryLimit) < 0 {
				errs = append(errs, field.Invalid(kp, v.String(), "a memory limit must be at least 64Mi"))
			}
			if IsExtendedResource(k) && v.MilliValue()%1000 != 0 {
				errs = append(errs, field.Invalid(kp, v.String(), "extended resources are whole numbers"))
			}
		}
	}
	for _, k := range sortedNames(r.Requests) {
		v := r.Requests[k]
		l, limited := r.Limits[k]
		kp := rp.Child("requests").Key(string(k))
		switch {
		case IsExtendedResource(k) && (!limited || v.Cmp(l) != 0):
			errs = append(errs, field.Invalid(kp, v.String(), "extended resources are set in limits; a request, if given, must equal the limit"))
		case limited && v.Cmp(l) > 0:
			errs = append(errs, field.Invalid(kp, v.String(), fmt.Sprintf("a request must not exceed its limit (%s)", l.String())))
		}
	}
	return errs
}
