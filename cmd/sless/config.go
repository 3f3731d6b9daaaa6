package main

import (
	"context"
	"time"

	"github.com/sless-dev/sless/pkg/buildinfo"
	"github.com/sless-dev/sless/pkg/client"
)

// session is a logged-in client and the namespace commands act in.
type session struct {
	api *client.Client
	ns  string
}

// connect logs in as client.Connect does, with the CLI's user agent and
// retries.
func connect(ctx context.Context, getenv func(string) string, ns string) (*session, error) {
	api, ns, err := client.Connect(ctx, getenv, ns, cliOptions()...)
	if err != nil {
		return nil, err
	}
	return &session{api: api, ns: ns}, nil
}

// cliRetry gives up sooner than the Terraform provider's default: a person
// waits at the terminal.
var cliRetry = client.Retry{Budget: 20 * time.Second, Initial: 250 * time.Millisecond, Max: 4 * time.Second, Unreachable: 3 * time.Second}

// cliOptions are the CLI's client options.
func cliOptions() []client.Option {
	return []client.Option{client.WithUserAgent("sless-cli/" + buildinfo.Short(version)), client.WithRetry(cliRetry)}
}
