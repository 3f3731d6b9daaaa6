// Package cliflags is the flag handling of sless's subcommands: flag sets
// whose errors come back to the caller and whose -h prints a synopsis,
// flags among positionals (as kubectl takes them), defaults from the
// environment, repeatable flags and byte sizes.
package cliflags

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
)

// New makes a command's flag set. Parse errors come back to the caller,
// which prints them once; -h and --help print synopsis and flags to
// HelpOut (see Parse).
func New(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	synopses.Store(fs, synopsis)
	return fs
}

// synopses holds each flag set's help text.
var synopses sync.Map // *flag.FlagSet -> string

// HelpOut is where -h writes.
var HelpOut io.Writer = os.Stdout

// Parse parses args; on -h or --help it prints the help and returns
// flag.ErrHelp, which a command's caller turns into exit status 0.
func Parse(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		printHelp(HelpOut, fs)
	}
	return err
}

// ParseInterleaved parses flags given before, between or after positional
// arguments (`sless describe hello -o json`), and returns the positionals.
func ParseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := Parse(fs, args); err != nil {
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

// NoPositionals parses args of a command that takes no NAME; hint, if
// any, says which one does.
func NoPositionals(fs *flag.FlagSet, args []string, hint string) error {
	pos, err := ParseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return nil
	}
	if hint != "" {
		return fmt.Errorf("unexpected arguments %q (%s)", pos, hint)
	}
	return fmt.Errorf("unexpected arguments %q", pos)
}

// OnePositional parses args and wants exactly one NAME, of a what.
func OnePositional(fs *flag.FlagSet, args []string, what string) (string, error) {
	pos, err := ParseInterleaved(fs, args)
	if err != nil {
		return "", err
	}
	switch len(pos) {
	case 0:
		return "", fmt.Errorf("the %s's NAME is required", what)
	case 1:
		return pos[0], nil
	}
	return "", fmt.Errorf("one NAME, got %q", pos)
}

// IsSet says whether the command line gave the flag name.
func IsSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
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

// StringList is a repeatable flag.
type StringList []string

func (s *StringList) String() string     { return strings.Join(*s, ", ") }
func (s *StringList) Set(v string) error { *s = append(*s, v); return nil }
