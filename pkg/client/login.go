package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// Login is what `sless login` stores: where the API is and the token
// to call it with, plus the token's tenant namespace.
type Login struct {
	Server    string `json:"server"`
	Token     string `json:"token"`
	Namespace string `json:"namespace,omitempty"`
}

// Environment overrides of the login, for CI.
const (
	EnvConfig    = "SLESS_CONFIG"
	EnvServer    = "SLESS_SERVER"
	EnvToken     = "SLESS_TOKEN"
	EnvNamespace = "SLESS_NAMESPACE"
)

// LoginPath is $SLESS_CONFIG, else sless/config in the user's config dir.
func LoginPath(getenv func(string) string) (string, error) {
	if p := getenv(EnvConfig); p != "" {
		return p, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("no config directory (set $%s to a file path): %w", EnvConfig, err)
	}
	return filepath.Join(dir, "sless", "config"), nil
}

// ReadLogin reads the login stored at path.
func ReadLogin(path string) (*Login, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c Login
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s is not a sless login (run sless login again): %w", path, err)
	}
	return &c, nil
}

// WriteLogin stores c readable by the user alone: it holds a credential.
func WriteLogin(path string, c *Login) error {
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

// ErrNoLogin says how to log in.
var ErrNoLogin = errors.New("not logged in: run sless login --server URL --token-file FILE " +
	"(for sless dev: sless login --dev), or set $" + EnvServer + " and $" + EnvToken)

// Connect makes the client from the environment or the stored login, and
// finds the namespace commands act in: ns if given, the login's, or the
// token's tenant.
func Connect(ctx context.Context, getenv func(string) string, ns string, opts ...Option) (*Client, string, error) {
	server, token := getenv(EnvServer), getenv(EnvToken)
	var stored *Login
	if server == "" || token == "" {
		path, err := LoginPath(getenv)
		if err != nil {
			return nil, "", err
		}
		stored, err = ReadLogin(path)
		if errors.Is(err, os.ErrNotExist) {
			return nil, "", ErrNoLogin
		}
		if err != nil {
			return nil, "", err
		}
		if server == "" {
			server = stored.Server
		}
		if token == "" {
			token = stored.Token
		}
	}
	if server == "" || token == "" {
		return nil, "", ErrNoLogin
	}
	api, err := New(server, token, opts...)
	if err != nil {
		return nil, "", fmt.Errorf("server: %w", err)
	}
	if ns == "" {
		ns = getenv(EnvNamespace)
	}
	// The stored namespace belongs to the stored login; a server or token
	// from the environment asks whoami.
	if ns == "" && stored != nil && stored.Server == server && stored.Token == token {
		ns = stored.Namespace
	}
	if ns == "" {
		id, err := api.Whoami(ctx)
		if err != nil {
			return nil, "", err
		}
		if id.Namespace == "" {
			return nil, "", errors.New("the token names no tenant namespace: pass -n NAMESPACE")
		}
		ns = id.Namespace
	}
	return api, ns, nil
}

// Describe words an error for a person: an API problem is one line of
// its title, detail and field errors, never the raw document.
func Describe(err error) string {
	var e *Error
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
