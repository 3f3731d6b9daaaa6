package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// Every bad input of `sless secret` is refused before any call, with a
// message naming it, and no message shows a value.
func TestSecretCLIRefusesBadInput(t *testing.T) {
	const value = "hunter2-do-not-print"
	missing := filepath.Join(t.TempDir(), "missing")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bogus"}, "sless secret bogus: unknown"},
		{[]string{"create"}, "the secret's NAME is required"},
		{[]string{"create", "a", "b", "--from-literal", "k=v"}, "one NAME"},
		{[]string{"create", "Bad_Name", "--from-literal", "k=v"}, `secret name "Bad_Name"`},
		{[]string{"create", "db"}, "no values: give --from-literal KEY=VALUE or --from-file KEY=PATH"},
		{[]string{"create", "db", "--from-literal", value}, `--from-literal "…": want KEY=VALUE`},
		{[]string{"create", "db", "--from-literal", "=" + value}, `--from-literal "=…": want KEY=VALUE`},
		{[]string{"create", "db", "--from-literal", "a/b=" + value}, `--from-literal: key "a/b"`},
		{[]string{"create", "db", "--from-literal", "k=" + value, "--from-literal", "k=" + value}, `key "k" is given twice`},
		{[]string{"create", "db", "--from-file", "k="}, "--from-file k: no PATH after ="},
		{[]string{"create", "db", "--from-file", "k=" + missing}, "--from-file k: open " + missing},
		{[]string{"rotate", "db", "--remove", "k"}, "--remove takes --keep"},
		{[]string{"rotate", "db", "--keep"}, "no values"},
		{[]string{"create", "db", "--keep", "--from-literal", "k=v"}, "flag provided but not defined: -keep"},
		{[]string{"list", "extra"}, "unexpected arguments"},
		{[]string{"list", "-o", "xml"}, `-o "xml"`},
		{[]string{"describe"}, "the secret's NAME is required"},
		{[]string{"delete"}, "the secret's NAME is required"},
		// Valid input: it gets as far as asking for a login.
		{[]string{"create", "db", "--from-literal", "k=" + value}, "run sless login"},
	} {
		var out bytes.Buffer
		err := runSecret(context.Background(), &out, noEnv, tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("sless secret %q: %v, want %q", tc.args, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), value) || strings.Contains(out.String(), value) {
			t.Errorf("sless secret %q shows the value: %v", tc.args, err)
		}
	}
}
