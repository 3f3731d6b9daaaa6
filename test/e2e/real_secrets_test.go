package e2e_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"testing"
	"time"

	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/adapter/resources"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/secrets"
)

// TestSecretRotationOnRealKnative: a secret made as the secrets API makes
// it, referred to through secretKeyRef by a Function and a SlessService,
// rotated. Each gets a new Revision, made by Knative's Configuration, whose
// container refers to the secret and which carries the new version; the
// Route keeps its traffic on the old Revision until the new one is Ready,
// the old one is kept, and both objects return to Ready with their
// generation unchanged. No object of the namespace but the Secret, no
// Event and no log of Knative's or Tekton's controller holds a value.
func TestSecretRotationOnRealKnative(t *testing.T) {
	s := newRealSlice(t)
	ctx := context.Background()
	c := s.bed.Kube.Client
	v1, v2 := "one-Vb7Qx-secret", "two-Lm2Rk-secret"
	db := secrets.Make(s.ns, "db", map[string][]byte{"password": []byte(v1)}, time.Now())
	if err := c.Create(ctx, db); err != nil {
		t.Fatal(err)
	}
	ref := []slessv1alpha1.EnvVar{{Name: "DB_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}}}
	fn := &slessv1alpha1.Function{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "reader"},
		Spec: slessv1alpha1.FunctionSpec{
			WorkloadSpec: slessv1alpha1.WorkloadSpec{
				Runtime:    slessv1alpha1.RuntimePython312,
				Entrypoint: "main.handler",
				Env:        ref,
				Source: slessv1alpha1.FunctionSource{Inline: &slessv1alpha1.InlineSource{Files: map[string]string{
					"main.py": "import os\n\ndef handler(event, context):\n    return {'set': bool(os.environ.get('DB_PASSWORD'))}\n"}}},
			},
		}}
	web := &slessv1alpha1.SlessService{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "web"},
		Spec: slessv1alpha1.SlessServiceSpec{
			WorkloadSpec: slessv1alpha1.WorkloadSpec{
				Runtime:    slessv1alpha1.RuntimePython312,
				Entrypoint: "app.app",
				Env:        ref,
				Source: slessv1alpha1.FunctionSource{Inline: &slessv1alpha1.InlineSource{Files: map[string]string{
					"app.py": "def app(environ, start_response):\n    start_response('200 OK', [])\n    return [b'ok']\n"}}},
			},
		}}
	for _, o := range []client.Object{fn, web} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	workloads := []struct {
		name string
		obj  slessv1alpha1.Workload
	}{{"reader", &slessv1alpha1.Function{}}, {"web", &slessv1alpha1.SlessService{}}}
	// ready waits until the workload is Ready at generation 1 serving a
	// revision other than not, and gives that revision.
	ready := func(name string, obj slessv1alpha1.Workload, not string) string {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			s.get(name, obj)
			st := obj.WorkloadStatus()
			if obj.GetGeneration() != 1 {
				t.Fatalf("%s: generation %d, a rotation must not change the spec", name, obj.GetGeneration())
			}
			if st.ObservedGeneration == 1 && st.Phase == slessv1alpha1.FunctionPhaseFailed {
				t.Fatalf("%s failed: %+v", name, st.Conditions)
			}
			if st.ObservedGeneration == 1 && st.Phase == slessv1alpha1.FunctionPhaseReady && st.LatestReadyRevision != not {
				return st.LatestReadyRevision
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not Ready on a revision other than %q after 2 min: phase %s, revision %q, conditions %+v",
					name, not, st.Phase, st.LatestReadyRevision, st.Conditions)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// revision asserts that Knative made rev for name's Configuration with
	// the secret referred to and its version version.
	revision := func(name, rev, version string) {
		t.Helper()
		r := &servingv1.Revision{}
		s.get(rev, r)
		if owner := metav1.GetControllerOf(r); owner == nil || owner.Kind != "Configuration" || owner.Name != name {
			t.Errorf("Revision %s: controller %+v, want Configuration %s", rev, owner, name)
		}
		if got, want := r.Annotations[resources.AnnotationSecretVersions], "db="+version; got != want {
			t.Errorf("Revision %s: secret versions %q, want %q", rev, got, want)
		}
		refers := false
		for _, e := range r.Spec.Containers[0].Env {
			if e.Name == "DB_PASSWORD" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil &&
				e.ValueFrom.SecretKeyRef.Name == "db" && e.ValueFrom.SecretKeyRef.Key == "password" && e.Value == "" {
				refers = true
			}
		}
		if !refers {
			t.Errorf("Revision %s does not refer to the secret: env %+v", rev, r.Spec.Containers[0].Env)
		}
	}
	before := map[string]string{}
	for _, w := range workloads {
		before[w.name] = ready(w.name, w.obj, "")
		revision(w.name, before[w.name], db.ResourceVersion)
	}

	cur := &corev1.Secret{}
	s.get("db", cur)
	secrets.SetData(cur, map[string][]byte{"password": []byte(v2)}, time.Now())
	if err := c.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}

	// Until the new revision is Ready each Route sends every request to
	// a Ready revision: the old one, which Knative does not delete. Both
	// rolls are watched at once, and one moment when the new revision
	// exists, not Ready yet, while the old one serves is noted.
	deadline := time.Now().Add(2 * time.Minute)
	rolled, overlap := map[string]bool{}, map[string]bool{}
	for len(rolled) < len(workloads) {
		for _, w := range workloads {
			if rolled[w.name] {
				continue
			}
			route := &servingv1.Route{}
			s.get(w.name, route)
			served := 0
			oldServes := false
			for _, tr := range route.Status.Traffic {
				if ptr.Deref(tr.Percent, 0) == 0 {
					continue
				}
				r := &servingv1.Revision{}
				if err := c.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: tr.RevisionName}, r); err != nil {
					t.Fatalf("%s: the Route sends traffic to revision %s: %v", w.name, tr.RevisionName, err)
				}
				if !r.IsReady() {
					t.Fatalf("%s: the Route sends %d%% to revision %s, which is not Ready", w.name, ptr.Deref(tr.Percent, 0), r.Name)
				}
				served += int(ptr.Deref(tr.Percent, 0))
				oldServes = oldServes || r.Name == before[w.name]
			}
			if served != 100 {
				t.Fatalf("%s: the Route sends %d%% of the traffic anywhere during the roll: %+v", w.name, served, route.Status.Traffic)
			}
			cfg := &servingv1.Configuration{}
			s.get(w.name, cfg)
			if latest := cfg.Status.LatestCreatedRevisionName; oldServes && latest != before[w.name] && latest != cfg.Status.LatestReadyRevisionName {
				overlap[w.name] = true
			}
			s.get(w.name, w.obj)
			st := w.obj.WorkloadStatus()
			if st.Phase == slessv1alpha1.FunctionPhaseReady && st.LatestReadyRevision != before[w.name] {
				rolled[w.name] = true
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not every workload has a new Ready revision 2 min after the rotation: %v", rolled)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, w := range workloads {
		if !overlap[w.name] {
			t.Errorf("%s: never seen serving the old revision while Knative's new one was not Ready yet", w.name)
		}
	}
	for _, w := range workloads {
		after := ready(w.name, w.obj, before[w.name])
		revision(w.name, after, cur.ResourceVersion)
		ksvc := &servingv1.Service{}
		s.get(w.name, ksvc)
		if got := ksvc.Spec.Template.Annotations[resources.AnnotationSecretVersions]; got != "db="+cur.ResourceVersion {
			t.Errorf("%s: Knative Service template secret versions %q", w.name, got)
		}
		if !ksvc.IsReady() || ksvc.Status.LatestReadyRevisionName != after {
			t.Errorf("%s: Knative Service ready %v on %s, want %s", w.name, ksvc.IsReady(), ksvc.Status.LatestReadyRevisionName, after)
		}
		old := &servingv1.Revision{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: before[w.name]}, old); err != nil {
			t.Errorf("%s: the old revision %s is gone: %v", w.name, before[w.name], err)
		}
		route := &servingv1.Route{}
		s.get(w.name, route)
		if tr := route.Status.Traffic; len(tr) != 1 || tr[0].RevisionName != after || ptr.Deref(tr[0].Percent, 0) != 100 {
			t.Errorf("%s: Route traffic %+v, want 100%% to %s", w.name, tr, after)
		}
	}

	// Only the Secret holds a value: not the objects sless, Knative and
	// Tekton made, their pods, the namespace's Events, nor the log of
	// Knative's or Tekton's controller.
	var forms []string
	for _, v := range []string{v1, v2} {
		forms = append(forms, v, base64.StdEncoding.EncodeToString([]byte(v)))
	}
	events := &corev1.EventList{}
	for _, l := range []client.ObjectList{&slessv1alpha1.FunctionList{}, &slessv1alpha1.SlessServiceList{},
		&servingv1.ServiceList{}, &servingv1.ConfigurationList{}, &servingv1.RevisionList{}, &servingv1.RouteList{},
		&tektonv1.PipelineRunList{}, &tektonv1.TaskRunList{}, &corev1.PodList{}, events, &eventsv1.EventList{}} {
		if err := c.List(ctx, l, client.InNamespace(s.ns)); err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range forms {
			if bytes.Contains(b, []byte(f)) {
				t.Errorf("a %T of the namespace holds %q", l, f)
			}
		}
	}
	if len(events.Items) == 0 {
		t.Error("no Events in the namespace: the audit of them read nothing")
	}
	for _, path := range s.bed.LogFiles() {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range forms {
			if bytes.Contains(b, []byte(f)) {
				t.Errorf("%s holds %q", path, f)
			}
		}
	}
}
