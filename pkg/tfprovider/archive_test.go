package tfprovider

import (
	"archive/zip"
	"bytes"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/sless-dev/sless/pkg/source"
)

// A source_dir's executable files are zipped 0755 and every other file
// 0644, so a script the function runs stays executable through the API's
// build; before, every entry was 0644 and running it failed with
// "permission denied". Only the execute bit counts: the rest of a file's
// mode (umask, a private 0600 file) does not move the digest.
func TestZipDirKeepsExecuteBits(t *testing.T) {
	tests := []struct {
		name string
		mode os.FileMode
		want fs.FileMode
	}{
		{"plain", 0o644, 0o644},
		{"private", 0o600, 0o644},
		{"group-writable", 0o664, 0o644},
		{"script", 0o755, 0o755},
		{"owner-only-exec", 0o700, 0o755},
		{"group-exec", 0o654, 0o755},
		{"other-exec", 0o645, 0o755},
	}
	tree := map[string]string{"main.py": "def handler(e, c):\n    return 1\n"}
	for _, tc := range tests {
		tree["bin/"+tc.name] = "#!/bin/sh\necho " + tc.name + "\n"
	}
	dir := writeTree(t, tree)
	for _, tc := range tests {
		if err := os.Chmod(filepath.Join(dir, "bin", tc.name), tc.mode); err != nil {
			t.Fatal(err)
		}
	}
	a, err := zipDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(a.Zip), int64(len(a.Zip)))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]fs.FileMode{}
	for _, f := range zr.File {
		got[f.Name] = f.Mode()
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if m := got["bin/"+tc.name]; m != tc.want {
				t.Errorf("a %v file is zipped %v, want %v", tc.mode, m, tc.want)
			}
		})
	}
	if m := got["main.py"]; m != 0o644 {
		t.Errorf("main.py is zipped %v, want 0644", m)
	}

	// The API reads back exactly the execute bits.
	_, modes, err := source.ReadZipModes(bytes.NewReader(a.Zip), int64(len(a.Zip)), source.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	wantModes := source.Modes{}
	for _, tc := range tests {
		if tc.want != 0o644 {
			wantModes["bin/"+tc.name] = tc.want
		}
	}
	if !maps.Equal(modes, wantModes) {
		t.Errorf("the API reads modes %v, want %v", modes, wantModes)
	}

	// Deterministic: the same directory zips to the same bytes, and a mode
	// change that keeps every file's execute bit keeps the digest.
	again, err := zipDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Zip, a.Zip) {
		t.Fatal("two zips of one directory differ")
	}
	for path, mode := range map[string]os.FileMode{"bin/script": 0o711, "bin/private": 0o640, "main.py": 0o600} {
		if err := os.Chmod(filepath.Join(dir, filepath.FromSlash(path)), mode); err != nil {
			t.Fatal(err)
		}
	}
	same, err := zipDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if same.SHA256 != a.SHA256 {
		t.Errorf("modes with the same execute bits changed the digest: %s, want %s", same.SHA256, a.SHA256)
	}
	// Making a file executable, or no longer, is a change to plan.
	if err := os.Chmod(filepath.Join(dir, "main.py"), 0o755); err != nil {
		t.Fatal(err)
	}
	changed, err := zipDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if changed.SHA256 == a.SHA256 {
		t.Error("making main.py executable kept the digest")
	}
}
