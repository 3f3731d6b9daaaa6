package api_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/sless-dev/sless/pkg/api"
	"github.com/sless-dev/sless/pkg/names/blobkey"
	"github.com/sless-dev/sless/pkg/source"
)

// contextModes reads the modes of the entries of a stored build context.
func (e *env) contextModes(key string) map[string]int64 {
	e.t.Helper()
	rc, _, err := e.blobs.Get(context.Background(), key)
	if err != nil {
		e.t.Fatalf("stored context %s: %v", key, err)
	}
	defer rc.Close()
	gz, err := gzip.NewReader(rc)
	if err != nil {
		e.t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	out := map[string]int64{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			e.t.Fatal(err)
		}
		out[h.Name] = h.Mode
	}
}

// A script shipped executable in an uploaded zip is executable in the build
// context the upload stores and reports, whether the zip is uploaded to a
// Function or before it is created (the context is then made by the
// create's check): the context made with the zip's modes, the one the
// controller builds from the same archive, so the digest reported is the
// Function's status.sourceDigest. Before, the upload dropped the modes:
// the script was 0644 and the reported digest was not the one built.
func TestUploadKeepsExecutableFiles(t *testing.T) {
	e := newEnv(t)
	tok := e.token("alice")
	z := makeZip(t,
		zipEntry{name: "main.py", body: []byte("import subprocess\ndef handler(event, context):\n    return subprocess.check_output(['./tool.sh']).decode()\n"), mode: 0o644},
		zipEntry{name: "tool.sh", body: []byte("#!/bin/sh\necho from the tool\n"), mode: 0o755},
		zipEntry{name: "notes.txt", body: []byte("private\n"), mode: 0o600},
	)
	files, modes, err := source.ReadZipModes(bytes.NewReader(z), int64(len(z)), source.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	bc, err := source.BuildContext(source.Input{Runtime: "python3.12", Entrypoint: "main.handler", Files: files, Modes: modes})
	if err != nil {
		t.Fatal(err)
	}
	wantModes := map[string]int64{"function/tool.sh": 0o755, "function/main.py": 0o644, "function/notes.txt": 0o644}
	check := func(name, key string) {
		t.Helper()
		got := e.contextModes(key)
		for path, want := range wantModes {
			if m, ok := got[path]; !ok || m != want {
				t.Errorf("%s: %s in the stored context: mode %o (present %v), want %o", name, path, m, ok, want)
			}
		}
	}

	want(t, e.do("POST", e.path("functions"), tok, pythonFunction("existing")), http.StatusCreated)
	r := e.do("PUT", e.path("functions", "existing", "source"), tok, z, "Content-Type", "application/zip")
	want(t, r, http.StatusOK)
	res := decode[api.UploadResult](t, r)
	if res.BuildContext == nil || res.BuildContext.Digest != bc.Digest || res.BuildContext.Key != blobkey.Context(e.ns, "existing", bc.Digest) {
		t.Fatalf("build context %+v, want digest %s", res.BuildContext, bc.Digest)
	}
	check("upload", res.BuildContext.Key)

	r = e.do("PUT", e.path("functions", "later", "source"), tok, z, "Content-Type", "application/zip")
	want(t, r, http.StatusOK)
	res = decode[api.UploadResult](t, r)
	body := pythonFunction("later")
	body["spec"].(map[string]any)["source"] = map[string]any{"archive": res.Archive}
	want(t, e.do("POST", e.path("functions"), tok, body), http.StatusCreated)
	key := blobkey.Context(e.ns, "later", bc.Digest)
	if !e.blobExists(key) {
		t.Fatal("create did not store the context made with the zip's modes")
	}
	check("create", key)
}
