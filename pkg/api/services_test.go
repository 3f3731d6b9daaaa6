package api_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/sless-dev/sless/pkg/api"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

func webService(name string) map[string]any {
	return map[string]any{
		"apiVersion": "sless.dev/v1alpha1", "kind": "SlessService",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"runtime": "python3.12", "entrypoint": "app.app",
			"source": map[string]any{"inline": map[string]any{"files": map[string]any{
				"app.py": "def app(environ, start_response):\n    start_response('200 OK', [])\n    return [b'hi']\n"}}},
		},
	}
}

// SlessServices are a kind of the API like Functions: created with the
// CRD's defaults, read with ETags, listed, patched, refused with field
// errors, kept to the caller's tenant, deleted.
func TestServiceCRUD(t *testing.T) {
	e := newEnv(t)
	tok := e.token("alice")

	r := e.do("POST", e.path("services"), tok, webService("web"))
	want(t, r, http.StatusCreated)
	svc := decode[slessv1alpha1.SlessService](t, r)
	if svc.Kind != "SlessService" || svc.Namespace != e.ns || r.Header.Get("ETag") != `"`+svc.ResourceVersion+`"` {
		t.Fatalf("created: %+v, ETag %s", svc.ObjectMeta, r.Header.Get("ETag"))
	}
	if svc.Spec.MinScale == nil || svc.Spec.TimeoutSeconds == nil || svc.Spec.MemoryMB == nil {
		t.Fatalf("CRD defaults not applied: %s", r.Body)
	}
	if *svc.Spec.MinScale != 1 || *svc.Spec.TimeoutSeconds != slessv1alpha1.DefaultServiceTimeoutSeconds || *svc.Spec.MemoryMB != slessv1alpha1.DefaultMemoryMB {
		t.Fatalf("CRD defaults not applied: %+v", svc.Spec)
	}
	if loc := r.Header.Get("Location"); loc != e.path("services", "web") {
		t.Fatalf("Location %q", loc)
	}

	r = e.do("GET", e.path("services"), tok, nil)
	want(t, r, http.StatusOK)
	if l := decode[struct {
		Items []slessv1alpha1.SlessService `json:"items"`
	}](t, r); len(l.Items) != 1 || l.Items[0].Name != "web" {
		t.Fatalf("list: %s", r.Body)
	}

	r = e.do("PATCH", e.path("services", "web"), tok, map[string]any{"spec": map[string]any{"minScale": 0, "maxScale": 3}},
		"Content-Type", "application/merge-patch+json", "If-Match", `"`+svc.ResourceVersion+`"`)
	want(t, r, http.StatusOK)
	if got := decode[slessv1alpha1.SlessService](t, r); *got.Spec.MinScale != 0 || *got.Spec.MaxScale != 3 {
		t.Fatalf("patched: %+v", got.Spec)
	}
	// The old ETag is stale now.
	r = e.do("PATCH", e.path("services", "web"), tok, map[string]any{"spec": map[string]any{"maxScale": 4}},
		"Content-Type", "application/merge-patch+json", "If-Match", `"`+svc.ResourceVersion+`"`)
	want(t, r, http.StatusPreconditionFailed)

	bad := []struct {
		name  string
		spec  map[string]any
		field string
	}{
		{"max below min", map[string]any{"minScale": 3, "maxScale": 2}, "spec.maxScale"},
		{"negative min", map[string]any{"minScale": -1}, "spec.minScale"},
		{"concurrency", map[string]any{"containerConcurrency": 5000}, "spec.containerConcurrency"},
		{"archive by hand", map[string]any{"source": map[string]any{"inline": nil, "archive": map[string]any{
			"bucket": "sless", "key": "team/other/source/x.zip", "sha256": "0c9f1bd2e3d4c5b6a7980a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f"}}}, "spec.source.archive"},
		{"unknown runtime", map[string]any{"runtime": "ruby"}, "spec.runtime"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			body := webService("bad")
			spec := body["spec"].(map[string]any)
			for k, v := range tc.spec {
				if k == "source" {
					spec[k] = map[string]any{"archive": v.(map[string]any)["archive"]}
					continue
				}
				spec[k] = v
			}
			r := e.do("POST", e.path("services"), tok, body)
			want(t, r, http.StatusBadRequest)
			if p := r.problem(t); !slices.ContainsFunc(p.Errors, func(f api.FieldError) bool { return f.Field == tc.field }) {
				t.Errorf("problem does not name %s: %s", tc.field, r.Body)
			}
		})
	}

	// Another tenant sees nothing of it.
	r = e.do("GET", e.path("services", "web"), e.token("bob", "sless.dev/namespace", "t-bob"), nil)
	if r.Code != http.StatusForbidden {
		t.Fatalf("another tenant: %d %s", r.Code, r.Body)
	}

	r = e.do("DELETE", e.path("services", "web"), tok, nil)
	if r.Code != http.StatusNoContent && r.Code != http.StatusAccepted {
		t.Fatalf("delete: %d %s", r.Code, r.Body)
	}
	r = e.do("DELETE", e.path("services", "missing"), tok, nil)
	want(t, r, http.StatusNotFound)
}
