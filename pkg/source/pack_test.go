package source

import (
	"archive/zip"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/source/sourcetest"
)

// The fixture packs to its code only: ignored tool state, caches,
// dependencies and .slessignore's patterns stay out, the link inside is a
// copy of its file, and of the modes only the execute bit is kept.
func TestPackDirKeepsCodeOnly(t *testing.T) {
	dir := sourcetest.Tree(t)
	p, err := PackDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(p.Zip), int64(len(p.Zip)))
	if err != nil {
		t.Fatal(err)
	}
	if len(zr.File) != len(sourcetest.Packed) || p.Files != len(zr.File) {
		var names []string
		for _, f := range zr.File {
			names = append(names, f.Name)
		}
		t.Fatalf("packed %q (Files %d), want %v", names, p.Files, sourcetest.Packed)
	}
	for i, f := range zr.File {
		want := sourcetest.Packed[i]
		if f.Name != want.Path || f.Mode() != want.Mode {
			t.Errorf("entry %d: %s %v, want %s %v", i, f.Name, f.Mode(), want.Path, want.Mode)
		}
		if !f.Modified.Equal(time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)) || len(f.Extra) != 0 {
			t.Errorf("%s: modified %v, extra %x: want the fixed epoch and no extra field", f.Name, f.Modified, f.Extra)
		}
		if f.Name == "util.py" {
			rc, _ := f.Open()
			b, _ := io.ReadAll(rc)
			rc.Close()
			if string(b) != "def greet():\n    return 'packed'\n" {
				t.Errorf("util.py (a link to lib/util.py) holds %q", b)
			}
		}
	}
}

// The same contents and execute bits give the same bytes, whatever the
// files' times or other mode bits; a change of content or execute bit
// moves the digest.
func TestPackDirIsStable(t *testing.T) {
	dir := sourcetest.Tree(t)
	first, err := PackDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	for _, f := range []string{"main.py", "run.sh", "lib/util.py"} {
		if err := os.Chtimes(filepath.Join(dir, f), later, later); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, "data.txt"), 0o664); err != nil {
		t.Fatal(err)
	}
	if again, err := PackDir(dir); err != nil || !bytes.Equal(again.Zip, first.Zip) || again.SHA256 != first.SHA256 {
		t.Fatalf("repacked after touching times and modes: %v; sha256 %s, was %s", err, again.SHA256, first.SHA256)
	}
	if err := os.Chmod(filepath.Join(dir, "data.txt"), 0o744); err != nil {
		t.Fatal(err)
	}
	if exec, err := PackDir(dir); err != nil || exec.SHA256 == first.SHA256 {
		t.Fatalf("an execute bit added: %v; digest unchanged", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data.txt"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if changed, err := PackDir(dir); err != nil || changed.SHA256 == first.SHA256 {
		t.Fatalf("content changed: %v; digest unchanged", err)
	}
}

func TestPackDirRefuses(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(outside, []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "main.py")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		// setup adds to a directory holding main.py; it returns the
		// directory to pack when that is another.
		setup func(dir string) string
		want  string
	}{
		{"link out of the directory", func(dir string) string { link(t, outside, dir, "secret.txt"); return "" }, "outside the directory"},
		{"relative link climbing out", func(dir string) string {
			rel, _ := filepath.Rel(filepath.Join(dir, "lib"), outside)
			link(t, rel, dir, "lib/secret.txt")
			return ""
		}, "outside the directory"},
		{"link to a directory", func(dir string) string { link(t, "lib", dir, "lib2"); return "" }, "not to a file"},
		{"dangling link", func(dir string) string { link(t, "gone.py", dir, "util.py"); return "" }, "leads nowhere"},
		{"negated pattern", func(dir string) string { write(t, dir, IgnoreFile, "!keep\n"); return "" }, "negated patterns"},
		{"bad pattern", func(dir string) string { write(t, dir, IgnoreFile, "[\n"); return "" }, "bad pattern"},
		{"only ignored files", func(dir string) string { write(t, dir, IgnoreFile, "*.py\nlib\n"); return "" }, "holds no files"},
		{"a file, not a directory", func(string) string { return file }, "not a directory"},
		{"missing directory", func(dir string) string { return filepath.Join(dir, "nope") }, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, dir, "main.py", "x")
			write(t, dir, "lib/util.py", "x")
			if other := tc.setup(dir); other != "" {
				dir = other
			}
			if _, err := PackDir(dir); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("PackDir: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

func write(t *testing.T, dir, name, body string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func link(t *testing.T, target, dir, name string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}
