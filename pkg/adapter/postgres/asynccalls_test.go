package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/adapter/postgres"
	"github.com/sless-dev/sless/pkg/adapter/postgres/postgrestest"
	"github.com/sless-dev/sless/pkg/adapter/s3"
	"github.com/sless-dev/sless/pkg/invoke/async"
	"github.com/sless-dev/sless/pkg/invoke/async/asynctest"
	"github.com/sless-dev/sless/test/testbed"
)

func asyncCalls(t *testing.T) (*postgres.Store, *postgres.AsyncCalls) {
	srv := testbed.SharedS3(t)
	blobs, err := s3.New(s3.Config{Endpoint: "http://" + srv.Endpoint, Bucket: srv.Bucket(t), AccessKey: srv.AccessKey,
		SecretKey: srv.SecretKey, PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	pg := postgrestest.New(t)
	return pg, pg.AsyncCalls(blobs)
}

// The table every async.Store passes, on PostgreSQL with S3 for long
// response bodies.
func TestAsyncCallsContract(t *testing.T) {
	pg, st := asyncCalls(t)
	asynctest.StoreContract(t, st)
	var key *string
	var inline []byte
	err := pg.Pool().QueryRow(context.Background(), `SELECT response_body_key, response_body FROM async_calls
WHERE namespace = 'ns' AND function = 'fn' AND request_id = 'a'`).Scan(&key, &inline)
	if err != nil || key == nil || inline != nil {
		t.Fatalf("a response past the inline size is kept in the row (key %v, %d bytes inline): %v", key, len(inline), err)
	}
	if n, err := st.Prune(context.Background(), time.Now(), time.Now()); err != nil || n != 0 {
		// a's result is still to be posted: it stays.
		t.Fatalf("prune: %d %v", n, err)
	}
}

func TestAsyncCallsClaims(t *testing.T) {
	ctx := context.Background()
	_, st := asyncCalls(t)
	now := time.Now()
	for _, id := range []string{"a", "b", "c"} {
		if _, _, err := st.Create(ctx, asynctest.Job("ns", "fn", id, "", now.Add(-time.Minute)), async.IdempotencyWindow); err != nil {
			t.Fatal(err)
		}
	}
	ref := func(id string) async.Ref { return async.Ref{Namespace: "ns", Function: "fn", RequestID: id} }
	a, wait, err := st.Claim(ctx, ref("a"), 1, time.Minute)
	if err != nil || a == nil || a.State != async.StateRunning || string(a.Body) != "body of a" {
		t.Fatalf("claim a: %+v %v %v", a, wait, err)
	}
	for _, c := range []struct {
		name string
		ref  async.Ref
		busy bool
	}{
		{"held by a claim", ref("a"), false},
		{"function at its concurrency", ref("b"), true},
		{"no such call", ref("zz"), false},
	} {
		j, wait, err := st.Claim(ctx, c.ref, 1, time.Minute)
		if err != nil || j != nil || (wait > 0) != c.busy {
			t.Errorf("%s: %+v, wait %v, %v", c.name, j, wait, err)
		}
	}
	// a waits for a retry a minute from now.
	a.State, a.NextAttemptAt = async.StateQueued, time.Now().Add(time.Minute)
	if err := st.Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := st.Release(ctx, ref("a")); err != nil {
		t.Fatal(err)
	}
	if j, wait, err := st.Claim(ctx, ref("a"), 1, time.Minute); j != nil || wait < 50*time.Second || err != nil {
		t.Errorf("a before its retry is due: %+v, wait %v, %v", j, wait, err)
	}
	b, _, err := st.Claim(ctx, ref("b"), 1, time.Minute)
	if err != nil || b == nil {
		t.Fatalf("b once a no longer runs: %v", err)
	}
	b.State, b.FinishedAt = async.StateSucceeded, time.Now()
	if err := st.Update(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := st.Release(ctx, ref("b")); err != nil {
		t.Fatal(err)
	}
	if j, wait, err := st.Claim(ctx, ref("b"), 1, time.Minute); j != nil || wait != 0 || err != nil {
		t.Errorf("b done: %+v, wait %v, %v", j, wait, err)
	}
	if n, oldest, err := st.Pending(ctx); n != 2 || !oldest.Before(now) || err != nil {
		t.Errorf("pending: %d %v %v", n, oldest, err)
	}

	// c is claimed by a replica that dies: its lease runs out, the sweep
	// finds it once, and another replica claims it.
	// A lease long enough that a busy machine reaches the sweep within it
	// (50 ms was not, under make test's load), short enough to wait out.
	lease := time.Second
	claimed := time.Now()
	if j, _, err := st.Claim(ctx, ref("c"), 5, lease); j == nil || err != nil {
		t.Fatalf("claim c: %v", err)
	}
	if refs, _ := st.Due(ctx, time.Now(), 10); len(refs) != 0 && time.Since(claimed) < lease {
		t.Errorf("swept %v while c's lease holds", refs)
	}
	var again *async.Job
	eventually(t, 10*time.Second, "c's lease to run out", func() bool {
		again, _, err = st.Claim(ctx, ref("c"), 5, time.Minute)
		return again != nil || err != nil
	})
	if err != nil || again.State != async.StateRunning {
		t.Fatalf("claim c again: %+v %v", again, err)
	}
	if err := st.Release(ctx, ref("c")); err != nil {
		t.Fatal(err)
	}
	refs, err := st.Due(ctx, time.Now(), 10)
	if err != nil || fmt.Sprint(refs) != fmt.Sprint([]async.Ref{ref("c")}) {
		t.Errorf("swept %v %v, want c", refs, err)
	}
	if refs, _ := st.Due(ctx, time.Now().Add(-time.Second), 10); len(refs) != 0 {
		t.Errorf("swept %v again", refs)
	}

	if err := st.Abandon(ctx, ref("c")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ctx, "ns", "fn", "c"); err == nil {
		t.Error("c kept after Abandon")
	}
}

// Replicas claiming one function's calls at once start no more than its
// concurrency.
func TestAsyncCallsClaimsHoldConcurrencyAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	_, st := asyncCalls(t)
	const calls, limit = 12, 3
	for i := range calls {
		if _, _, err := st.Create(ctx, asynctest.Job("ns", "fn", fmt.Sprint("c", i), "", time.Now()), async.IdempotencyWindow); err != nil {
			t.Fatal(err)
		}
	}
	var got atomic.Int32
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j, _, err := st.Claim(ctx, async.Ref{Namespace: "ns", Function: "fn", RequestID: fmt.Sprint("c", i)}, limit, time.Minute)
			if err != nil {
				t.Error(err)
			}
			if j != nil {
				got.Add(1)
			}
		}()
	}
	wg.Wait()
	if got.Load() != limit {
		t.Errorf("%d calls claimed at once, want %d", got.Load(), limit)
	}
}

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
