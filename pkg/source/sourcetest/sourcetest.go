// Package sourcetest holds the directory every packer test packs: code
// beside everything sless leaves out, a symbolic link and an executable.
package sourcetest

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// Packed are the paths and modes PackDir keeps of Tree, sorted by path.
var Packed = []struct {
	Path string
	Mode fs.FileMode
}{
	{"data.txt", 0o644}, // 0600 on disk: only the execute bit is kept
	{"docs/keep.md", 0o644},
	{"lib/util.py", 0o644},
	{"main.py", 0o644},
	{"run.sh", 0o755},
	{"util.py", 0o644}, // a link to lib/util.py, packed as its copy
}

// Tree writes the fixture under a new temporary directory and returns it.
// Its main.py is a Python function (entrypoint main.handler).
func Tree(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"main.py":      "from util import greet\n\ndef handler(event, context):\n    return greet()\n",
		"lib/util.py":  "def greet():\n    return 'packed'\n",
		"run.sh":       "#!/bin/sh\necho run\n",
		"data.txt":     "private\n",
		"docs/keep.md": "kept\n",
		// Left out by .slessignore.
		".slessignore":  "# the packer's fixture\nsecrets/\n*.log\ndocs/draft.md\n",
		"secrets/key":   "k",
		"debug.log":     "log",
		"lib/trace.log": "log",
		"docs/draft.md": "draft",
		// Left out always.
		"sless.yaml":                       "name: packed\n",
		".git/HEAD":                        "ref: refs/heads/main\n",
		".hg/store":                        "x",
		".svn/entries":                     "x",
		".terraform/providers":             "x",
		".DS_Store":                        "x",
		"__pycache__/main.cpython-312.pyc": "x",
		"lib/stale.pyc":                    "x",
		".venv/pyvenv.cfg":                 "home = /usr/bin\n",
		"venv/pyvenv.cfg":                  "home = /usr/bin\n",
		"node_modules/left-pad/index.js":   "module.exports = 1\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, mode := range map[string]fs.FileMode{"run.sh": 0o755, "data.txt": 0o600} {
		if err := os.Chmod(filepath.Join(dir, name), mode); err != nil {
			t.Fatal(err)
		}
	}
	// A virtualenv's interpreter links out of the directory: ignored, so
	// not refused.
	links := map[string]string{"util.py": "lib/util.py", ".venv/bin/python": "/usr/bin/python3"}
	for name, target := range links {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
