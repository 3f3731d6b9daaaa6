// Package resources builds the objects the cluster adapters write: the
// PipelineRun that builds a function's image (pkg/adapter/tekton) and the
// Knative Service that serves it (pkg/adapter/knative). Builders are pure:
// no client, no clock; the same inputs give the same object.
package resources

import (
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Labels and annotations sless puts on what it makes.
const (
	LabelFunction  = "sless.dev/function"
	LabelService   = "sless.dev/service"
	LabelTenant    = "sless.dev/tenant"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "sless"
	// AnnotationSourceDigest on a PipelineRun, and on the revision template
	// of what it built, is the build context's digest.
	AnnotationSourceDigest = "sless.dev/source-digest"
	// AnnotationSupersededBy on a PipelineRun sless cancelled is the
	// Function's generation that no longer builds its source. It tells such
	// a run from one cancelled by hand: only those sless cancelled are built
	// again when the Function asks for their source once more.
	AnnotationSupersededBy = "sless.dev/superseded-by-generation"
	// AnnotationRebuild on a PipelineRun is the Function's spec.rebuild it
	// was made for. A failed run made for another value than the spec's
	// now is passed over for a new run: the user asked to build again.
	AnnotationRebuild = "sless.dev/rebuild"
	// AnnotationSecretVersions on a revision template records the versions
	// of the Secrets its env refers to (secrets.Versions): a rotation
	// changes the template, so Knative rolls a revision that reads the new
	// values, which it would not do for a changed Secret alone.
	AnnotationSecretVersions = "sless.dev/secret-versions"

	// LabelVisibility with VisibilityClusterLocal keeps a Knative Service
	// off the public ingress: sless's invoke proxy is the public door.
	LabelVisibility        = "networking.knative.dev/visibility"
	VisibilityClusterLocal = "cluster-local"
	// AnnotationIngressClass on a Knative Service picks the networking
	// layer that routes it (Config.IngressClass).
	AnnotationIngressClass = "networking.knative.dev/ingress.class"

	AnnotationMinScale = "autoscaling.knative.dev/min-scale"
	AnnotationMaxScale = "autoscaling.knative.dev/max-scale"
	AnnotationTarget   = "autoscaling.knative.dev/target"

	// PrewarmHoldPrefix starts the Service annotations by which cron
	// triggers hold a function warm (knative.MinScale): while one is
	// present the template's min-scale stays at least 1.
	PrewarmHoldPrefix = "prewarm.sless.dev/"
)

// Names inside the PipelineRun; the build's contract with its task.
const (
	ParamContext       = "CONTEXT"
	ParamContextDigest = "CONTEXT_DIGEST"
	ParamImage         = "IMAGE"
	ParamTag           = "TAG"
	ResultImageDigest  = "IMAGE_DIGEST"
	ResultImageURL     = "IMAGE_URL"
	BuildTask          = "build"
	StepImageURL       = "image-url"
	StepBuild          = "build-and-push"
	// DockerConfigDir is where the registry credentials are mounted; kaniko
	// reads config.json there.
	DockerConfigDir = "/kaniko/.docker"
	// ContainerName is the function's container in its Knative revision.
	ContainerName = "function"
	// RuntimeUID is the user the runtime images and build contexts run as
	// (USER 65532:65532).
	RuntimeUID = 65532
)

// Defaults of Config.
const (
	// DefaultBuilderImage is kaniko's last upstream release. Upstream was
	// archived in 2025: operators should pin a maintained fork (or another
	// builder that takes kaniko's flags) with --builder-image.
	DefaultBuilderImage = "gcr.io/kaniko-project/executor:v1.23.2"
	// DefaultBuilderCommand is kaniko's executable in its images.
	DefaultBuilderCommand = "/kaniko/executor"
	// DefaultHelperImage runs the one-line step that reports IMAGE_URL.
	DefaultHelperImage = "busybox:1.37.0"
	DefaultS3Region    = "us-east-1"
)

// Config is the cluster-wide configuration the builders need beyond a
// Function. The controller fills it from flags (see cmd/sless/controller.go).
type Config struct {
	// Registry is the repository prefix images are pushed to, e.g.
	// registry.example.com/sless; each function gets <Registry>/<ns>/<name>.
	Registry string
	// BuilderImage runs the build; it takes kaniko's flags.
	BuilderImage string
	// BuilderCommand is the builder image's executable. Tekton must know
	// a step's command: without one it asks the image's registry for the
	// entrypoint on every build, which fails where the registry is private
	// or out of reach.
	BuilderCommand string
	// BuilderArgs are extra flags for the builder (e.g. --insecure for a
	// plain-HTTP registry, --cache=true).
	BuilderArgs []string
	// HelperImage has a POSIX shell; it writes the IMAGE_URL result.
	HelperImage string
	// RegistrySecret names a kubernetes.io/dockerconfigjson Secret in the
	// function's namespace with push rights; none when empty.
	RegistrySecret string
	// BuildServiceAccount runs the build's pod; the namespace's default when empty.
	BuildServiceAccount string
	// S3Endpoint is the S3 server as the build pod reaches it, with scheme
	// (http://minio.sless-system:9000); AWS S3 when empty.
	S3Endpoint string
	S3Region   string
	// S3Secret names a Secret in the function's namespace with keys
	// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY that may read build contexts.
	S3Secret string
	// ServiceAccount runs the function's pods; the namespace's default when empty.
	ServiceAccount string
	// IngressClass is the Knative networking class of the Services sless
	// makes (annotation networking.knative.dev/ingress.class, which Knative
	// copies to their Routes and Ingresses): sless's own class routes them
	// in sless-api, another names Kourier, Istio or Contour. Empty: no
	// annotation, so config-network's ingress-class decides.
	IngressClass string
	// DefaultResources fill each resource a function's spec names in
	// neither its requests nor its limits (site configuration).
	DefaultResources *slessv1alpha1.ResourceSpec
	// OTLPEndpoint is the OTLP/HTTP collector function pods send their
	// spans to, as EnvOTLPEndpoint (the runtimes add /v1/traces); empty:
	// functions export none.
	OTLPEndpoint string
	// DefaultRuntimeClass is the RuntimeClass of every workload whose
	// spec names none (gVisor's runsc, Kata); none when empty.
	DefaultRuntimeClass string
}

// EnvOTLPEndpoint is the standard OpenTelemetry variable the runtimes read
// their collector from (docs/observability.md).
const EnvOTLPEndpoint = "OTEL_EXPORTER_OTLP_ENDPOINT"

// WithDefaults fills what is unset.
func (c Config) WithDefaults() Config {
	if c.BuilderImage == "" {
		c.BuilderImage = DefaultBuilderImage
	}
	if c.BuilderCommand == "" {
		c.BuilderCommand = DefaultBuilderCommand
	}
	if c.HelperImage == "" {
		c.HelperImage = DefaultHelperImage
	}
	if c.S3Region == "" {
		c.S3Region = DefaultS3Region
	}
	return c
}

// Labels sless puts on every object it makes for fn: a Function's name
// under LabelFunction, a SlessService's under LabelService, so that
// selecting one never finds the other's builds.
func Labels(fn slessv1alpha1.Workload) map[string]string {
	return map[string]string{
		OwnerLabel(fn): fn.GetName(),
		LabelTenant:    fn.GetNamespace(),
		LabelManagedBy: ManagedBy,
	}
}

// OwnerLabel is the label that names fn on the objects made for it.
func OwnerLabel(fn slessv1alpha1.Workload) string {
	if fn.WorkloadKind() == slessv1alpha1.KindSlessService {
		return LabelService
	}
	return LabelFunction
}

// OwnerReference makes fn the controller of a child, so garbage collection
// removes the child with it and Owns() watches map the child back to it.
func OwnerReference(fn slessv1alpha1.Workload) metav1.OwnerReference {
	return *metav1.NewControllerRef(fn, slessv1alpha1.SchemeGroupVersion.WithKind(fn.WorkloadKind()))
}
