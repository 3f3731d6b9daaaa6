// Package asynctest checks that an async.Store keeps calls as the Runner
// expects, whatever it keeps them in: the same table for local mode's file
// and for PostgreSQL.
package asynctest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/async"
)

// Job is a queued call of fn with id, Idempotency-Key key, accepted at at.
func Job(ns, fn, id, key string, at time.Time) *async.Job {
	return &async.Job{Submission: invoke.Submission{Namespace: ns, Function: fn, RequestID: id, Method: http.MethodPost,
		Path: "/", RawQuery: "a=1", Header: http.Header{"Content-Type": {"text/plain"}}, Body: []byte("body of " + id),
		IdempotencyKey: key, AcceptedAt: at}, State: async.StateQueued}
}

// StoreContract runs the contract of async.Store against st, which must be
// empty.
func StoreContract(t *testing.T, st async.Store) {
	ctx := context.Background()
	t0 := time.Now().Add(-48 * time.Hour).Truncate(time.Millisecond)
	for _, c := range []struct {
		name     string
		j        *async.Job
		wantID   string
		replayed bool
		err      error
	}{
		{"first", Job("ns", "fn", "a", "k", t0), "a", false, nil},
		{"same key within the window", Job("ns", "fn", "b", "k", t0.Add(time.Hour)), "a", true, nil},
		{"same key, other function", Job("ns", "other", "c", "k", t0.Add(time.Hour)), "c", false, nil},
		{"same key, other namespace", Job("ns2", "fn", "c", "k", t0.Add(time.Hour)), "c", false, nil},
		{"same key past the window", Job("ns", "fn", "d", "k", t0.Add(25*time.Hour)), "d", false, nil},
		{"taken id", Job("ns", "fn", "a", "", t0.Add(26*time.Hour)), "", false, invoke.ErrRequestIDTaken},
		{"no key", Job("ns", "fn", "e", "", t0.Add(27*time.Hour)), "e", false, nil},
	} {
		id, replayed, err := st.Create(ctx, c.j, async.IdempotencyWindow)
		if id != c.wantID || replayed != c.replayed || !errors.Is(err, c.err) {
			t.Errorf("create %s: %q %v %v, want %q %v %v", c.name, id, replayed, err, c.wantID, c.replayed, c.err)
		}
	}
	got, err := st.Get(ctx, "ns", "fn", "d")
	if err != nil || string(got.Body) != "body of d" || got.RawQuery != "a=1" || got.Header.Get("Content-Type") != "text/plain" ||
		got.State != async.StateQueued || !got.AcceptedAt.Equal(t0.Add(25*time.Hour)) {
		t.Fatalf("get d: %+v %v", got, err)
	}
	if _, err := st.Get(ctx, "ns", "fn", "zz"); !errors.Is(err, async.ErrNotFound) {
		t.Fatalf("missing call: %v", err)
	}

	done := Job("ns", "fn", "a", "k", t0)
	done.State, done.Attempts, done.Failures, done.LastError = async.StateSucceeded, 2, 1, ""
	done.StartedAt, done.FinishedAt = t0.Add(time.Minute), t0.Add(2*time.Minute)
	big := strings.Repeat("answer ", 4000)
	done.Response = &async.Response{Status: 201, Header: http.Header{"X-Answer": {"yes"}}, Body: []byte(big), Bytes: int64(len(big)) + 10, Truncated: true}
	done.Callback = &async.Callback{URL: "https://hooks.example/x", State: async.CallbackPending, Attempts: 1, LastError: "503"}
	if err := st.Update(ctx, done); err != nil {
		t.Fatal(err)
	}
	got, err = st.Get(ctx, "ns", "fn", "a")
	if err != nil || got.State != async.StateSucceeded || got.Attempts != 2 || got.Failures != 1 || got.Response == nil ||
		got.Response.Status != 201 || string(got.Response.Body) != big || got.Response.Header.Get("X-Answer") != "yes" ||
		!got.Response.Truncated || got.Response.Bytes != int64(len(big))+10 || got.Callback == nil ||
		got.Callback.State != async.CallbackPending || got.Callback.Attempts != 1 || !got.FinishedAt.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("after update: %+v %v", got, err)
	}

	// Pages: a, d, e of ns/fn, newest first.
	var ids []string
	var after *async.Cursor
	for pages := 0; ; pages++ {
		page, err := st.List(ctx, async.ListQuery{Namespace: "ns", Function: "fn", Limit: 2, After: after})
		if err != nil || pages > 3 {
			t.Fatalf("list: %v after %d pages", err, pages)
		}
		for _, j := range page.Items {
			if j.Body != nil {
				t.Errorf("listed %s with its request body", j.RequestID)
			}
			ids = append(ids, j.RequestID)
		}
		if page.Next == nil {
			break
		}
		// The cursor travels as a token.
		if after, err = async.ParseCursor(page.Next.String()); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(ids) != "[e d a]" {
		t.Errorf("pages listed %v, want [e d a]", ids)
	}
	page, err := st.List(ctx, async.ListQuery{Namespace: "ns", Function: "fn", State: async.StateSucceeded, Limit: 10})
	if err != nil || len(page.Items) != 1 || page.Items[0].RequestID != "a" || page.Next != nil {
		t.Errorf("succeeded: %+v %v", page, err)
	}
}
