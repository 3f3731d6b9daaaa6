package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/sless-dev/sless/pkg/adapter/postgres"
	"github.com/sless-dev/sless/pkg/api"
	"github.com/sless-dev/sless/pkg/auth"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/spool"
)

// proxyAuthenticator lets the invoke proxy check callers with the same
// verifier the REST API uses, on clusters and in local mode alike. With
// tenants, a non-admin caller whose namespace is no tenant's acts in none:
// the proxy answers it 403, as the REST API does.
func proxyAuthenticator(v *auth.Verifier, tenants api.TenantNamespaces, log *slog.Logger) invoke.Authenticator {
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

// openRecords opens the invocation database at url and migrates it in the
// background once it answers, so sless starts while PostgreSQL is still
// down (records wait in the recorder's queue and spool). With maxAge > 0 it also
// deletes older records hourly: every replica does, and since deletes are
// bounded batches of old rows, concurrent runs only share the work. The
// caller closes the store.
func openRecords(ctx context.Context, url string, maxAge time.Duration, log *slog.Logger) (*postgres.Store, error) {
	pg, err := postgres.Open(url)
	if err != nil {
		return nil, err
	}
	// Retention deletes from the table the migrations make, so it starts
	// after them: on a fresh database it would otherwise warn of a missing
	// table at every first start.
	go func() {
		if err := pg.MigrateWhenUp(ctx, func(err error) { log.Warn("invocation database not ready", "error", err) }); err != nil || maxAge <= 0 {
			return
		}
		pg.RunRetention(ctx, maxAge, time.Hour, 10000, func(n int64, err error) {
			switch {
			case err != nil && ctx.Err() == nil:
				log.Warn("invocation retention", "error", err)
			case err == nil:
				log.Debug("invocation retention", "deleted", n, "maxAge", maxAge)
			}
		})
	}()
	return pg, nil
}

// byteSize reads a size flag: a quantity of bytes (512Ki, 10Mi, 1Gi), 0 when
// zero is allowed (it then turns the bound off), else at least least.
func byteSize(flag, v string, least int64, zeroOK bool) (int64, error) {
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return 0, fmt.Errorf("%s %q: want a size such as 512Ki, 10Mi or 1Gi: %w", flag, v, err)
	}
	n, ok := q.AsInt64()
	if !ok || n < 0 {
		return 0, fmt.Errorf("%s %q: want a whole number of bytes", flag, v)
	}
	if n == 0 && zeroOK {
		return 0, nil
	}
	if n < least {
		return 0, fmt.Errorf("%s %q: want at least %s", flag, v, resource.NewQuantity(least, resource.BinarySI))
	}
	return n, nil
}

// openSpool opens the recorder's disk spool at path (none when path is
// empty), to be closed after the recorder.
func openSpool(path string, maxBytes int64, log *slog.Logger) (*spool.Spool, invoke.Spool, error) {
	if path == "" {
		return nil, nil, nil
	}
	sp, err := spool.Open(path, maxBytes, log)
	if err != nil {
		return nil, nil, fmt.Errorf("invocation spool: %w", err)
	}
	return sp, sp, nil
}
