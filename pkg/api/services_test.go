package api_test

import (
	"bytes"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/sless-dev/sless/pkg/api"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/names/blobkey"
	"github.com/sless-dev/sless/pkg/source"
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
	if svc.Spec.MinScale == nil || svc.Spec.TimeoutSeconds == nil || svc.Spec.MemoryMB != nil {
		t.Fatalf("CRD defaults not applied: %s", r.Body)
	}
	if *svc.Spec.MinScale != 1 || *svc.Spec.TimeoutSeconds != slessv1alpha1.DefaultServiceTimeoutSeconds {
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

func webZip(t testing.TB, body string) []byte {
	return makeZip(t, zipEntry{name: "app.py", body: []byte(
		"def app(environ, start_response):\n    start_response('200 OK', [])\n    return [b'" + body + "']\n")})
}

// A SlessService takes uploads as a Function does, through the same
// handler: upload before create, create naming the archive, upload again
// to change the code, download. Its objects lie under the services' prefix
// with a context built in service mode, so a function of the same name
// never shares one.
func TestServiceSourceUpload(t *testing.T) {
	e := newEnv(t)
	tok := e.token("alice")
	zipA, zipB := webZip(t, "a"), webZip(t, "b")

	r := e.do("PUT", e.path("services", "web", "source"), tok, zipA, "Content-Type", "application/zip")
	want(t, r, http.StatusOK)
	res := decode[api.UploadResult](t, r)
	sumA := sha256hex(zipA)
	wantA := slessv1alpha1.ArchiveSource{Bucket: e.bucket, Key: blobkey.ServiceSource(e.ns, "web", sumA), SHA256: sumA}
	if res.Changed || res.Archive != wantA || res.Service != nil || res.Function != nil ||
		!strings.Contains(res.Message, `no SlessService "web" exists`) || !strings.Contains(res.Message, "/services") {
		t.Fatalf("upload before create: %s", r.Body)
	}
	if !e.blobExists(wantA.Key) {
		t.Fatal("archive not stored")
	}

	body := webService("web")
	body["spec"].(map[string]any)["source"] = map[string]any{"archive": res.Archive}
	r = e.do("POST", e.path("services"), tok, body)
	want(t, r, http.StatusCreated)
	if svc := decode[slessv1alpha1.SlessService](t, r); svc.Spec.Source.Archive == nil || *svc.Spec.Source.Archive != wantA {
		t.Fatalf("created: %s", r.Body)
	}
	contextKey := func(zipped []byte) string {
		files, modes, err := source.ReadZipModes(bytes.NewReader(zipped), int64(len(zipped)), source.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		bc, err := source.BuildContext(source.Input{Runtime: "python3.12", Entrypoint: "app.app", Mode: slessv1alpha1.ModeService, Files: files, Modes: modes})
		if err != nil {
			t.Fatal(err)
		}
		return blobkey.ServiceContext(e.ns, "web", bc.Digest)
	}
	if !e.blobExists(contextKey(zipA)) {
		t.Fatal("create did not store the service's build context")
	}

	r = e.do("PUT", e.path("services", "web", "source"), tok, zipB, "Content-Type", "application/zip")
	want(t, r, http.StatusOK)
	res = decode[api.UploadResult](t, r)
	sumB := sha256hex(zipB)
	if !res.Changed || res.Service == nil || res.Service.Kind != "SlessService" || res.Service.Spec.Source.Archive == nil ||
		res.Service.Spec.Source.Archive.SHA256 != sumB || res.BuildContext == nil || res.BuildContext.Key != contextKey(zipB) {
		t.Fatalf("upload to the service: %s", r.Body)
	}
	if r.Header.Get("ETag") != `"`+res.Service.ResourceVersion+`"` {
		t.Fatalf("ETag %s, service version %s", r.Header.Get("ETag"), res.Service.ResourceVersion)
	}
	// The same bytes again change nothing.
	r = e.do("PUT", e.path("services", "web", "source"), tok, zipB, "Content-Type", "application/zip")
	want(t, r, http.StatusOK)
	if again := decode[api.UploadResult](t, r); again.Changed || again.Service.ResourceVersion != res.Service.ResourceVersion {
		t.Fatalf("same bytes changed the service: %s", r.Body)
	}

	r = e.do("GET", e.path("services", "web", "source"), tok, nil)
	want(t, r, http.StatusOK)
	if !bytes.Equal(r.Body, zipB) || r.Header.Get("ETag") != `"`+sumB+`"` {
		t.Fatalf("download: %d bytes, ETag %s", len(r.Body), r.Header.Get("ETag"))
	}

	// A function's archive is not a service's, even of the same name.
	want(t, e.do("PUT", e.path("functions", "web", "source"), tok, pythonZip(t, "1"), "Content-Type", "application/zip"), http.StatusOK)
	fnSum := sha256hex(pythonZip(t, "1"))
	r = e.do("PATCH", e.path("services", "web"), tok, map[string]any{"spec": map[string]any{"source": map[string]any{"archive": map[string]any{
		"bucket": e.bucket, "key": blobkey.Source(e.ns, "web", fnSum), "sha256": fnSum}}}}, "Content-Type", "application/merge-patch+json")
	want(t, r, http.StatusBadRequest)
	if p := r.problem(t); !slices.ContainsFunc(p.Errors, func(f api.FieldError) bool { return f.Field == "spec.source.archive" }) {
		t.Fatalf("problem does not name spec.source.archive: %s", r.Body)
	}
}
