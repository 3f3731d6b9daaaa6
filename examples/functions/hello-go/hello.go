// Package hello is a sless function (entrypoint "hello.Handle"):
// GET /?name=Ada or POST {"name": "Ada"}.
package hello

import (
	"context"
	"fmt"
)

// Event is the part of the sless event this function reads: any type the
// event's JSON decodes into will do, so the function needs no import.
type Event struct {
	Query map[string]string `json:"query"`
	Body  struct {
		Name string `json:"name"`
	} `json:"body"`
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
