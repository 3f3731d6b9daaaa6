package postgres_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/adapter/postgres"
	"github.com/sless-dev/sless/test/testbed"
)

// TestRetentionAfterMigrations opens the invocation store on a fresh
// database: retention's first pass runs once the table exists, so the
// first start logs no warning.
func TestRetentionAfterMigrations(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs testbed.SyncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	pg, err := postgres.Start(ctx, testbed.DatabaseURL(t), time.Hour, log)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(logs.String(), `msg="invocation retention" deleted=0`); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no retention pass within 30 s:\n%s", logs.String())
		}
	}
	if strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("a fresh database's first start warned:\n%s", logs.String())
	}
}
