package function_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"io/fs"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/names"
	"github.com/sless-dev/sless/pkg/source"
)

// A script shipped executable in an uploaded zip is executable in the build
// context the controller stores and builds, and that context is the one the
// API made of the same upload (ReadZipModes, then BuildContext with the
// modes), so the digest the upload reported is the Function's
// status.sourceDigest. Before, the controller read the zip without its
// modes: the script was 0644 in the image and running it failed with
// "permission denied".
func TestArchiveKeepsExecutableFiles(t *testing.T) {
	w := newWorld(t)
	w.startController()

	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range []struct {
		name, body string
		mode       fs.FileMode
	}{
		{"main.py", "import subprocess\ndef handler(event, context):\n    return subprocess.check_output(['./tool.sh']).decode()\n", 0o644},
		{"tool.sh", "#!/bin/sh\necho from the tool\n", 0o755},
		{"notes.txt", "private\n", 0o600},
	} {
		h := &zip.FileHeader{Name: f.name, Method: zip.Deflate}
		h.SetMode(f.mode)
		fw, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(fw, f.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	z := buf.Bytes()
	key := w.ns + "/tooled/source/" + sha(z) + ".zip"
	w.upload(t, key, z)
	w.create(&slessv1alpha1.Function{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "tooled"},
		Spec: slessv1alpha1.FunctionSpec{
			WorkloadSpec: slessv1alpha1.WorkloadSpec{
				Runtime:    "python3.12",
				Entrypoint: "main.handler",
				Source:     slessv1alpha1.FunctionSource{Archive: &slessv1alpha1.ArchiveSource{Bucket: w.bucket, Key: key, SHA256: sha(z)}},
			},
		},
	})
	fn := w.waitReady("tooled")

	files, modes, err := source.ReadZipModes(bytes.NewReader(z), int64(len(z)), source.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	uploaded, err := source.BuildContext(source.Input{Runtime: "python3.12", Entrypoint: "main.handler", Files: files, Modes: modes})
	if err != nil {
		t.Fatal(err)
	}
	if fn.Status.SourceDigest != uploaded.Digest {
		t.Errorf("sourceDigest %s, the upload's context is %s", fn.Status.SourceDigest, uploaded.Digest)
	}

	rc, _, err := w.store.Get(context.Background(), names.ContextKey(w.ns, "tooled", fn.Status.SourceDigest))
	if err != nil {
		t.Fatalf("stored context: %v", err)
	}
	defer rc.Close()
	gz, err := gzip.NewReader(rc)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	got := map[string]int64{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = h.Mode
	}
	for name, want := range map[string]int64{"function/tool.sh": 0o755, "function/main.py": 0o644, "function/notes.txt": 0o644} {
		if m, ok := got[name]; !ok || m != want {
			t.Errorf("%s in the stored context: mode %o (present %v), want %o", name, m, ok, want)
		}
	}
}
