package frontdoor

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/sless-dev/sless/pkg/adapter/postgres"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/spool"
	"github.com/sless-dev/sless/pkg/invoke/stats"
)

// Records says where invocation records go: PostgreSQL when DatabaseURL is
// set, else Sink and History (local mode keeps them in its store), else
// nowhere.
type Records struct {
	DatabaseURL string
	// MaxAge deletes records older than this from PostgreSQL (0 keeps all).
	MaxAge time.Duration
	// SpoolPath, with a DatabaseURL, keeps records on disk while PostgreSQL
	// is down or slow, up to SpoolMaxBytes; none: they wait in memory.
	SpoolPath     string
	SpoolMaxBytes int64
	Sink          invoke.Sink
	History       invoke.History
	// Stats aggregates History for charts; nil serves none.
	Stats stats.Source
}

// records is where a front door's records go, opened.
type records struct {
	recorder *invoke.Recorder
	history  invoke.History
	stats    stats.Source
	closers  Closers
}

func openRecords(ctx context.Context, o Records, metrics *invoke.Metrics, log *slog.Logger) (*records, error) {
	r := &records{}
	sink, history, st := o.Sink, o.History, o.Stats
	var spooler invoke.Spool
	if o.DatabaseURL != "" {
		pg, err := postgres.Start(ctx, o.DatabaseURL, o.MaxAge, log)
		if err != nil {
			return nil, err
		}
		r.closers.Add(pg.Close)
		sink, history, st = pg, pg, pg
		if o.SpoolPath != "" {
			sp, err := spool.Open(o.SpoolPath, o.SpoolMaxBytes, log)
			if err != nil {
				r.close()
				return nil, fmt.Errorf("invocation spool: %w", err)
			}
			// Closed after the recorder, which writes to it.
			r.closers.Add(func() { _ = sp.Close() })
			spooler = sp
		}
	}
	if sink == nil {
		return r, nil
	}
	r.history, r.stats = history, st
	r.recorder = invoke.NewRecorder(sink, invoke.RecorderOptions{Logger: log, Metrics: metrics, Spool: spooler})
	r.closers.Add(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = r.recorder.Close(cctx)
	})
	return r, nil
}

// close closes the recorder, then the spool and the database it flushes into.
func (r *records) close() { r.closers.Close() }

// Closers close what was opened, last first, since what was opened later
// may use what was opened before it (a recorder writes to its spool and
// database; local mode's parts read its store).
type Closers []func()

// Add adds f, to run before every closer added before it.
func (c *Closers) Add(f func()) { *c = append(*c, f) }

// Close runs the closers last first, once.
func (c *Closers) Close() {
	for i := len(*c) - 1; i >= 0; i-- {
		(*c)[i]()
	}
	*c = nil
}
