// Package postgres keeps sless's invocation history in PostgreSQL: a pgx
// connection pool, schema migrations embedded in the binary and applied under
// an advisory lock, idempotent batched writes (invoke.Sink), keyset-paginated
// listings (invoke.History), the aggregate charts are drawn from
// (stats.Source) and age-based retention.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/golang-migrate/migrate/v4"
	migratepgx "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/stats"
)

//go:embed migrations/*.sql
var migrations embed.FS

// MigrationsTable records the applied schema version. It is sless's own, so
// the database may be shared with other applications.
const MigrationsTable = "sless_schema_migrations"

// Store is sless's PostgreSQL database.
type Store struct {
	pool *pgxpool.Pool
}

var (
	_ invoke.Sink    = (*Store)(nil)
	_ invoke.History = (*Store)(nil)
	_ stats.Source   = (*Store)(nil)
)

// Open makes a connection pool for url (a postgres:// URL or a key=value
// DSN; pgxpool's pool_max_conns and friends work). It does not connect: a
// database that is down at start is reached once it is up, and writes wait
// in the Recorder's queue meanwhile.
func Open(url string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// The parse error may quote the URL, password included.
		return nil, errors.New("postgres: the database URL is not valid")
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = "sless"
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return &Store{pool: pool}, nil
}

// Pool is the connection pool, for callers that need plain queries.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close closes the pool.
func (s *Store) Close() { s.pool.Close() }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// Migrate brings the schema to the version this binary embeds. It takes
// golang-migrate's PostgreSQL advisory lock (keyed on database, schema and
// MigrationsTable), so replicas that start together apply each migration
// once; the others wait for the lock and then find nothing to do. A
// database left dirty by a failed migration is reported, not forced.
func (s *Store) Migrate(ctx context.Context) error {
	src, err := iofs.New(migrations, "migrations")
	if err != nil {
		return fmt.Errorf("postgres: embedded migrations: %w", err)
	}
	// golang-migrate speaks database/sql; this *sql.DB borrows connections
	// from the pool and closing it leaves the pool open.
	db := stdlib.OpenDBFromPool(s.pool)
	defer db.Close()
	if err := db.PingContext(ctx); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	drv, err := migratepgx.WithInstance(db, &migratepgx.Config{MigrationsTable: MigrationsTable})
	if err != nil {
		return fmt.Errorf("postgres: prepare migrations: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "pgx5", drv)
	if err != nil {
		return fmt.Errorf("postgres: prepare migrations: %w", err)
	}
	defer m.Close()
	m.LockTimeout = time.Minute
	done := make(chan error, 1)
	go func() { done <- m.Up() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		m.GracefulStop <- true
		err = <-done
		if err == nil || errors.Is(err, migrate.ErrNoChange) {
			err = ctx.Err()
		}
	}
	if err != nil && !errors.Is(err, migrate.ErrNoChange) {
		var dirty migrate.ErrDirty
		if errors.As(err, &dirty) {
			return fmt.Errorf("postgres: migration %d failed earlier and left the schema dirty; fix it by hand and clear the flag in %s", dirty.Version, MigrationsTable)
		}
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	return nil
}

// MigrateWhenUp calls Migrate until it succeeds or ctx ends, waiting
// between attempts (doubling from one second up to a minute); for a server
// that must start while its database is still down. report, when not nil,
// hears each failure.
func (s *Store) MigrateWhenUp(ctx context.Context, report func(error)) error {
	wait := time.Second
	for {
		err := s.Migrate(ctx)
		if err == nil {
			return nil
		}
		if report != nil {
			report(err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, time.Minute)
	}
}

// recordColumns are the columns a Write fills, in the order of its rows.
var recordColumns = []string{"namespace", "function", "revision", "trigger", "request_id", "started_at",
	"duration_us", "status", "bytes_in", "bytes_out", "cold_start", "error"}

// insertRecords stores a batch in one statement, the columns sent as
// arrays, and skips a record already stored (the same namespace, function,
// start and request id: see migrations 3 and 5). Rows go in the unique
// key's order, so that writers of overlapping batches wait on each other
// in one order and never deadlock.
const insertRecords = `INSERT INTO invocations (namespace, function, revision, trigger, request_id, started_at,
	duration_us, status, bytes_in, bytes_out, cold_start, error)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[],
	$7::bigint[], $8::smallint[], $9::bigint[], $10::bigint[], $11::boolean[], $12::text[])
	AS r (namespace, function, revision, trigger, request_id, started_at, duration_us, status, bytes_in, bytes_out, cold_start, error)
ORDER BY namespace, function, started_at DESC, request_id DESC
ON CONFLICT DO NOTHING`

// Write stores a batch. A record already stored is skipped, so a batch
// retried after its acknowledgement was lost, or replayed from the
// recorder's spool, stores nothing twice; the batch id is not needed for
// that. A record PostgreSQL refuses (the Recorder cleans records, so this
// is rare) costs only itself: the rest is stored and the answer is an
// *invoke.RefusedError. Other errors a retry cannot fix wrap
// invoke.ErrPermanent.
func (s *Store) Write(ctx context.Context, b invoke.Batch) error {
	if len(b.Records) == 0 {
		return nil
	}
	err := s.write(ctx, b.Records)
	if len(b.Records) == 1 || !isCode(err, dataClass) {
		return err
	}
	budget := isolateWrites
	refused, why, err := s.isolate(ctx, b.Records, &budget)
	switch {
	case err != nil:
		// Retrying the batch skips the parts stored meanwhile.
		return err
	case refused == 0:
		return nil
	}
	return &invoke.RefusedError{Refused: refused, Err: why}
}

// isolateWrites bounds the writes isolate spends on one batch: a few bad
// records are found alone in about 13 writes each (5,000 records), and a
// batch of many bad ones does not outlast its write timeout.
const isolateWrites = 64

// isolate stores records in halves, and the halves of a refused half, until
// each refusal is a record of its own or the budget of writes is spent,
// when a refused half is refused whole; refused counts those records and
// why is the first refusal's error. A retryable error ends it.
func (s *Store) isolate(ctx context.Context, records []invoke.Record, budget *int) (refused int, why, err error) {
	mid := len(records) / 2
	for _, half := range [][]invoke.Record{records[:mid], records[mid:]} {
		*budget--
		e := s.write(ctx, half)
		switch {
		case e == nil:
			continue
		case !isCode(e, dataClass):
			return 0, nil, e
		case len(half) == 1 || *budget <= 0:
			refused += len(half)
		default:
			n, w, err := s.isolate(ctx, half, budget)
			if err != nil {
				return 0, nil, err
			}
			refused += n
			e = w
		}
		if why == nil {
			why = e
		}
	}
	return refused, why, nil
}

// write stores records, whole or not at all. They go first by COPY, which
// the unique index refuses whole if one of them is stored already; only
// then are they inserted with ON CONFLICT DO NOTHING, at half COPY's rate
// (bench/invoke). Duplicates are rare (a lost acknowledgement, the first
// batches of a replayed spool), so nearly every batch takes the fast way.
func (s *Store) write(ctx context.Context, records []invoke.Record) error {
	_, err := s.pool.CopyFrom(ctx, pgx.Identifier{"invocations"}, recordColumns, &recordRows{records: records, i: -1})
	if err == nil {
		return nil
	}
	if !isCode(err, uniqueViolation, deadlockDetected) {
		return classify(err)
	}
	// A record is stored already, or a writer of the same records holds
	// it: skip what is stored. Deadlocks are only possible with a COPY,
	// whose rows come in the batch's order; one more try outlives it.
	for try := 0; ; try++ {
		err = s.insert(ctx, records)
		if err == nil || try == 2 || !isCode(err, deadlockDetected) {
			return classify(err)
		}
	}
}

// insert stores records with insertRecords.
func (s *Store) insert(ctx context.Context, records []invoke.Record) error {
	n := len(records)
	var (
		ns, fn, rev, trig, reqID, errs = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		started                        = make([]time.Time, n)
		dur, in, out                   = make([]int64, n), make([]int64, n), make([]int64, n)
		status                         = make([]int16, n)
		cold                           = make([]bool, n)
	)
	for i := range records {
		r := &records[i]
		ns[i], fn[i], rev[i], trig[i], reqID[i], errs[i] = r.Namespace, r.Function, r.Revision, r.Trigger, r.RequestID, r.Error
		started[i] = r.StartedAt
		dur[i], in[i], out[i] = r.Duration.Microseconds(), r.BytesIn, r.BytesOut
		status[i] = storedStatus(r.Status)
		cold[i] = r.ColdStart
	}
	_, err := s.pool.Exec(ctx, insertRecords, ns, fn, rev, trig, reqID, started, dur, status, in, out, cold, errs)
	return err
}

// storedStatus fits a status into the smallint column.
func storedStatus(status int) int16 { return int16(min(max(status, 0), 32767)) }

// recordRows is a batch as pgx.CopyFromSource, one row at a time, so that
// COPY needs no second copy of the batch.
type recordRows struct {
	records []invoke.Record
	i       int
	row     [12]any
}

func (r *recordRows) Next() bool {
	r.i++
	return r.i < len(r.records)
}

func (r *recordRows) Values() ([]any, error) {
	rec := &r.records[r.i]
	r.row = [12]any{rec.Namespace, rec.Function, rec.Revision, rec.Trigger, rec.RequestID, rec.StartedAt,
		rec.Duration.Microseconds(), storedStatus(rec.Status), rec.BytesIn, rec.BytesOut, rec.ColdStart, rec.Error}
	return r.row[:], nil
}

func (r *recordRows) Err() error { return nil }

// SQLSTATEs Write tells apart.
const (
	uniqueViolation  = "23505"
	deadlockDetected = "40P01"
)

// dataClass stands for any code of class 22, data PostgreSQL refuses.
const dataClass = "22"

// isCode reports whether err is a PostgreSQL error with one of codes, or in
// dataClass when that is one of them.
func isCode(err error, codes ...string) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	return slices.Contains(codes, pgErr.Code) || slices.Contains(codes, dataClass) && strings.HasPrefix(pgErr.Code, dataClass)
}

// classify marks errors no retry can fix as permanent: the data itself
// (class 22) or a constraint (class 23) refused. Everything else (a
// connection refused or cut, a server shutting down, a missing table before
// migrations ran) may pass.
func classify(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "23")) {
		return fmt.Errorf("%w: %w", invoke.ErrPermanent, err)
	}
	return err
}

// List is invoke.History over the invocations table. Every filter is a
// condition the indexes serve: namespace, function (and status class) pick
// an index range, the cursor starts inside it, and the walk stops after
// Limit+1 rows.
func (s *Store) List(ctx context.Context, q invoke.Query) (invoke.Page, error) {
	if q.Limit <= 0 || q.Limit > invoke.MaxListLimit {
		return invoke.Page{}, fmt.Errorf("limit must be from 1 to %d", invoke.MaxListLimit)
	}
	var sql strings.Builder
	args := make([]any, 0, 8)
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	sql.WriteString(`SELECT id, namespace, function, revision, trigger, request_id, started_at, duration_us, status, bytes_in, bytes_out, cold_start, error
FROM invocations WHERE namespace = `)
	sql.WriteString(arg(q.Namespace))
	sql.WriteString(` AND function = ` + arg(q.Function))
	if q.StatusClass != 0 {
		sql.WriteString(` AND status_class = ` + arg(int16(q.StatusClass)))
	}
	if q.Status != 0 {
		sql.WriteString(` AND status = ` + arg(int16(q.Status)))
	}
	if q.Trigger != "" {
		sql.WriteString(` AND trigger = ` + arg(q.Trigger))
	}
	if q.Service {
		sql.WriteString(` AND trigger = ` + arg(invoke.TriggerService))
	} else {
		sql.WriteString(` AND trigger <> ` + arg(invoke.TriggerService))
	}
	if !q.Since.IsZero() {
		sql.WriteString(` AND started_at >= ` + arg(q.Since))
	}
	if !q.Until.IsZero() {
		sql.WriteString(` AND started_at < ` + arg(q.Until))
	}
	switch {
	case q.After != nil && q.After.RequestID != "":
		// started_at <= bounds the status class's and the trigger's
		// indexes too, which end in id, not request_id.
		at := arg(q.After.StartedAt)
		sql.WriteString(` AND started_at <= ` + at + ` AND (started_at, request_id) < (` + at + `, ` + arg(q.After.RequestID) + `)`)
	case q.After != nil:
		// A cursor made before migration 5 ordered ties by id.
		sql.WriteString(` AND started_at < ` + arg(q.After.StartedAt))
	}
	sql.WriteString(` ORDER BY started_at DESC, request_id DESC LIMIT ` + arg(q.Limit+1))

	rows, err := s.pool.Query(ctx, sql.String(), args...)
	if err != nil {
		return invoke.Page{}, err
	}
	defer rows.Close()
	items := make([]invoke.Record, 0, min(q.Limit+1, 64))
	for rows.Next() {
		var r invoke.Record
		var durUS int64
		var status int16
		if err := rows.Scan(&r.ID, &r.Namespace, &r.Function, &r.Revision, &r.Trigger, &r.RequestID, &r.StartedAt,
			&durUS, &status, &r.BytesIn, &r.BytesOut, &r.ColdStart, &r.Error); err != nil {
			return invoke.Page{}, err
		}
		r.Duration = time.Duration(durUS) * time.Microsecond
		r.Status = int(status)
		r.StartedAt = r.StartedAt.UTC()
		items = append(items, r)
	}
	if err := rows.Err(); err != nil {
		return invoke.Page{}, err
	}
	var page invoke.Page
	if len(items) > q.Limit {
		items = items[:q.Limit]
		last := items[len(items)-1]
		page.Next = &invoke.Cursor{StartedAt: last.StartedAt, ID: last.ID, RequestID: last.RequestID}
	}
	page.Items = items
	return page, nil
}

// DeleteBefore deletes the invocations that started before cutoff, at most
// batchSize rows per statement so no statement holds locks or builds WAL
// for long, and returns how many it deleted.
func (s *Store) DeleteBefore(ctx context.Context, cutoff time.Time, batchSize int) (int64, error) {
	if batchSize <= 0 {
		batchSize = 10000
	}
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, `DELETE FROM invocations WHERE id IN (
			SELECT id FROM invocations WHERE started_at < $1 LIMIT $2)`, cutoff, batchSize)
		if err != nil {
			return total, err
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(batchSize) {
			return total, nil
		}
	}
}

// Start opens the database at url and migrates it in the background once it
// answers, so sless starts while PostgreSQL is still down (records wait in
// the recorder's queue and spool). With maxAge > 0 it also deletes older
// records hourly: every replica does, and since deletes are bounded batches
// of old rows, concurrent runs only share the work. The caller closes the
// store.
func Start(ctx context.Context, url string, maxAge time.Duration, log *slog.Logger) (*Store, error) {
	pg, err := Open(url)
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
		invoke.RunRetention(ctx, pg, maxAge, time.Hour, 10000, func(n int64, err error) {
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

// statsSQL aggregates one function's window in the database: the
// (namespace, function, started_at) index picks the window's rows and
// percentile_cont interpolates as stats.Percentile does.
const statsSQL = `SELECT date_bin($5 * interval '1 microsecond', started_at, $3) AS step,
	count(*), count(*) FILTER (WHERE status >= 500), count(*) FILTER (WHERE cold_start),
	percentile_cont($7::float8[]) WITHIN GROUP (ORDER BY duration_us::float8)
FROM invocations
WHERE namespace = $1 AND function = $2 AND started_at >= $3 AND started_at < $4
	AND (trigger = 'service') = $6
GROUP BY step ORDER BY step`

// Stats is stats.Source over the invocations table.
func (s *Store) Stats(ctx context.Context, q stats.Query) ([]stats.Bucket, error) {
	if q.Step <= 0 || !q.From.Before(q.Until) {
		return nil, fmt.Errorf("stats: a window and a step are required")
	}
	rows, err := s.pool.Query(ctx, statsSQL, q.Namespace, q.Function, q.From, q.Until, q.Step.Microseconds(),
		q.Service, stats.Percentiles[:])
	if err != nil {
		return nil, fmt.Errorf("invocation stats: %w", err)
	}
	defer rows.Close()
	var out []stats.Bucket
	for rows.Next() {
		var b stats.Bucket
		var pct []float64
		if err := rows.Scan(&b.Start, &b.Calls, &b.Errors, &b.ColdStarts, &pct); err != nil {
			return nil, fmt.Errorf("invocation stats: %w", err)
		}
		if len(pct) != len(stats.Percentiles) {
			return nil, fmt.Errorf("invocation stats: %d percentiles, want %d", len(pct), len(stats.Percentiles))
		}
		b.Start = b.Start.UTC()
		b.P50, b.P95, b.P99 = pct[0], pct[1], pct[2]
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("invocation stats: %w", err)
	}
	return out, nil
}
