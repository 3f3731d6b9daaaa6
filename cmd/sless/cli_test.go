package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sless-dev/sless/pkg/client"
	"github.com/sless-dev/sless/pkg/cliflags"
	"github.com/sless-dev/sless/pkg/source"
)

// noEnv is an environment with nothing set.
func noEnv(string) string { return "" }

// Every bad input of the user's commands is refused before any call, with
// a message naming it.
func TestCLIRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	fn := filepath.Join(dir, "fn")
	os.MkdirAll(fn, 0o755)
	os.WriteFile(filepath.Join(fn, source.ManifestFile), []byte("name: ok\nruntime: python3.12\nentrypoint: main.handler\n"), 0o644)
	badManifest := filepath.Join(dir, "badmanifest")
	os.MkdirAll(badManifest, 0o755)
	os.WriteFile(filepath.Join(badManifest, source.ManifestFile), []byte("name: ok\nruntme: python3.12\n"), 0o644)
	noManifest := filepath.Join(dir, "nomanifest")
	os.MkdirAll(noManifest, 0o755)
	aFile := filepath.Join(fn, source.ManifestFile)
	emptyToken := filepath.Join(dir, "empty-token")
	os.WriteFile(emptyToken, []byte("\n"), 0o600)
	ctx := context.Background()
	run := map[string]func(args []string) error{
		"login":     func(a []string) error { _, err := parseLogin(a, noEnv); return err },
		"new":       func(a []string) error { _, _, _, err := parseNew(a); return err },
		"deploy":    func(a []string) error { _, err := parseDeploy(a); return err },
		"invoke":    func(a []string) error { _, err := parseInvokeCall(a, strings.NewReader("")); return err },
		"list":      func(a []string) error { return runList(ctx, &bytes.Buffer{}, noEnv, a) },
		"describe":  func(a []string) error { return runDescribe(ctx, &bytes.Buffer{}, noEnv, a) },
		"history":   func(a []string) error { return runHistory(ctx, &bytes.Buffer{}, noEnv, a) },
		"delete":    func(a []string) error { return runDelete(ctx, &bytes.Buffer{}, noEnv, a) },
		"version":   func(a []string) error { return commands["version"].run(ctx, a) },
		"callbacks": func(a []string) error { return runCallbacks(ctx, &bytes.Buffer{}, noEnv, a) },
		"revisions": func(a []string) error { return runRevisions(ctx, &bytes.Buffer{}, noEnv, a) },
		"rollout":   func(a []string) error { return runRollout(ctx, &bytes.Buffer{}, noEnv, a) },
		"rollback":  func(a []string) error { return runRollback(ctx, &bytes.Buffer{}, noEnv, a) },
	}
	cases := []struct {
		cmd  string
		args []string
		want string
	}{
		{"login", nil, "--server is required"},
		{"login", []string{"--server", "http://x"}, "--token or --token-file is required"},
		{"login", []string{"--server", "http://x", "--token", "a", "--token-file", "b"}, "not both"},
		{"login", []string{"--server", "http://x", "--token-file", filepath.Join(dir, "missing")}, "--token-file: open"},
		{"login", []string{"--server", "http://x", "--token-file", emptyToken}, "is empty"},
		{"login", []string{"--dev", "--data-dir", dir}, "no dev token at " + filepath.Join(dir, "dev-token") + ": start sless dev"},
		{"login", []string{"--dev", "--token", "x"}, "--dev reads the token"},
		{"login", []string{"--data-dir", dir}, "--data-dir goes with --dev"},
		{"login", []string{"--server", "http://x", "--token", "t", "extra"}, "unexpected arguments"},
		{"login", []string{"--bogus"}, "flag provided but not defined: -bogus"},
		{"new", []string{"hello"}, "--lang is required"},
		{"new", []string{"--lang", "cobol", "hello"}, `--lang "cobol": want python, node or go`},
		{"new", []string{"--lang", "python"}, "NAME is required"},
		{"new", []string{"--lang", "python", "a", "b"}, "one NAME"},
		{"new", []string{"--lang", "python", "Hello_World"}, `NAME "Hello_World"`},
		{"deploy", []string{filepath.Join(dir, "missing")}, "DIR: stat"},
		{"deploy", []string{aFile}, "is not a folder"},
		{"deploy", []string{fn, fn}, "one DIR"},
		{"deploy", []string{badManifest}, `unknown field "runtme"`},
		{"deploy", []string{noManifest}, "no function name"},
		{"deploy", []string{noManifest, "--name", "x"}, "no runtime"},
		{"deploy", []string{fn, "--name", "Bad_Name"}, `name "Bad_Name"`},
		{"deploy", []string{fn, "--timeout", "0s"}, "--timeout must be positive"},
		{"callbacks", []string{"rotate"}, "sless callbacks rotate: unknown; want key"},
		{"callbacks", []string{"key", "extra"}, `unexpected arguments ["extra"]`},
		{"callbacks", []string{"key", "-o", "xml"}, `-o "xml": want json or yaml`},
		{"callbacks", []string{"key", "--bogus"}, "flag provided but not defined: -bogus"},
		{"invoke", nil, "NAME is required"},
		{"invoke", []string{"a", "b"}, "one NAME"},
		{"invoke", []string{"f", "-d", "{not json"}, "-d is not valid JSON"},
		{"invoke", []string{"f", "-d", "@" + filepath.Join(dir, "missing.json")}, "-d: open"},
		{"invoke", []string{"f", "-H", "NoColon"}, `-H "NoColon": want 'Key: value'`},
		{"invoke", []string{"f", "-H", "Bad Key: v"}, `want 'Key: value'`},
		{"invoke", []string{"f", "-X", "GET/1"}, "is not an HTTP method"},
		{"invoke", []string{"f", "--path", "x"}, "must start with /"},
		{"invoke", []string{"f", "--wait"}, "--wait follows an asynchronous call"},
		{"invoke", []string{"f", "--idempotency-key", "k"}, "--idempotency-key is for asynchronous calls"},
		{"invoke", []string{"f", "--async", "--idempotency-key", "a b"}, "without spaces"},
		{"invoke", []string{"f", "--async", "--idempotency-key", strings.Repeat("k", 256)}, "at most 255"},
		{"list", []string{"extra"}, "unexpected arguments"},
		{"list", []string{"-o", "xml"}, `-o "xml": want json or yaml`},
		{"list", nil, "not logged in: run sless login"},
		{"describe", nil, "NAME is required"},
		{"describe", []string{"f", "-o", "wide"}, `-o "wide"`},
		{"history", []string{"f", "--limit", "0"}, "--limit must be between 1 and 1000"},
		{"history", []string{"f", "--limit", "5000"}, "--limit must be between 1 and 1000"},
		{"history", []string{"f", "--since", "-1h"}, "--since must not be negative"},
		{"history", []string{"f", "--state", "queued"}, "--state filters asynchronous calls"},
		{"history", []string{"f", "--async", "--status", "5xx"}, "--async lists asynchronous calls"},
		{"history", []string{"f", "--async", "--state", "lost"}, `--state "lost": want queued`},
		{"history", []string{"f", "--since", "yesterday"}, `invalid value "yesterday"`},
		{"delete", []string{"f", "g"}, "one NAME"},
		{"delete", []string{"f", "--timeout", "-1s"}, "--timeout must be positive"},
		{"delete", []string{"f"}, "not logged in"},
		{"version", []string{"now"}, "unexpected arguments"},
		{"revisions", nil, "the function's NAME is required"},
		{"revisions", []string{"--service"}, "the service's NAME is required"},
		{"revisions", []string{"f", "g"}, "one NAME"},
		{"revisions", []string{"f", "-o", "wide"}, `-o "wide"`},
		{"revisions", []string{"f"}, "not logged in"},
		{"rollout", []string{"f"}, "--percent P (0 to 100) or --promote is required"},
		{"rollout", []string{"f", "--percent", "10", "--promote"}, "--percent and --promote: give one"},
		{"rollout", []string{"f", "--percent", "101"}, "--percent 101: want 0 to 100"},
		{"rollout", []string{"f", "--percent", "ten"}, `invalid value "ten"`},
		{"rollout", []string{"f", "--promote", "--timeout", "0s"}, "--timeout must be positive"},
		{"rollout", []string{"--promote"}, "NAME is required"},
		{"rollout", []string{"f", "--promote"}, "not logged in"},
		{"rollback", nil, "NAME is required"},
		{"rollback", []string{"f", "--timeout", "-1s"}, "--timeout must be positive"},
		{"rollback", []string{"f", "--to"}, "flag needs an argument"},
		{"rollback", []string{"f", "--to", "f-00001"}, "not logged in"},
	}
	t.Setenv(client.EnvConfig, filepath.Join(dir, "no-config"))
	for _, c := range cases {
		t.Run(c.cmd+" "+strings.Join(c.args, " "), func(t *testing.T) {
			err := run[c.cmd](c.args)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("sless %s %q: %v, want an error with %q", c.cmd, c.args, err, c.want)
			}
		})
	}
}

// Flags go anywhere among the positionals, as with kubectl.
func TestCLIParsesFlagsAfterNames(t *testing.T) {
	o, err := parseInvokeCall([]string{"hello", "-d", `{"a":1}`, "-X", "put", "-H", "X-A: 1", "-H", "X-A: 2", "--path", "/p?q=1", "-i", "-n", "team"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.name != "hello" || o.ns != "team" || o.call.Method != "PUT" || string(o.call.Body) != `{"a":1}` ||
		strings.Join(o.call.Header.Values("X-A"), ",") != "1,2" || o.call.Path != "/p?q=1" || !o.include {
		t.Fatalf("parsed %+v", o)
	}
	o, err = parseInvokeCall([]string{"-d", "@-", "hello"}, strings.NewReader(`[1]`))
	if err != nil || string(o.call.Body) != "[1]" {
		t.Fatalf("-d @-: %q, %v", o.call.Body, err)
	}
	o, err = parseInvokeCall([]string{"hello", "-H", "Content-Type: text/plain", "-d", "plain words"}, nil)
	if err != nil || string(o.call.Body) != "plain words" {
		t.Fatalf("a text body with its Content-Type: %q, %v", o.call.Body, err)
	}
	pos, err := parseInterleaved(newFlags("t", "t"), []string{"--", "-n"})
	if err != nil || len(pos) != 1 || pos[0] != "-n" {
		t.Fatalf("after --: %q, %v", pos, err)
	}
}

// `sless invoke --url=…` is a cron run of a CronJob an older controller
// wrote; anything else is the user's invoke.
func TestInvokeTellsTheCronRunner(t *testing.T) {
	for args, want := range map[string]bool{
		"--url=http://x/fn/a/b --trigger=cron --timeout=90s": true,
		"-url http://x/fn/a/b":                               true,
		"hello -d {}":                                        false,
		"hello --path /url":                                  false,
		"hello -- --url":                                     false,
	} {
		if got := cronCallArgs(strings.Fields(args)); got != want {
			t.Errorf("cronCallArgs(%q) = %v, want %v", args, got, want)
		}
	}
}

// -h and --help print the command's usage and flags and are no error to
// main (exit 0).
func TestHelpIsNoError(t *testing.T) {
	var out bytes.Buffer
	cliflags.HelpOut = &out
	defer func() { cliflags.HelpOut = os.Stdout }()
	fs := newFlags("list", listSynopsis)
	var c common
	c.register(fs, true)
	err := parseFlags(fs, []string{"--help"})
	if !errors.Is(err, flag.ErrHelp) || !strings.HasPrefix(out.String(), "usage: sless list") || !strings.Contains(out.String(), "-output") {
		t.Fatalf("--help: %v, printed %q", err, out.String())
	}
}
