package resources

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"

	"github.com/sless-dev/sless/pkg/adapter"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func testFunction(mutate ...func(*slessv1alpha1.Function)) *slessv1alpha1.Function {
	fn := &slessv1alpha1.Function{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "hello", UID: "uid-1", Generation: 3},
		Spec: slessv1alpha1.FunctionSpec{
			WorkloadSpec: slessv1alpha1.WorkloadSpec{
				Runtime:    "python3.12",
				Entrypoint: "main.handler",
				Source:     slessv1alpha1.FunctionSource{Inline: &slessv1alpha1.InlineSource{Files: map[string]string{"main.py": "x"}}},
			},
		},
	}
	for _, m := range mutate {
		m(fn)
	}
	return fn
}

func owner() []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "sless.dev/v1alpha1", Kind: "Function", Name: "hello", UID: "uid-1",
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
}

func labels() map[string]string {
	return map[string]string{LabelFunction: "hello", LabelTenant: "team-a", LabelManagedBy: ManagedBy}
}

func mem(mb int64) resource.Quantity { return *resource.NewQuantity(mb<<20, resource.BinarySI) }

func wantService(mutate func(*servingv1.Service)) *servingv1.Service {
	svcLabels := labels()
	svcLabels[LabelVisibility] = VisibilityClusterLocal
	svc := &servingv1.Service{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "team-a", Labels: svcLabels, OwnerReferences: owner()}}
	svc.Spec.Template.Name = "hello-00003"
	svc.Spec.Template.Labels = labels()
	svc.Spec.Template.Spec.TimeoutSeconds = ptr.To[int64](30)
	svc.Spec.Template.Spec.Containers = []corev1.Container{{
		Name:  "function",
		Image: "reg/team-a/hello@" + digest,
		Ports: []corev1.ContainerPort{{Name: "http1", ContainerPort: 8080}},
		Env: []corev1.EnvVar{
			{Name: "SLESS_FUNCTION_NAME", Value: "hello"},
			{Name: "SLESS_NAMESPACE", Value: "team-a"},
			{Name: "SLESS_TIMEOUT_SECONDS", Value: "30"},
			{Name: "SLESS_ENTRYPOINT", Value: "main.handler"},
		},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceMemory: mem(128)},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: mem(128)},
		},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/_sless/health"}}},
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65532),
			AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}}
	if mutate != nil {
		mutate(svc)
	}
	return svc
}

func TestMakeService(t *testing.T) {
	image := "reg/team-a/hello@" + digest
	cpu := resource.MustParse("500m")
	tests := []struct {
		name string
		fn   *slessv1alpha1.Function
		cfg  Config
		want *servingv1.Service
	}{{
		name: "defaults",
		fn:   testFunction(),
		want: wantService(nil),
	}, {
		name: "memory, cpu, timeout, scale, env with a secret, service account",
		fn: testFunction(func(fn *slessv1alpha1.Function) {
			fn.Spec.MemoryMB = ptr.To[int32](512)
			fn.Spec.CPU = &cpu
			fn.Spec.TimeoutSeconds = ptr.To[int32](300)
			fn.Spec.Scale = &slessv1alpha1.ScaleSpec{Min: ptr.To[int32](1), Max: ptr.To[int32](10), Target: ptr.To[int32](50), ContainerConcurrency: ptr.To[int64](100)}
			fn.Spec.Env = []slessv1alpha1.EnvVar{
				{Name: "MODE", Value: "prod"},
				{Name: "KEY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}},
			}
		}),
		cfg: Config{ServiceAccount: "functions"},
		want: wantService(func(svc *servingv1.Service) {
			tmpl := &svc.Spec.Template
			tmpl.Annotations = map[string]string{AnnotationMinScale: "1", AnnotationMaxScale: "10", AnnotationTarget: "50"}
			tmpl.Spec.TimeoutSeconds = ptr.To[int64](300)
			tmpl.Spec.ContainerConcurrency = ptr.To[int64](100)
			tmpl.Spec.ServiceAccountName = "functions"
			c := &tmpl.Spec.Containers[0]
			c.Env[2].Value = "300"
			c.Env = append(c.Env,
				corev1.EnvVar{Name: "MODE", Value: "prod"},
				corev1.EnvVar{Name: "KEY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}})
			c.Resources = corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceMemory: mem(512), corev1.ResourceCPU: resource.MustParse("500m")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: mem(512)},
			}
		}),
	}, {
		name: "prebuilt image without entrypoint; scale with only min 0",
		fn: testFunction(func(fn *slessv1alpha1.Function) {
			fn.Spec.Entrypoint = ""
			fn.Spec.Source = slessv1alpha1.FunctionSource{Image: image}
			fn.Spec.Scale = &slessv1alpha1.ScaleSpec{Min: ptr.To[int32](0)}
		}),
		want: wantService(func(svc *servingv1.Service) {
			svc.Spec.Template.Annotations = map[string]string{AnnotationMinScale: "0"}
			c := &svc.Spec.Template.Spec.Containers[0]
			c.Env = c.Env[:3]
		}),
	}, {
		name: "an ingress class on the Service, which Knative copies to its Route",
		fn:   testFunction(),
		cfg:  Config{IngressClass: "sless.ingress.networking.knative.dev"},
		want: wantService(func(svc *servingv1.Service) {
			svc.Annotations = map[string]string{AnnotationIngressClass: "sless.ingress.networking.knative.dev"}
		}),
	}, {
		name: "resources with a GPU and site defaults for what the spec leaves out",
		fn: testFunction(func(fn *slessv1alpha1.Function) {
			fn.Spec.Resources = &slessv1alpha1.ResourceSpec{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: mem(1024), "nvidia.com/gpu": resource.MustParse("1")},
			}
		}),
		cfg: Config{DefaultResources: &slessv1alpha1.ResourceSpec{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: mem(256), corev1.ResourceEphemeralStorage: resource.MustParse("2Gi")},
		}},
		want: wantService(func(svc *servingv1.Service) {
			svc.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: mem(1024),
					"nvidia.com/gpu": resource.MustParse("1"), corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")},
				Limits: corev1.ResourceList{corev1.ResourceMemory: mem(1024), "nvidia.com/gpu": resource.MustParse("1"),
					corev1.ResourceEphemeralStorage: resource.MustParse("2Gi")},
			}
		}),
	}, {
		name: "the site's OTLP endpoint before the function's env",
		fn: testFunction(func(fn *slessv1alpha1.Function) {
			fn.Spec.Env = []slessv1alpha1.EnvVar{{Name: "MODE", Value: "prod"}}
		}),
		cfg: Config{OTLPEndpoint: "http://otel-collector.observability:4318"},
		want: wantService(func(svc *servingv1.Service) {
			c := &svc.Spec.Template.Spec.Containers[0]
			c.Env = append(c.Env, corev1.EnvVar{Name: "OTEL_EXPORTER_OTLP_ENDPOINT", Value: "http://otel-collector.observability:4318"},
				corev1.EnvVar{Name: "MODE", Value: "prod"})
		}),
	}, {
		name: "a function that names its own OTLP endpoint keeps it, once",
		fn: testFunction(func(fn *slessv1alpha1.Function) {
			fn.Spec.Env = []slessv1alpha1.EnvVar{{Name: "OTEL_EXPORTER_OTLP_ENDPOINT", Value: "http://mine:4318"}}
		}),
		cfg: Config{OTLPEndpoint: "http://otel-collector.observability:4318"},
		want: wantService(func(svc *servingv1.Service) {
			c := &svc.Spec.Template.Spec.Containers[0]
			c.Env = append(c.Env, corev1.EnvVar{Name: "OTEL_EXPORTER_OTLP_ENDPOINT", Value: "http://mine:4318"})
		}),
	}, {
		name: "placement onto the revision's pod spec",
		fn: testFunction(func(fn *slessv1alpha1.Function) {
			fn.Spec.NodeSelector = map[string]string{"pool": "gpu"}
			fn.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
			fn.Spec.Affinity = &slessv1alpha1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}}}}}
			fn.Spec.PriorityClassName = "low"
			fn.Spec.RuntimeClassName = ptr.To("gvisor")
		}),
		want: wantService(func(svc *servingv1.Service) {
			ps := &svc.Spec.Template.Spec.PodSpec
			ps.NodeSelector = map[string]string{"pool": "gpu"}
			ps.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
			ps.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}}}}}
			ps.PriorityClassName = "low"
			ps.RuntimeClassName = ptr.To("gvisor")
		}),
	}, {
		name: "volumes onto the pod spec, mounted in the function's container",
		fn: testFunction(func(fn *slessv1alpha1.Function) {
			fn.Spec.Volumes = testVolumes()
		}),
		want: wantService(func(svc *servingv1.Service) {
			ps := &svc.Spec.Template.Spec.PodSpec
			size := resource.MustParse("64Mi")
			ps.Volumes = []corev1.Volume{
				{Name: "db", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db-creds", DefaultMode: ptr.To[int32](0o440),
					Items: []corev1.KeyToPath{{Key: "password", Path: "pw", Mode: ptr.To[int32](0o400)}}}}},
				{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &size}}},
				{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
				{Name: "ro", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "models", ReadOnly: true}}},
			}
			ps.Containers[0].VolumeMounts = []corev1.VolumeMount{
				{Name: "db", MountPath: "/etc/db", ReadOnly: true},
				{Name: "cfg", MountPath: "/etc/app", ReadOnly: true},
				{Name: "scratch", MountPath: "/tmp"},
				{Name: "data", MountPath: "/data"},
				{Name: "ro", MountPath: "/models", ReadOnly: true},
			}
		}),
	}, {
		name: "the site's runtime class where the spec names none",
		fn:   testFunction(),
		cfg:  Config{DefaultRuntimeClass: "kata"},
		want: wantService(func(svc *servingv1.Service) {
			svc.Spec.Template.Spec.RuntimeClassName = ptr.To("kata")
		}),
	}, {
		name: "the spec's runtime class over the site's",
		fn:   testFunction(func(fn *slessv1alpha1.Function) { fn.Spec.RuntimeClassName = ptr.To("gvisor") }),
		cfg:  Config{DefaultRuntimeClass: "kata"},
		want: wantService(func(svc *servingv1.Service) {
			svc.Spec.Template.Spec.RuntimeClassName = ptr.To("gvisor")
		}),
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := MakeService(tc.fn, image, tc.cfg)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("MakeService (-want +got):\n%s", d)
			}
		})
	}
}

func TestMakePipelineRun(t *testing.T) {
	in := adapter.BuildInput{Digest: digest, Location: "s3://fns/team-a/hello/context/0123.tar.gz"}
	params := func(timeout time.Duration) *tektonv1.PipelineRun {
		pr := &tektonv1.PipelineRun{
			ObjectMeta: metav1.ObjectMeta{Name: "hello-0123456789", Namespace: "team-a", Labels: labels(),
				Annotations: map[string]string{AnnotationSourceDigest: digest}, OwnerReferences: owner()},
			Spec: tektonv1.PipelineRunSpec{
				Params: tektonv1.Params{
					{Name: "CONTEXT", Value: *tektonv1.NewStructuredValues(in.Location)},
					{Name: "CONTEXT_DIGEST", Value: *tektonv1.NewStructuredValues(digest)},
					{Name: "IMAGE", Value: *tektonv1.NewStructuredValues("reg.example/sless/team-a/hello")},
					{Name: "TAG", Value: *tektonv1.NewStructuredValues("src-0123456789abcdef0123456789abcdef")},
				},
				Timeouts: &tektonv1.TimeoutFields{Pipeline: &metav1.Duration{Duration: timeout}},
			},
		}
		return pr
	}
	ps := func(names ...string) tektonv1.ParamSpecs {
		var out tektonv1.ParamSpecs
		for _, n := range names {
			out = append(out, tektonv1.ParamSpec{Name: n, Type: tektonv1.ParamTypeString})
		}
		return out
	}
	all := []string{"CONTEXT", "CONTEXT_DIGEST", "IMAGE", "TAG"}
	pipeline := func(builderImage, builderCommand string, extraArgs []string, env []corev1.EnvVar, volumes []corev1.Volume, mounts []corev1.VolumeMount) *tektonv1.PipelineSpec {
		args := append([]string{
			"--dockerfile=Dockerfile",
			"--context=$(params.CONTEXT)",
			"--destination=$(params.IMAGE):$(params.TAG)",
			"--digest-file=$(results.IMAGE_DIGEST.path)",
		}, extraArgs...)
		return &tektonv1.PipelineSpec{
			Params: ps(all...),
			Results: []tektonv1.PipelineResult{
				{Name: "IMAGE_DIGEST", Type: "string", Value: *tektonv1.NewStructuredValues("$(tasks.build.results.IMAGE_DIGEST)")},
				{Name: "IMAGE_URL", Type: "string", Value: *tektonv1.NewStructuredValues("$(tasks.build.results.IMAGE_URL)")},
			},
			Tasks: []tektonv1.PipelineTask{{
				Name: "build",
				Params: tektonv1.Params{
					{Name: "CONTEXT", Value: *tektonv1.NewStructuredValues("$(params.CONTEXT)")},
					{Name: "CONTEXT_DIGEST", Value: *tektonv1.NewStructuredValues("$(params.CONTEXT_DIGEST)")},
					{Name: "IMAGE", Value: *tektonv1.NewStructuredValues("$(params.IMAGE)")},
					{Name: "TAG", Value: *tektonv1.NewStructuredValues("$(params.TAG)")},
				},
				TaskSpec: &tektonv1.EmbeddedTask{TaskSpec: tektonv1.TaskSpec{
					Params: ps(all...),
					Results: []tektonv1.TaskResult{
						{Name: "IMAGE_DIGEST", Type: "string", Description: "digest of the pushed image, sha256:<hex>"},
						{Name: "IMAGE_URL", Type: "string", Description: "repository the image was pushed to"},
					},
					Volumes: volumes,
					Steps: []tektonv1.Step{
						{Name: "image-url", Image: DefaultHelperImage, Env: []corev1.EnvVar{{Name: "IMAGE", Value: "$(params.IMAGE)"}},
							Script: "#!/bin/sh\nset -eu\nprintf '%s' \"$IMAGE\" > \"$(results.IMAGE_URL.path)\"\n"},
						{Name: "build-and-push", Image: builderImage, Command: []string{builderCommand}, Args: args, Env: env, VolumeMounts: mounts},
					},
				}},
			}},
		}
	}
	secretEnv := func(key string) corev1.EnvVar {
		return corev1.EnvVar{Name: key, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "s3-creds"}, Key: key}}}
	}
	tests := []struct {
		name    string
		fn      *slessv1alpha1.Function
		attempt int
		cfg     Config
		want    *tektonv1.PipelineRun
	}{{
		name: "defaults: AWS S3, no credentials",
		fn:   testFunction(),
		cfg:  Config{Registry: "reg.example/sless/"},
		want: func() *tektonv1.PipelineRun {
			pr := params(900 * time.Second)
			pr.Spec.PipelineSpec = pipeline(DefaultBuilderImage, "/kaniko/executor", nil, []corev1.EnvVar{{Name: "AWS_REGION", Value: "us-east-1"}}, nil, nil)
			return pr
		}(),
	}, {
		name: "S3 endpoint, credentials, registry secret, builder, service account, timeout",
		fn:   testFunction(func(fn *slessv1alpha1.Function) { fn.Spec.BuildTimeoutSeconds = ptr.To[int32](120) }),
		cfg: Config{Registry: "reg.example/sless", BuilderImage: "ghcr.io/fork/kaniko:v1.25.0", BuilderCommand: "/ko-app/executor", BuilderArgs: []string{"--insecure", "--cache=true"},
			RegistrySecret: "push", S3Endpoint: "http://minio.sless-system:9000", S3Region: "eu-west-1", S3Secret: "s3-creds", BuildServiceAccount: "builder"},
		want: func() *tektonv1.PipelineRun {
			pr := params(120 * time.Second)
			pr.Spec.TaskRunTemplate.ServiceAccountName = "builder"
			pr.Spec.PipelineSpec = pipeline("ghcr.io/fork/kaniko:v1.25.0", "/ko-app/executor", []string{"--insecure", "--cache=true"},
				[]corev1.EnvVar{
					{Name: "AWS_REGION", Value: "eu-west-1"},
					{Name: "S3_ENDPOINT", Value: "http://minio.sless-system:9000"},
					{Name: "S3_FORCE_PATH_STYLE", Value: "true"},
					secretEnv("AWS_ACCESS_KEY_ID"), secretEnv("AWS_SECRET_ACCESS_KEY"),
					{Name: "DOCKER_CONFIG", Value: "/kaniko/.docker"},
				},
				[]corev1.Volume{{Name: "registry-credentials", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
					SecretName: "push", Items: []corev1.KeyToPath{{Key: ".dockerconfigjson", Path: "config.json"}}}}}},
				[]corev1.VolumeMount{{Name: "registry-credentials", MountPath: "/kaniko/.docker", ReadOnly: true}})
			return pr
		}(),
	}, {
		name:    "built again after a run cancelled as superseded",
		fn:      testFunction(),
		attempt: 2,
		cfg:     Config{Registry: "reg.example/sless/"},
		want: func() *tektonv1.PipelineRun {
			pr := params(900 * time.Second)
			pr.Name = "hello-01234567-2"
			pr.Spec.PipelineSpec = pipeline(DefaultBuilderImage, "/kaniko/executor", nil, []corev1.EnvVar{{Name: "AWS_REGION", Value: "us-east-1"}}, nil, nil)
			return pr
		}(),
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := MakePipelineRun(tc.fn, in, tc.attempt, tc.cfg)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("MakePipelineRun (-want +got):\n%s", d)
			}
		})
	}
}

func testVolumes() []slessv1alpha1.Volume {
	size := resource.MustParse("64Mi")
	return []slessv1alpha1.Volume{
		{Name: "db", MountPath: "/etc/db", Secret: &slessv1alpha1.SecretVolume{SecretName: "db-creds", DefaultMode: ptr.To[int32](0o440),
			Items: []slessv1alpha1.KeyToPath{{Key: "password", Path: "pw", Mode: ptr.To[int32](0o400)}}}},
		{Name: "cfg", MountPath: "/etc/app", ConfigMap: &slessv1alpha1.ConfigMapVolume{Name: "settings"}},
		{Name: "scratch", MountPath: "/tmp", EmptyDir: &slessv1alpha1.EmptyDirVolume{Medium: corev1.StorageMediumMemory, SizeLimit: &size}},
		{Name: "data", MountPath: "/data", PersistentVolumeClaim: &slessv1alpha1.PVCVolume{ClaimName: "data"}},
		{Name: "ro", MountPath: "/models", PersistentVolumeClaim: &slessv1alpha1.PVCVolume{ClaimName: "models", ReadOnly: true}},
	}
}

// VolumesOf reads back what SetVolumes wrote: the revisions API and the
// console show a revision's mounts from it.
func TestVolumesRoundTrip(t *testing.T) {
	var pod corev1.PodSpec
	pod.Containers = []corev1.Container{{Name: ContainerName}}
	SetVolumes(&pod, &pod.Containers[0], testVolumes())
	if d := cmp.Diff(testVolumes(), VolumesOf(&pod)); d != "" {
		t.Errorf("VolumesOf(SetVolumes(v)) (-want +got):\n%s", d)
	}
	SetVolumes(&pod, &pod.Containers[0], nil)
	if len(pod.Volumes) != 0 || len(pod.Containers[0].VolumeMounts) != 0 {
		t.Errorf("volumes removed from the spec stay on the pod: %+v", pod)
	}
}
