package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

func init() {
	register("new", "make a folder with a function ready to deploy", func(_ context.Context, args []string) error {
		return runNew(os.Stdout, args)
	})
}

const newSynopsis = `sless new --lang python|node|go NAME [--dir DIR]

Make DIR (default ./NAME) with a hello-world handler, a sless.yaml naming the
function, its runtime and entrypoint, and a README. Deploy it with
sless deploy DIR.`

// template is the starting point of a function in one language.
type template struct {
	runtime, entrypoint string
	files               map[string]string
}

var templates = map[string]template{
	"python": {runtime: "python3.12", entrypoint: "main.handler", files: map[string]string{
		"main.py": `"""A sless function: GET /?name=Ada or POST {"name": "Ada"}."""


def handler(event, context):
    body = event["body"] if isinstance(event["body"], dict) else {}
    name = body.get("name") or event["query"].get("name") or "world"
    return {"message": "Hello, %s!" % name}
`,
		"requirements.txt": "# Dependencies, one a line; sless installs them with pip when it builds.\n",
	}},
	"node": {runtime: "nodejs22", entrypoint: "index.handler", files: map[string]string{
		"index.js": `// A sless function: GET /?name=Ada or POST {"name": "Ada"}.
exports.handler = async (event, context) => {
  const body = event.body && typeof event.body === 'object' ? event.body : {};
  const name = body.name || event.query.name || 'world';
  return { message: ` + "`Hello, ${name}!`" + ` };
};
`,
	}},
	"go": {runtime: "go1.24", entrypoint: "function.Handle", files: map[string]string{
		"handler.go": `// Package function is a sless function: GET /?name=Ada or POST {"name": "Ada"}.
package function

import (
	"context"
	"fmt"
)

// Event is the part of the sless event this function reads.
type Event struct {
	Query map[string]string ` + "`json:\"query\"`" + `
	Body  struct {
		Name string ` + "`json:\"name\"`" + `
	} ` + "`json:\"body\"`" + `
}

// Handle greets by name.
func Handle(ctx context.Context, ev Event) (map[string]string, error) {
	name := ev.Body.Name
	if name == "" {
		name = ev.Query["name"]
	}
	if name == "" {
		name = "world"
	}
	return map[string]string{"message": fmt.Sprintf("Hello, %s!", name)}, nil
}
`,
	}},
}

// langs are the --lang values, for messages.
const langs = "python, node or go"

func parseNew(args []string) (lang, name, dir string, err error) {
	fs := newFlags("new", newSynopsis)
	l := fs.String("lang", "", "the function's language: "+langs)
	d := fs.String("dir", "", "folder to make (default ./NAME); it must not exist or be empty")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return "", "", "", err
	}
	var errs []error
	if _, ok := templates[*l]; !ok {
		if *l == "" {
			errs = append(errs, errors.New("--lang is required: "+langs))
		} else {
			errs = append(errs, fmt.Errorf("--lang %q: want %s", *l, langs))
		}
	}
	switch {
	case len(pos) == 0:
		errs = append(errs, errors.New("the function's NAME is required"))
	case len(pos) > 1:
		errs = append(errs, fmt.Errorf("one NAME, got %q", pos))
	default:
		if msgs := validation.IsDNS1123Label(pos[0]); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("NAME %q: %s", pos[0], strings.Join(msgs, "; ")))
		}
	}
	if len(errs) > 0 {
		return "", "", "", errors.Join(errs...)
	}
	dir = *d
	if dir == "" {
		dir = pos[0]
	}
	return *l, pos[0], dir, nil
}

func runNew(stdout io.Writer, args []string) error {
	lang, name, dir, err := parseNew(args)
	if err != nil {
		return err
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("%s exists and is not empty: pick another NAME or --dir", dir)
	}
	t := templates[lang]
	files := map[string]string{
		manifestName: fmt.Sprintf("# sless deploy reads this file; sless.yaml and .slessignore are not uploaded.\nname: %s\nruntime: %s\nentrypoint: %s\n# memoryMB: 128\n# timeoutSeconds: 30\n# env:\n#   GREETING: hello\n# secretEnv:                 # NAME: SECRET/KEY, made with sless secret create\n#   DB_PASSWORD: db/password\n",
			name, t.runtime, t.entrypoint),
		"README.md": fmt.Sprintf("# %s\n\nA sless function (%s, entrypoint `%s`).\n\nDeploy it: `sless deploy %s`, then call it: `sless invoke %s -d '{\"name\": \"Ada\"}'`.\n",
			name, t.runtime, t.entrypoint, dir, name),
		ignoreFile: "# Paths sless deploy leaves out of the upload, one pattern a line (as .gitignore, without negation).\n",
	}
	for f, body := range t.files {
		files[f] = body
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for f, body := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(body), 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "Made %s: a %s function %q (entrypoint %s).\nDeploy it with: sless deploy %s\n", dir, t.runtime, name, t.entrypoint, dir)
	return nil
}
