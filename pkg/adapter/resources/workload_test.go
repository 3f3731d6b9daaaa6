package resources

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"

	"github.com/sless-dev/sless/pkg/adapter"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

func testService(mutate ...func(*slessv1alpha1.SlessService)) *slessv1alpha1.SlessService {
	s := &slessv1alpha1.SlessService{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "hello", UID: "uid-1", Generation: 3},
		Spec: slessv1alpha1.SlessServiceSpec{
			WorkloadSpec: slessv1alpha1.WorkloadSpec{
				Runtime:    "python3.12",
				Entrypoint: "app.app",
				Source:     slessv1alpha1.FunctionSource{Inline: &slessv1alpha1.InlineSource{Files: map[string]string{"app.py": "x"}}},
			},
		},
	}
	for _, m := range mutate {
		m(s)
	}
	return s
}

func serviceOwner() []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "sless.dev/v1alpha1", Kind: "SlessService", Name: "hello", UID: "uid-1",
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
}

func serviceLabels() map[string]string {
	return map[string]string{LabelService: "hello", LabelTenant: "team-a", LabelManagedBy: ManagedBy}
}

// A SlessService is served by the same builder as a Function, owned by the
// SlessService and labelled as one, told its mode, kept at one instance
// unless it asks otherwise, with a service's request timeout.
func TestMakeServiceOfSlessService(t *testing.T) {
	image := "reg/team-a/hello@" + digest
	asService := func(mutate func(*servingv1.Service)) *servingv1.Service {
		return wantService(func(svc *servingv1.Service) {
			svc.OwnerReferences = serviceOwner()
			svc.Labels = serviceLabels()
			svc.Labels[LabelVisibility] = VisibilityClusterLocal
			tmpl := &svc.Spec.Template
			tmpl.Labels = serviceLabels()
			tmpl.Spec.TimeoutSeconds = ptr.To[int64](300)
			c := &tmpl.Spec.Containers[0]
			c.Env = []corev1.EnvVar{
				{Name: "SLESS_FUNCTION_NAME", Value: "hello"},
				{Name: "SLESS_NAMESPACE", Value: "team-a"},
				{Name: "SLESS_TIMEOUT_SECONDS", Value: "300"},
				{Name: "SLESS_ENTRYPOINT", Value: "app.app"},
				{Name: "SLESS_MODE", Value: "service"},
			}
			mutate(svc)
		})
	}
	tests := []struct {
		name string
		svc  *slessv1alpha1.SlessService
		want *servingv1.Service
	}{{
		name: "defaults: one instance kept",
		svc:  testService(),
		want: asService(func(svc *servingv1.Service) {
			svc.Spec.Template.Annotations = map[string]string{AnnotationMinScale: "1"}
		}),
	}, {
		name: "scale to zero asked for, max, concurrency, timeout",
		svc: testService(func(s *slessv1alpha1.SlessService) {
			s.Spec.MinScale = ptr.To[int32](0)
			s.Spec.MaxScale = ptr.To[int32](5)
			s.Spec.ContainerConcurrency = ptr.To[int64](20)
			s.Spec.TimeoutSeconds = ptr.To[int32](600)
		}),
		want: asService(func(svc *servingv1.Service) {
			tmpl := &svc.Spec.Template
			tmpl.Annotations = map[string]string{AnnotationMinScale: "0", AnnotationMaxScale: "5"}
			tmpl.Spec.ContainerConcurrency = ptr.To[int64](20)
			tmpl.Spec.TimeoutSeconds = ptr.To[int64](600)
			tmpl.Spec.Containers[0].Env[2].Value = "600"
		}),
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := MakeService(tc.svc, image, Config{})
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("MakeService (-want +got):\n%s", d)
			}
		})
	}
}

// A service's build is the Function's pipeline, owned and labelled as the
// service's, so the Function's cancelling of superseded builds never
// selects it.
func TestMakePipelineRunOfSlessService(t *testing.T) {
	in := adapter.BuildInput{Digest: digest, Location: "s3://b/k"}
	fnRun := MakePipelineRun(testFunction(), in, 0, Config{Registry: "reg"})
	got := MakePipelineRun(testService(), in, 0, Config{Registry: "reg"})
	if d := cmp.Diff(serviceOwner(), got.OwnerReferences); d != "" {
		t.Errorf("owner (-want +got):\n%s", d)
	}
	if d := cmp.Diff(serviceLabels(), got.Labels); d != "" {
		t.Errorf("labels (-want +got):\n%s", d)
	}
	if _, ok := got.Labels[LabelFunction]; ok {
		t.Errorf("a service's build carries %s", LabelFunction)
	}
	if d := cmp.Diff(fnRun.Spec, got.Spec); d != "" {
		t.Errorf("the service's pipeline differs from the function's (-fn +svc):\n%s", d)
	}
}
