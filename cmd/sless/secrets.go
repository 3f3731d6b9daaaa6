package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sless-dev/sless/pkg/printers"
	"github.com/sless-dev/sless/pkg/secrets"
)

func init() {
	register("secret", "keep secrets functions read through secretKeyRef: create, list, describe, rotate, delete", func(ctx context.Context, args []string) error {
		return runSecret(ctx, os.Stdout, os.Getenv, args)
	})
}

const secretSynopsis = `sless secret create NAME (--from-literal KEY=VALUE | --from-file KEY=PATH)... [-n NAMESPACE]
sless secret rotate NAME (--from-literal KEY=VALUE | --from-file KEY=PATH)... [--keep] [--remove KEY]... [--if-version V] [-n NAMESPACE]
sless secret list [-n NAMESPACE] [-o json|yaml]
sless secret describe NAME [-n NAMESPACE] [-o json|yaml]
sless secret delete NAME [-n NAMESPACE]

Values are read from the command line or from files and never printed; the
API gives back key names and versions only. rotate replaces every value,
or with --keep sets the keys given (and removes --remove ones) and keeps the
rest. A function refers to a value with env valueFrom.secretKeyRef; a
rotation rolls a new revision of it.`

func runSecret(ctx context.Context, stdout io.Writer, getenv func(string) string, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fs := newFlags("secret", secretSynopsis)
		return parseFlags(fs, []string{"-h"})
	}
	switch sub, rest := args[0], args[1:]; sub {
	case "create", "rotate":
		return runSecretWrite(ctx, stdout, getenv, sub, rest)
	case "list":
		return runSecretList(ctx, stdout, getenv, rest)
	case "describe", "get":
		return runSecretDescribe(ctx, stdout, getenv, rest)
	case "delete":
		return runSecretDelete(ctx, stdout, getenv, rest)
	default:
		return fmt.Errorf("sless secret %s: unknown; want create, list, describe, rotate or delete", sub)
	}
}

// secretValues gathers --from-literal and --from-file, each KEY=..., in the
// order given; a key given twice is refused rather than silently taking
// the last value.
type secretValues struct {
	data  map[string][]byte
	order []string
	err   error
	// readFile reads a --from-file path.
	readFile func(string) ([]byte, error)
}

func (v *secretValues) add(flagName, arg string, value func(rest string) ([]byte, error)) error {
	key, rest, ok := strings.Cut(arg, "=")
	if !ok || key == "" {
		return fmt.Errorf("--%s %q: want KEY=%s", flagName, redactArg(arg), map[bool]string{true: "PATH", false: "VALUE"}[flagName == "from-file"])
	}
	if errs := secrets.ValidateData(map[string][]byte{key: nil}, field.NewPath("key")); len(errs) > 0 {
		return fmt.Errorf("--%s: key %q: %s", flagName, key, errs[0].Detail)
	}
	if _, dup := v.data[key]; dup {
		return fmt.Errorf("--%s: key %q is given twice", flagName, key)
	}
	b, err := value(rest)
	if err != nil {
		return fmt.Errorf("--%s %s: %w", flagName, key, err)
	}
	if v.data == nil {
		v.data = map[string][]byte{}
	}
	v.data[key] = b
	v.order = append(v.order, key)
	return nil
}

// redactArg keeps a KEY=VALUE's key and drops its value from a message.
func redactArg(arg string) string {
	if k, _, ok := strings.Cut(arg, "="); ok {
		return k + "=…"
	}
	if len(arg) > 0 {
		return "…"
	}
	return ""
}

type literalFlag struct{ v *secretValues }

func (f literalFlag) String() string { return "" }

// Set keeps its error for later: the flag package would print the
// argument, value and all, in its own message.
func (f literalFlag) Set(arg string) error {
	f.v.keep(f.v.add("from-literal", arg, func(rest string) ([]byte, error) { return []byte(rest), nil }))
	return nil
}

type fileFlag struct{ v *secretValues }

func (f fileFlag) String() string { return "" }
func (f fileFlag) Set(arg string) error {
	f.v.keep(f.v.add("from-file", arg, func(path string) ([]byte, error) {
		if path == "" {
			return nil, errors.New("no PATH after =")
		}
		return f.v.readFile(path)
	}))
	return nil
}

// keep remembers the first error.
func (v *secretValues) keep(err error) {
	if v.err == nil {
		v.err = err
	}
}

func runSecretWrite(ctx context.Context, stdout io.Writer, getenv func(string) string, sub string, args []string) error {
	fs := newFlags("secret "+sub, secretSynopsis)
	var c common
	c.register(fs, false)
	vals := &secretValues{readFile: os.ReadFile}
	fs.Var(literalFlag{vals}, "from-literal", "KEY=VALUE: a value given on the command line (shells keep history: prefer --from-file)")
	fs.Var(fileFlag{vals}, "from-file", "KEY=PATH: a value read from a file, as its bytes")
	var keep *bool
	var ifVersion *string
	var removeKeys stringList
	if sub == "rotate" {
		keep = fs.Bool("keep", false, "set only the keys given (and remove --remove ones); keep the others")
		fs.Var(&removeKeys, "remove", "KEY to remove (with --keep)")
		ifVersion = fs.String("if-version", "", "rotate only if the secret's version is still this (from describe)")
	}
	name, err := onePositionalOf(fs, args, "secret")
	if vals.err != nil {
		return vals.err
	}
	if err != nil {
		return err
	}
	if msgs := secrets.ValidateName(name); len(msgs) > 0 {
		return fmt.Errorf("secret name %q: %s", name, strings.Join(msgs, "; "))
	}
	keepOthers := keep != nil && *keep
	if len(removeKeys) > 0 && !keepOthers {
		return errors.New("--remove takes --keep: without it, rotate replaces every value anyway")
	}
	if len(vals.data) == 0 && len(removeKeys) == 0 {
		return errors.New("no values: give --from-literal KEY=VALUE or --from-file KEY=PATH")
	}
	s, err := c.connect(ctx, getenv)
	if err != nil {
		return err
	}
	var info *secrets.Info
	switch {
	case sub == "create":
		info, err = s.api.CreateSecret(ctx, s.ns, name, vals.data)
	case keepOthers:
		info, err = s.api.PatchSecret(ctx, s.ns, name, vals.data, removeKeys, *ifVersion)
	default:
		info, err = s.api.RotateSecret(ctx, s.ns, name, vals.data, *ifVersion)
	}
	if err != nil {
		return err
	}
	verb := map[string]string{"create": "created", "rotate": "rotated"}[sub]
	fmt.Fprintf(stdout, "secret %s %s: keys %s, version %s\n", info.Metadata.Name, verb, strings.Join(info.Keys, ", "), info.Metadata.ResourceVersion)
	return nil
}

func runSecretList(ctx context.Context, stdout io.Writer, getenv func(string) string, args []string) error {
	fs := newFlags("secret list", secretSynopsis)
	var c common
	c.register(fs, true)
	if err := noPositionals(fs, args, "sless secret describe NAME shows one secret"); err != nil {
		return err
	}
	s, err := c.connect(ctx, getenv)
	if err != nil {
		return err
	}
	all, err := s.api.AllSecrets(ctx, s.ns)
	if err != nil {
		return err
	}
	return printers.Secrets(stdout, c.output, s.ns, all)
}

func runSecretDescribe(ctx context.Context, stdout io.Writer, getenv func(string) string, args []string) error {
	fs := newFlags("secret describe", secretSynopsis)
	var c common
	c.register(fs, true)
	name, err := onePositionalOf(fs, args, "secret")
	if err != nil {
		return err
	}
	s, err := c.connect(ctx, getenv)
	if err != nil {
		return err
	}
	in, err := s.api.GetSecret(ctx, s.ns, name)
	if err != nil {
		return err
	}
	return printers.Secret(stdout, c.output, in)
}

func runSecretDelete(ctx context.Context, stdout io.Writer, getenv func(string) string, args []string) error {
	fs := newFlags("secret delete", secretSynopsis)
	var c common
	c.register(fs, false)
	name, err := onePositionalOf(fs, args, "secret")
	if err != nil {
		return err
	}
	s, err := c.connect(ctx, getenv)
	if err != nil {
		return err
	}
	if err := s.api.DeleteSecret(ctx, s.ns, name); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "secret %s deleted\n", name)
	return nil
}
