package invoke

import (
	"context"
	"time"
)

// Expirer deletes the records that started before cutoff, at most batch
// per statement, and says how many went: PostgreSQL's store and local
// mode's records both do.
type Expirer interface {
	DeleteBefore(ctx context.Context, cutoff time.Time, batch int) (int64, error)
}

// RunRetention deletes records older than maxAge from e every interval
// until ctx ends, starting at once. report, when not nil, hears the outcome
// of each pass (deleted records, or the error; a failed pass is retried at
// the next interval).
func RunRetention(ctx context.Context, e Expirer, maxAge, interval time.Duration, batch int, report func(deleted int64, err error)) {
	if interval <= 0 {
		interval = time.Hour
	}
	for {
		n, err := e.DeleteBefore(ctx, time.Now().Add(-maxAge), batch)
		if report != nil && ctx.Err() == nil {
			report(n, err)
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
