package main

import (
	"context"
	"io"

	"github.com/sless-dev/sless/pkg/client"
	"github.com/sless-dev/sless/pkg/printers"
)

func init() {
	registerOut("services", "list the services (SlessServices) of a namespace", runServices)
}

const servicesSynopsis = `sless services [-n NAMESPACE] [-l SELECTOR] [-o json|yaml]

The namespace's SlessServices, long-running web apps (docs/services.md).`

func runServices(ctx context.Context, stdout io.Writer, getenv func(string) string, args []string) error {
	fs := newFlags("services", servicesSynopsis)
	var c common
	c.register(fs, true)
	sel := fs.String("l", "", "label selector, e.g. app=web")
	if err := noPositionals(fs, args, ""); err != nil {
		return err
	}
	s, err := c.connect(ctx, getenv)
	if err != nil {
		return err
	}
	svcs, err := s.api.AllServices(ctx, s.ns, client.LabelSelector(*sel))
	if err != nil {
		return err
	}
	return printers.Services(stdout, c.output, s.ns, svcs)
}
