package resources

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/names"
	"github.com/sless-dev/sless/pkg/secrets"
	"github.com/sless-dev/sless/runtimes"
)

// MakeService builds the Knative Service that serves fn from image (always
// repo@sha256:..., so a rebuild can never be served by a stale pull). The
// revision template is named from the function's generation; Knative
// readiness, autoscaling and scale to zero do the rest. The Service is
// cluster-local: callers reach it through sless's invoke proxy.
func MakeService(fn slessv1alpha1.Workload, image string, cfg Config) *servingv1.Service {
	labels := Labels(fn)
	svcLabels := Labels(fn)
	svcLabels[LabelVisibility] = VisibilityClusterLocal

	svc := &servingv1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:            names.Service(fn),
			Namespace:       fn.GetNamespace(),
			Labels:          svcLabels,
			OwnerReferences: []metav1.OwnerReference{OwnerReference(fn)},
		},
	}
	if cfg.IngressClass != "" {
		svc.Annotations = map[string]string{AnnotationIngressClass: cfg.IngressClass}
	}
	svc.Spec.Traffic = MakeTraffic(fn)
	tmpl := &svc.Spec.Template
	tmpl.Name = names.Revision(fn)
	tmpl.Labels = labels
	tmpl.Annotations = scaleAnnotations(fn.BuildSpec().Scale)
	if d := fn.WorkloadStatus().SourceDigest; d != "" && fn.BuildSpec().Source.Image == "" {
		// Each Revision tells the source it was built from (sless revisions).
		if tmpl.Annotations == nil {
			tmpl.Annotations = map[string]string{}
		}
		tmpl.Annotations[AnnotationSourceDigest] = d
	}
	tmpl.Spec.TimeoutSeconds = ptr.To(int64(fn.Timeout()))
	if s := fn.BuildSpec().Scale; s != nil && s.ContainerConcurrency != nil {
		tmpl.Spec.ContainerConcurrency = ptr.To(*s.ContainerConcurrency)
	}
	tmpl.Spec.ServiceAccountName = cfg.ServiceAccount
	SetPlacement(&tmpl.Spec.PodSpec, &fn.BuildSpec().WorkloadSpec)
	if tmpl.Spec.RuntimeClassName == nil && cfg.DefaultRuntimeClass != "" {
		tmpl.Spec.RuntimeClassName = ptr.To(cfg.DefaultRuntimeClass)
	}
	tmpl.Spec.Containers = []corev1.Container{{
		Name:            ContainerName,
		Image:           image,
		Ports:           []corev1.ContainerPort{{Name: "http1", ContainerPort: runtimes.DefaultPort}},
		Env:             env(fn, cfg),
		Resources:       fn.BuildSpec().ResourceRequirements(cfg.DefaultResources),
		SecurityContext: restricted(),
		// The wrapper listens only once the handler is loaded and answers
		// this path itself, so Knative routes no request to an instance
		// that cannot serve it.
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: runtimes.HealthPath,
		}}},
	}}
	SetVolumes(&tmpl.Spec.PodSpec, &tmpl.Spec.Containers[0], fn.BuildSpec().Volumes)
	return svc
}

// StampSecretVersions records on svc's revision template the versions of
// the Secrets its env refers to (name to resourceVersion; none: no mark).
func StampSecretVersions(svc *servingv1.Service, versions map[string]string) {
	if len(versions) == 0 {
		return
	}
	tmpl := &svc.Spec.Template
	if tmpl.Annotations == nil {
		tmpl.Annotations = map[string]string{}
	}
	tmpl.Annotations[AnnotationSecretVersions] = secrets.Versions(versions)
}

// restricted is the Pod Security Standard "restricted" profile for the
// function's container, as far as Knative lets a revision set it, and as
// FunctionJobs run the same images: the runtime images run as RuntimeUID.
func restricted() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		RunAsUser:                ptr.To[int64](RuntimeUID),
		RunAsGroup:               ptr.To[int64](RuntimeUID),
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// env is the runtime contract's variables (docs/runtimes.md) and the site's
// OTLP endpoint, followed by the user's; the API refuses user names that
// would shadow the contract's, and a Function that names the endpoint
// itself keeps its own.
func env(fn slessv1alpha1.Workload, cfg Config) []corev1.EnvVar {
	out := []corev1.EnvVar{
		{Name: "SLESS_FUNCTION_NAME", Value: fn.GetName()},
		{Name: "SLESS_NAMESPACE", Value: fn.GetNamespace()},
		{Name: "SLESS_TIMEOUT_SECONDS", Value: strconv.Itoa(int(fn.Timeout()))},
	}
	if fn.BuildSpec().Entrypoint != "" {
		out = append(out, corev1.EnvVar{Name: "SLESS_ENTRYPOINT", Value: fn.BuildSpec().Entrypoint})
	}
	if m := fn.Mode(); m != slessv1alpha1.ModeFunction {
		// A prebuilt image learns its mode here; a built one has it baked in too.
		out = append(out, corev1.EnvVar{Name: "SLESS_MODE", Value: m})
	}
	user := fn.BuildSpec().CoreEnv()
	if cfg.OTLPEndpoint != "" && !slices.ContainsFunc(user, func(e corev1.EnvVar) bool { return e.Name == EnvOTLPEndpoint }) {
		out = append(out, corev1.EnvVar{Name: EnvOTLPEndpoint, Value: cfg.OTLPEndpoint})
	}
	return append(out, user...)
}

// UserEnv is the function's own part of a revision container's env as env
// built it: every variable but the runtime contract's, whose SLESS_* names
// the API keeps users from taking.
func UserEnv(containerEnv []corev1.EnvVar) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, e := range containerEnv {
		if !strings.HasPrefix(e.Name, "SLESS_") {
			out = append(out, *e.DeepCopy())
		}
	}
	return out
}

// PlacementOf is a pod spec with only pod's scheduling fields.
func PlacementOf(pod *corev1.PodSpec) corev1.PodSpec {
	return corev1.PodSpec{NodeSelector: pod.NodeSelector, Tolerations: pod.Tolerations, Affinity: pod.Affinity,
		PriorityClassName: pod.PriorityClassName, RuntimeClassName: pod.RuntimeClassName}
}

// SetPlacement copies the spec's scheduling fields onto a pod spec.
func SetPlacement(pod *corev1.PodSpec, s *slessv1alpha1.WorkloadSpec) {
	pod.NodeSelector = maps.Clone(s.NodeSelector)
	pod.Tolerations = nil
	for _, t := range s.Tolerations {
		pod.Tolerations = append(pod.Tolerations, *t.DeepCopy())
	}
	pod.Affinity = nil
	if a := s.Affinity; a != nil && a.NodeAffinity != nil {
		pod.Affinity = &corev1.Affinity{NodeAffinity: a.NodeAffinity.DeepCopy()}
	}
	pod.PriorityClassName = s.PriorityClassName
	pod.RuntimeClassName = nil
	if s.RuntimeClassName != nil {
		pod.RuntimeClassName = ptr.To(*s.RuntimeClassName)
	}
}

func scaleAnnotations(s *slessv1alpha1.ScaleSpec) map[string]string {
	if s == nil {
		return nil
	}
	a := map[string]string{}
	if s.Min != nil {
		a[AnnotationMinScale] = strconv.Itoa(int(*s.Min))
	}
	if s.Max != nil {
		a[AnnotationMaxScale] = strconv.Itoa(int(*s.Max))
	}
	if s.Target != nil {
		a[AnnotationTarget] = strconv.Itoa(int(*s.Target))
	}
	if len(a) == 0 {
		return nil
	}
	return a
}
