package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
)

// newFlags makes a subcommand's flag set. Parse errors come back to main,
// which prints them once; -h and --help print synopsis and flags to stdout
// (see parseFlags).
func newFlags(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet("sless "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	synopses.Store(fs, synopsis)
	return fs
}

// synopses holds each flag set's help text.
var synopses sync.Map // *flag.FlagSet -> string

// helpOut is where -h writes.
var helpOut io.Writer = os.Stdout

// parseFlags parses args; on -h or --help it prints the help and returns
// flag.ErrHelp, which main turns into exit status 0.
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		printHelp(helpOut, fs)
	}
	return err
}

// parseInterleaved parses flags given before, between or after positional
// arguments (`sless describe hello -o json`), and returns the positionals.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		// After "--" everything is positional.
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func printHelp(w io.Writer, fs *flag.FlagSet) {
	syn, _ := synopses.Load(fs)
	fmt.Fprintf(w, "usage: %s\n", syn)
	var b strings.Builder
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	if b.Len() > 0 {
		fmt.Fprintf(w, "\nflags:\n%s", b.String())
	}
}

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ", ") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }
