package api_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/api"
	"github.com/sless-dev/sless/pkg/local/blobs"
	"github.com/sless-dev/sless/pkg/sourcegc"
)

// Uploading again a zip stored days ago for a Function not created yet
// makes it young again, so a sweep for objects no Function needs that runs
// between the upload and the create leaves it, and the create names it.
// Before, the second upload found the object and left it as it was, the
// sweep deleted it, and the create was refused: no archive uploaded.
func TestUploadAgainOutlivesSweep(t *testing.T) {
	// local mode's blob directory, whose objects' ages are their files'.
	blobs, err := blobs.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(o *api.Options) { o.Blobs = blobs })
	tok := e.token("alice")
	zip := pythonZip(t, `"again"`)
	upload := func() api.UploadResult {
		t.Helper()
		r := e.do("PUT", e.path("functions", "later", "source"), tok, zip, "Content-Type", "application/zip")
		want(t, r, http.StatusOK)
		return *decode[api.UploadResult](t, r)
	}
	archive := upload().Archive
	twoDaysAgo := time.Now().Add(-48 * time.Hour)
	if err := os.Chtimes(filepath.Join(blobs.Root(), filepath.FromSlash(archive.Key)), twoDaysAgo, twoDaysAgo); err != nil {
		t.Fatal(err)
	}
	if again := upload().Archive; again != archive {
		t.Fatalf("the same zip uploaded again: %+v, want %+v", again, archive)
	}

	gc, err := sourcegc.New(sourcegc.Options{Store: blobs, Objects: e.kube.Client, Grace: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gc.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	body := pythonFunction("later")
	body["spec"].(map[string]any)["source"] = map[string]any{"archive": archive}
	want(t, e.do("POST", e.path("functions"), tok, body), http.StatusCreated)
}
