package service_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"

	"github.com/sless-dev/sless/pkg/adapter/resources"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/secrets"
)

// A rotation through the secrets API rolls a new revision of a service
// whose env refers to the Secret, its generation unchanged, as it does a
// Function's: the Knative Service's template carries the Secret's version.
// One Secret referred to by a service and a Function rolls both.
func TestSecretRotationRollsServiceRevision(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	db := secrets.Make(w.ns, "db", map[string][]byte{"password": []byte("one")}, time.Now())
	if err := w.kube.Client.Create(ctx, db); err != nil {
		t.Fatal(err)
	}
	ref := slessv1alpha1.EnvVar{Name: "DB_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}}
	app := webApp(w.ns, "web")
	app.Spec.Env = []slessv1alpha1.EnvVar{ref}
	if err := w.kube.Client.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	fn := &slessv1alpha1.Function{}
	fn.Namespace, fn.Name = w.ns, "reader"
	fn.Spec = slessv1alpha1.FunctionSpec{
		WorkloadSpec: slessv1alpha1.WorkloadSpec{
			Runtime:    slessv1alpha1.RuntimePython312,
			Entrypoint: "main.handler",
			Env:        []slessv1alpha1.EnvVar{ref},
			Source: slessv1alpha1.FunctionSource{Inline: &slessv1alpha1.InlineSource{Files: map[string]string{
				"main.py": "def handler(event, context):\n    return 'ok'\n"}}},
		},
	}
	if err := w.kube.Client.Create(ctx, fn); err != nil {
		t.Fatal(err)
	}
	first := w.waitReady("web")
	template := func(name string) string {
		ksvc := &servingv1.Service{}
		if err := w.kube.Client.Get(ctx, types.NamespacedName{Namespace: w.ns, Name: name}, ksvc); err != nil {
			return "error: " + err.Error()
		}
		return ksvc.Spec.Template.Annotations[resources.AnnotationSecretVersions]
	}
	if got, want := template("web"), "db="+db.ResourceVersion; got != want {
		t.Fatalf("service template annotation %q, want %q", got, want)
	}
	var fnFirst string
	w.eventually("the Function Ready with the secret's version", func() (bool, string) {
		f := &slessv1alpha1.Function{}
		if err := w.kube.Client.Get(ctx, types.NamespacedName{Namespace: w.ns, Name: "reader"}, f); err != nil {
			return false, err.Error()
		}
		fnFirst = f.Status.LatestReadyRevision
		return f.IsReady() && template("reader") == "db="+db.ResourceVersion, describe(&f.Status) + "; " + template("reader")
	})

	cur := &corev1.Secret{}
	if err := w.kube.Client.Get(ctx, types.NamespacedName{Namespace: w.ns, Name: "db"}, cur); err != nil {
		t.Fatal(err)
	}
	secrets.SetData(cur, map[string][]byte{"password": []byte("two")}, time.Now())
	if err := w.kube.Client.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	want := "db=" + cur.ResourceVersion
	var now *slessv1alpha1.SlessService
	w.eventually("a new service revision after the rotation, Ready", func() (bool, string) {
		now = w.get("web")
		return now.IsReady() && now.Status.LatestReadyRevision != first.Status.LatestReadyRevision && template("web") == want,
			describe(&now.Status) + "; template " + template("web")
	})
	if now.Generation != first.Generation {
		t.Fatalf("the service's generation moved: %d, was %d", now.Generation, first.Generation)
	}
	w.eventually("a new Function revision after the rotation, Ready", func() (bool, string) {
		f := &slessv1alpha1.Function{}
		if err := w.kube.Client.Get(ctx, types.NamespacedName{Namespace: w.ns, Name: "reader"}, f); err != nil {
			return false, err.Error()
		}
		return f.IsReady() && f.Status.LatestReadyRevision != fnFirst && template("reader") == want, describe(&f.Status)
	})
}
