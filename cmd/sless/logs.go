package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/sless-dev/sless/pkg/client"
)

func init() {
	registerOut("logs", "print a function's or service's output, or a build's; -f follows it", runLogs)
}

const logsSynopsis = `sless logs NAME [-n NAMESPACE] [--service] [-f] [--since 10m|RFC3339] [--tail N] [--invocation ID] [--build latest|BUILD] [--timestamps]

Print the function's output (what its handler printed and the runtime's
lines, docs/runtimes.md), oldest first. NAME is a function's, or a
service's (SlessService) when no function has that name or --service
is given. --build prints a build's output
instead: latest is the build of the current source, BUILD a name from
status.buildRef (sless describe). -f keeps printing new lines until Ctrl-C
(for a build: until it ends).`

func runLogs(ctx context.Context, stdout io.Writer, getenv func(string) string, args []string) error {
	fs := newFlags("logs", logsSynopsis)
	var c common
	c.register(fs, false)
	var q client.LogQuery
	fs.BoolVar(&q.Follow, "f", false, "keep printing new lines until interrupted")
	fs.BoolVar(&q.Follow, "follow", false, "keep printing new lines until interrupted")
	fs.StringVar(&q.Since, "since", "", "only lines written since: a duration back from now (10m, 1h) or an RFC 3339 time")
	tail := fs.Int("tail", -1, "only the last N lines (-1: all)")
	fs.StringVar(&q.Invocation, "invocation", "", "only the lines of one call: its request id (X-Request-Id, sless history)")
	fs.StringVar(&q.Build, "build", "", "a build's output instead: latest, or a build's name")
	fs.BoolVar(&q.Timestamps, "timestamps", false, "start each line with the time it was written")
	fs.BoolVar(&q.Service, "service", false, "NAME is a service's (SlessService), not a function's")
	name, err := onePositional(fs, args)
	if err != nil {
		return err
	}
	if *tail < -1 {
		return fmt.Errorf("--tail must be -1 (all) or more, got %d", *tail)
	}
	if *tail >= 0 {
		q.Tail = tail
	}
	if q.Build != "" && q.Invocation != "" {
		return errors.New("--invocation selects a call's lines, and a build has none: give one of --build and --invocation")
	}
	s, err := c.connect(ctx, getenv)
	if err != nil {
		return err
	}
	rc, err := s.api.WorkloadLogs(ctx, s.ns, name, q)
	if err != nil {
		return err
	}
	defer rc.Close()
	// The body is copied as it comes: following, each line shows when the
	// server sends it.
	if _, err := io.Copy(stdout, rc); err != nil && ctx.Err() == nil {
		return fmt.Errorf("reading the log of %s/%s: %w", s.ns, name, err)
	}
	return nil
}
