package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/sless-dev/sless/pkg/client"
	"github.com/sless-dev/sless/runtimes"
)

func init() {
	register("new", "make a folder with a function ready to deploy", func(_ context.Context, args []string) error {
		return runNew(os.Stdout, args)
	})
}

const newSynopsis = `sless new --lang python|node|go NAME [--dir DIR]

Make DIR (default ./NAME) with a hello-world handler, a sless.yaml naming the
function, its runtime and entrypoint, and a README. Deploy it with
sless deploy DIR.`

// langs are the --lang values, for messages.
const langs = "python, node or go"

func parseNew(args []string) (lang, name, dir string, err error) {
	fs := newFlags("new", newSynopsis)
	l := fs.String("lang", "", "the function's language: "+langs)
	d := fs.String("dir", "", "folder to make (default ./NAME); it must not exist or be empty")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return "", "", "", err
	}
	var errs []error
	if _, ok := runtimes.Starters[*l]; !ok {
		if *l == "" {
			errs = append(errs, errors.New("--lang is required: "+langs))
		} else {
			errs = append(errs, fmt.Errorf("--lang %q: want %s", *l, langs))
		}
	}
	switch {
	case len(pos) == 0:
		errs = append(errs, errors.New("the function's NAME is required"))
	case len(pos) > 1:
		errs = append(errs, fmt.Errorf("one NAME, got %q", pos))
	default:
		if msgs := validation.IsDNS1123Label(pos[0]); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("NAME %q: %s", pos[0], strings.Join(msgs, "; ")))
		}
	}
	if len(errs) > 0 {
		return "", "", "", errors.Join(errs...)
	}
	dir = *d
	if dir == "" {
		dir = pos[0]
	}
	return *l, pos[0], dir, nil
}

func runNew(stdout io.Writer, args []string) error {
	lang, name, dir, err := parseNew(args)
	if err != nil {
		return err
	}
	t, err := client.WriteStarter(dir, lang, name)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Made %s: a %s function %q (entrypoint %s).\nDeploy it with: sless deploy %s\n", dir, t.Runtime, name, t.Entrypoint, dir)
	return nil
}
