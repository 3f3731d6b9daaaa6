package runtimes

// Starter is the starting point of a function in one language: the
// handler `sless new` writes, its runtime and entrypoint.
type Starter struct {
	Runtime, Entrypoint string
	Files               map[string]string
}

// Starters are by the language `sless new --lang` names.
var Starters = map[string]Starter{
	"python": {Runtime: "python3.12", Entrypoint: "main.handler", Files: map[string]string{
		"main.py": `"""A sless function: GET /?name=Ada or POST {"name": "Ada"}."""


def handler(event, context):
    body = event["body"] if isinstance(event["body"], dict) else {}
    name = body.get("name") or event["query"].get("name") or "world"
    return {"message": "Hello, %s!" % name}
`,
		"requirements.txt": "# Dependencies, one a line; sless installs them with pip when it builds.\n",
	}},
	"node": {Runtime: "nodejs22", Entrypoint: "index.handler", Files: map[string]string{
		"index.js": `// A sless function: GET /?name=Ada or POST {"name": "Ada"}.
exports.handler = async (event, context) => {
  const body = event.body && typeof event.body === 'object' ? event.body : {};
  const name = body.name || event.query.name || 'world';
  return { message: ` + "`Hello, ${name}!`" + ` };
};
`,
	}},
	"go": {Runtime: "go1.24", Entrypoint: "function.Handle", Files: map[string]string{
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
