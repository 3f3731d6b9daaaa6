package testbed_test

import (
	"archive/tar"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/sless-dev/sless/pkg/source"
	"github.com/sless-dev/sless/runtimes"
	"github.com/sless-dev/sless/test/testbed"
)

// TestFunctionImage lays a Python function's build context out as its
// generated Dockerfile says: files under /sless, the wrapper's command,
// user, working directory and environment.
func TestFunctionImage(t *testing.T) {
	ctx, err := source.BuildContext(source.Input{Runtime: runtimes.Python312, Entrypoint: "main.handler",
		Files: source.Files{"main.py": []byte("def handler(event, context):\n    return 'hi'\n"), "lib/util.py": []byte("X = 1\n")}})
	if err != nil {
		t.Fatal(err)
	}
	img, err := testbed.FunctionImage(empty.Image, ctx.TarGz)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	// Layers and diff IDs agree, as containerd checks on pull.
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != len(cf.RootFS.DiffIDs) {
		t.Fatalf("%d layers, %d diff IDs", len(layers), len(cf.RootFS.DiffIDs))
	}
	for i, l := range layers {
		if id, err := l.DiffID(); err != nil || id != cf.RootFS.DiffIDs[i] {
			t.Errorf("layer %d: diff ID %v (%v), the config names %v", i, id, err, cf.RootFS.DiffIDs[i])
		}
	}
	rt, _ := runtimes.Lookup(runtimes.Python312)
	if want := rt.ServeArgs(runtimes.ImageRoot, rt.Interpreter); !slices.Equal(cf.Config.Cmd, want) {
		t.Errorf("Cmd %q, want %q", cf.Config.Cmd, want)
	}
	if cf.Config.User != "65532:65532" || cf.Config.WorkingDir != "/sless/function" {
		t.Errorf("User %q WorkingDir %q", cf.Config.User, cf.Config.WorkingDir)
	}
	for _, kv := range []string{"SLESS_ENTRYPOINT=main.handler", "SLESS_FUNCTION_DIR=/sless/function", "PORT=8080", "PYTHONUNBUFFERED=1"} {
		if !slices.Contains(cf.Config.Env, kv) {
			t.Errorf("Env %q lacks %s", cf.Config.Env, kv)
		}
	}
	if _, ok := cf.Config.ExposedPorts["8080/tcp"]; !ok {
		t.Errorf("ExposedPorts %v", cf.Config.ExposedPorts)
	}
	files := map[string]int64{}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s owned by %d:%d", h.Name, h.Uid, h.Gid)
		}
		files[strings.TrimSuffix(h.Name, "/")] = h.Mode
	}
	for _, name := range []string{"sless/sless.json", "sless/runtime/server.py", "sless/function/main.py", "sless/function/lib/util.py"} {
		if mode, ok := files[name]; !ok || mode != 0o644 {
			t.Errorf("%s: present %t, mode %o; the image holds %v", name, ok, mode, files)
		}
	}
	if _, ok := files["Dockerfile"]; ok {
		t.Error("the Dockerfile itself was copied")
	}

	// Dependencies need a builder.
	ctx, err = source.BuildContext(source.Input{Runtime: runtimes.Python312, Entrypoint: "main.handler",
		Files: source.Files{"main.py": []byte("def handler(e, c):\n    return 1\n"), "requirements.txt": []byte("six\n")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := testbed.FunctionImage(empty.Image, ctx.TarGz); err == nil || !strings.Contains(err.Error(), "RUN needs a builder") {
		t.Errorf("a context with a RUN line: %v", err)
	}
}
