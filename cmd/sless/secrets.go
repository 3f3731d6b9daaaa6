package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sless-dev/sless/pkg/cliflags"
	"github.com/sless-dev/sless/pkg/printers"
	"github.com/sless-dev/sless/pkg/secrets"
)

func init() {
	registerOut("secret", "keep secrets functions read through secretKeyRef: create, list, describe, rotate, delete", runSecret)
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

// checkSecretKey refuses what cannot be a key of a secret's data.
func checkSecretKey(key string) error {
	if errs := secrets.ValidateData(map[string][]byte{key: nil}, field.NewPath("key")); len(errs) > 0 {
		return errors.New(errs[0].Detail)
	}
	return nil
}

func runSecretWrite(ctx context.Context, stdout io.Writer, getenv func(string) string, sub string, args []string) error {
	fs := newFlags("secret "+sub, secretSynopsis)
	var c common
	c.register(fs, false)
	vals := &cliflags.Values{CheckKey: checkSecretKey}
	fs.Var(vals.Literal("from-literal"), "from-literal", "KEY=VALUE: a value given on the command line (shells keep history: prefer --from-file)")
	fs.Var(vals.File("from-file"), "from-file", "KEY=PATH: a value read from a file, as its bytes")
	var keep *bool
	var ifVersion *string
	var removeKeys stringList
	if sub == "rotate" {
		keep = fs.Bool("keep", false, "set only the keys given (and remove --remove ones); keep the others")
		fs.Var(&removeKeys, "remove", "KEY to remove (with --keep)")
		ifVersion = fs.String("if-version", "", "rotate only if the secret's version is still this (from describe)")
	}
	name, err := onePositionalOf(fs, args, "secret")
	if vals.Err != nil {
		return vals.Err
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
	if len(vals.Data) == 0 && len(removeKeys) == 0 {
		return errors.New("no values: give --from-literal KEY=VALUE or --from-file KEY=PATH")
	}
	s, err := c.connect(ctx, getenv)
	if err != nil {
		return err
	}
	var info *secrets.Info
	switch {
	case sub == "create":
		info, err = s.api.CreateSecret(ctx, s.ns, name, vals.Data)
	case keepOthers:
		info, err = s.api.PatchSecret(ctx, s.ns, name, vals.Data, removeKeys, *ifVersion)
	default:
		info, err = s.api.RotateSecret(ctx, s.ns, name, vals.Data, *ifVersion)
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
