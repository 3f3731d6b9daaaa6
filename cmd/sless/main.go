// Command sless is the one binary of the platform. Each subcommand lives in a
// file of its own and registers itself in init, so the parts stay apart:
//
//	sless controller   the reconcilers (Function, Trigger, FunctionJob)
//	sless api          the REST API and the invoke proxy
//	sless dev          local mode: the whole platform on one machine
//	sless version      print the version
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

type command struct {
	summary string
	run     func(ctx context.Context, args []string) error
}

var commands = map[string]command{}

func register(name, summary string, run func(ctx context.Context, args []string) error) {
	commands[name] = command{summary: summary, run: run}
}

func init() {
	register("version", "print the version", func(context.Context, []string) error {
		fmt.Println(version)
		return nil
	})
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: sless <command> [flags]\n\ncommands:")
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
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage()
		os.Exit(2)
	}
	cmd, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "sless: unknown command %q\n\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := cmd.run(ctx, os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "sless %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
