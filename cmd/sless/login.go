package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sless-dev/sless/pkg/client"
	"github.com/sless-dev/sless/pkg/local"
)

func init() {
	registerOut("login", "check a server URL and token and store them for the other commands", runLogin)
}

const loginSynopsis = `sless login --server URL (--token T | --token-file F)
       sless login --dev [--data-dir .data] [--server http://127.0.0.1:8080]

Check the token against the server (GET /v1/whoami) and store server, token
and the token's namespace in $SLESS_CONFIG or <user config dir>/sless/config
(mode 0600). $SLESS_SERVER and $SLESS_TOKEN override the stored login.`

type loginOptions struct {
	server, token string
}

func parseLogin(args []string, getenv func(string) string) (loginOptions, error) {
	fs := newFlags("login", loginSynopsis)
	server := fs.String("server", "", "the sless API's URL, e.g. https://sless.example.com")
	token := fs.String("token", "", "the bearer token (visible in the process list: prefer --token-file)")
	tokenFile := fs.String("token-file", "", "file holding the bearer token")
	dev := fs.Bool("dev", false, "log in to a local sless dev: its token from <data-dir>/dev-token, server http://$SLESS_ADDR or http://127.0.0.1:8080")
	dataDir := fs.String("data-dir", "", "sless dev's data directory, with --dev (default $SLESS_DATA_DIR or .data)")
	if err := parseFlags(fs, args); err != nil {
		return loginOptions{}, err
	}
	if fs.NArg() > 0 {
		return loginOptions{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *dataDir != "" && !*dev {
		return loginOptions{}, errors.New("--data-dir goes with --dev")
	}
	if *dev {
		if *token != "" || *tokenFile != "" {
			return loginOptions{}, errors.New("--dev reads the token from <data-dir>/dev-token: give no --token or --token-file")
		}
		if *server == "" {
			*server = "http://" + cmp.Or(getenv("SLESS_ADDR"), local.DefaultAddr)
		}
		*tokenFile = local.TokenFile(cmp.Or(*dataDir, getenv("SLESS_DATA_DIR"), local.DefaultDataDir))
	}
	if *server == "" {
		return loginOptions{}, errors.New("--server is required (or --dev for a local sless dev)")
	}
	if *token != "" && *tokenFile != "" {
		return loginOptions{}, errors.New("give --token or --token-file, not both")
	}
	t := *token
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			if *dev && errors.Is(err, os.ErrNotExist) {
				return loginOptions{}, fmt.Errorf("no dev token at %s: start sless dev (make run) or pass its --data-dir", *tokenFile)
			}
			return loginOptions{}, fmt.Errorf("--token-file: %w", err)
		}
		t = strings.TrimSpace(string(b))
		if t == "" {
			return loginOptions{}, fmt.Errorf("--token-file %s is empty", *tokenFile)
		}
	}
	if t == "" {
		return loginOptions{}, errors.New("--token or --token-file is required")
	}
	return loginOptions{server: strings.TrimSuffix(*server, "/"), token: t}, nil
}

func runLogin(ctx context.Context, stdout io.Writer, getenv func(string) string, args []string) error {
	o, err := parseLogin(args, getenv)
	if err != nil {
		return err
	}
	api, err := client.New(o.server, o.token, cliOptions()...)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	id, err := api.Whoami(ctx)
	if err != nil {
		return fmt.Errorf("checking the token at %s: %s", o.server, client.Describe(err))
	}
	path, err := client.LoginPath(getenv)
	if err != nil {
		return err
	}
	if err := client.WriteLogin(path, &client.Login{Server: o.server, Token: o.token, Namespace: id.Namespace}); err != nil {
		return err
	}
	who := id.Subject
	if id.Admin {
		who += " (admin)"
	}
	fmt.Fprintf(stdout, "Logged in to %s as %s, namespace %s.\nSaved to %s.\n", o.server, who, id.Namespace, path)
	return nil
}
