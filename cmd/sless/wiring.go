package main

import (
	"net/http"

	"github.com/sless-dev/sless/pkg/auth"
	"github.com/sless-dev/sless/pkg/invoke"
)

// proxyAuthenticator lets the invoke proxy check callers with the same
// verifier the REST API uses, on clusters and in local mode alike.
func proxyAuthenticator(v *auth.Verifier) invoke.Authenticator {
	return invoke.AuthenticatorFunc(func(r *http.Request) (invoke.Identity, error) {
		id, err := v.Authenticate(r)
		if err != nil {
			return invoke.Identity{}, err
		}
		return invoke.Identity(*id), nil
	})
}
