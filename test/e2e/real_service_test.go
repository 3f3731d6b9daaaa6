package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"

	"github.com/sless-dev/sless/pkg/adapter/resources"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/test/testbed/functionctl"
)

// TestServiceOnRealKnativeAndTekton: kubectl apply of a SlessService is
// built by Tekton's own controller and served by Knative's, whose webhook
// accepts the min-scale annotation; it reaches Ready with the built image,
// kubectl finds it as ssvc, and a new minScale rolls a revision Knative
// makes with the new bound.
func TestServiceOnRealKnativeAndTekton(t *testing.T) {
	s := newRealSlice(t)
	applyService := func(minScale int) {
		t.Helper()
		manifest := fmt.Sprintf(`apiVersion: sless.dev/v1alpha1
kind: SlessService
metadata:
  name: web
spec:
  runtime: python3.12
  entrypoint: app.app
  minScale: %d
  maxScale: 3
  source:
    inline:
      files:
        app.py: |
          def app(environ, start_response):
              start_response("200 OK", [("Content-Type", "text/plain")])
              return [environ["PATH_INFO"].encode()]
`, minScale)
		file := filepath.Join(s.dir, "web.yaml")
		if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
			t.Fatal(err)
		}
		s.mustKubectl("apply", "-f", file)
	}
	settle := func(gen int64) *slessv1alpha1.SlessService {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			svc := &slessv1alpha1.SlessService{}
			s.get("web", svc)
			phase := svc.Status.Phase
			if svc.Status.ObservedGeneration >= gen && (phase == slessv1alpha1.FunctionPhaseReady || phase == slessv1alpha1.FunctionPhaseFailed) {
				if phase != slessv1alpha1.FunctionPhaseReady {
					t.Fatalf("SlessService web is %s: %+v", phase, meta.FindStatusCondition(svc.Status.Conditions, slessv1alpha1.FunctionConditionReady))
				}
				return svc
			}
			if time.Now().After(deadline) {
				t.Fatalf("SlessService web generation %d not settled after 2 min: phase %s, conditions %+v", gen, phase, svc.Status.Conditions)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	start := time.Now()
	applyService(1)
	svc := settle(1)
	t.Logf("SlessService Ready through the real controllers in %v", time.Since(start).Round(time.Millisecond))
	s.mustKubectl("wait", "--for=condition=Ready", "ssvc/web", "--timeout=10s")

	pr := &tektonv1.PipelineRun{}
	s.get(svc.Status.BuildRef, pr)
	if !pr.IsSuccessful() || !metav1.IsControlledBy(pr, svc) || pr.Labels[resources.LabelService] != "web" {
		t.Fatalf("PipelineRun %s: succeeded %v, owners %+v, labels %v", pr.Name, pr.IsSuccessful(), pr.OwnerReferences, pr.Labels)
	}
	results := map[string]string{}
	for _, r := range pr.Status.Results {
		results[r.Name] = r.Value.StringVal
	}
	if got := results["IMAGE_URL"] + "@" + results["IMAGE_DIGEST"]; got != svc.Status.Image ||
		!strings.HasPrefix(got, functionctl.Registry+"/"+s.ns+"/web@sha256:") {
		t.Errorf("image: Tekton's results give %s, the SlessService says %s", got, svc.Status.Image)
	}

	ksvc := &servingv1.Service{}
	s.get("web", ksvc)
	if !metav1.IsControlledBy(ksvc, svc) || ksvc.Status.LatestReadyRevisionName != svc.Status.LatestReadyRevision {
		t.Fatalf("Knative Service: owners %+v, ready revision %q, the SlessService's %q", ksvc.OwnerReferences, ksvc.Status.LatestReadyRevisionName, svc.Status.LatestReadyRevision)
	}
	rev := &servingv1.Revision{}
	s.get(svc.Status.LatestReadyRevision, rev)
	if got := rev.Annotations[resources.AnnotationMinScale]; got != "1" || rev.Spec.Containers[0].Image != svc.Status.Image || !rev.IsReady() {
		t.Errorf("Revision %s: min-scale %q, image %s, ready %v", rev.Name, got, rev.Spec.Containers[0].Image, rev.IsReady())
	}
	if out := s.mustKubectl("get", "slessservices"); !strings.Contains(out, "web") || !strings.Contains(out, "Ready") || !strings.Contains(out, "/svc/"+s.ns+"/web/") {
		t.Errorf("kubectl get slessservices:\n%s", out)
	}

	// A new minScale is a new revision, made by Knative with the new bound.
	applyService(2)
	svc = settle(2)
	if svc.Status.LatestReadyRevision == rev.Name {
		t.Fatalf("no new revision after minScale changed: %s", rev.Name)
	}
	s.get(svc.Status.LatestReadyRevision, rev)
	if got := rev.Annotations[resources.AnnotationMinScale]; got != "2" {
		t.Errorf("Revision %s: min-scale %q, want 2", rev.Name, got)
	}
}
