// Command sless is the one binary of the platform. Each subcommand lives in a
// file of its own and registers itself in init, so the parts stay apart:
//
//	sless controller   the reconcilers (Function, Trigger, FunctionJob)
//	sless api          the REST API and the invoke proxy
//	sless dev          local mode: the whole platform on one machine
//	sless version      print the version
//
// and the user's commands (login, new, deploy, list, describe, invoke,
// history, delete; docs/cli.md).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"github.com/sless-dev/sless/pkg/buildinfo"
	"github.com/sless-dev/sless/pkg/client"
)

// version and commit are stamped by `make build` with -ldflags
// "-X main.version=... -X main.commit=..."; build info fills them otherwise.
var (
	version = ""
	commit  = ""
)

type command struct {
	summary string
	run     func(ctx context.Context, args []string) error
}

var commands = map[string]command{}

func register(name, summary string, run func(ctx context.Context, args []string) error) {
	commands[name] = command{summary: summary, run: run}
}

// registerOut registers a command that prints to stdout and reads its
// defaults from the environment (tests pass their own of both).
func registerOut(name, summary string, run func(context.Context, io.Writer, func(string) string, []string) error) {
	register(name, summary, func(ctx context.Context, args []string) error { return run(ctx, os.Stdout, os.Getenv, args) })
}

func init() {
	register("version", "print the version and the commit it was built from", func(_ context.Context, args []string) error {
		fs := newFlags("version", "sless version")
		if err := parseFlags(fs, args); err != nil {
			return err
		}
		if fs.NArg() > 0 {
			return fmt.Errorf("unexpected arguments %q", fs.Args())
		}
		fmt.Println(buildinfo.String("sless", version, commit))
		return nil
	})
}

// errSilent fails a command whose message is printed already.
var errSilent = errors.New("failed")

func usage() {
	fmt.Fprintln(os.Stderr, "usage: sless <command> [flags]   (sless <command> -h for its help)\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-12s %s\n", n, commands[n].summary)
	}
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	if a := os.Args[1]; a == "-h" || a == "--help" || a == "help" {
		if len(os.Args) > 2 && a == "help" {
			// `sless help deploy` is `sless deploy -h`.
			os.Args = []string{os.Args[0], os.Args[2], "-h"}
		} else {
			usage()
			os.Exit(0)
		}
	}
	cmd, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "sless: unknown command %q\n\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := cmd.run(ctx, os.Args[2:])
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errSilent):
		os.Exit(1)
	default:
		fmt.Fprintf(os.Stderr, "sless %s: %s\n", os.Args[1], client.Describe(err))
		os.Exit(1)
	}
}
