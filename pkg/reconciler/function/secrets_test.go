package function_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sless-dev/sless/pkg/adapter/resources"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/secrets"
)

func secretRef(env, secret, key string) slessv1alpha1.EnvVar {
	return slessv1alpha1.EnvVar{Name: env, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key}}}
}

// Knative does not restart pods when a Secret changes: a rotation through
// the secrets API must roll a new revision by itself, with the Function's
// generation unchanged. A Secret sless did not make is not followed.
func TestSecretRotationRollsRevision(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.startController()
	db := secrets.Make(w.ns, "db", map[string][]byte{"password": []byte("one")}, time.Now())
	w.create(db)
	theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "theirs"}, StringData: map[string]string{"token": "a"}}
	w.create(theirs)
	fn := pythonFunction(w.ns, "reader", `"ok"`)
	fn.Spec.Env = []slessv1alpha1.EnvVar{secretRef("DB_PASSWORD", "db", "password"), secretRef("TOKEN", "theirs", "token")}
	w.create(fn)
	first := w.waitReady("reader")
	svc, err := w.service("reader")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := svc.Spec.Template.Annotations[resources.AnnotationSecretVersions], "db="+db.ResourceVersion; got != want {
		t.Fatalf("template annotation %q, want %q", got, want)
	}

	// Rotate.
	cur := &corev1.Secret{}
	if err := w.kube.Client.Get(ctx, types.NamespacedName{Namespace: w.ns, Name: "db"}, cur); err != nil {
		t.Fatal(err)
	}
	secrets.SetData(cur, map[string][]byte{"password": []byte("two")}, time.Now())
	if err := w.kube.Client.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	var now *slessv1alpha1.Function
	w.eventually("a new revision after the rotation, Ready", func() (bool, string) {
		now = w.fn("reader")
		svc, err := w.service("reader")
		if err != nil {
			return false, err.Error()
		}
		return now.IsReady() && now.Status.LatestReadyRevision != first.Status.LatestReadyRevision &&
			svc.Spec.Template.Annotations[resources.AnnotationSecretVersions] == "db="+cur.ResourceVersion, describe(now)
	})
	if now.Generation != first.Generation {
		t.Fatalf("the Function's generation moved: %d, was %d", now.Generation, first.Generation)
	}
	if rev := now.Status.LatestReadyRevision; len(rev) > 58 {
		t.Errorf("revision name %q leaves no room for -warm", rev)
	}

	// A Secret made later than the Function rolls it too once it exists.
	w.update("reader", func(f *slessv1alpha1.Function) {
		f.Spec.Env = append(f.Spec.Env, secretRef("API_KEY", "api", "key"))
	})
	w.waitReady("reader")
	api := secrets.Make(w.ns, "api", map[string][]byte{"key": []byte("k")}, time.Now())
	w.create(api)
	w.eventually("the new secret's version on the template", func() (bool, string) {
		svc, err := w.service("reader")
		if err != nil {
			return false, err.Error()
		}
		got := svc.Spec.Template.Annotations[resources.AnnotationSecretVersions]
		return got == "api="+api.ResourceVersion+",db="+cur.ResourceVersion, got
	})
}
