package source

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

func goldenInput() Input {
	return Input{
		Runtime:    "python3.12",
		Entrypoint: "main.handler",
		Files: Inline(map[string]string{
			"main.py":          "def handler(event, context):\n    return {\"hello\": \"world\"}\n",
			"requirements.txt": "six==1.16.0\n",
			"lib/util.py":      "X = 1\n",
		}),
	}
}

// goldenDigest is the digest of goldenInput's context. It changes only when
// the context format, the Python wrapper or the generated Dockerfile change:
// then check the diff is intended and update it here.
const goldenDigest = "sha256:dbcbcdc3a8f067b073f9b42c574a0aca98893f8101bfe4790bbcfafeed8dc2c9"

func TestBuildContextGoldenDigest(t *testing.T) {
	c, err := BuildContext(goldenInput())
	if err != nil {
		t.Fatal(err)
	}
	if c.Digest != goldenDigest {
		t.Fatalf("digest %s, want %s (did the context format change on purpose?)", c.Digest, goldenDigest)
	}
}

func TestBuildContextIsByteIdentical(t *testing.T) {
	for _, rt := range []struct{ runtime, entrypoint string }{
		{"python3.12", "main.handler"}, {"nodejs22", "index.handler"}, {"go1.24", "function.Handle"},
	} {
		files := Inline(map[string]string{
			"main.py":  "def handler(e, c): return 1\n",
			"index.js": "exports.handler = async () => 1;\n",
			"f.go":     "package function\n\nfunc Handle(ctx any, ev any) (any, error) { return 1, nil }\n",
		})
		a, err := BuildContext(Input{Runtime: rt.runtime, Entrypoint: rt.entrypoint, Files: files})
		if err != nil {
			t.Fatalf("%s: %v", rt.runtime, err)
		}
		// Same content, map built in another order.
		files2 := Files{}
		for _, n := range []string{"f.go", "index.js", "main.py"} {
			files2[n] = append([]byte(nil), files[n]...)
		}
		b, err := BuildContext(Input{Runtime: rt.runtime, Entrypoint: rt.entrypoint, Files: files2})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.TarGz, b.TarGz) || a.Digest != b.Digest {
			t.Errorf("%s: two builds of the same input differ", rt.runtime)
		}
	}
}

func TestBuildContextDigestChanges(t *testing.T) {
	base, err := BuildContext(goldenInput())
	if err != nil {
		t.Fatal(err)
	}
	change := map[string]func(in *Input){
		"one byte of a file": func(in *Input) { in.Files["lib/util.py"] = []byte("X = 2\n") },
		"a file name":        func(in *Input) { in.Files["lib/utils.py"] = in.Files["lib/util.py"]; delete(in.Files, "lib/util.py") },
		"an added file":      func(in *Input) { in.Files["README"] = nil },
		"the entrypoint":     func(in *Input) { in.Files["main.py"] = append(in.Files["main.py"], "def other(e, c): pass\n"...) },
		"the function name": func(in *Input) {
			in.Files["main.py"] = []byte("def other(event, context):\n    return {\"hello\": \"world\"}\n")
			in.Entrypoint = "main.other"
		},
		"the base image": func(in *Input) { in.BaseImage = "registry.example/python:3.12" },
		"the runtime": func(in *Input) {
			in.Runtime = "nodejs22"
			in.Files["main.js"] = []byte("exports.handler = () => 1;")
		},
	}
	seen := map[string]string{base.Digest: "base"}
	for name, mutate := range change {
		in := goldenInput()
		mutate(&in)
		c, err := BuildContext(in)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if prev, dup := seen[c.Digest]; dup {
			t.Errorf("changing %s gives the same digest as %s", name, prev)
		}
		seen[c.Digest] = name
	}
}

func TestBuildContextAliasIsCanonical(t *testing.T) {
	in := goldenInput()
	in.Runtime = "python3.11"
	c, err := BuildContext(in)
	if err != nil {
		t.Fatal(err)
	}
	if c.Digest != goldenDigest {
		t.Errorf("python3.11 context differs from python3.12's")
	}
}

// readContext lists a context's entries and the contents of its files.
func readContext(t *testing.T, tgz []byte) ([]*tar.Header, map[string]string) {
	t.Helper()
	if len(tgz) < 10 || tgz[4] != 0 || tgz[5] != 0 || tgz[6] != 0 || tgz[7] != 0 || tgz[9] != 255 || tgz[3]&0x08 != 0 {
		t.Fatalf("gzip header has a time, a name or an OS byte: % x", tgz[:10])
	}
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var hs []*tar.Header
	contents := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
		b, _ := io.ReadAll(tr)
		contents[h.Name] = string(b)
	}
	return hs, contents
}

func TestBuildContextLayout(t *testing.T) {
	tests := []struct {
		name       string
		in         Input
		wantFiles  []string
		dockerfile []string
	}{
		{"python with requirements", goldenInput(),
			[]string{"Dockerfile", "sless.json", "runtime/server.py", "runtime/sless_asgi.py", "function/main.py", "function/lib/util.py", "function/requirements.txt"},
			[]string{"FROM docker.io/library/python:3.12.8-slim-bookworm\n", `SLESS_ENTRYPOINT="main.handler"`,
				`RUN ["python3","-m","pip","install","--no-cache-dir","--disable-pip-version-check","--no-warn-script-location","--target",".deps","-r","requirements.txt"]`,
				`CMD ["python3","/sless/runtime/server.py"]`}},
		{"node with lock", Input{Runtime: "nodejs20", Entrypoint: "lib/api.handle", Files: Inline(map[string]string{
			"lib/api.mjs": "export const handle = () => 1;", "package.json": "{}", "package-lock.json": "{}"})},
			[]string{"runtime/server.js", "function/lib/api.mjs"},
			[]string{"FROM docker.io/library/node:22.12.0-bookworm-slim\n", `RUN ["npm","ci","--omit=dev","--no-audit","--no-fund"]`,
				`CMD ["node","/sless/runtime/server.js"]`}},
		{"node without lock", Input{Runtime: "nodejs22", Entrypoint: "index.handler", Files: Inline(map[string]string{
			"index.cjs": "exports.handler = () => 1;", "package.json": "{}"})},
			[]string{"function/index.cjs"},
			[]string{`RUN ["npm","install","--omit=dev","--no-audit","--no-fund"]`}},
		{"node without package.json", Input{Runtime: "nodejs22", Entrypoint: "index.handler", Files: Inline(map[string]string{
			"index.js": "exports.handler = () => 1;"})},
			[]string{"function/index.js"}, nil},
		{"go without go.mod", Input{Runtime: "go1.24", Entrypoint: "function.Handle", Files: Inline(map[string]string{
			"handler.go": "package function\n"})},
			[]string{"function/go.mod", "main/main.go", "main/go.mod", "runtime/go.mod", "runtime/sless.go", "runtime/server.go"},
			[]string{"FROM docker.io/library/golang:1.24.4-bookworm AS build\n", "FROM docker.io/library/debian:12.8-slim\n",
				`RUN ["go","build","-trimpath","-o","../bin/function","."]`, `CMD ["/sless/bin/function"]`}},
		{"base image override", Input{Runtime: "python3.12", Entrypoint: "main.handler", BaseImage: "registry.example/py@sha256:abc",
			Files: Inline(map[string]string{"main.py": ""})},
			[]string{"function/main.py"}, []string{"FROM registry.example/py@sha256:abc\n"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := BuildContext(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			hs, contents := readContext(t, c.TarGz)
			var names []string
			for i, h := range hs {
				names = append(names, h.Name)
				if i > 0 && hs[i-1].Name >= h.Name {
					t.Errorf("entries not sorted: %q before %q", hs[i-1].Name, h.Name)
				}
				if !h.ModTime.Equal(time.Unix(0, 0)) || h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
					t.Errorf("%s: mtime %v uid %d gid %d uname %q gname %q", h.Name, h.ModTime, h.Uid, h.Gid, h.Uname, h.Gname)
				}
				wantMode := int64(0o644)
				if h.Typeflag == tar.TypeDir {
					wantMode = 0o755
				}
				if h.Mode != wantMode {
					t.Errorf("%s: mode %o, want %o", h.Name, h.Mode, wantMode)
				}
			}
			for _, f := range tc.wantFiles {
				if _, ok := contents[f]; !ok {
					t.Errorf("no %s in %v", f, names)
				}
			}
			df := contents["Dockerfile"]
			for _, want := range tc.dockerfile {
				if !strings.Contains(df, want) {
					t.Errorf("Dockerfile lacks %q:\n%s", want, df)
				}
			}
			if tc.dockerfile == nil && strings.Contains(df, "RUN ") {
				t.Errorf("Dockerfile has a step with nothing to install:\n%s", df)
			}
		})
	}
}

func TestGoMainGeneration(t *testing.T) {
	in := Input{Runtime: "go1.24", Entrypoint: "handlers/hello.Handle", Files: Inline(map[string]string{
		"go.mod":                  "module example.com/app // the app\n\ngo 1.25.1\n\nrequire github.com/google/uuid v1.6.0\n",
		"go.sum":                  "github.com/google/uuid v1.6.0 h1:x\n",
		"handlers/hello/hello.go": "package hello\n",
	})}
	c, err := BuildContext(in)
	if err != nil {
		t.Fatal(err)
	}
	_, contents := readContext(t, c.TarGz)
	for _, want := range []string{`fn "example.com/app/handlers/hello"`, `sless "github.com/sless-dev/sless/runtimes/go1.24"`, "sless.Start(fn.Handle)"} {
		if !strings.Contains(contents["main/main.go"], want) {
			t.Errorf("main.go lacks %q:\n%s", want, contents["main/main.go"])
		}
	}
	for _, want := range []string{"go 1.25.1\n", `replace "example.com/app" => ../function`, "replace github.com/sless-dev/sless/runtimes/go1.24 => ../runtime"} {
		if !strings.Contains(contents["main/go.mod"], want) {
			t.Errorf("main/go.mod lacks %q:\n%s", want, contents["main/go.mod"])
		}
	}
	if contents["main/go.sum"] != "github.com/google/uuid v1.6.0 h1:x\n" {
		t.Errorf("go.sum not carried over: %q", contents["main/go.sum"])
	}
	if _, ok := contents["function/go.mod"]; !ok {
		t.Error("the user's go.mod is missing")
	}
}

func TestBuildContextRejects(t *testing.T) {
	tests := []struct {
		name   string
		in     Input
		reason string
	}{
		{"unknown runtime", Input{Runtime: "ruby3", Entrypoint: "a.b", Files: Inline(map[string]string{"a.rb": ""})}, ReasonUnknownRuntime},
		{"no files", Input{Runtime: "python3.12", Entrypoint: "main.handler"}, ReasonEmpty},
		{"unclean path", Input{Runtime: "python3.12", Entrypoint: "main.handler", Files: Inline(map[string]string{"main.py": "", "./x.py": ""})}, ReasonBadPath},
		{"traversal", Input{Runtime: "python3.12", Entrypoint: "main.handler", Files: Inline(map[string]string{"main.py": "", "../x.py": ""})}, ReasonPathTraversal},
		{"absolute", Input{Runtime: "python3.12", Entrypoint: "main.handler", Files: Inline(map[string]string{"main.py": "", "/x.py": ""})}, ReasonAbsolutePath},
		{"file and directory", Input{Runtime: "python3.12", Entrypoint: "main.handler", Files: Inline(map[string]string{"main.py": "", "main.py/x": ""})}, ReasonDuplicate},
		{"entrypoint missing", Input{Runtime: "python3.12", Entrypoint: "app.handler", Files: Inline(map[string]string{"main.py": ""})}, ReasonEntrypointMissing},
		{"reserved go module", Input{Runtime: "go1.24", Entrypoint: "function.Handle", Files: Inline(map[string]string{
			"go.mod": "module github.com/sless-dev/sless/runtimes/go1.24\n", "f.go": "package function\n"})}, ReasonBadEntrypoint},
		{"go.mod without module", Input{Runtime: "go1.24", Entrypoint: "function.Handle", Files: Inline(map[string]string{
			"go.mod": "go 1.24\n", "f.go": "package function\n"})}, ReasonBadEntrypoint},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := BuildContext(tc.in)
			var se *Error
			if !errors.As(err, &se) || se.Reason != tc.reason {
				t.Fatalf("error %v, want reason %s", err, tc.reason)
			}
		})
	}
}

func TestCheckEntrypoint(t *testing.T) {
	py := Inline(map[string]string{"main.py": "", "pkg/__init__.py": "", "pkg/sub/mod.py": ""})
	node := Inline(map[string]string{"index.js": "", "lib/api.mjs": "", "lib/my.api.cjs": ""})
	gofiles := Inline(map[string]string{"f.go": "package function\n", "f_test.go": "package function\n",
		"handlers/h.go": "package handlers\n", "cmd/main.go": "package main\n", "function/x.go": "package other\n"})
	gorootOnly := Inline(map[string]string{"f.go": "// doc\npackage fn\n"})
	tests := []struct {
		runtime, entrypoint string
		files               Files
		reason              string // "" = accepted
		file                string
	}{
		{"python3.12", "main.handler", py, "", "main.py"},
		{"python3.11", "pkg.handler", py, "", "pkg/__init__.py"},
		{"python3.12", "pkg.sub.mod.handle", py, "", "pkg/sub/mod.py"},
		{"python3.12", "missing.handler", py, ReasonEntrypointMissing, ""},
		{"python3.12", "handler", py, ReasonBadEntrypoint, ""},
		{"python3.12", "main.", py, ReasonBadEntrypoint, ""},
		{"python3.12", "main.2bad", py, ReasonBadEntrypoint, ""},
		{"python3.12", "my-mod.handler", py, ReasonBadEntrypoint, ""},
		{"python3.12", "pkg/sub.handler", py, ReasonBadEntrypoint, ""},
		{"nodejs22", "index.handler", node, "", "index.js"},
		{"nodejs20", "lib/api.handle", node, "", "lib/api.mjs"},
		{"nodejs22", "lib/my.api.handle", node, "", "lib/my.api.cjs"},
		{"nodejs22", "lib/none.handle", node, ReasonEntrypointMissing, ""},
		{"nodejs22", "../index.handler", node, ReasonBadEntrypoint, ""},
		{"nodejs22", "/index.handler", node, ReasonBadEntrypoint, ""},
		{"nodejs22", "index.bad-name", node, ReasonBadEntrypoint, ""},
		{"go1.24", "handlers.Handle", gofiles, "", "handlers"},
		{"go1.24", "function.Handle", gofiles, "", "function"}, // a directory wins over the root's package name
		{"go1.24", "fn.Handle", gorootOnly, "", "."},
		{"go1.24", "handlers.handle", gofiles, ReasonBadEntrypoint, ""},
		{"go1.24", "cmd.Handle", gofiles, ReasonBadEntrypoint, ""},
		{"go1.24", "nothing.Handle", gofiles, ReasonEntrypointMissing, ""},
		{"go1.24", "./handlers.Handle", gofiles, ReasonBadEntrypoint, ""},
		{"java21", "a.b", py, ReasonUnknownRuntime, ""},
	}
	for _, tc := range tests {
		target, err := ResolveEntrypoint(tc.runtime, tc.entrypoint, tc.files)
		if tc.reason == "" {
			if err != nil {
				t.Errorf("%s %q: %v", tc.runtime, tc.entrypoint, err)
			} else if target.File != tc.file {
				t.Errorf("%s %q resolved to %q, want %q", tc.runtime, tc.entrypoint, target.File, tc.file)
			}
			continue
		}
		var se *Error
		if !errors.As(err, &se) || se.Reason != tc.reason {
			t.Errorf("%s %q: error %v, want reason %s", tc.runtime, tc.entrypoint, err, tc.reason)
		}
		if err2 := CheckEntrypoint(tc.runtime, tc.entrypoint, tc.files); (err2 == nil) != (err == nil) {
			t.Errorf("CheckEntrypoint and ResolveEntrypoint disagree on %q", tc.entrypoint)
		}
	}
}

// A zip of a folder rather than of its contents gets told so; a missing
// handler in a zip with several top-level entries does not.
func TestEntrypointMissingFolderHint(t *testing.T) {
	for _, tc := range []struct {
		name, runtime, entrypoint string
		files                     Files
		hint                      string
	}{
		{"python in a folder", "python3.12", "main.handler", Inline(map[string]string{"hello/main.py": "", "hello/util.py": ""}), "under one folder, hello/"},
		{"node in a folder", "nodejs22", "index.handler", Inline(map[string]string{"app/index.js": ""}), "(cd app && zip -r ../function.zip .)"},
		{"go in a folder", "go1.24", "function.Handle", Inline(map[string]string{"fn/go.mod": "module x\n", "fn/x.go": "package function\n"}), "under one folder, fn/"},
		{"two folders", "python3.12", "main.handler", Inline(map[string]string{"a/main.py": "", "b/x.py": ""}), ""},
		{"root file beside a folder", "python3.12", "main.handler", Inline(map[string]string{"README": "", "src/main.py": ""}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckEntrypoint(tc.runtime, tc.entrypoint, tc.files)
			var se *Error
			if !errors.As(err, &se) || se.Reason != ReasonEntrypointMissing {
				t.Fatalf("got %v, want %s", err, ReasonEntrypointMissing)
			}
			if tc.hint == "" && strings.Contains(se.Message, "one folder") {
				t.Fatalf("hint where the files are not under one folder: %s", se.Message)
			}
			if !strings.Contains(se.Message, tc.hint) {
				t.Fatalf("message %q lacks %q", se.Message, tc.hint)
			}
		})
	}
}

func TestParseGoModAndVersions(t *testing.T) {
	m, v, err := parseGoMod([]byte("// comment\nmodule \"example.com/q\"\n\ngo 1.22\n"))
	if err != nil || m != "example.com/q" || v != "1.22" {
		t.Errorf("got %q %q %v", m, v, err)
	}
	for _, c := range []struct {
		a, b string
		less bool
	}{{"1.24", "1.25", true}, {"1.24", "1.24.1", true}, {"1.24", "1.24", false}, {"1.25", "1.24.9", false}, {"1.24", "1.3", false}} {
		if versionLess(c.a, c.b) != c.less {
			t.Errorf("versionLess(%s, %s) != %v", c.a, c.b, c.less)
		}
	}
}

func TestInlineAndFiles(t *testing.T) {
	f := Inline(map[string]string{"b": "22", "a": "1"})
	if got := strings.Join(f.Names(), ","); got != "a,b" {
		t.Errorf("Names() = %s", got)
	}
	if f.Size() != 3 {
		t.Errorf("Size() = %d", f.Size())
	}
}

// A service's context says its mode in the manifest and the image's env;
// a function's says nothing of modes, so its digest is what it was.
func TestBuildContextServiceMode(t *testing.T) {
	files := Inline(map[string]string{"app.py": "def app(environ, start_response):\n    pass\n"})
	fn, err := BuildContext(Input{Runtime: "python3.12", Entrypoint: "app.app", Files: files})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := BuildContext(Input{Runtime: "python3.12", Entrypoint: "app.app", Mode: "service", Files: files})
	if err != nil {
		t.Fatal(err)
	}
	if fn.Digest == svc.Digest {
		t.Fatal("a function and a service of the same code share a build context digest")
	}
	_, fnFiles := readContext(t, fn.TarGz)
	_, svcFiles := readContext(t, svc.TarGz)
	if strings.Contains(fnFiles["sless.json"], "mode") || strings.Contains(fnFiles["Dockerfile"], "SLESS_MODE") {
		t.Errorf("a function's context names a mode:\n%s\n%s", fnFiles["sless.json"], fnFiles["Dockerfile"])
	}
	if !strings.Contains(svcFiles["sless.json"], `"mode":"service"`) || !strings.Contains(svcFiles["Dockerfile"], `ENV SLESS_MODE="service"`) {
		t.Errorf("a service's context does not name its mode:\n%s\n%s", svcFiles["sless.json"], svcFiles["Dockerfile"])
	}
}

// Contexts made at once and one after another by the reused gzip writers
// are the same bytes, and making one no longer allocates a compressor's
// state (about 600 KiB) each time.
func TestBuildContextReusesCompressor(t *testing.T) {
	want, err := BuildContext(goldenInput())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				c, err := BuildContext(goldenInput())
				if err != nil {
					t.Error(err)
					return
				}
				if c.Digest != goldenDigest || !bytes.Equal(c.TarGz, want.TarGz) {
					t.Errorf("concurrent context differs: %s", c.Digest)
					return
				}
			}
		})
	}
	wg.Wait()

	if raceEnabled {
		return
	}
	res := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := BuildContext(goldenInput()); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The context's own bytes (the wrappers: about 95 KiB of Python) stay
	// under this; a fresh compressor's state alone would pass it.
	if per := res.AllocedBytesPerOp(); per > 384<<10 {
		t.Errorf("a small context allocates %d bytes, want under 384 KiB", per)
	}
}
