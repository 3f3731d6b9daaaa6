package runs

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/local/apiserver"
	"github.com/sless-dev/sless/pkg/local/blobs"
	"github.com/sless-dev/sless/pkg/local/build"
	"github.com/sless-dev/sless/pkg/local/localtest"
	"github.com/sless-dev/sless/pkg/local/serving"
	"github.com/sless-dev/sless/runtimes"
)

// runsRig is the local adapters a Runs test drives, as sless dev wires
// them: a store, blob storage, a builder, a process server, a recorder
// into the store's records, and Runs over them. All stop when the test
// ends, Runs first.
type runsRig struct {
	store    *apiserver.Store
	blobs    *blobs.Store
	builder  *build.Builder
	server   *serving.Server
	records  *apiserver.Records
	recorder *invoke.Recorder
	runs     *Runs
}

// newRunsRig starts the adapters; opts.Dir is the builder's.
func newRunsRig(t *testing.T, opts serving.ServerOptions) *runsRig {
	t.Helper()
	dir := t.TempDir()
	r := &runsRig{}
	r.store, _ = localtest.OpenStore(t)
	var err error
	if r.blobs, err = blobs.New(filepath.Join(dir, "blobs")); err != nil {
		t.Fatal(err)
	}
	if r.builder, err = build.New(filepath.Join(dir, "builds"), runtimes.LocalOptions{}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.builder.Close)
	opts.Dir = r.builder.Dir
	r.server = serving.NewServer(opts)
	t.Cleanup(r.server.Close)
	if r.records, err = r.store.Records(); err != nil {
		t.Fatal(err)
	}
	r.recorder = invoke.NewRecorder(r.records, invoke.RecorderOptions{})
	t.Cleanup(func() { _ = r.recorder.Close(context.Background()) })
	r.runs = New(r.store, r.server, r.recorder)
	t.Cleanup(r.runs.Close)
	return r
}

// serve creates fn, builds its Python code and waits until the server
// serves it, then writes the status the Function reconciler would.
func (r *runsRig) serve(ctx context.Context, t *testing.T, fn *slessv1alpha1.Function, code string) {
	t.Helper()
	if err := r.store.Create(ctx, fn); err != nil {
		t.Fatal(err)
	}
	in := localtest.StoreContext(t, r.blobs, "python3.12", "main.handler", map[string]string{"main.py": code})
	bs := localtest.AwaitBuild(t, r.builder, fn, in, time.Minute)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ss, err := r.server.EnsureService(ctx, fn, bs.Image)
		if err != nil {
			t.Fatal(err)
		}
		if ss.Ready {
			fn.Status.Image, fn.Status.ServingImage, fn.Status.LatestReadyRevision = bs.Image, ss.ServingImage, ss.LatestReadyRevision
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("function not ready: %+v", ss)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := r.store.Status().Update(ctx, fn); err != nil {
		t.Fatal(err)
	}
}
