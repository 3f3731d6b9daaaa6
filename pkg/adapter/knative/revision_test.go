package knative

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	servingconfig "knative.dev/serving/pkg/apis/config"
	"knative.dev/serving/pkg/apis/serving"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"

	"github.com/sless-dev/sless/pkg/adapter/resources"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/test/testbed"
)

func TestMain(m *testing.M) { testbed.Main(m) }

const (
	digestA = "registry.test/team/f@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	digestB = "registry.test/team/f@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// revisionOf is the Revision Knative makes from the template of the Service
// sless wrote for fn, named name, for service (fn's own unless another).
func revisionOf(fn *slessv1alpha1.Function, name, service, image string) *servingv1.Revision {
	svc := resources.MakeService(fn, image, resources.Config{})
	return &servingv1.Revision{
		ObjectMeta: metav1.ObjectMeta{Namespace: fn.Namespace, Name: name, Labels: map[string]string{serving.ServiceLabelKey: service}},
		Spec:       *svc.Spec.Template.Spec.DeepCopy(),
	}
}

// TestReadRevision reads a Revision back from the apiserver as the job
// reconciler does: the settings the template was made with, whatever the
// Function says now, and nothing from a Revision that is not the
// function's.
func TestReadRevision(t *testing.T) {
	k := testbed.SharedKube(t)
	ctx := context.Background()
	ns := k.Namespace(t)
	s := &Server{Client: k.Client, APIReader: k.Client}

	made := fn()
	made.Namespace = ns
	made.Spec.MemoryMB = ptr.To[int32](256)
	made.Spec.CPU = ptr.To(resource.MustParse("500m"))
	made.Spec.TimeoutSeconds = ptr.To[int32](45)
	made.Spec.Env = []slessv1alpha1.EnvVar{{Name: "GREETING", Value: "old"}}
	for _, rev := range []*servingv1.Revision{
		revisionOf(made, "f-00001", "f", digestA),
		revisionOf(made, "other-00001", "other", digestA),
	} {
		if err := k.Client.Create(ctx, rev); err != nil {
			t.Fatal(err)
		}
	}
	untimed := revisionOf(made, "f-00002", "f", digestA)
	untimed.Spec.TimeoutSeconds = nil
	if err := k.Client.Create(ctx, untimed); err != nil {
		t.Fatal(err)
	}

	// The Function has moved on since f-00001 was made.
	now := made.DeepCopy()
	now.Spec.MemoryMB, now.Spec.TimeoutSeconds = ptr.To[int32](1024), ptr.To[int32](900)
	now.Spec.Env = []slessv1alpha1.EnvVar{{Name: "GREETING", Value: "new"}, {Name: "ONLY_NEW", Value: "1"}}

	got, found, err := s.ReadRevision(ctx, now, "f-00001")
	if err != nil || !found {
		t.Fatalf("f-00001: found %v, %v", found, err)
	}
	wantEnv := []corev1.EnvVar{{Name: "GREETING", Value: "old"}}
	wantRes := revisionOf(made, "x", "f", digestA).Spec.Containers[0].Resources
	if !equality.Semantic.DeepEqual(got.Env, wantEnv) || !equality.Semantic.DeepEqual(got.Resources, wantRes) || got.TimeoutSeconds != 45 || got.Entrypoint != "index.handler" {
		t.Errorf("f-00001: env %v, resources %v, timeout %d, entrypoint %q; want %v, %v, 45, index.handler", got.Env, got.Resources, got.TimeoutSeconds, got.Entrypoint, wantEnv, wantRes)
	}
	// Knative's webhook gives a Revision written without timeoutSeconds its
	// revision-timeout-seconds: that is what the Revision runs with.
	if got, _, _ := s.ReadRevision(ctx, now, "f-00002"); got.TimeoutSeconds != servingconfig.DefaultRevisionTimeoutSeconds {
		t.Errorf("a Revision written without timeoutSeconds: %d, want Knative's default %d", got.TimeoutSeconds, servingconfig.DefaultRevisionTimeoutSeconds)
	}
	for _, name := range []string{"other-00001", "f-00009"} {
		if _, found, err := s.ReadRevision(ctx, now, name); found || err != nil {
			t.Errorf("%s: found %v, %v; want not found", name, found, err)
		}
	}
}

// TestRevisionImage: the digest Knative resolved (status) comes first, a
// digest-pinned spec image stands in when it has not resolved one, and a
// tag alone is no image.
func TestRevisionImage(t *testing.T) {
	k := testbed.SharedKube(t)
	ctx := context.Background()
	ns := k.Namespace(t)
	s := &Server{Client: k.Client, APIReader: k.Client}
	f := fn()
	f.Namespace = ns

	cases := []struct {
		name, spec, resolved, want string
	}{
		{"f-00001", "registry.test/team/f:v1", digestB, digestB},
		{"f-00002", digestA, "", digestA},
		{"f-00003", digestA, digestB, digestB},
		{"f-00004", "registry.test/team/f:v1", "", ""},
	}
	for _, tc := range cases {
		rev := revisionOf(f, tc.name, "f", tc.spec)
		if err := k.Client.Create(ctx, rev); err != nil {
			t.Fatal(err)
		}
		if tc.resolved != "" {
			rev.Status.ContainerStatuses = []servingv1.ContainerStatus{{Name: resources.ContainerName, ImageDigest: tc.resolved}}
			if err := k.Client.Status().Update(ctx, rev); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.revisionImage(ctx, ns, tc.name)
		if err != nil || got != tc.want {
			t.Errorf("%s (spec %s, resolved %q): %q, %v; want %q", tc.name, tc.spec, tc.resolved, got, err, tc.want)
		}
	}
	if got, err := s.revisionImage(ctx, ns, "f-00009"); got != "" || err != nil {
		t.Errorf("missing Revision: %q, %v", got, err)
	}
}
