package frontdoor

import (
	"log/slog"
	"net/http"

	"github.com/sless-dev/sless/pkg/api"
	"github.com/sless-dev/sless/pkg/auth"
	"github.com/sless-dev/sless/pkg/invoke"
)

// ProxyAuthenticator lets the invoke proxy check callers with the same
// verifier the REST API uses, on clusters and in local mode alike. With
// tenants, a non-admin caller whose namespace is no tenant's acts in none:
// the proxy answers it 403, as the REST API does.
func ProxyAuthenticator(v *auth.Verifier, tenants api.TenantNamespaces, log *slog.Logger) invoke.Authenticator {
	return invoke.AuthenticatorFunc(func(r *http.Request) (invoke.Identity, error) {
		id, err := v.Authenticate(r)
		if err != nil {
			return invoke.Identity{}, err
		}
		if tenants != nil && !id.Admin {
			ok, err := tenants.IsTenant(r.Context(), id.Namespace)
			if err != nil {
				// An Authenticator's error is a 401, which would send the
				// caller for a new token; failing closed as a 403 does not.
				log.Warn("check tenant namespace", "namespace", id.Namespace, "subject", id.Subject, "error", err)
			}
			if err != nil || !ok {
				id.Namespace = ""
			}
		}
		return invoke.Identity(*id), nil
	})
}
