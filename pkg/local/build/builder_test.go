package build_test

import (
	"archive/zip"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/sless-dev/sless/pkg/adapter"
	"github.com/sless-dev/sless/pkg/local/blobs"
	"github.com/sless-dev/sless/pkg/local/build"
	"github.com/sless-dev/sless/pkg/local/localtest"
	"github.com/sless-dev/sless/pkg/source"
	"github.com/sless-dev/sless/runtimes"
)

// doneRecorder collects onDone calls.
type doneRecorder struct {
	mu   sync.Mutex
	got  map[string]int
	cond chan struct{}
}

func newDoneRecorder() *doneRecorder {
	return &doneRecorder{got: map[string]int{}, cond: make(chan struct{}, 100)}
}

func (d *doneRecorder) done(ns, name string) {
	d.mu.Lock()
	d.got[ns+"/"+name]++
	d.mu.Unlock()
	d.cond <- struct{}{}
}

func (d *doneRecorder) count(key string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.got[key]
}

func TestBuilderBuildsOncePerDigestAndRemembers(t *testing.T) {
	dir := t.TempDir()
	blobs, _ := blobs.New(filepath.Join(dir, "blobs"))
	rec := newDoneRecorder()
	b, err := build.New(filepath.Join(dir, "builds"), runtimes.LocalOptions{}, rec.done)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	in := localtest.StoreContext(t, blobs, "python3.12", "main.handler", map[string]string{"main.py": "def handler(e, c):\n    return 'hi'\n"})

	a, other := localtest.FunctionNamed("ns", "a"), localtest.FunctionNamed("ns", "b")
	st, err := b.EnsureBuild(context.Background(), a, in)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Started || !st.Created || st.Done || st.Name != build.Name("a", in.Digest) {
		t.Fatalf("first EnsureBuild = %+v, want a build it started", st)
	}
	// A second function with the same source while the build runs joins it
	// (or, if it already ended, is told its outcome).
	second, err := b.EnsureBuild(context.Background(), other, in)
	if err != nil {
		t.Fatal(err)
	}
	if second.Created {
		t.Errorf("second EnsureBuild of one digest = %+v, says it started the build", second)
	}
	wantB := 1
	if second.Done {
		wantB = 0
	}
	done := localtest.AwaitBuild(t, b, a, in, time.Minute)
	if !done.Succeeded || done.Image != build.Image("ns", "a", in.Digest) || done.StartTime == nil || done.CompletionTime == nil {
		t.Fatalf("done = %+v", done)
	}
	// Its steps, with their own times inside the build's, for its trace.
	if len(done.Steps) < 1 || done.Steps[0].Name != "unpack" {
		t.Fatalf("steps %+v, want unpack first", done.Steps)
	}
	for _, s := range done.Steps {
		if s.Failed || s.Start.Before(*done.StartTime) || s.End.Before(s.Start) || s.End.After(*done.CompletionTime) {
			t.Fatalf("step %+v lies outside the build's %s–%s", s, done.StartTime, done.CompletionTime)
		}
	}
	// Both functions that asked are told when it ends.
	deadline := time.Now().Add(10 * time.Second)
	for rec.count("ns/a") != 1 || rec.count("ns/b") != wantB {
		if time.Now().After(deadline) {
			t.Fatalf("onDone calls: %v", rec.got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// One directory per digest, complete, and no temporary leftovers.
	entries, _ := os.ReadDir(b.Root())
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	hexd := strings.TrimPrefix(in.Digest, "sha256:")
	if len(entries) != 3 { // <hex>/, <hex>.json, <hex>.log
		t.Fatalf("build root holds %v", names)
	}
	d, err := b.Dir(done.Image)
	if err != nil || d != filepath.Join(b.Root(), hexd) {
		t.Fatalf("Dir = %q, %v", d, err)
	}
	if _, err := os.Stat(filepath.Join(d, "function", "main.py")); err != nil {
		t.Fatal(err)
	}
	// A second function with the same source reuses the build.
	st, _ = b.EnsureBuild(context.Background(), other, in)
	if !st.Done || st.Image != build.Image("ns", "b", in.Digest) {
		t.Fatalf("second function: %+v", st)
	}
	// A new builder on the same root remembers.
	b.Close()
	b2, err := build.New(b.Root(), runtimes.LocalOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	if st, _ := b2.EnsureBuild(context.Background(), a, in); !st.Done || !st.Succeeded {
		t.Fatalf("after restart: %+v", st)
	}
}

func TestBuilderFailures(t *testing.T) {
	dir := t.TempDir()
	blobs, _ := blobs.New(filepath.Join(dir, "blobs"))
	// A python3 that hangs shows the timeout and that the whole process
	// group is killed.
	hang := filepath.Join(dir, "hang-python")
	if err := os.WriteFile(hang, []byte("#!/bin/sh\nsleep 60 &\nwait\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		opts     runtimes.LocalOptions
		timeout  int32
		files    map[string]string
		corrupt  bool
		reason   string
		inMsg    string
		maxDelay time.Duration
	}{
		{
			name:   "pip cannot find a requirement",
			files:  map[string]string{"main.py": "def handler(e, c): return 1\n", "requirements.txt": "--no-index\nsless-no-such-package==1.0\n"},
			reason: build.ReasonBuildFailed, inMsg: "sless-no-such-package", maxDelay: time.Minute,
		},
		{
			name:    "context changed on disk",
			files:   map[string]string{"main.py": "def handler(e, c): return 2\n"},
			corrupt: true, reason: build.ReasonBadContext, inMsg: "has digest", maxDelay: 10 * time.Second,
		},
		{
			name:    "build timeout",
			opts:    runtimes.LocalOptions{Python: hang},
			timeout: 1,
			files:   map[string]string{"main.py": "def handler(e, c): return 3\n", "requirements.txt": "x\n"},
			reason:  build.ReasonBuildTimeout, inMsg: "did not finish within 1s", maxDelay: 10 * time.Second,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := build.New(filepath.Join(dir, "builds-"+strings.ReplaceAll(c.name, " ", "-")), c.opts, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			in := localtest.StoreContext(t, blobs, "python3.12", "main.handler", c.files)
			if c.corrupt {
				p := strings.TrimPrefix(in.Location, "file://")
				if err := os.WriteFile(p, []byte("not the context"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			fn := localtest.FunctionNamed("ns", "f")
			if c.timeout > 0 {
				fn.Spec.BuildTimeoutSeconds = ptr.To(c.timeout)
			}
			start := time.Now()
			st := localtest.AwaitBuild(t, b, fn, in, c.maxDelay)
			if st.Succeeded || st.Reason != c.reason || !strings.Contains(st.Message, c.inMsg) || st.Image != "" {
				t.Fatalf("state = %+v, want reason %s with %q", st, c.reason, c.inMsg)
			}
			if time.Since(start) > c.maxDelay {
				t.Fatalf("failure took %s", time.Since(start))
			}
			if _, err := b.Dir(build.Image("ns", "f", in.Digest)); err == nil {
				t.Fatal("Dir of a failed build succeeded")
			}
			// The outcome is remembered: asking again starts nothing.
			if again, _ := b.EnsureBuild(context.Background(), fn, in); !again.Done || again.Reason != c.reason {
				t.Fatalf("asked again: %+v", again)
			}
		})
	}
}

func TestBuilderRefusesBadInput(t *testing.T) {
	b, err := build.New(t.TempDir(), runtimes.LocalOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, d := range []string{"", "sha256:abc", "md5:" + strings.Repeat("a", 64), "sha256:" + strings.Repeat("A", 64)} {
		if _, err := b.EnsureBuild(context.Background(), localtest.FunctionNamed("ns", "f"), adapter.BuildInput{Digest: d}); err == nil {
			t.Errorf("EnsureBuild accepted digest %q", d)
		}
	}
	for _, img := range []string{"docker.io/library/python:3.12", "local/ns/f@sha256:" + strings.Repeat("a", 64), "local/ns/f"} {
		if _, err := b.Dir(img); err == nil {
			t.Errorf("Dir(%q) succeeded", img)
		}
	}
}

// A script shipped in a zip with its execute bit runs from the build: the
// mode goes from the zip through the build context into the directory
// the function's processes run in. Before, it was 0644 there and running
// it failed with "permission denied".
func TestBuilderKeepsExecutableFilesOfAZip(t *testing.T) {
	dir := t.TempDir()
	blobs, _ := blobs.New(filepath.Join(dir, "blobs"))
	b, err := build.New(filepath.Join(dir, "builds"), runtimes.LocalOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	var zbuf bytes.Buffer
	zw := zip.NewWriter(&zbuf)
	for _, f := range []struct {
		name, body string
		mode       os.FileMode
	}{
		{"main.py", "import subprocess\ndef handler(e, c):\n    return subprocess.check_output(['./bin/run.sh']).decode()\n", 0o644},
		{"bin/run.sh", "#!/bin/sh\necho ran from the zip\n", 0o755},
		{"notes.txt", "private\n", 0o600},
	} {
		h := &zip.FileHeader{Name: f.name, Method: zip.Deflate}
		h.SetMode(f.mode)
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, f.body)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	files, modes, err := source.ReadZipModes(bytes.NewReader(zbuf.Bytes()), int64(zbuf.Len()), source.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	bc, err := source.BuildContext(source.Input{Runtime: "python3.12", Entrypoint: "main.handler", Files: files, Modes: modes})
	if err != nil {
		t.Fatal(err)
	}
	key := "ns/contexts/" + strings.TrimPrefix(bc.Digest, "sha256:") + ".tar.gz"
	if err := blobs.Put(context.Background(), key, bytes.NewReader(bc.TarGz), int64(len(bc.TarGz)), "application/gzip"); err != nil {
		t.Fatal(err)
	}
	st := localtest.AwaitBuild(t, b, localtest.FunctionNamed("ns", "zipped"), adapter.BuildInput{Digest: bc.Digest, Location: blobs.Location(key)}, time.Minute)
	if !st.Succeeded {
		t.Fatalf("build: %+v", st)
	}
	root, err := b.Dir(st.Image)
	if err != nil {
		t.Fatal(err)
	}
	fdir := filepath.Join(root, runtimes.FunctionDir)
	for name, want := range map[string]os.FileMode{"bin/run.sh": 0o755, "notes.txt": 0o644, "main.py": 0o644} {
		info, err := os.Stat(filepath.Join(fdir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Mode().Perm(); got&0o111 != want&0o111 || got&0o444 != 0o444 {
			t.Errorf("%s: mode %v, want %v", name, got, want)
		}
	}
	cmd := exec.Command("./bin/run.sh")
	cmd.Dir = fdir
	if out, err := cmd.CombinedOutput(); err != nil || string(out) != "ran from the zip\n" {
		t.Fatalf("running the zip's script: %q, %v", out, err)
	}
}
