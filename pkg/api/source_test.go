package api_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"mime/multipart"
	"net/http"
	"strconv"
	"testing"

	"github.com/sless-dev/sless/pkg/adapter/s3"
	"github.com/sless-dev/sless/pkg/api"
	"github.com/sless-dev/sless/pkg/api/blobkey"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/source"
	"github.com/sless-dev/sless/test/testbed"
)

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestSourceUpload(t *testing.T) {
	e := newEnv(t)
	tok := e.token("alice")
	want(t, e.do("POST", e.path("functions"), tok, pythonFunction("zipped")), http.StatusCreated)
	zipA := pythonZip(t, `"a"`)

	r := e.do("PUT", e.path("functions", "zipped", "source"), tok, zipA, "Content-Type", "application/zip")
	want(t, r, http.StatusOK)
	res := decode[api.UploadResult](t, r)
	sum := sha256hex(zipA)
	wantArchive := slessv1alpha1.ArchiveSource{Bucket: e.bucket, Key: blobkey.Source(e.ns, "zipped", sum), SHA256: sum}
	if !res.Changed || res.Archive != wantArchive || res.Function == nil || res.BuildContext == nil {
		t.Fatalf("upload result: %s", r.Body)
	}
	// The stored build context is the one pkg/source makes of these files.
	files, err := source.ReadZip(bytes.NewReader(zipA), int64(len(zipA)), source.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	bc, err := source.BuildContext(source.Input{Runtime: "python3.12", Entrypoint: "main.handler", Files: files})
	if err != nil {
		t.Fatal(err)
	}
	if res.BuildContext.Digest != bc.Digest || res.BuildContext.Key != blobkey.Context(e.ns, "zipped", bc.Digest) {
		t.Fatalf("build context %+v, want digest %s", res.BuildContext, bc.Digest)
	}
	if !e.blobExists(wantArchive.Key) || !e.blobExists(res.BuildContext.Key) {
		t.Fatal("archive or build context not stored")
	}
	fn := e.getFunction("zipped")
	if fn.Spec.Source.Archive == nil || *fn.Spec.Source.Archive != wantArchive || fn.Spec.Source.Inline != nil || fn.Generation != 2 {
		t.Fatalf("spec after upload: %+v generation %d", fn.Spec.Source, fn.Generation)
	}

	// Same bytes again, as multipart this time: nothing changes.
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	fw, _ := mw.CreateFormFile("file", "code.zip")
	_, _ = fw.Write(zipA)
	_ = mw.Close()
	r = e.do("PUT", e.path("functions", "zipped", "source"), tok, mp.Bytes(), "Content-Type", mw.FormDataContentType())
	want(t, r, http.StatusOK)
	if res := decode[api.UploadResult](t, r); res.Changed {
		t.Fatalf("same bytes changed the function: %s", r.Body)
	}
	if again := e.getFunction("zipped"); again.ResourceVersion != fn.ResourceVersion || again.Generation != fn.Generation {
		t.Fatalf("same bytes wrote the function: rv %s→%s", fn.ResourceVersion, again.ResourceVersion)
	}

	// Download.
	r = e.do("GET", e.path("functions", "zipped", "source"), tok, nil)
	want(t, r, http.StatusOK)
	if !bytes.Equal(r.Body, zipA) || r.Header.Get("ETag") != `"`+sum+`"` || r.Header.Get("Content-Type") != "application/zip" {
		t.Fatalf("download: %d bytes, ETag %s, type %s", len(r.Body), r.Header.Get("ETag"), r.Header.Get("Content-Type"))
	}

	// Re-applying the same archive through PUT (as Terraform does) passes;
	// changing the entrypoint to one the zip lacks does not.
	body := pythonFunction("zipped")
	body["spec"].(map[string]any)["source"] = map[string]any{"archive": map[string]any{"bucket": e.bucket, "key": wantArchive.Key, "sha256": sum}}
	want(t, e.do("PUT", e.path("functions", "zipped"), tok, body), http.StatusOK)
	body["spec"].(map[string]any)["entrypoint"] = "lib.util.missing"
	r = e.do("PUT", e.path("functions", "zipped"), tok, body)
	want(t, r, http.StatusOK) // lib/util.py exists; the function name is not checked
	body["spec"].(map[string]any)["entrypoint"] = "nothere.handler"
	r = e.do("PUT", e.path("functions", "zipped"), tok, body)
	want(t, r, http.StatusBadRequest)
	if p := r.problem(t); len(p.Errors) == 0 || p.Errors[0].Field != "spec.entrypoint" || p.Reason != source.ReasonEntrypointMissing {
		t.Fatalf("problem: %s", r.Body)
	}
}

// TestUploadBeforeCreate is how Terraform makes a Function from a zip:
// upload first (the Function does not exist), then create it naming the
// archive the upload reported.
func TestUploadBeforeCreate(t *testing.T) {
	e := newEnv(t)
	tok := e.token("alice")
	zipB := pythonZip(t, `"b"`)
	r := e.do("PUT", e.path("functions", "later", "source"), tok, zipB, "Content-Type", "application/zip")
	want(t, r, http.StatusOK)
	res := decode[api.UploadResult](t, r)
	if res.Function != nil || res.BuildContext != nil || !e.blobExists(res.Archive.Key) {
		t.Fatalf("upload before create: %s", r.Body)
	}
	body := pythonFunction("later")
	body["spec"].(map[string]any)["source"] = map[string]any{"archive": res.Archive}
	r = e.do("POST", e.path("functions"), tok, body)
	want(t, r, http.StatusCreated)
	fn := decode[slessv1alpha1.Function](t, r)
	if fn.Spec.Source.Archive == nil || *fn.Spec.Source.Archive != res.Archive {
		t.Fatalf("created: %s", r.Body)
	}
	files, _ := source.ReadZip(bytes.NewReader(zipB), int64(len(zipB)), source.Limits{})
	bc, _ := source.BuildContext(source.Input{Runtime: "python3.12", Entrypoint: "main.handler", Files: files})
	if !e.blobExists(blobkey.Context(e.ns, "later", bc.Digest)) {
		t.Fatal("create did not store the build context")
	}
}

// TestUploadS3Unavailable points the API at an S3 endpoint where nothing
// listens: the upload is a 503 with Retry-After and the Function is unchanged.
func TestUploadS3Unavailable(t *testing.T) {
	port, err := testbed.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	dead, err := s3.New(s3.Config{Endpoint: "http://127.0.0.1:" + strconv.Itoa(port), Bucket: "gone", AccessKey: "x", SecretKey: "y", PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(o *api.Options) { o.Blobs, o.Bucket = dead, "gone" })
	tok := e.token("alice")
	want(t, e.do("POST", e.path("functions"), tok, pythonFunction("stuck")), http.StatusCreated)
	before := e.getFunction("stuck")

	r := e.do("PUT", e.path("functions", "stuck", "source"), tok, pythonZip(t, `"x"`), "Content-Type", "application/zip")
	want(t, r, http.StatusServiceUnavailable)
	r.problem(t)
	if ra, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || ra < 1 {
		t.Fatalf("Retry-After = %q", r.Header.Get("Retry-After"))
	}
	if after := e.getFunction("stuck"); after.ResourceVersion != before.ResourceVersion {
		t.Fatal("the Function changed although storage was down")
	}
	want(t, e.do("GET", e.path("functions", "stuck", "source"), tok, nil), http.StatusNotFound)
}
