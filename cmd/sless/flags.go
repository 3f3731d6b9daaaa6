package main

import (
	"flag"

	"github.com/sless-dev/sless/pkg/cliflags"
)

// newFlags makes the flag set of `sless name`; see pkg/cliflags.
func newFlags(name, synopsis string) *flag.FlagSet { return cliflags.New("sless "+name, synopsis) }

// onePositional parses args and wants exactly one NAME, a function's.
func onePositional(fs *flag.FlagSet, args []string) (string, error) {
	return cliflags.OnePositional(fs, args, "function")
}

// The subcommands' flag handling is pkg/cliflags'; short names keep the
// call sites readable.
var (
	parseFlags       = cliflags.Parse
	parseInterleaved = cliflags.ParseInterleaved
	noPositionals    = cliflags.NoPositionals
	onePositionalOf  = cliflags.OnePositional
	isSet            = cliflags.IsSet
	envOr            = cliflags.EnvOr
	bindEnv          = cliflags.BindEnv
	byteSize         = cliflags.ByteSize
)

type stringList = cliflags.StringList
