// Package postgrestest gives tests and benchmarks a migrated invocation
// store on the test bed's PostgreSQL.
package postgrestest

import (
	"context"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/adapter/postgres"
	"github.com/sless-dev/sless/test/testbed"
)

// New opens a fresh database of the test bed (testbed.DatabaseURL), applies
// the migrations and closes it when the test ends.
func New(t testing.TB) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(testbed.DatabaseURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}
