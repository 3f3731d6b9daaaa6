package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/async"
)

// InlineResponseBytes is how much of a function's answer an asynchronous
// call's row holds; a longer body goes to the blob store.
const InlineResponseBytes = 8 << 10

// busyWait is when a call whose function runs as many calls as it may is
// offered again.
const busyWait = time.Second

// Blobs keeps the response bodies past InlineResponseBytes (S3).
type Blobs interface {
	Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error
	Get(ctx context.Context, key string) (io.ReadCloser, int64, error)
	Delete(ctx context.Context, keys []string) ([]string, error)
}

// AsyncCalls keeps the asynchronous calls of sless api's replicas in the
// async_calls table: an async.Store with the Claims replicas share.
type AsyncCalls struct {
	pool  *pgxpool.Pool
	blobs Blobs
}

var (
	_ async.Store  = (*AsyncCalls)(nil)
	_ async.Claims = (*AsyncCalls)(nil)
)

// AsyncCalls is the store of asynchronous calls in s's database; blobs,
// when not nil, takes long response bodies (else they stay in the row).
func (s *Store) AsyncCalls(blobs Blobs) *AsyncCalls { return &AsyncCalls{pool: s.pool, blobs: blobs} }

// callColumns are read by every query that returns a call, in scanCall's
// order; the request body is left out of listings.
const callColumns = `namespace, function, request_id, state, attempts, failures, accepted_at, started_at, finished_at,
	next_attempt_at, last_error, idempotency_key, request, response_status, response_headers, response_body,
	response_body_key, response_bytes, response_truncated, callback`

// Create keeps j, queued, unless its Idempotency-Key names a call of the
// same function accepted within window: the key's row is taken, or taken
// over once older than window, in the call's transaction.
func (a *AsyncCalls) Create(ctx context.Context, j *async.Job, window time.Duration) (string, bool, error) {
	req, err := requestJSON(&j.Submission)
	if err != nil {
		return "", false, err
	}
	tx, err := a.pool.Begin(ctx)
	if err != nil {
		return "", false, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if j.IdempotencyKey != "" {
		var id string
		err := tx.QueryRow(ctx, `INSERT INTO async_idempotency_keys (namespace, function, key, request_id, taken_at)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (namespace, function, key) DO UPDATE SET request_id = EXCLUDED.request_id, taken_at = EXCLUDED.taken_at
	WHERE async_idempotency_keys.taken_at <= $6
RETURNING request_id`, j.Namespace, j.Function, j.IdempotencyKey, j.RequestID, j.AcceptedAt, j.AcceptedAt.Add(-window)).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			// Taken within the window (by a transaction that committed
			// first, when two raced): the first call answers.
			err = tx.QueryRow(ctx, `SELECT request_id FROM async_idempotency_keys WHERE namespace = $1 AND function = $2 AND key = $3`,
				j.Namespace, j.Function, j.IdempotencyKey).Scan(&id)
			if err != nil {
				return "", false, fmt.Errorf("read an Idempotency-Key: %w", err)
			}
			return id, true, nil
		}
		if err != nil {
			return "", false, fmt.Errorf("take an Idempotency-Key: %w", err)
		}
	}
	_, err = tx.Exec(ctx, `INSERT INTO async_calls (namespace, function, request_id, state, accepted_at, idempotency_key,
	request, request_body, due_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $5)`,
		j.Namespace, j.Function, j.RequestID, string(j.State), j.AcceptedAt, j.IdempotencyKey, req, j.Body)
	if isCode(err, uniqueViolation) {
		return "", false, invoke.ErrRequestIDTaken
	}
	if err != nil {
		return "", false, fmt.Errorf("keep an asynchronous call: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return "", false, err
	}
	return j.RequestID, false, nil
}

// requestJSON is s without its body, which has a column of its own.
func requestJSON(s *invoke.Submission) ([]byte, error) {
	c := *s
	c.Body = nil
	return json.Marshal(c)
}

// dueAt is when j's next step is due: an attempt, or the posting of its
// result; nil for none.
func dueAt(j *async.Job) *time.Time {
	var t time.Time
	switch {
	case !j.State.Done():
		t = j.NextAttemptAt
	case j.CallbackPending():
		t = j.Callback.NextAttemptAt
	default:
		return nil
	}
	if t.IsZero() {
		t = time.Now()
	}
	return &t
}

// Update replaces j's kept state. A response body past InlineResponseBytes
// is put in the blob store first.
func (a *AsyncCalls) Update(ctx context.Context, j *async.Job) error {
	var (
		status, bytesN     *int64
		headers, cb        []byte
		body               []byte
		bodyKey            *string
		truncated          bool
		err                error
		startedAt, endedAt = optTime(j.StartedAt), optTime(j.FinishedAt)
	)
	if r := j.Response; r != nil {
		st, n := int64(r.Status), r.Bytes
		status, bytesN, truncated, body = &st, &n, r.Truncated, r.Body
		if headers, err = json.Marshal(r.Header); err != nil {
			return err
		}
		if len(body) > InlineResponseBytes && a.blobs != nil {
			k := responseKey(j.Namespace, j.Function, j.RequestID)
			if err := a.blobs.Put(ctx, k, bytes.NewReader(body), int64(len(body)), "application/octet-stream"); err != nil {
				return fmt.Errorf("keep the response of %s: %w", async.RefOf(j), err)
			}
			body, bodyKey = nil, &k
		}
	}
	if j.Callback != nil {
		if cb, err = json.Marshal(j.Callback); err != nil {
			return err
		}
	}
	_, err = a.pool.Exec(ctx, `UPDATE async_calls SET state = $4, attempts = $5, failures = $6, started_at = $7, finished_at = $8,
	next_attempt_at = $9, last_error = $10, response_status = $11, response_headers = $12, response_body = $13,
	response_body_key = $14, response_bytes = $15, response_truncated = $16, callback = $17, due_at = $18
WHERE namespace = $1 AND function = $2 AND request_id = $3`,
		j.Namespace, j.Function, j.RequestID, string(j.State), j.Attempts, j.Failures, startedAt, endedAt,
		optTime(j.NextAttemptAt), j.LastError, status, headers, body, bodyKey, bytesN, truncated, cb, dueAt(j))
	if err != nil {
		return fmt.Errorf("save the asynchronous call %s: %w", async.RefOf(j), err)
	}
	return nil
}

// responseKey is where the blob store keeps a call's long response body.
func responseKey(ns, fn, id string) string {
	return "async-calls/" + ns + "/" + fn + "/" + id + "/response"
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// Get reads one call with its request and whole response body.
func (a *AsyncCalls) Get(ctx context.Context, ns, fn, id string) (*async.Job, error) {
	rows, err := a.pool.Query(ctx, `SELECT `+callColumns+`, request_body FROM async_calls
WHERE namespace = $1 AND function = $2 AND request_id = $3`, ns, fn, id)
	if err != nil {
		return nil, err
	}
	jobs, err := a.collect(ctx, rows, true)
	if err != nil {
		return nil, err
	}
	if len(jobs) == 0 {
		return nil, async.ErrNotFound
	}
	return &jobs[0], nil
}

// List lists a page of a function's calls, newest first. Response bodies
// kept in the blob store are left out (Bytes still says their length).
func (a *AsyncCalls) List(ctx context.Context, q async.ListQuery) (async.ListPage, error) {
	if q.Limit <= 0 || q.Limit > invoke.MaxListLimit {
		return async.ListPage{}, fmt.Errorf("limit must be from 1 to %d", invoke.MaxListLimit)
	}
	var sql strings.Builder
	args := []any{q.Namespace, q.Function}
	sql.WriteString(`SELECT ` + callColumns + ` FROM async_calls WHERE namespace = $1 AND function = $2`)
	if q.State != "" {
		args = append(args, string(q.State))
		fmt.Fprintf(&sql, " AND state = $%d", len(args))
	}
	if q.After != nil {
		args = append(args, q.After.AcceptedAt, q.After.RequestID)
		fmt.Fprintf(&sql, " AND (accepted_at, request_id) < ($%d, $%d)", len(args)-1, len(args))
	}
	args = append(args, q.Limit+1)
	fmt.Fprintf(&sql, " ORDER BY accepted_at DESC, request_id DESC LIMIT $%d", len(args))
	rows, err := a.pool.Query(ctx, sql.String(), args...)
	if err != nil {
		return async.ListPage{}, err
	}
	jobs, err := a.collect(ctx, rows, false)
	if err != nil {
		return async.ListPage{}, err
	}
	var page async.ListPage
	if len(jobs) > q.Limit {
		jobs = jobs[:q.Limit]
		page.Next = async.CursorOf(&jobs[len(jobs)-1])
	}
	page.Items = jobs
	return page, nil
}

// Unfinished lists the calls not final or whose result is to be posted.
func (a *AsyncCalls) Unfinished(ctx context.Context) ([]async.Job, error) {
	rows, err := a.pool.Query(ctx, `SELECT `+callColumns+`, request_body FROM async_calls
WHERE due_at IS NOT NULL ORDER BY accepted_at`)
	if err != nil {
		return nil, err
	}
	return a.collect(ctx, rows, true)
}

// collect scans rows of callColumns (and request_body when whole), reading
// long response bodies from the blob store when whole.
func (a *AsyncCalls) collect(ctx context.Context, rows pgx.Rows, whole bool) ([]async.Job, error) {
	defer rows.Close()
	var out []async.Job
	for rows.Next() {
		var (
			j                   async.Job
			state               string
			started, finished   *time.Time
			next                *time.Time
			req, headers, cb    []byte
			status, n           *int64
			body, reqBody       []byte
			bodyKey             *string
			truncated           bool
			ns, fn, id, idemKey string
			accepted            time.Time
		)
		dest := []any{&ns, &fn, &id, &state, &j.Attempts, &j.Failures, &accepted, &started, &finished, &next, &j.LastError,
			&idemKey, &req, &status, &headers, &body, &bodyKey, &n, &truncated, &cb}
		if whole {
			dest = append(dest, &reqBody)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(req, &j.Submission); err != nil {
			return nil, fmt.Errorf("asynchronous call %s/%s/%s: %w", ns, fn, id, err)
		}
		j.Namespace, j.Function, j.RequestID, j.IdempotencyKey, j.AcceptedAt = ns, fn, id, idemKey, accepted.UTC()
		j.Body, j.State = reqBody, async.State(state)
		j.StartedAt, j.FinishedAt, j.NextAttemptAt = deref(started), deref(finished), deref(next)
		if status != nil {
			r := &async.Response{Status: int(*status), Body: body, Truncated: truncated, Header: http.Header{}}
			if n != nil {
				r.Bytes = *n
			}
			if len(headers) > 0 {
				if err := json.Unmarshal(headers, &r.Header); err != nil {
					return nil, fmt.Errorf("asynchronous call %s/%s/%s: %w", ns, fn, id, err)
				}
			}
			if bodyKey != nil && whole && a.blobs != nil {
				b, err := a.readBlob(ctx, *bodyKey)
				if err != nil {
					return nil, err
				}
				r.Body = b
			}
			j.Response = r
		}
		if len(cb) > 0 {
			j.Callback = &async.Callback{}
			if err := json.Unmarshal(cb, j.Callback); err != nil {
				return nil, fmt.Errorf("asynchronous call %s/%s/%s: %w", ns, fn, id, err)
			}
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

func (a *AsyncCalls) readBlob(ctx context.Context, key string) ([]byte, error) {
	rc, _, err := a.blobs.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read a response body: %w", err)
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func deref(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// Claim takes ref's call for one step (see async.Claims). Attempts of one
// function are claimed one at a time under an advisory lock on the
// function, so that the count of its running calls cannot be raced past
// limit by two replicas at once.
func (a *AsyncCalls) Claim(ctx context.Context, ref async.Ref, limit int, lease time.Duration) (*async.Job, time.Duration, error) {
	tx, err := a.pool.Begin(ctx)
	if err != nil {
		return nil, 0, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var (
		state     string
		due, held *time.Time
		now       time.Time
		args      = []any{ref.Namespace, ref.Function, ref.RequestID}
		whereCall = ` WHERE namespace = $1 AND function = $2 AND request_id = $3`
	)
	err = tx.QueryRow(ctx, `SELECT state, due_at, lease_until, now() FROM async_calls`+whereCall+` FOR UPDATE`, args...).
		Scan(&state, &due, &held, &now)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, 0, nil
	case err != nil:
		return nil, 0, err
	case due == nil, held != nil && held.After(now):
		return nil, 0, nil
	case due.After(now):
		return nil, due.Sub(now), nil
	}
	if !async.State(state).Done() {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, "sless-async/"+ref.Namespace+"/"+ref.Function); err != nil {
			return nil, 0, err
		}
		var running int
		err := tx.QueryRow(ctx, `SELECT count(*) FROM async_calls WHERE namespace = $1 AND function = $2 AND request_id <> $3
	AND state = 'running' AND lease_until > now()`, args...).Scan(&running)
		if err != nil {
			return nil, 0, err
		}
		if running >= limit {
			return nil, busyWait, nil
		}
	}
	rows, err := tx.Query(ctx, `UPDATE async_calls SET lease_until = now() + $4 * interval '1 millisecond',
	state = CASE WHEN state IN ('queued', 'running') THEN 'running' ELSE state END`+whereCall+`
RETURNING `+callColumns+`, request_body`, append(args, lease.Milliseconds())...)
	if err != nil {
		return nil, 0, err
	}
	jobs, err := a.collect(ctx, rows, true)
	if err != nil {
		return nil, 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, 0, err
	}
	if len(jobs) == 0 {
		return nil, 0, nil
	}
	return &jobs[0], 0, nil
}

// Release ends the claim on ref.
func (a *AsyncCalls) Release(ctx context.Context, ref async.Ref) error {
	_, err := a.pool.Exec(ctx, `UPDATE async_calls SET lease_until = NULL WHERE namespace = $1 AND function = $2 AND request_id = $3`,
		ref.Namespace, ref.Function, ref.RequestID)
	return err
}

// Due lists the calls whose step fell due before t, unclaimed and not
// listed since t, and marks them listed.
func (a *AsyncCalls) Due(ctx context.Context, before time.Time, limit int) ([]async.Ref, error) {
	rows, err := a.pool.Query(ctx, `UPDATE async_calls SET swept_at = now()
WHERE (namespace, function, request_id) IN (
	SELECT namespace, function, request_id FROM async_calls
	WHERE due_at < $1 AND (lease_until IS NULL OR lease_until < now()) AND (swept_at IS NULL OR swept_at < $1)
	ORDER BY due_at LIMIT $2 FOR UPDATE SKIP LOCKED)
RETURNING namespace, function, request_id`, before, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (async.Ref, error) {
		var ref async.Ref
		err := r.Scan(&ref.Namespace, &ref.Function, &ref.RequestID)
		return ref, err
	})
}

// Abandon deletes a call whose ref was never queued, and its key.
func (a *AsyncCalls) Abandon(ctx context.Context, ref async.Ref) error {
	tx, err := a.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	args := []any{ref.Namespace, ref.Function, ref.RequestID}
	if _, err := tx.Exec(ctx, `DELETE FROM async_idempotency_keys WHERE namespace = $1 AND function = $2 AND request_id = $3`, args...); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM async_calls WHERE namespace = $1 AND function = $2 AND request_id = $3`, args...); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// Pending counts the calls not final and says when the oldest was accepted.
func (a *AsyncCalls) Pending(ctx context.Context) (int, time.Time, error) {
	var n int
	var oldest *time.Time
	err := a.pool.QueryRow(ctx, `SELECT count(*), min(accepted_at) FROM async_calls WHERE state IN ('queued', 'running')`).Scan(&n, &oldest)
	return n, deref(oldest), err
}

// Prune deletes the calls that ended before before (with their response
// bodies in the blob store) and the Idempotency-Keys taken before
// keysBefore, and says how many calls went.
func (a *AsyncCalls) Prune(ctx context.Context, before, keysBefore time.Time) (int, error) {
	rows, err := a.pool.Query(ctx, `DELETE FROM async_calls WHERE finished_at < $1 AND due_at IS NULL RETURNING response_body_key`, before)
	if err != nil {
		return 0, err
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[*string])
	if err != nil {
		return 0, err
	}
	var blobKeys []string
	for _, k := range keys {
		if k != nil {
			blobKeys = append(blobKeys, *k)
		}
	}
	if len(blobKeys) > 0 && a.blobs != nil {
		if _, err := a.blobs.Delete(ctx, blobKeys); err != nil {
			return len(keys), fmt.Errorf("delete pruned response bodies: %w", err)
		}
	}
	if _, err := a.pool.Exec(ctx, `DELETE FROM async_idempotency_keys WHERE taken_at < $1`, keysBefore); err != nil {
		return len(keys), err
	}
	return len(keys), nil
}
