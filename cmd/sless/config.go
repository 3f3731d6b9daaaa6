package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sless-dev/sless/pkg/client"
)

// loginConfig is what `sless login` stores: where the API is and the token
// to call it with, plus the token's tenant namespace.
type loginConfig struct {
	Server    string `json:"server"`
	Token     string `json:"token"`
	Namespace string `json:"namespace,omitempty"`
}

// Environment overrides of the login, for CI.
const (
	envConfig    = "SLESS_CONFIG"
	envServer    = "SLESS_SERVER"
	envToken     = "SLESS_TOKEN"
	envNamespace = "SLESS_NAMESPACE"
)

// configPath is $SLESS_CONFIG, else sless/config in the user's config dir.
func configPath(getenv func(string) string) (string, error) {
	if p := getenv(envConfig); p != "" {
		return p, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("no config directory (set $%s to a file path): %w", envConfig, err)
	}
	return filepath.Join(dir, "sless", "config"), nil
}

func readConfig(path string) (*loginConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c loginConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s is not a sless login (run sless login again): %w", path, err)
	}
	return &c, nil
}

// writeConfig stores c readable by the user alone: it holds a credential.
func writeConfig(path string, c *loginConfig) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("config directory: %w", err)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	// Written beside and renamed, so a crash never leaves half a login, and
	// created 0600 so the token is never readable by others, even briefly.
	tmp, err := os.CreateTemp(filepath.Dir(path), ".config-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// errNoLogin says how to log in.
var errNoLogin = errors.New("not logged in: run sless login --server URL --token-file FILE " +
	"(for sless dev: sless login --dev), or set $" + envServer + " and $" + envToken)

// session is a logged-in client and the namespace commands act in.
type session struct {
	api *client.Client
	ns  string
}

// connect makes the client from the environment or the stored login, and
// finds the namespace: ns if given, the login's, or the token's tenant.
func connect(ctx context.Context, getenv func(string) string, ns string) (*session, error) {
	server, token := getenv(envServer), getenv(envToken)
	var stored *loginConfig
	if server == "" || token == "" {
		path, err := configPath(getenv)
		if err != nil {
			return nil, err
		}
		stored, err = readConfig(path)
		if errors.Is(err, os.ErrNotExist) {
			return nil, errNoLogin
		}
		if err != nil {
			return nil, err
		}
		if server == "" {
			server = stored.Server
		}
		if token == "" {
			token = stored.Token
		}
	}
	if server == "" || token == "" {
		return nil, errNoLogin
	}
	api, err := newAPIClient(server, token)
	if err != nil {
		return nil, err
	}
	if ns == "" {
		ns = getenv(envNamespace)
	}
	// The stored namespace belongs to the stored login; a server or token
	// from the environment asks whoami.
	if ns == "" && stored != nil && stored.Server == server && stored.Token == token {
		ns = stored.Namespace
	}
	if ns == "" {
		id, err := api.Whoami(ctx)
		if err != nil {
			return nil, err
		}
		if id.Namespace == "" {
			return nil, errors.New("the token names no tenant namespace: pass -n NAMESPACE")
		}
		ns = id.Namespace
	}
	return &session{api: api, ns: ns}, nil
}

// cliRetry gives up sooner than the Terraform provider's default: a person
// waits at the terminal.
var cliRetry = client.Retry{Budget: 20 * time.Second, Initial: 250 * time.Millisecond, Max: 4 * time.Second, Unreachable: 3 * time.Second}

func newAPIClient(server, token string) (*client.Client, error) {
	c, err := client.New(server, token, client.WithUserAgent("sless-cli/"+versionShort()), client.WithRetry(cliRetry))
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	return c, nil
}

func versionShort() string {
	if version != "" {
		return version
	}
	return "devel"
}

// describeErr words an error for a person: an API problem is one line of
// its title, detail and field errors, never the raw document.
func describeErr(err error) string {
	var e *client.Error
	if !errors.As(err, &e) {
		return err.Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s", e.Status, http.StatusText(e.Status))
	if e.Title != "" && !strings.EqualFold(e.Title, http.StatusText(e.Status)) {
		fmt.Fprintf(&b, ": %s", e.Title)
	}
	if e.Detail != "" && e.Detail != e.Title {
		fmt.Fprintf(&b, ": %s", e.Detail)
	}
	for _, f := range e.Fields {
		// Problems often repeat their one field error in the detail.
		if !strings.Contains(e.Detail, f.Detail) {
			fmt.Fprintf(&b, "; %s: %s", f.Field, f.Detail)
		}
	}
	if e.Status == http.StatusUnauthorized {
		b.WriteString(" (log in again: sless login)")
	}
	return b.String()
}
