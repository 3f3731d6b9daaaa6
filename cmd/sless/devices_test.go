package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// Every bad input of `sless device` is refused before any call, with a
// message naming it.
func TestDeviceCLIRefusesBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bogus"}, "sless device bogus: unknown"},
		{[]string{"create"}, "the device's NAME is required"},
		{[]string{"create", "a", "b"}, "one NAME"},
		{[]string{"create", "Thermo"}, "metadata.name"},
		{[]string{"create", "thermo", "--attribute", "room"}, `--attribute "room": want KEY=VALUE`},
		{[]string{"create", "thermo", "--attribute", "=x"}, `--attribute "=x": want KEY=VALUE`},
		{[]string{"create", "thermo", "--attribute", "a b=x"}, "attribute names"},
		{[]string{"create", "thermo", "--attribute", "a=1", "--attribute", "a=2"}, "--attribute a given twice"},
		{[]string{"create", "thermo", "--attribute", "a=" + strings.Repeat("x", 257)}, "at most 256 characters"},
		{[]string{"create", "thermo", "--function", "f", "--trigger", "t"}, "set function or trigger, not both"},
		{[]string{"create", "thermo", "--function", "F"}, "spec.function"},
		{[]string{"list", "extra"}, "unexpected arguments"},
		{[]string{"list", "-o", "xml"}, `-o "xml"`},
		{[]string{"describe"}, "the device's NAME is required"},
		{[]string{"rotate"}, "the device's NAME is required"},
		{[]string{"disable"}, "the device's NAME is required"},
		{[]string{"delete", "a", "b"}, "one NAME"},
		{[]string{"rotate", "thermo", "-o", "json"}, "flag provided but not defined: -o"},
		// Valid input: it gets as far as asking for a login.
		{[]string{"create", "thermo", "--attribute", "room=kitchen"}, "run sless login"},
		{[]string{"disable", "thermo"}, "run sless login"},
	} {
		var out bytes.Buffer
		err := runDevice(context.Background(), &out, noEnv, tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("sless device %q: %v, want %q", tc.args, err, tc.want)
		}
	}
}
