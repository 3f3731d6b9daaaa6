package function_test

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os/exec"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/names"
	"github.com/sless-dev/sless/test/testbed"
)

func zipOf(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range files {
		f, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func (w *world) upload(t *testing.T, key string, b []byte) {
	t.Helper()
	if err := w.store.Put(context.Background(), key, bytes.NewReader(b), int64(len(b)), "application/zip"); err != nil {
		t.Fatal(err)
	}
}

// An uploaded archive builds like inline files: the same code gives the
// same build context digest whichever way it came.
func TestArchiveSource(t *testing.T) {
	w := newWorld(t)
	w.startController()
	code := "def handler(event, context):\n    return 'zip'\n"
	z := zipOf(t, map[string]string{"main.py": code})
	key := w.ns + "/zipped/source/" + sha(z) + ".zip"
	w.upload(t, key, z)
	w.create(&slessv1alpha1.Function{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "zipped"},
		Spec: slessv1alpha1.FunctionSpec{
			WorkloadSpec: slessv1alpha1.WorkloadSpec{
				Runtime:    "python3.12",
				Entrypoint: "main.handler",
				Source:     slessv1alpha1.FunctionSource{Archive: &slessv1alpha1.ArchiveSource{Bucket: w.bucket, Key: key, SHA256: sha(z)}},
			},
		},
	})
	inline := pythonFunction(w.ns, "inline", "'zip'")
	w.create(inline)
	zipped, in := w.waitReady("zipped"), w.waitReady("inline")
	if zipped.Status.SourceDigest != in.Status.SourceDigest {
		t.Errorf("archive digest %s, inline digest %s", zipped.Status.SourceDigest, in.Status.SourceDigest)
	}
	if ok, err := w.store.Exists(context.Background(), names.ContextKey(w.ns, "zipped", zipped.Status.SourceDigest)); !ok || err != nil {
		t.Errorf("context of the archive not stored: %v %v", ok, err)
	}
	// The real kubectl waits on the Ready condition.
	out, err := exec.Command(testbed.Kubectl(t), "--kubeconfig", w.kube.Kubeconfig, "-n", w.ns, "wait",
		"--for=condition=Ready", "function/zipped", "--timeout=30s").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "condition met") {
		t.Errorf("kubectl wait: %v: %s", err, out)
	}
}

// Every refused source says why on SourceReady, makes the Function Failed,
// and starts no build.
func TestBadSources(t *testing.T) {
	w := newWorld(t)
	w.startController()
	good := zipOf(t, map[string]string{"main.py": "def handler(e, c):\n    return 1\n"})
	goodKey := w.ns + "/good.zip"
	w.upload(t, goodKey, good)
	traversal := zipOf(t, map[string]string{"../evil.py": "x"})
	travKey := w.ns + "/trav.zip"
	w.upload(t, travKey, traversal)
	notZip := []byte("this is not a zip file at all")
	notZipKey := w.ns + "/notzip.zip"
	w.upload(t, notZipKey, notZip)

	inline := func(files map[string]string, entry string) slessv1alpha1.FunctionSpec {
		return slessv1alpha1.FunctionSpec{
			WorkloadSpec: slessv1alpha1.WorkloadSpec{
				Runtime:    "python3.12",
				Entrypoint: entry,
				Source:     slessv1alpha1.FunctionSource{Inline: &slessv1alpha1.InlineSource{Files: files}},
			},
		}
	}
	archive := func(bucket, key, sum string) slessv1alpha1.FunctionSpec {
		return slessv1alpha1.FunctionSpec{
			WorkloadSpec: slessv1alpha1.WorkloadSpec{
				Runtime:    "python3.12",
				Entrypoint: "main.handler",
				Source:     slessv1alpha1.FunctionSource{Archive: &slessv1alpha1.ArchiveSource{Bucket: bucket, Key: key, SHA256: sum}},
			},
		}
	}
	tests := []struct {
		name, reason, message string
		spec                  slessv1alpha1.FunctionSpec
	}{
		{"entrypoint-file-missing", "EntrypointMissing", "main", inline(map[string]string{"other.py": "x"}, "main.handler")},
		{"archive-missing", slessv1alpha1.FunctionReasonArchiveMissing, "no uploaded archive", archive(w.bucket, w.ns+"/nothing.zip", sha(good))},
		{"archive-digest-mismatch", slessv1alpha1.FunctionReasonArchiveMismatch, "the Function names " + sha(notZip), archive(w.bucket, goodKey, sha(notZip))},
		{"archive-other-bucket", slessv1alpha1.FunctionReasonArchiveBucket, `bucket "someone-elses"`, archive("someone-elses", goodKey, sha(good))},
		{"archive-not-a-zip", "BadArchive", "", archive(w.bucket, notZipKey, sha(notZip))},
		{"archive-path-traversal", "PathTraversal", "evil.py", archive(w.bucket, travKey, sha(traversal))},
	}
	for _, tc := range tests {
		w.create(&slessv1alpha1.Function{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: tc.name}, Spec: tc.spec})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fn := w.waitPhase(tc.name, slessv1alpha1.FunctionPhaseFailed)
			c := condition(fn, slessv1alpha1.FunctionConditionSourceReady)
			if c.Status != metav1.ConditionFalse || c.Reason != tc.reason || !strings.Contains(c.Message, tc.message) {
				t.Errorf("SourceReady %+v, want reason %s and message containing %q", c, tc.reason, tc.message)
			}
			if r := condition(fn, slessv1alpha1.FunctionConditionReady); r.Status != metav1.ConditionFalse || r.Reason != tc.reason {
				t.Errorf("Ready %+v", r)
			}
			if n := len(w.pipelineRuns(tc.name)); n != 0 {
				t.Errorf("%d PipelineRuns for a refused source", n)
			}
		})
	}
	// The fix: the missing archive is uploaded and the Function points at it.
	w.update("archive-missing", func(fn *slessv1alpha1.Function) { fn.Spec.Source.Archive.Key = goodKey })
	w.waitReady("archive-missing")
}
