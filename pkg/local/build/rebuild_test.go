package build_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/sless-dev/sless/pkg/local/blobs"
	"github.com/sless-dev/sless/pkg/local/build"
	"github.com/sless-dev/sless/pkg/local/localtest"
	"github.com/sless-dev/sless/runtimes"
)

// A failed build is kept for its digest, for every Function with that
// code, until one asks again with a spec.rebuild the outcome does not
// answer, or with a build timeout above the one it timed out at. Functions
// that do not ask keep the failure until the new build ends.
func TestBuilderRunsAFailedBuildAgainWhenAsked(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is needed to build a Python function")
	}
	dir := t.TempDir()
	// A python3 that fails while the package index is "down".
	down := filepath.Join(dir, "index-down")
	flaky := filepath.Join(dir, "flaky-python")
	script := "#!/bin/sh\nif [ -e " + down + " ]; then echo 'index unreachable' >&2; exit 1; fi\nexec " + python + " \"$@\"\n"
	if err := os.WriteFile(flaky, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(down, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	blobs, _ := blobs.New(filepath.Join(dir, "blobs"))
	b, err := build.New(filepath.Join(dir, "builds"), runtimes.LocalOptions{Python: flaky}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	in := localtest.StoreContext(t, blobs, "python3.12", "main.handler",
		map[string]string{"main.py": "def handler(e, c): return 1\n", "requirements.txt": "--no-index\n"})
	f, g := localtest.FunctionNamed("ns", "f"), localtest.FunctionNamed("ns", "g")

	if st := localtest.AwaitBuild(t, b, f, in, time.Minute); st.Succeeded || st.Reason != build.ReasonBuildFailed {
		t.Fatalf("first build: %+v, want BuildFailed", st)
	}
	if err := os.Remove(down); err != nil { // the index is back
		t.Fatal(err)
	}
	// Asking the same way finds the failure, for either Function.
	for _, fn := range []string{"f", "g"} {
		if st, _ := b.EnsureBuild(context.Background(), localtest.FunctionNamed("ns", fn), in); !st.Done || st.Succeeded {
			t.Fatalf("%s without a rebuild: %+v, want the failure kept", fn, st)
		}
	}
	f.Spec.Rebuild = "1"
	st, err := b.EnsureBuild(context.Background(), f, in)
	if err != nil || !st.Created || st.Done {
		t.Fatalf("with rebuild 1: %+v, %v; want a new build started", st, err)
	}
	if st := localtest.AwaitBuild(t, b, f, in, time.Minute); !st.Succeeded {
		t.Fatalf("rebuilt: %+v, want success", st)
	}
	// The success is the digest's, for g too, with or without asking.
	if st, _ := b.EnsureBuild(context.Background(), g, in); !st.Succeeded {
		t.Fatalf("g after the rebuild: %+v", st)
	}
	f.Spec.Rebuild = "2"
	if st, _ := b.EnsureBuild(context.Background(), f, in); !st.Succeeded || st.Created {
		t.Fatalf("rebuild of a success: %+v, want it kept", st)
	}
}

func TestBuilderRunsATimedOutBuildAgainWithALongerTimeout(t *testing.T) {
	dir := t.TempDir()
	blobs, _ := blobs.New(filepath.Join(dir, "blobs"))
	hang := filepath.Join(dir, "hang-python")
	if err := os.WriteFile(hang, []byte("#!/bin/sh\nsleep 60 &\nwait\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := build.New(filepath.Join(dir, "builds"), runtimes.LocalOptions{Python: hang}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	in := localtest.StoreContext(t, blobs, "python3.12", "main.handler",
		map[string]string{"main.py": "def handler(e, c): return 1\n", "requirements.txt": "x\n"})
	fn := localtest.FunctionNamed("ns", "f")
	fn.Spec.BuildTimeoutSeconds = ptr.To[int32](1)
	if st := localtest.AwaitBuild(t, b, fn, in, 30*time.Second); st.Reason != build.ReasonBuildTimeout {
		t.Fatalf("first build: %+v, want BuildTimeout", st)
	}
	for _, tc := range []struct {
		timeout int32
		again   bool
	}{{1, false}, {2, true}} {
		fn.Spec.BuildTimeoutSeconds = ptr.To(tc.timeout)
		st, err := b.EnsureBuild(context.Background(), fn, in)
		if err != nil || st.Created != tc.again {
			t.Fatalf("timeout %ds: %+v, %v; want a new build: %v", tc.timeout, st, err, tc.again)
		}
	}
	if st := localtest.AwaitBuild(t, b, fn, in, 30*time.Second); st.Reason != build.ReasonBuildTimeout || st.Message == "" {
		t.Fatalf("second build: %+v, want BuildTimeout", st)
	}
	// Timed out at 2 s, it is not run again at 2 s.
	if st, _ := b.EnsureBuild(context.Background(), fn, in); st.Created || !st.Done {
		t.Fatalf("after the second timeout: %+v, want it kept", st)
	}
}
