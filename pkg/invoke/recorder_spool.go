package invoke

import (
	"errors"
	"strconv"
	"time"
)

// writeResult is the outcome of one Sink.Write the spooled writer started.
type writeResult struct {
	err       error
	records   []Record
	fromSpool bool
	epoch     uint64
}

// runSpooled is the writer when a Spool is set. One loop decides, in order:
// ready records in memory go to the spool while it holds any (they are
// newer), while a write has taken longer than SlowWrite or the queue passes
// half the room it leaves, and at shutdown while the sink fails; the sink
// gets the spool's head while the spool holds records, else the queue's
// oldest batch. The write runs beside the loop so that a slow sink never
// keeps the queue from reaching the disk.
func (r *Recorder) runSpooled() {
	defer close(r.done)
	sp := r.opts.Spool
	results := make(chan writeResult, 1)
	var (
		inflight bool
		failing  bool
		retryAt  time.Time
		began    time.Time // of the write in flight
		backoff  = r.opts.MinBackoff
		// The backlog: since when the spool has held records, and how
		// many of them have been written since.
		backlogSince time.Time
		drained      int
	)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()

	start := func(records []Record, fromSpool bool, epoch uint64) {
		inflight, began = true, time.Now()
		r.batchSeq++
		b := Batch{ID: r.batchPrefix + strconv.FormatUint(r.batchSeq, 10), Records: records}
		go func() {
			results <- writeResult{err: r.write(b), records: records, fromSpool: fromSpool, epoch: epoch}
		}()
	}
	handle := func(res writeResult) {
		inflight = false
		n := len(res.records)
		done := func() {
			if res.fromSpool {
				if err := sp.Remove(n); err != nil {
					// They are written again from the spool; the sink
					// stores each record once.
					r.opts.Logger.Error("invocation spool: cannot remove written records", "error", err)
				}
			} else {
				r.release(res.records)
			}
		}
		switch {
		case res.err == nil:
			done()
			if res.fromSpool {
				drained += n
			}
			if failing {
				r.opts.Logger.Info("invocation records are being written again", "spooled", sp.Len())
				failing = false
			}
			backoff, retryAt = r.opts.MinBackoff, time.Time{}
			r.kept(res.epoch)
		case errors.Is(res.err, ErrPermanent):
			lost := refused(res.err, n)
			r.opts.Logger.Error("invocation records refused by the store; dropping them", "records", lost, "batch", n, "error", res.err)
			r.dropped(DropRejected, lost)
			done()
			if res.fromSpool {
				drained += n - lost
			}
		default:
			if !failing {
				r.opts.Logger.Warn("cannot write invocation records; spooling them to disk and retrying", "spooled", sp.Len(), "error", res.err)
				failing = true
			}
			if !res.fromSpool {
				r.spoolRecords(res.records, res.epoch)
				r.release(res.records)
			}
			retryAt = time.Now().Add(backoff)
			backoff = min(2*backoff, r.opts.MaxBackoff)
		}
		if res.fromSpool && sp.Len() == 0 && !backlogSince.IsZero() {
			// The metrics show the spool's size; this says when a backlog
			// ended, what it held and how long it lasted.
			r.opts.Logger.Info("invocation spool drained", "records", drained, "took", time.Since(backlogSince).Round(time.Millisecond))
			backlogSince, drained = time.Time{}, 0
		}
	}
	finish := func() {
		r.spoolWaiting(true)
		if n := sp.Len(); n > 0 {
			r.opts.Logger.Info("invocation records stay in the spool until the next start", "spooled", n)
		}
	}

	for {
		closed := r.isClosed()
		slow := inflight && time.Since(began) >= r.opts.SlowWrite
		if sp.Len() > 0 || slow || (inflight && r.pressed()) || (closed && failing) {
			r.spoolWaiting(closed)
		}
		if backlogSince.IsZero() && sp.Len() > 0 {
			backlogSince = time.Now()
		}
		wait := time.Duration(-1)
		if !inflight {
			switch {
			case closed && failing:
				finish()
				return
			case sp.Len() > 0:
				if d := time.Until(retryAt); d > 0 {
					wait = d
					break
				}
				epoch := r.dropEpoch()
				records, err := sp.Oldest(r.opts.BatchSize)
				if err != nil {
					r.opts.Logger.Error("invocation spool: cannot read", "error", err)
					retryAt = time.Now().Add(r.opts.MaxBackoff)
					wait = r.opts.MaxBackoff
					break
				}
				start(records, true, epoch)
			default:
				epoch := r.dropEpoch()
				batch, d, ok := r.takeDue()
				switch {
				case ok:
					start(batch, false, epoch)
				case d >= 0:
					wait = d
				case closed:
					return // nothing left anywhere
				}
			}
		}
		if sp.Len() > 0 || inflight {
			d := r.nextDue()
			if d >= 0 && inflight && sp.Len() == 0 && !slow {
				// A ready batch waits for the write to end, or to turn slow.
				d = max(d, time.Until(began.Add(r.opts.SlowWrite)))
			}
			if d >= 0 && (wait < 0 || d < wait) {
				wait = d
			}
		}
		var due <-chan time.Time
		if wait >= 0 {
			timer.Reset(wait)
			due = timer.C
		}
		select {
		case <-r.wake:
		case <-due:
		case res := <-results:
			handle(res)
		case <-r.stop.Done():
			if inflight {
				handle(<-results) // the write's context is cancelled too
			}
			finish()
			return
		}
		if due != nil && !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

func (r *Recorder) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// pressed reports whether the waiting records fill half the room the write
// in flight leaves in the queue.
func (r *Recorder) pressed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return 2*r.waiting >= r.opts.QueueSize-r.inflight
}

// ready reports whether the oldest chunk should go now; r.mu is held and a
// chunk waits.
func (r *Recorder) ready() bool {
	return r.closed || len(r.chunks) > 1 || len(r.chunks[0]) == r.opts.BatchSize ||
		time.Since(r.since[0]) >= r.opts.FlushInterval
}

// nextDue is how long until the oldest chunk is ready: 0 if it is, -1 if
// nothing waits.
func (r *Recorder) nextDue() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.chunks) == 0 {
		return -1
	}
	if r.ready() {
		return 0
	}
	return r.opts.FlushInterval - time.Since(r.since[0])
}

// takeDue takes the oldest chunk when it is ready, as the batch in flight;
// otherwise d is how long until it is (-1: nothing waits).
func (r *Recorder) takeDue() (batch []Record, d time.Duration, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.chunks) == 0 {
		return nil, -1, false
	}
	if !r.ready() {
		return nil, r.opts.FlushInterval - time.Since(r.since[0]), false
	}
	batch = r.chunks[0]
	r.chunks[0] = nil
	r.chunks, r.since = r.chunks[1:], r.since[1:]
	r.waiting -= len(batch)
	r.inflight = len(batch)
	return batch, 0, true
}

// spoolWaiting moves the ready chunks (all of them when all is set) from
// memory to the spool in one append.
func (r *Recorder) spoolWaiting(all bool) {
	epoch := r.dropEpoch()
	r.mu.Lock()
	var taken [][]Record
	n := 0
	for len(r.chunks) > 0 && (all || r.ready()) {
		c := r.chunks[0]
		r.chunks[0] = nil
		r.chunks, r.since = r.chunks[1:], r.since[1:]
		taken = append(taken, c)
		n += len(c)
	}
	r.waiting -= n
	r.spooling = n
	r.mu.Unlock()
	if n == 0 {
		return
	}
	records := taken[0]
	if len(taken) > 1 {
		records = make([]Record, 0, n)
		for _, c := range taken {
			records = append(records, c...)
		}
	}
	r.spoolRecords(records, epoch)
	r.mu.Lock()
	r.spooling = 0
	for _, c := range taken {
		clear(c)
		if len(r.free) < 4 {
			r.free = append(r.free, c[:0])
		}
	}
	r.mu.Unlock()
}

// spoolRecords appends records to the spool, counting what does not fit.
func (r *Recorder) spoolRecords(records []Record, epoch uint64) {
	kept, err := r.opts.Spool.Append(records)
	switch {
	case err != nil:
		r.opts.Logger.Error("invocation spool: cannot append", "records", len(records), "error", err)
		r.dropped(DropSpoolFail, len(records))
	case kept < len(records):
		r.dropped(DropSpoolFull, len(records)-kept)
	default:
		r.kept(epoch)
	}
}
