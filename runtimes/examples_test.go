package runtimes_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/sless-dev/sless/pkg/source"
	"github.com/sless-dev/sless/runtimes"
)

// TestExamples serves each function under examples/functions as local mode
// would and checks its greeting, so the examples stay true to the contract.
func TestExamples(t *testing.T) {
	requireTools(t, "python3", "node", "go")
	for _, ex := range []struct{ dir, runtime, entrypoint string }{
		{"hello-python", runtimes.Python312, "main.handler"},
		{"hello-node", runtimes.NodeJS22, "index.handler"},
		{"hello-go", runtimes.Go124, "hello.Handle"},
	} {
		t.Run(ex.dir, func(t *testing.T) {
			t.Parallel()
			root := filepath.Join("..", "examples", "functions", ex.dir)
			files := source.Files{}
			err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() || filepath.Ext(p) == ".yaml" {
					return err
				}
				rel, _ := filepath.Rel(root, p)
				b, err := os.ReadFile(p)
				files[filepath.ToSlash(rel)] = b
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			in := prepare(t, ex.runtime, ex.entrypoint, files).start(t, runtimes.LocalOptions{})
			c := &client{t: t, base: in.base}
			r := c.do("GET", "/?name=Ada", nil, nil).status(200)
			var got map[string]any
			r.decode(&got)
			if got["message"] != "Hello, Ada!" {
				t.Errorf("GET: %s", r.body)
			}
			r = c.do("POST", "/", map[string]string{"Content-Type": "application/json"}, []byte(`{"name":"Grace"}`)).status(200)
			r.decode(&got)
			if got["message"] != "Hello, Grace!" {
				t.Errorf("POST: %s", r.body)
			}
		})
	}
}
