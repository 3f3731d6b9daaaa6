package runtimes_test

import (
	"fmt"
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

// TestServiceExamples serves each app under examples/services in service
// mode, as a SlessService runs it, and walks its routes.
func TestServiceExamples(t *testing.T) {
	requireTools(t, "python3", "node")
	read := func(t *testing.T, dir string) source.Files {
		root := filepath.Join("..", "examples", "services", dir)
		files := source.Files{}
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || filepath.Ext(p) == ".yaml" || filepath.Ext(p) == ".md" {
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
		return files
	}
	t.Run("hello-node", func(t *testing.T) {
		t.Parallel()
		in := prepareService(t, runtimes.NodeJS22, "server.server", read(t, "hello-node")).start(t, runtimes.LocalOptions{})
		c := &client{t: t, base: in.base}
		var got map[string]any
		c.do("GET", "/?name=Ada", nil, nil).status(200).decode(&got)
		if got["message"] != "Hello, Ada!" {
			t.Errorf("GET: %v", got)
		}
		c.do("POST", "/greet", map[string]string{"Content-Type": "application/json"}, []byte(`{"name":"Grace"}`)).status(200).decode(&got)
		if got["message"] != "Hello, Grace!" || got["path"] != "/greet" {
			t.Errorf("POST: %v", got)
		}
		c.do("GET", "/nowhere", nil, nil).status(404)
	})
	t.Run("notes-python", func(t *testing.T) {
		t.Parallel()
		db := filepath.Join(t.TempDir(), "notes.db")
		in := prepareService(t, runtimes.Python312, "app.app", read(t, "notes-python")).start(t, runtimes.LocalOptions{Env: []string{"NOTES_DB=" + db}})
		c := &client{t: t, base: in.base}
		var note struct {
			ID   int
			Text string
		}
		c.do("POST", "/notes", map[string]string{"Content-Type": "application/json"}, []byte(`{"text":"buy milk"}`)).status(201).decode(&note)
		if note.Text != "buy milk" || note.ID == 0 {
			t.Fatalf("created %+v", note)
		}
		c.do("POST", "/notes", nil, []byte(`{}`)).status(400)
		var list struct{ Notes []struct{ ID int } }
		c.do("GET", "/notes", nil, nil).status(200).decode(&list)
		if len(list.Notes) != 1 || list.Notes[0].ID != note.ID {
			t.Errorf("list: %+v", list)
		}
		c.do("GET", fmt.Sprintf("/notes/%d", note.ID), nil, nil).status(200)
		c.do("DELETE", fmt.Sprintf("/notes/%d", note.ID), nil, nil).status(204)
		c.do("GET", fmt.Sprintf("/notes/%d", note.ID), nil, nil).status(404)
	})
}
