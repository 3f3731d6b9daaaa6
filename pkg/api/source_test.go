package api_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/adapter/s3"
	"github.com/sless-dev/sless/pkg/api"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/names/blobkey"
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
	// Nothing was deployed, and the answer says so and what to do next.
	if res.Changed || !strings.Contains(res.Message, `no Function "later" exists`) || !strings.Contains(res.Message, "spec.source.archive") {
		t.Fatalf("upload before create must say nothing was deployed: %s", r.Body)
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

// heldUpload is a source upload whose body the test writes: the server
// holds it in progress until finish sends the rest.
type heldUpload struct {
	body  *io.PipeWriter
	rest  []byte
	reply chan *response
}

// startUpload sends PUT …/functions/{name}/source with body and answers on
// the channel, so a test can wait for an answer it expects to be held back.
func (e *env) startUpload(tok, name string, body io.Reader) chan *response {
	e.t.Helper()
	return e.uploadTo(tok, e.ns, name, body)
}

// holdUpload starts an upload of zip, sends its first bytes and keeps the
// request open.
func (e *env) holdUpload(tok, name string, zip []byte) *heldUpload {
	e.t.Helper()
	pr, pw := io.Pipe()
	e.t.Cleanup(func() { _ = pw.CloseWithError(errors.New("test over")) })
	h := &heldUpload{body: pw, rest: zip[8:], reply: e.startUpload(tok, name, pr)}
	if _, err := pw.Write(zip[:8]); err != nil {
		e.t.Fatal(err)
	}
	return h
}

// finish sends the rest of the body and waits for the answer.
func (h *heldUpload) finish(t *testing.T) *response {
	t.Helper()
	if _, err := h.body.Write(h.rest); err != nil {
		t.Fatal(err)
	}
	if err := h.body.Close(); err != nil {
		t.Fatal(err)
	}
	return <-h.reply
}

// awaitMetric waits until /metrics has the sample line (name, labels and value).
func (e *env) awaitMetric(line string) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := e.do("GET", "/metrics", "", nil)
		if strings.Contains(string(r.Body), "\n"+line+"\n") {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("metrics never showed %q:\n%s", line, r.Body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestUploadBound holds as many uploads in progress as the server runs at
// once: one more waits UploadQueueWait and is refused with 503, Retry-After
// and a problem, having read and stored nothing; once a held upload
// finishes, a new upload succeeds.
func TestUploadBound(t *testing.T) {
	const queueWait = 300 * time.Millisecond
	e := newEnv(t, func(o *api.Options) { o.MaxUploads, o.MaxUploadsPerTenant, o.UploadQueueWait = 2, 2, queueWait })
	tok := e.token("alice")
	for _, name := range []string{"held-0", "held-1", "late"} {
		want(t, e.do("POST", e.path("functions"), tok, pythonFunction(name)), http.StatusCreated)
	}
	e.awaitMetric("sless_api_source_upload_slots 2")
	before := e.snapshot()
	lateBefore := e.getFunction("late")

	held := []*heldUpload{e.holdUpload(tok, "held-0", pythonZip(t, `"h0"`)), e.holdUpload(tok, "held-1", pythonZip(t, `"h1"`))}
	e.awaitMetric("sless_api_source_uploads_in_progress 2")

	lateZip := pythonZip(t, `"late"`)
	start := time.Now()
	r := e.do("PUT", e.path("functions", "late", "source"), tok, lateZip, "Content-Type", "application/zip")
	waited := time.Since(start)
	want(t, r, http.StatusServiceUnavailable)
	if p := r.problem(t); !strings.HasSuffix(p.Type, "/busy") {
		t.Fatalf("problem type %q", p.Type)
	}
	if ra, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || ra < 1 {
		t.Fatalf("Retry-After = %q", r.Header.Get("Retry-After"))
	}
	if waited < queueWait {
		t.Fatalf("refused after %s, before the queue wait of %s", waited, queueWait)
	}
	if after := e.snapshot(); !slices.Equal(before, after) {
		t.Fatalf("a refused upload changed the world:\nbefore %v\nafter  %v", before, after)
	}
	if fn := e.getFunction("late"); fn.ResourceVersion != lateBefore.ResourceVersion || fn.Spec.Source.Archive != nil {
		t.Fatalf("the refused upload's Function changed: %+v", fn.Spec.Source)
	}
	e.awaitMetric(`sless_api_source_uploads_total{result="busy"} 1`)

	// One held upload finishes; its slot serves the next upload.
	r = held[0].finish(t)
	want(t, r, http.StatusOK)
	if res := decode[api.UploadResult](t, r); !res.Changed {
		t.Fatalf("held upload: %s", r.Body)
	}
	r = e.do("PUT", e.path("functions", "late", "source"), tok, lateZip, "Content-Type", "application/zip")
	want(t, r, http.StatusOK)
	if a := e.getFunction("late").Spec.Source.Archive; a == nil || a.SHA256 != sha256hex(lateZip) {
		t.Fatalf("after a slot freed, the upload did not land: %+v", a)
	}
	want(t, held[1].finish(t), http.StatusOK)
	e.awaitMetric("sless_api_source_uploads_in_progress 0")
}

// TestUploadQueueWaits: an upload that finds every slot taken waits for one,
// and goes through when a held upload finishes within the queue wait.
func TestUploadQueueWaits(t *testing.T) {
	e := newEnv(t, func(o *api.Options) { o.MaxUploads, o.UploadQueueWait = 1, time.Minute })
	tok := e.token("alice")
	for _, name := range []string{"first", "second"} {
		want(t, e.do("POST", e.path("functions"), tok, pythonFunction(name)), http.StatusCreated)
	}
	first := e.holdUpload(tok, "first", pythonZip(t, `"1"`))
	e.awaitMetric("sless_api_source_uploads_in_progress 1")

	secondZip := pythonZip(t, `"2"`)
	second := e.startUpload(tok, "second", bytes.NewReader(secondZip))
	e.awaitMetric("sless_api_source_uploads_waiting 1")
	select {
	case r := <-second:
		t.Fatalf("the second upload was answered while the only slot was taken: %d %s", r.Code, r.Body)
	default:
	}
	if fn := e.getFunction("second"); fn.Spec.Source.Archive != nil {
		t.Fatal("the waiting upload changed its Function")
	}

	want(t, first.finish(t), http.StatusOK)
	r := <-second
	want(t, r, http.StatusOK)
	if a := e.getFunction("second").Spec.Source.Archive; a == nil || a.SHA256 != sha256hex(secondZip) {
		t.Fatalf("the waiting upload did not land: %+v", a)
	}
	e.awaitMetric("sless_api_source_uploads_waiting 0")
}

// TestUploadChangesRuntimeAndEntrypoint: new code whose handler moved (here
// from Python to Node.js) is uploaded with the runtime and entrypoint it
// needs in one request. Either value alone is checked against the other's
// old counterpart and refused; bad parameters are refused before anything
// is stored.
func TestUploadChangesRuntimeAndEntrypoint(t *testing.T) {
	e := newEnv(t)
	tok := e.token("alice")
	want(t, e.do("POST", e.path("functions"), tok, pythonFunction("moving")), http.StatusCreated)
	want(t, e.do("PUT", e.path("functions", "moving", "source"), tok, pythonZip(t, `"py"`), "Content-Type", "application/zip"), http.StatusOK)
	before := e.getFunction("moving")
	nodeZip := makeZip(t, zipEntry{name: "app.js", body: []byte("exports.handle = async (event) => ({ok: true});\n")})
	upload := func(query string) *response {
		return e.do("PUT", e.path("functions", "moving", "source")+query, tok, nodeZip, "Content-Type", "application/zip")
	}

	for _, tc := range []struct {
		query, field string
	}{
		{"", "spec.entrypoint"},                       // Node code, Python entrypoint
		{"?entrypoint=app.handle", "spec.entrypoint"}, // a Node entrypoint for the Python runtime
		{"?runtime=nodejs22", "spec.entrypoint"},      // main.handler is not in the Node code
		{"?runtime=ruby3.3&entrypoint=app.handle", "runtime"},
		{"?runtime=nodejs22&entrypoint=", "entrypoint"},
	} {
		r := upload(tc.query)
		want(t, r, http.StatusBadRequest)
		if p := r.problem(t); len(p.Errors) == 0 || p.Errors[0].Field != tc.field {
			t.Errorf("upload%s: problem %s, want field %s", tc.query, r.Body, tc.field)
		}
		if e.blobExists(blobkey.Source(e.ns, "moving", sha256hex(nodeZip))) {
			t.Fatalf("upload%s was refused but stored the archive", tc.query)
		}
		if fn := e.getFunction("moving"); fn.ResourceVersion != before.ResourceVersion {
			t.Fatalf("upload%s was refused but changed the function", tc.query)
		}
	}

	// nodejs20 is an alias: stored as given, built as nodejs22.
	r := upload("?runtime=nodejs20&entrypoint=app.handle")
	want(t, r, http.StatusOK)
	res := decode[api.UploadResult](t, r)
	fn := e.getFunction("moving")
	if !res.Changed || fn.Spec.Runtime != "nodejs20" || fn.Spec.Entrypoint != "app.handle" ||
		fn.Spec.Source.Archive == nil || fn.Spec.Source.Archive.SHA256 != sha256hex(nodeZip) || fn.Generation != before.Generation+1 {
		t.Fatalf("after the upload: runtime %q entrypoint %q source %+v generation %d (was %d)",
			fn.Spec.Runtime, fn.Spec.Entrypoint, fn.Spec.Source, fn.Generation, before.Generation)
	}
	files, _ := source.ReadZip(bytes.NewReader(nodeZip), int64(len(nodeZip)), source.Limits{})
	bc, err := source.BuildContext(source.Input{Runtime: "nodejs22", Entrypoint: "app.handle", Files: files})
	if err != nil {
		t.Fatal(err)
	}
	if res.BuildContext == nil || res.BuildContext.Digest != bc.Digest || !e.blobExists(res.BuildContext.Key) {
		t.Fatalf("build context %+v, want digest %s", res.BuildContext, bc.Digest)
	}

	// The same again changes nothing; the same code with another
	// entrypoint is a change.
	r = upload("?runtime=nodejs20&entrypoint=app.handle")
	want(t, r, http.StatusOK)
	if decode[api.UploadResult](t, r).Changed || e.getFunction("moving").Generation != fn.Generation {
		t.Fatalf("the same upload again changed the function: %s", r.Body)
	}
	nodeZip = makeZip(t, zipEntry{name: "app.js", body: []byte("exports.handle = async () => 1;\nexports.other = async () => 2;\n")})
	want(t, upload(""), http.StatusOK)
	r = upload("?entrypoint=app.other")
	want(t, r, http.StatusOK)
	if fn := e.getFunction("moving"); !decode[api.UploadResult](t, r).Changed || fn.Spec.Entrypoint != "app.other" {
		t.Fatalf("entrypoint change with the same code: %s", r.Body)
	}
}

// TestArchiveCheckTakesUploadSlot: creating a Function that names an
// uploaded archive reads that archive into memory to check it, so it takes
// an upload slot too: with every slot held it is refused (503, busy,
// Retry-After) and nothing is created; once a slot frees it succeeds.
func TestArchiveCheckTakesUploadSlot(t *testing.T) {
	e := newEnv(t, func(o *api.Options) { o.MaxUploads, o.UploadQueueWait = 1, 300*time.Millisecond })
	tok := e.token("alice")
	r := e.do("PUT", e.path("functions", "later", "source"), tok, pythonZip(t, `"later"`), "Content-Type", "application/zip")
	want(t, r, http.StatusOK)
	archive := decode[api.UploadResult](t, r).Archive
	want(t, e.do("POST", e.path("functions"), tok, pythonFunction("held")), http.StatusCreated)
	held := e.holdUpload(tok, "held", pythonZip(t, `"held"`))
	e.awaitMetric("sless_api_source_uploads_in_progress 1")

	body := pythonFunction("later")
	body["spec"].(map[string]any)["source"] = map[string]any{"archive": archive}
	r = e.do("POST", e.path("functions"), tok, body)
	want(t, r, http.StatusServiceUnavailable)
	if p := r.problem(t); !strings.HasSuffix(p.Type, "/busy") || r.Header.Get("Retry-After") == "" {
		t.Fatalf("create while every slot is held: %s (Retry-After %q)", r.Body, r.Header.Get("Retry-After"))
	}
	want(t, e.do("GET", e.path("functions", "later"), tok, nil), http.StatusNotFound)

	want(t, held.finish(t), http.StatusOK)
	want(t, e.do("POST", e.path("functions"), tok, body), http.StatusCreated)
}

// TestStalledBodyIsCutOff: a client that starts an upload and stops sending
// is answered 408 once BodyIdleTimeout passes without a byte, and its upload
// slot serves the next upload; before, it held the slot for as long as it
// kept the connection open, so MaxUploads such clients refused every upload.
// A JSON body that stalls is answered the same way.
func TestStalledBodyIsCutOff(t *testing.T) {
	const idle = 300 * time.Millisecond
	e := newEnv(t, func(o *api.Options) { o.MaxUploads, o.UploadQueueWait, o.BodyIdleTimeout = 1, time.Minute, idle })
	tok := e.token("alice")
	want(t, e.do("POST", e.path("functions"), tok, pythonFunction("slow")), http.StatusCreated)
	before := e.snapshot()

	answered := func(reply chan *response) *response {
		t.Helper()
		select {
		case r := <-reply:
			return r
		case <-time.After(20 * idle):
			t.Fatalf("a body that stopped arriving was not answered within %s", 20*idle)
			return nil
		}
	}
	stalled := e.holdUpload(tok, "slow", pythonZip(t, `"never"`))
	r := answered(stalled.reply)
	want(t, r, http.StatusRequestTimeout)
	if p := r.problem(t); !strings.HasSuffix(p.Type, "/body-timeout") {
		t.Fatalf("problem type %q", p.Type)
	}
	if after := e.snapshot(); !slices.Equal(before, after) {
		t.Fatalf("a stalled upload changed the world:\nbefore %v\nafter  %v", before, after)
	}
	e.awaitMetric("sless_api_source_uploads_in_progress 0")

	zip := pythonZip(t, `"next"`)
	want(t, e.do("PUT", e.path("functions", "slow", "source"), tok, zip, "Content-Type", "application/zip"), http.StatusOK)
	if a := e.getFunction("slow").Spec.Source.Archive; a == nil || a.SHA256 != sha256hex(zip) {
		t.Fatalf("the upload after the stalled one did not land: %+v", a)
	}

	// A create whose JSON body stops half-way.
	pr, pw := io.Pipe()
	t.Cleanup(func() { _ = pw.CloseWithError(errors.New("test over")) })
	reply := e.start("POST", e.path("functions"), tok, "application/json", pr)
	if _, err := pw.Write([]byte(`{"metadata":{"name":"half"`)); err != nil {
		t.Fatal(err)
	}
	r = answered(reply)
	want(t, r, http.StatusRequestTimeout)
	r.problem(t)
}
