package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/adapter/kube"
	"github.com/sless-dev/sless/pkg/api"
	"github.com/sless-dev/sless/pkg/limits"
)

func withMemory(body map[string]any, memory string) map[string]any {
	body["spec"].(map[string]any)["resources"] = map[string]any{"limits": map[string]any{"memory": memory}}
	return body
}

func annotate(t *testing.T, c client.Client, ns, maximums string) {
	t.Helper()
	var o corev1.Namespace
	ctx := context.Background()
	if err := c.Get(ctx, client.ObjectKey{Name: ns}, &o); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(o.DeepCopy())
	metav1.SetMetaDataAnnotation(&o.ObjectMeta, limits.AnnotationMax, maximums)
	if err := c.Patch(ctx, &o, patch); err != nil {
		t.Fatal(err)
	}
}

// The API refuses resources over the namespace's maximums with the
// sentence the apiserver's admission policy says, naming the field; and
// where it leaves the check to that policy, passes the same sentence on.
func TestResourceMaximums(t *testing.T) {
	site, err := limits.ParseSite(limits.Setting{}, limits.Setting{}, limits.Setting{Name: "m", Value: "cpu=2"})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(o *api.Options) { o.Maximums = &kube.Maximums{Reader: o.Live, Site: site} })
	tok := e.token("alice")
	annotate(t, e.kube.Client, e.ns, "memory=2Gi")
	sentence := "spec.resources.limits.memory 4Gi is over namespace " + e.ns + "'s maximum 2Gi"

	r := e.do("POST", e.path("functions"), tok, withMemory(pythonFunction("big"), "4Gi"))
	want(t, r, http.StatusBadRequest)
	p := r.problem(t)
	if !strings.Contains(p.Detail, sentence) || len(p.Errors) != 1 || p.Errors[0].Field != "spec.resources.limits.memory" || p.Errors[0].Detail != sentence {
		t.Fatalf("over the maximum: %+v, want %q on spec.resources.limits.memory", p, sentence)
	}
	r = e.do("POST", e.path("functions"), tok, withMemory(pythonFunction("fits"), "2Gi"))
	want(t, r, http.StatusCreated)
	r = e.do("PUT", e.path("functions", "fits"), tok, withMemory(pythonFunction("fits"), "4Gi"))
	want(t, r, http.StatusBadRequest)
	if p := r.problem(t); !strings.Contains(p.Detail, sentence) {
		t.Fatalf("an update over the maximum: %+v", p)
	}
	// Lowered below what "fits" asks: its labels stay writable, its spec must fit.
	annotate(t, e.kube.Client, e.ns, "memory=1Gi")
	relabelled := withMemory(pythonFunction("fits"), "2Gi")
	relabelled["metadata"].(map[string]any)["labels"] = map[string]any{"team": "b"}
	r = e.do("PUT", e.path("functions", "fits"), tok, relabelled)
	want(t, r, http.StatusOK)
	r = e.do("PUT", e.path("functions", "fits"), tok, withMemory(pythonFunction("fits"), "1536Mi"))
	want(t, r, http.StatusBadRequest)
	if p := r.problem(t); !strings.Contains(p.Detail, "spec.resources.limits.memory 1536Mi is over namespace "+e.ns+"'s maximum 1Gi") {
		t.Fatalf("a spec change over the lowered maximum: %+v", p)
	}
	annotate(t, e.kube.Client, e.ns, "memory=2Gi")
	svc := pythonFunction("svc")
	svc["kind"] = "SlessService"
	svc["spec"].(map[string]any)["entrypoint"] = "main.app"
	svc["spec"].(map[string]any)["cpu"] = "3"
	r = e.do("POST", e.path("services"), tok, svc)
	want(t, r, http.StatusBadRequest)
	if p := r.problem(t); !strings.Contains(p.Detail, "spec.cpu 3 is over namespace "+e.ns+"'s maximum 2") {
		t.Fatalf("a service over the site's maximum: %+v", p)
	}
	annotate(t, e.kube.Client, e.ns, "memory=lots")
	r = e.do("POST", e.path("functions"), tok, withMemory(pythonFunction("any"), "128Mi"))
	want(t, r, http.StatusBadRequest)
	if p := r.problem(t); p.Detail != "namespace "+e.ns+"'s annotation sless.dev/max-resources is malformed: want name=quantity pairs separated by commas" {
		t.Fatalf("a malformed annotation: %+v", p)
	}

	t.Run("the apiserver's policy", func(t *testing.T) {
		// Only the namespace's annotation limits: other tests' namespaces
		// on this apiserver have none.
		p, b := limits.Policy(limits.Site{})
		ctx := context.Background()
		for _, o := range []client.Object{p, b} {
			if err := e.kube.Client.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = e.kube.Client.Delete(context.Background(), o) })
		}
		plain := newEnv(t)
		annotate(t, plain.kube.Client, plain.ns, "memory=2Gi")
		sentence := "spec.resources.limits.memory 4Gi is over namespace " + plain.ns + "'s maximum 2Gi"
		// The apiserver loads the policy, and reads the namespace, through its caches.
		var r *response
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if r = plain.do("POST", plain.path("functions"), plain.token("bob"), withMemory(pythonFunction("big"), "4Gi")); r.Code != http.StatusCreated {
				break
			}
			plain.do("DELETE", plain.path("functions", "big"), plain.token("bob"), nil)
		}
		want(t, r, http.StatusBadRequest)
		if p := r.problem(t); !strings.Contains(p.Detail, sentence) {
			t.Fatalf("the policy's refusal through the API: %+v, want %q", p, sentence)
		}
	})
}
