package kube_test

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/invoke"
)

// SlessServices resolve through Services from the same caches, apart from
// Functions of the same name, and never as public.
func TestResolverFollowsServices(t *testing.T) {
	r, k := startResolver(t)
	ctx := context.Background()
	ns := k.Namespace(t)
	services := r.Services()
	eventually := func(what string, check func(invoke.Target, error) bool) invoke.Target {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			tg, err := services.Resolve(ctx, ns, "web")
			if check(tg, err) {
				return tg
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: last resolve %+v, %v", what, tg, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	if _, err := services.Resolve(ctx, ns, "web"); !errors.Is(err, invoke.ErrNotFound) {
		t.Fatalf("unknown service: %v", err)
	}
	// A Function and an http Trigger of that name make no service.
	if err := k.Client.Create(ctx, newFunction(ns, "web")); err != nil {
		t.Fatal(err)
	}
	if err := k.Client.Create(ctx, trigger(ns, "web", "web", slessv1alpha1.TriggerTypeHTTP, nil)); err != nil {
		t.Fatal(err)
	}
	svc := &slessv1alpha1.SlessService{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: slessv1alpha1.SlessServiceSpec{
			WorkloadSpec: slessv1alpha1.WorkloadSpec{
				Runtime:    "python3.12",
				Entrypoint: "app.app",
				Source:     slessv1alpha1.FunctionSource{Inline: &slessv1alpha1.InlineSource{Files: map[string]string{"app.py": "app = None\n"}}},
			},
		},
	}
	if err := k.Client.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	tg := eventually("created", func(_ invoke.Target, err error) bool { return err == nil })
	if tg.Ready || tg.Address != nil || tg.Timeout != slessv1alpha1.DefaultServiceTimeoutSeconds*time.Second {
		t.Fatalf("new service resolves to %+v", tg)
	}

	svc.Status.ObservedGeneration = svc.Generation
	svc.Status.MarkBuildFailed("BuildFailed", "step build exited 1")
	if err := k.Client.Status().Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	if tg = eventually("failed", func(tg invoke.Target, err error) bool { return err == nil && tg.Failed != "" }); tg.Failed != "BuildFailed" || tg.Ready {
		t.Fatalf("failed service resolves to %+v", tg)
	}

	svc.Spec.TimeoutSeconds = ptr.To[int32](600)
	if err := k.Client.Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	svc.Status.ObservedGeneration = svc.Generation
	svc.Status.Address = "http://web." + ns + ".svc.cluster.local"
	svc.Status.LatestReadyRevision = "web-00001"
	svc.Status.MarkPrebuiltImage()
	svc.Status.MarkServiceReady()
	if err := k.Client.Status().Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	tg = eventually("served", func(tg invoke.Target, err error) bool { return err == nil && tg.Ready })
	if tg.Address.String() != "http://web."+ns+".svc.cluster.local" || tg.Revision != "web-00001" || tg.Public || tg.Failed != "" || tg.Timeout != 600*time.Second {
		t.Fatalf("served service resolves to %+v", tg)
	}
	// The Function of the same name is still only a function.
	if fn, err := r.Resolve(ctx, ns, "web"); err != nil || fn.Ready || fn.Address != nil {
		t.Fatalf("the function web resolves to %+v, %v", fn, err)
	}

	if err := k.Client.Delete(ctx, svc); err != nil {
		t.Fatal(err)
	}
	eventually("deleted", func(_ invoke.Target, err error) bool { return errors.Is(err, invoke.ErrNotFound) })
}
