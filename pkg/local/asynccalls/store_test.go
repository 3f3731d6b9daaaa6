package asynccalls_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/async"
	"github.com/sless-dev/sless/pkg/invoke/async/asynctest"
	"github.com/sless-dev/sless/pkg/local/asynccalls"
)

func job(fn, id, key string, at time.Time) *async.Job {
	return &async.Job{Submission: invoke.Submission{Namespace: "team-a", Function: fn, RequestID: id,
		IdempotencyKey: key, AcceptedAt: at, Body: []byte("body of " + id)}, State: async.StateQueued}
}

// The store keeps calls across reopening, answers a key's first call
// within the window only, refuses a taken id, and prunes what ended.
func TestStore(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "async.db")
	st, err := asynccalls.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().Add(-48 * time.Hour)
	for _, c := range []struct {
		name     string
		j        *async.Job
		wantID   string
		replayed bool
		err      error
	}{
		{"first", job("fn", "a", "k", t0), "a", false, nil},
		{"same key within the window", job("fn", "b", "k", t0.Add(time.Hour)), "a", true, nil},
		{"same key, another function", job("other", "c", "k", t0.Add(time.Hour)), "c", false, nil},
		{"same key past the window", job("fn", "d", "k", t0.Add(25*time.Hour)), "d", false, nil},
		{"taken id", job("fn", "a", "", t0.Add(26*time.Hour)), "", false, invoke.ErrRequestIDTaken},
		{"no key", job("fn", "e", "", time.Now()), "e", false, nil},
	} {
		id, replayed, err := st.Create(ctx, c.j, async.IdempotencyWindow)
		if id != c.wantID || replayed != c.replayed || !errors.Is(err, c.err) {
			t.Errorf("%s: %q %v %v, want %q %v %v", c.name, id, replayed, err, c.wantID, c.replayed, c.err)
		}
	}
	done := job("fn", "a", "k", t0)
	done.State, done.FinishedAt = async.StateSucceeded, t0.Add(time.Minute)
	if err := st.Update(ctx, done); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err = asynccalls.Open(path); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got, err := st.Get(ctx, "team-a", "fn", "d")
	if err != nil || string(got.Body) != "body of d" {
		t.Fatalf("after reopening: %+v %v", got, err)
	}
	if _, err := st.Get(ctx, "team-a", "fn", "zz"); !errors.Is(err, async.ErrNotFound) {
		t.Fatalf("missing call: %v", err)
	}
	page, _ := st.List(ctx, async.ListQuery{Namespace: "team-a", Function: "fn", Limit: 10})
	list := page.Items
	if len(list) != 3 || list[0].RequestID != "e" || list[2].RequestID != "a" {
		t.Fatalf("list: %+v", list)
	}
	if page, _ := st.List(ctx, async.ListQuery{Namespace: "team-a", Function: "fn", State: async.StateSucceeded, Limit: 10}); len(page.Items) != 1 {
		t.Fatalf("succeeded: %+v", list)
	}
	if un, _ := st.Unfinished(ctx); len(un) != 3 {
		t.Fatalf("unfinished: %d", len(un))
	}
	n, err := st.Prune(ctx, time.Now().Add(-time.Hour), time.Now().Add(-async.IdempotencyWindow))
	if err != nil || n != 1 {
		t.Fatalf("pruned %d: %v", n, err)
	}
	if _, err := st.Get(ctx, "team-a", "fn", "a"); !errors.Is(err, async.ErrNotFound) {
		t.Fatalf("the old finished call is still kept: %v", err)
	}
	// The expired keys went: "k" names a new call now.
	if id, replayed, _ := st.Create(ctx, job("other", "f", "k", time.Now()), async.IdempotencyWindow); id != "f" || replayed {
		t.Fatalf("expired key: %q %v", id, replayed)
	}
}

func TestStoreContract(t *testing.T) {
	st, err := asynccalls.Open(filepath.Join(t.TempDir(), "async.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	asynctest.StoreContract(t, st)
}
