package kube

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/sless-dev/sless/pkg/adapter"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

const (
	// image is the serving revision's; newerImage a later revision's.
	image      = "registry.example.com/fn/hello@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	newerImage = "registry.example.com/fn/hello@sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
)

func function(mut ...func(*slessv1alpha1.Function)) *slessv1alpha1.Function {
	fn := &slessv1alpha1.Function{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "tenant-a"},
		Spec: slessv1alpha1.FunctionSpec{
			WorkloadSpec: slessv1alpha1.WorkloadSpec{
				Runtime:    "python3.12",
				Entrypoint: "main.handler",
				Source:     slessv1alpha1.FunctionSource{Inline: &slessv1alpha1.InlineSource{Files: map[string]string{"main.py": "def handler(e, c): return 1"}}},
			},
		},
		Status: slessv1alpha1.FunctionStatus{Image: image, ServingImage: image, LatestCreatedRevision: "hello-00003", LatestReadyRevision: "hello-00003"},
	}
	for _, m := range mut {
		m(fn)
	}
	return fn
}

func functionJob(mut ...func(*slessv1alpha1.FunctionJob)) *slessv1alpha1.FunctionJob {
	j := &slessv1alpha1.FunctionJob{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "tenant-a", UID: "uid-1"},
		Spec:       slessv1alpha1.FunctionJobSpec{Function: "hello", RunID: 7},
	}
	for _, m := range mut {
		m(j)
	}
	return j
}

func env(extra ...corev1.EnvVar) []corev1.EnvVar { return extra }

func TestMakeJob(t *testing.T) {
	mem128 := *resource.NewQuantity(128*1024*1024, resource.BinarySI)
	// served is the settings of the serving revision as a function with
	// the defaults made it.
	served := adapter.RevisionSettings{
		Resources:      corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: mem128}, Limits: corev1.ResourceList{corev1.ResourceMemory: mem128}},
		TimeoutSeconds: 30,
	}
	base := func(payload, timeout string, runID string, extraEnv []corev1.EnvVar) []corev1.EnvVar {
		return append(extraEnv,
			corev1.EnvVar{Name: "SLESS_MODE", Value: "job"},
			corev1.EnvVar{Name: "SLESS_PAYLOAD", Value: payload},
			corev1.EnvVar{Name: "SLESS_TERMINATION_MESSAGE_PATH", Value: "/dev/termination-log"},
			corev1.EnvVar{Name: "SLESS_TIMEOUT_SECONDS", Value: timeout},
			corev1.EnvVar{Name: "SLESS_FUNCTION_NAME", Value: "hello"},
			corev1.EnvVar{Name: "SLESS_NAMESPACE", Value: "tenant-a"},
			corev1.EnvVar{Name: "SLESS_REVISION", Value: "hello-00003"},
			corev1.EnvVar{Name: "SLESS_REQUEST_ID", Value: "job-uid-1-" + runID},
		)
	}
	tests := []struct {
		name string
		job  *slessv1alpha1.FunctionJob
		fn   *slessv1alpha1.Function
		rev  adapter.RevisionSettings
		cfg  JobConfig
		// what differs from the default shape
		wantName      string
		wantEnv       []corev1.EnvVar
		wantDeadline  int64
		wantTTL       int32
		wantRes       corev1.ResourceRequirements
		wantPlacement corev1.PodSpec
	}{{
		name:         "defaults: function timeout, no payload, default TTL",
		job:          functionJob(),
		fn:           function(),
		rev:          served,
		wantName:     "nightly-7",
		wantEnv:      base("null", "30", "7", nil),
		wantDeadline: 30 + StartupAllowanceSeconds,
		wantTTL:      DefaultTTLSecondsAfterFinished,
		wantRes:      corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: mem128}, Limits: corev1.ResourceList{corev1.ResourceMemory: mem128}},
	}, {
		name: "own timeout, compact payload, configured TTL",
		job: functionJob(func(j *slessv1alpha1.FunctionJob) {
			j.Spec.RunID = 9223372036854775807
			j.Spec.TimeoutSeconds = ptr.To[int32](3600)
			j.Spec.Payload = &apiextensionsv1.JSON{Raw: []byte(`{ "day": "2026-01-01",  "n": [1, 2] }`)}
		}),
		fn:           function(),
		rev:          served,
		cfg:          JobConfig{TTLSecondsAfterFinished: 60},
		wantName:     "nightly-9223372036854775807",
		wantEnv:      base(`{"day":"2026-01-01","n":[1,2]}`, "3600", "9223372036854775807", nil),
		wantDeadline: 3600 + StartupAllowanceSeconds,
		wantTTL:      60,
		wantRes:      corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: mem128}, Limits: corev1.ResourceList{corev1.ResourceMemory: mem128}},
	}, {
		name: "the revision's env first, its memory, cpu and timeout",
		job:  functionJob(),
		fn:   function(),
		rev: adapter.RevisionSettings{
			Env: []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}}},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceMemory: *resource.NewQuantity(512*1024*1024, resource.BinarySI), corev1.ResourceCPU: resource.MustParse("250m")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: *resource.NewQuantity(512*1024*1024, resource.BinarySI)},
			},
			TimeoutSeconds: 120,
		},
		wantName: "nightly-7",
		wantEnv: base("null", "120", "7", env(corev1.EnvVar{Name: "A", Value: "1"},
			corev1.EnvVar{Name: "B", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}})),
		wantDeadline: 120 + StartupAllowanceSeconds,
		wantTTL:      DefaultTTLSecondsAfterFinished,
		wantRes: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceMemory: *resource.NewQuantity(512*1024*1024, resource.BinarySI), corev1.ResourceCPU: resource.MustParse("250m")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: *resource.NewQuantity(512*1024*1024, resource.BinarySI)},
		},
	}, {
		name:         "the revision's entrypoint, for a prebuilt image",
		job:          functionJob(),
		fn:           function(),
		rev:          adapter.RevisionSettings{Resources: served.Resources, TimeoutSeconds: 30, Entrypoint: "app.main"},
		wantName:     "nightly-7",
		wantEnv:      append(base("null", "30", "7", nil), corev1.EnvVar{Name: "SLESS_ENTRYPOINT", Value: "app.main"}),
		wantDeadline: 30 + StartupAllowanceSeconds,
		wantTTL:      DefaultTTLSecondsAfterFinished,
		wantRes:      served.Resources,
	}, {
		name: "the revision's placement and GPU",
		job:  functionJob(),
		fn:   function(),
		rev: adapter.RevisionSettings{
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}},
			Placement: corev1.PodSpec{NodeSelector: map[string]string{"pool": "gpu"},
				Tolerations: []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}, RuntimeClassName: ptr.To("gvisor")},
			TimeoutSeconds: 30,
		},
		wantName:      "nightly-7",
		wantEnv:       base("null", "30", "7", nil),
		wantDeadline:  30 + StartupAllowanceSeconds,
		wantTTL:       DefaultTTLSecondsAfterFinished,
		wantRes:       corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}},
		wantPlacement: corev1.PodSpec{NodeSelector: map[string]string{"pool": "gpu"}, Tolerations: []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}, RuntimeClassName: ptr.To("gvisor")},
	}, {
		// Knative keeps the last ready revision serving; a run executes
		// the code calls reach and is named after it, not the newer image,
		// with that revision's settings, not the newer spec's.
		name: "newer revision failed: the serving revision's image and settings run",
		job:  functionJob(),
		fn: function(func(fn *slessv1alpha1.Function) {
			fn.Status.Image = newerImage
			fn.Status.LatestCreatedRevision = "hello-00004"
			fn.Spec.TimeoutSeconds = ptr.To[int32](900)
			fn.Spec.MemoryMB = ptr.To[int32](1024)
			fn.Spec.CPU = ptr.To(resource.MustParse("2"))
			fn.Spec.Env = []slessv1alpha1.EnvVar{{Name: "NEW", Value: "1"}}
		}),
		rev:          served,
		wantName:     "nightly-7",
		wantEnv:      base("null", "30", "7", nil),
		wantDeadline: 30 + StartupAllowanceSeconds,
		wantTTL:      DefaultTTLSecondsAfterFinished,
		wantRes:      corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: mem128}, Limits: corev1.ResourceList{corev1.ResourceMemory: mem128}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			labels := map[string]string{
				"sless.dev/function": "hello", "sless.dev/function-job": "nightly",
				"sless.dev/run-id": tc.wantName[len("nightly-"):], "app.kubernetes.io/managed-by": "sless",
			}
			want := &batchv1.Job{
				ObjectMeta: metav1.ObjectMeta{
					Name: tc.wantName, Namespace: "tenant-a", Labels: labels,
					Annotations: map[string]string{"sless.dev/revision": "hello-00003"},
					OwnerReferences: []metav1.OwnerReference{{
						APIVersion: "sless.dev/v1alpha1", Kind: "FunctionJob", Name: "nightly", UID: "uid-1",
						Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
					}},
				},
				Spec: batchv1.JobSpec{
					BackoffLimit:            ptr.To[int32](0),
					ActiveDeadlineSeconds:   ptr.To(tc.wantDeadline),
					TTLSecondsAfterFinished: ptr.To(tc.wantTTL),
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec: corev1.PodSpec{
							RestartPolicy:                 corev1.RestartPolicyNever,
							NodeSelector:                  tc.wantPlacement.NodeSelector,
							Tolerations:                   tc.wantPlacement.Tolerations,
							RuntimeClassName:              tc.wantPlacement.RuntimeClassName,
							AutomountServiceAccountToken:  ptr.To(false),
							EnableServiceLinks:            ptr.To(false),
							TerminationGracePeriodSeconds: ptr.To[int64](10),
							SecurityContext: &corev1.PodSecurityContext{
								RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65532),
								SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
							},
							Containers: []corev1.Container{{
								Name: "function", Image: image, Env: tc.wantEnv, Resources: tc.wantRes,
								SecurityContext: &corev1.SecurityContext{
									AllowPrivilegeEscalation: ptr.To(false),
									Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
								},
								TerminationMessagePath:   "/dev/termination-log",
								TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
							}},
						},
					},
				},
			}
			got := MakeJob(tc.job, tc.fn, tc.rev, tc.cfg)
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("MakeJob (-want +got):\n%s", d)
			}
			if len(got.Name) > 63 {
				t.Errorf("Job name %q is longer than 63 characters", got.Name)
			}
		})
	}
}

func TestMakeJobDoesNotAliasTheRevision(t *testing.T) {
	rev := adapter.RevisionSettings{
		Env:            []corev1.EnvVar{{Name: "A", Value: "1"}},
		Resources:      corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
		TimeoutSeconds: 30,
	}
	job := MakeJob(functionJob(), function(), rev, JobConfig{})
	job.Spec.Template.Spec.Containers[0].Env[0].Value = "changed"
	job.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("3")
	if cpu := rev.Resources.Requests[corev1.ResourceCPU]; rev.Env[0].Value != "1" || cpu.String() != "1" {
		t.Fatalf("the Job shares memory with the revision's settings: env %q cpu %s", rev.Env[0].Value, cpu.String())
	}
}
