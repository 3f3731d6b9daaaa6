package testbed_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

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

// TestStandInImage takes each FROM's base from the stand-ins and, for a Go
// function, runs the build stage here: the run stage holds the compiled
// server, the build stage base's CA file and the function's files, on the
// run image.
func TestStandInImage(t *testing.T) {
	if _, err := os.Stat(filepath.Join(testbed.GoRoot, "bin", "go")); err != nil {
		t.Skipf("no Go toolchain at %s: %v", testbed.GoRoot, err)
	}
	certs := []byte("-----BEGIN CERTIFICATE-----\nstand-in\n-----END CERTIFICATE-----\n")
	golang, err := mutate.AppendLayers(empty.Image, fileLayer(t, "etc/ssl/certs/ca-certificates.crt", certs))
	if err != nil {
		t.Fatal(err)
	}
	bases := []testbed.BaseImage{
		{Repo: "library/golang", Tag: "1.24.4-bookworm", Image: golang},
		{Repo: "library/debian", Tag: "12.8-slim", Image: empty.Image},
		{Repo: "library/node", Tag: testbed.NodeVersion + "-bookworm-slim", Image: empty.Image},
	}
	ctx, err := source.BuildContext(source.Input{Runtime: runtimes.Go124, Entrypoint: "hello.Handle", Files: source.Files{
		"go.mod":   []byte("module example.com/hello\n\ngo 1.24\n"),
		"hello.go": []byte("package hello\n\nimport \"context\"\n\nfunc Handle(ctx context.Context, ev map[string]any) (string, error) { return \"hi\", nil }\n"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	img, err := testbed.StandInImage(bases, ctx.TarGz)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/sless/bin/function"}; !slices.Equal(cf.Config.Cmd, want) || cf.Config.User != "65532:65532" {
		t.Errorf("Cmd %q User %q, want %q as 65532", cf.Config.Cmd, cf.Config.User, want)
	}
	files := fileContents(t, img)
	if bin, ok := files["sless/bin/function"]; !ok || bin.mode != 0o755 || !bytes.HasPrefix(bin.data, []byte("\x7fELF")) {
		t.Errorf("sless/bin/function: present %t, mode %o, not an executable ELF file", ok, bin.mode)
	}
	if got := files["etc/ssl/certs/ca-certificates.crt"].data; !bytes.Equal(got, certs) {
		t.Errorf("CA file %q, want the build stage's", got)
	}
	for _, name := range []string{"sless/sless.json", "sless/function/hello.go"} {
		if _, ok := files[name]; !ok {
			t.Errorf("%s missing", name)
		}
	}
	if _, ok := files["sless/main/main.go"]; ok {
		t.Error("the build stage's sources are in the run image")
	}

	// One stage: the runtime's base, as FunctionImage.
	ctx, err = source.BuildContext(source.Input{Runtime: runtimes.NodeJS22, Entrypoint: "index.handler",
		Files: source.Files{"index.js": []byte("exports.handler = async () => 'hi';\n")}})
	if err != nil {
		t.Fatal(err)
	}
	if img, err = testbed.StandInImage(bases, ctx.TarGz); err != nil {
		t.Fatal(err)
	}
	if _, ok := fileContents(t, img)["sless/function/index.js"]; !ok {
		t.Error("the Node.js function's file is missing")
	}
	if _, err := testbed.StandInImage(bases[:1], ctx.TarGz); err == nil || !strings.Contains(err.Error(), "no stand-in for") {
		t.Errorf("no base for the FROM line: %v", err)
	}
}

type fileContent struct {
	data []byte
	mode int64
}

// fileContents are img's regular files, by path.
func fileContents(t *testing.T, img v1.Image) map[string]fileContent {
	t.Helper()
	files := map[string]fileContent{}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[h.Name] = fileContent{data: b, mode: h.Mode}
		}
	}
}

// fileLayer is a layer of one 0644 file.
func fileLayer(t *testing.T, name string, data []byte) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := tarball.LayerFromReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	return l
}
