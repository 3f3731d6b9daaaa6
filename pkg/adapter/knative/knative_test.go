package knative

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"

	"github.com/sless-dev/sless/pkg/adapter/resources"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

func fn() *slessv1alpha1.Function {
	return &slessv1alpha1.Function{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "f", UID: "u", Generation: 2},
		Spec: slessv1alpha1.FunctionSpec{
			WorkloadSpec: slessv1alpha1.WorkloadSpec{
				Runtime:    "nodejs22",
				Entrypoint: "index.handler",
				Env:        []slessv1alpha1.EnvVar{{Name: "A", Value: "1"}},
			},
			Scale: &slessv1alpha1.ScaleSpec{Min: ptr.To[int32](1)},
		},
	}
}

// knativeDefaulted is what Knative's webhook makes of the Service sless wrote.
func knativeDefaulted(svc *servingv1.Service) *servingv1.Service {
	s := svc.DeepCopy()
	s.Labels["serving.knative.dev/creator"] = "system:serviceaccount:sless-system:sless-controller"
	s.Spec.Template.Spec.EnableServiceLinks = ptr.To(false)
	c := &s.Spec.Template.Spec.Containers[0]
	c.Ports[0].Protocol = corev1.ProtocolTCP
	c.ReadinessProbe.SuccessThreshold = 1
	c.ReadinessProbe.HTTPGet.Port = intstr.FromInt32(0)
	s.Spec.Template.Spec.ContainerConcurrency = nil
	s.Spec.Traffic = []servingv1.TrafficTarget{{LatestRevision: ptr.To(true), Percent: ptr.To[int64](100)}}
	return s
}

// A changed ingress class re-annotates the Service; Knative's own
// annotations beside it are no difference.
func TestDiffersOnIngressClass(t *testing.T) {
	image := "reg/ns/f@sha256:" + "ab"
	have := resources.MakeService(fn(), image, resources.Config{})
	want := resources.MakeService(fn(), image, resources.Config{IngressClass: "sless.ingress.networking.knative.dev"})
	if !Differs(want, have) {
		t.Fatal("a Service without the class does not differ")
	}
	have.Annotations = map[string]string{resources.AnnotationIngressClass: "sless.ingress.networking.knative.dev", "serving.knative.dev/creator": "sless"}
	if Differs(want, have) {
		t.Fatal("a Service with the class and Knative's annotations differs")
	}
}

func TestDiffers(t *testing.T) {
	image := "reg/ns/f@sha256:" + "ab"
	base := resources.MakeService(fn(), image, resources.Config{})
	tests := []struct {
		name string
		want func(*slessv1alpha1.Function) // change to the Function
		have func(*servingv1.Service)      // change to the stored Service
		diff bool
	}{
		{name: "as written", diff: false},
		{name: "Knative defaults", have: func(s *servingv1.Service) { *s = *knativeDefaulted(s) }, diff: false},
		{name: "new generation, same template", want: func(f *slessv1alpha1.Function) { f.Generation = 9 }, diff: false},
		{name: "env value", want: func(f *slessv1alpha1.Function) { f.Spec.Env[0].Value = "2" }, diff: true},
		{name: "last env removed", want: func(f *slessv1alpha1.Function) { f.Spec.Env = nil }, diff: true},
		{name: "min-scale removed", want: func(f *slessv1alpha1.Function) { f.Spec.Scale = nil }, diff: true},
		{name: "memory", want: func(f *slessv1alpha1.Function) { f.Spec.MemoryMB = ptr.To[int32](1024) }, diff: true},
		{name: "container concurrency set", want: func(f *slessv1alpha1.Function) { f.Spec.Scale.ContainerConcurrency = ptr.To[int64](5) }, diff: true},
		{name: "container concurrency set by hand", have: func(s *servingv1.Service) { s.Spec.Template.Spec.ContainerConcurrency = ptr.To[int64](3) }, diff: true},
		{name: "image changed by hand", have: func(s *servingv1.Service) { s.Spec.Template.Spec.Containers[0].Image = "other" }, diff: true},
		{name: "probe path changed by hand", have: func(s *servingv1.Service) { s.Spec.Template.Spec.Containers[0].ReadinessProbe.HTTPGet.Path = "/" }, diff: true},
		{name: "visibility label removed", have: func(s *servingv1.Service) { delete(s.Labels, resources.LabelVisibility) }, diff: true},
		{name: "extra label kept", have: func(s *servingv1.Service) { s.Labels["team"] = "x" }, diff: false},
		{name: "traffic split", want: func(f *slessv1alpha1.Function) {
			f.Spec.Traffic = []slessv1alpha1.TrafficTarget{{RevisionName: "f-00001", Percent: ptr.To[int64](100)}, {Tag: "next"}}
		}, diff: true},
		{name: "traffic changed by hand", have: func(s *servingv1.Service) {
			s.Spec.Traffic = []servingv1.TrafficTarget{{RevisionName: "f-00001", Percent: ptr.To[int64](100)}}
		}, diff: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := fn()
			if tc.want != nil {
				tc.want(f)
			}
			want := resources.MakeService(f, image, resources.Config{})
			have := base.DeepCopy()
			if tc.have != nil {
				tc.have(have)
			}
			if got := Differs(want, have); got != tc.diff {
				t.Errorf("Differs = %v, want %v", got, tc.diff)
			}
		})
	}
}

func TestState(t *testing.T) {
	svc := resources.MakeService(fn(), "img", resources.Config{})
	svc.Generation = 2
	if st := State(svc); st.Ready || st.Failed || st.Reason != ReasonDeploying {
		t.Errorf("unobserved: %+v", st)
	}
	svc.Status.ObservedGeneration = 2
	svc.Status.InitializeConditions()
	svc.Status.LatestCreatedRevisionName = "f-00002"
	svc.Status.LatestReadyRevisionName = "f-00001"
	// Knative's steps of a rollout are told as one steady message, so that
	// each does not cost the Function a status write.
	rolling := State(svc)
	if rolling.Reason != ReasonDeploying || !strings.Contains(rolling.Message, "rolling out revision "+svc.Spec.Template.Name) {
		t.Errorf("rolling out: %+v", rolling)
	}
	for _, reason := range []string{"RevisionMissing", "IngressNotConfigured", "Deploying"} {
		svc.GetConditionSet().Manage(&svc.Status).MarkUnknown(servingv1.ServiceConditionConfigurationsReady, reason, "step %s", reason)
		if st := State(svc); st.Reason != rolling.Reason || st.Message != rolling.Message {
			t.Errorf("%s: %q %q, want the steady %q %q", reason, st.Reason, st.Message, rolling.Reason, rolling.Message)
		}
	}
	// Knative's own steps while its Configuration and Route catch up.
	for name, mark := range map[string]func(){"configuration": svc.Status.MarkConfigurationNotReconciled, "route": svc.Status.MarkRouteNotReconciled} {
		mark()
		if st := State(svc); st.Reason != rolling.Reason || st.Message != rolling.Message {
			t.Errorf("%s not reconciled: %q %q, want the steady %q %q", name, st.Reason, st.Message, rolling.Reason, rolling.Message)
		}
	}
	// Any other reason is told as Knative tells it.
	svc.GetConditionSet().Manage(&svc.Status).MarkUnknown(servingv1.ServiceConditionConfigurationsReady, "QuotaWait", "over quota")
	if st := State(svc); st.Reason != "QuotaWait" || st.Message != "over quota" {
		t.Errorf("another reason: %+v", st)
	}
	svc.GetConditionSet().Manage(&svc.Status).MarkTrue(servingv1.ServiceConditionConfigurationsReady)
	svc.GetConditionSet().Manage(&svc.Status).MarkTrue(servingv1.ServiceConditionRoutesReady)
	if st := State(svc); st.Ready {
		t.Errorf("Ready while an older revision is the ready one: %+v", st)
	}
	svc.Status.LatestReadyRevisionName = "f-00002"
	if st := State(svc); !st.Ready || st.LatestReadyRevision != "f-00002" {
		t.Errorf("ready: %+v", st)
	}
	svc.GetConditionSet().Manage(&svc.Status).MarkFalse(servingv1.ServiceConditionConfigurationsReady, "RevisionFailed", "boom")
	if st := State(svc); st.Ready || !st.Failed || st.Reason != "RevisionFailed" || st.Message != "boom" {
		t.Errorf("failed: %+v", st)
	}
}
