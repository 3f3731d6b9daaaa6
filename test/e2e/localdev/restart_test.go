package localdev_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sless-dev/sless/test/testbed"
)

// With --database-url the records go to PostgreSQL; after a restart on the
// same data directory the functions are still there and serve again.
func TestRestartAndPostgresRecords(t *testing.T) {
	dbURL := testbed.DatabaseURL(t)
	data := t.TempDir()
	d := startDevIn(t, data, time.Minute, "--database-url", dbURL)
	body, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"name": "keeper"},
		"spec": map[string]any{"runtime": "python3.12", "entrypoint": "main.handler",
			"source": map[string]any{"inline": map[string]any{"files": map[string]string{
				"main.py": "def handler(event, context):\n    return {'kept': True}\n"}}}},
	})
	if code, b := d.do("POST", "/v1/namespaces/e2e/functions", "application/json", body); code != 201 {
		t.Fatalf("create: %d %s", code, b)
	}
	d.awaitReady("e2e", "keeper", 3*time.Minute)
	for i := 0; i < 3; i++ {
		if code, b := d.do("GET", "/fn/e2e/keeper", "", nil); code != 200 || !strings.Contains(string(b), `"kept": true`) {
			t.Fatalf("invoke: %d %s", code, b)
		}
	}
	// Stopping flushes the recorder: the rows are in PostgreSQL.
	d.stop()
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var rows int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM invocations WHERE namespace = 'e2e' AND function = 'keeper'").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 3 {
		t.Fatalf("%d rows in PostgreSQL, want 3", rows)
	}

	// A new sless dev on the same data directory serves the function again.
	d2 := startDevIn(t, data, time.Minute, "--database-url", dbURL)
	d2.awaitReady("e2e", "keeper", 3*time.Minute)
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, b := d2.do("GET", "/fn/e2e/keeper", "", nil)
		if code == 200 && strings.Contains(string(b), `"kept": true`) {
			break
		}
		// 503 while the restarted server brings the revision back.
		if code != 503 || time.Now().After(deadline) {
			t.Fatalf("invoke after restart: %d %s", code, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	code, b := d2.do("GET", "/v1/namespaces/e2e/functions/keeper/invocations", "", nil)
	var page struct {
		Items []json.RawMessage `json:"items"`
	}
	if code != 200 || json.Unmarshal(b, &page) != nil {
		t.Fatalf("invocations: %d %s", code, b)
	}
	if len(page.Items) < 3 {
		t.Fatalf("invocations after restart: %d, want at least the 3 from before", len(page.Items))
	}
}
