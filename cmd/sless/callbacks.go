package main

import (
	"context"
	"fmt"
	"io"

	"github.com/sless-dev/sless/pkg/printers"
)

func init() {
	registerOut("callbacks", "the key the results of asynchronous calls are signed with: callbacks key", runCallbacks)
}

const callbacksSynopsis = `sless callbacks key [-n NAMESPACE] [-o json|yaml]

Prints the key the namespace's callbacks (X-Callback-Url,
spec.async.onSuccess and onFailure) are signed with, made on first use. A
receiver checks each POST's header
  Sless-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(key, t + "." + body)>
with the key's characters as the HMAC key (docs/invoke.md shows how).`

func runCallbacks(ctx context.Context, stdout io.Writer, getenv func(string) string, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		return parseFlags(newFlags("callbacks", callbacksSynopsis), []string{"-h"})
	}
	if args[0] != "key" {
		return fmt.Errorf("sless callbacks %s: unknown; want key", args[0])
	}
	fs := newFlags("callbacks key", callbacksSynopsis)
	var c common
	c.register(fs, true)
	if err := noPositionals(fs, args[1:], ""); err != nil {
		return err
	}
	s, err := c.connect(ctx, getenv)
	if err != nil {
		return err
	}
	key, err := s.api.GetCallbackSigningKey(ctx, s.ns)
	if err != nil {
		return err
	}
	if c.output != "" {
		return printers.Doc(stdout, c.output, key)
	}
	// The key alone, so that KEY=$(sless callbacks key) works.
	fmt.Fprintln(stdout, key.Key)
	return nil
}
