package invoke

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"
)

// RecorderOptions tune a Recorder; zero values take the defaults.
type RecorderOptions struct {
	// QueueSize caps the records held in memory, waiting plus being
	// written. A record offered past it is dropped and counted. Default 100000.
	QueueSize int
	// BatchSize caps the records of one Sink.Write. Default 5000.
	BatchSize int
	// FlushInterval is how long a batch short of BatchSize may wait for
	// more records before it is written. Every write is a transaction with
	// a commit the store must flush, so under steady load a short wait
	// turns hundreds of small writes a second into a few large ones; a
	// full batch never waits, and neither does Close. Default 100 ms;
	// negative writes at once.
	FlushInterval time.Duration
	// WriteTimeout bounds one Sink.Write. Default 30 s.
	WriteTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait between retries of a failed
	// write; it doubles from the one to the other. Defaults 100 ms and 5 s.
	MinBackoff, MaxBackoff time.Duration
	// Metrics, when set, receive queue depth, drops, writes and write errors.
	Metrics *Metrics
	// Logger receives one line when writes start failing and one when they
	// recover (not one per retry), and one when records start being dropped
	// and one when that stops. Default slog.Default().
	Logger *slog.Logger
	// Spool, when set, takes the records the sink cannot: while the sink
	// fails, and while a write is slow (SlowWrite) or the queue passes half
	// the room the write in flight leaves.
	// While it holds records every new one goes behind them, and the writer
	// drains it in order. Only past its cap are records dropped. The sink
	// must be idempotent per record: a record written just before a crash
	// may be written again from the spool.
	Spool Spool
	// SlowWrite is how long a write may take before the batches ready
	// behind it go to the Spool. Default twice FlushInterval, within
	// 20 ms and 1 s.
	SlowWrite time.Duration
}

// Spool keeps records on durable storage, oldest first (package
// pkg/invoke/spool).
type Spool interface {
	// Append adds records at the tail, durable when it returns, as many
	// as fit; kept is how many (a prefix of records).
	Append(records []Record) (kept int, err error)
	// Oldest returns up to n records from the head without removing them.
	Oldest(n int) ([]Record, error)
	// Remove deletes the n oldest records.
	Remove(n int) error
	// Len is the number of records held.
	Len() int
}

func (o *RecorderOptions) defaults() {
	if o.QueueSize <= 0 {
		o.QueueSize = 100000
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 5000
	}
	if o.BatchSize > o.QueueSize {
		o.BatchSize = o.QueueSize
	}
	if o.FlushInterval == 0 {
		o.FlushInterval = 100 * time.Millisecond
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 30 * time.Second
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 100 * time.Millisecond
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(5*time.Second, o.MinBackoff)
	}
	if o.SlowWrite <= 0 {
		o.SlowWrite = min(max(2*o.FlushInterval, 20*time.Millisecond), time.Second)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Recorder takes invocation records from any part of sless (the proxy, the
// cron runner, the job reconciler, the queue consumer) and writes them to a
// Sink in the background. Record never blocks and never fails a caller: the
// records wait in a bounded queue while the sink is slow or down and are
// written in order once it recovers; past the queue's size they are dropped
// and counted.
//
// One goroutine writes. A batch is written when it holds BatchSize records
// or when its first record has waited FlushInterval, whichever comes first;
// while a batch is being written new records gather, so the batches grow
// with the load and a record waits at most FlushInterval plus one write
// before it is stored.
type Recorder struct {
	sink Sink
	opts RecorderOptions

	mu       sync.Mutex
	chunks   [][]Record  // waiting records, each chunk at most BatchSize long
	since    []time.Time // when each chunk's first record came
	free     [][]Record  // written chunks, for reuse
	waiting  int         // records in chunks
	inflight int         // records in the batch being written
	spooling int         // records being appended to the spool
	closed   bool
	wake     chan struct{}

	// stop is cancelled when Close gives up waiting: the write in flight
	// and the retry wait end, and what is left is dropped.
	stop   context.Context
	giveUp context.CancelFunc
	done   chan struct{} // closed when the writer returns

	batchPrefix string
	batchSeq    uint64

	stats struct {
		sync.Mutex
		written, dropped int64
		// A drop spell: from the first drop to a batch kept whole with
		// no drop since it was taken.
		dropping   bool
		spellStart int64 // dropped when the spell began
		dropEpoch  uint64
	}
}

// NewRecorder starts a Recorder writing to sink. Call Close to flush and stop it.
func NewRecorder(sink Sink, opts RecorderOptions) *Recorder {
	opts.defaults()
	var b [8]byte
	_, _ = rand.Read(b[:])
	r := &Recorder{
		sink:        sink,
		opts:        opts,
		wake:        make(chan struct{}, 1),
		done:        make(chan struct{}),
		batchPrefix: hex.EncodeToString(b[:]) + "-",
	}
	r.stop, r.giveUp = context.WithCancel(context.Background())
	opts.Metrics.addDepth(r.Depth)
	if opts.Spool != nil {
		opts.Metrics.addSpooled(opts.Spool.Len)
		go r.runSpooled()
	} else {
		go r.run()
	}
	return r
}

// Record queues rec for writing and reports whether it was taken; false
// means the queue was full (or the Recorder closed) and the record is lost
// and counted. It never blocks. Record cleans rec so that any store takes
// it: invalid UTF-8 and NUL bytes are replaced, long text is cut, StartedAt
// is truncated to microseconds.
func (r *Recorder) Record(rec Record) bool {
	rec.ID = 0
	rec.normalize()
	r.mu.Lock()
	if r.closed || r.waiting+r.inflight+r.spooling >= r.opts.QueueSize {
		r.mu.Unlock()
		r.dropped(DropQueueFull, 1)
		return false
	}
	n := len(r.chunks)
	if n == 0 || len(r.chunks[n-1]) == r.opts.BatchSize {
		var c []Record
		if f := len(r.free); f > 0 {
			c, r.free = r.free[f-1], r.free[:f-1]
		} else {
			c = make([]Record, 0, min(r.opts.BatchSize, 64))
		}
		r.chunks = append(r.chunks, c)
		r.since = append(r.since, time.Now())
		n++
	}
	r.chunks[n-1] = append(r.chunks[n-1], rec)
	r.waiting++
	// The writer needs waking only when it may have something to do: the
	// first record after a quiet spell starts its FlushInterval, and a full
	// chunk goes at once. Waking it for every record would cost the callers.
	// With a spool, crossing half the room a write in flight leaves wakes
	// it too, to move the queue to disk before it fills.
	wake := r.waiting == 1 || len(r.chunks[n-1]) == r.opts.BatchSize ||
		(r.opts.Spool != nil && r.inflight > 0 && 2*r.waiting == r.opts.QueueSize-r.inflight)
	r.mu.Unlock()
	if wake {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
	return true
}

// Depth is the number of records held: waiting plus being written.
func (r *Recorder) Depth() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.waiting + r.inflight + r.spooling
}

// Written is the number of records the sink has stored.
func (r *Recorder) Written() int64 {
	r.stats.Lock()
	defer r.stats.Unlock()
	return r.stats.written
}

// Dropped is the number of records lost, for any reason.
func (r *Recorder) Dropped() int64 {
	r.stats.Lock()
	defer r.stats.Unlock()
	return r.stats.dropped
}

func (r *Recorder) dropped(reason string, n int) {
	if n == 0 {
		return
	}
	r.stats.Lock()
	start := !r.stats.dropping
	if start {
		r.stats.dropping, r.stats.spellStart = true, r.stats.dropped
	}
	r.stats.dropped += int64(n)
	r.stats.dropEpoch++
	r.stats.Unlock()
	if start {
		r.opts.Logger.Warn("invocation records are being dropped", "reason", reason)
	}
	r.opts.Metrics.drop(reason, n)
}

// dropEpoch changes with every drop.
func (r *Recorder) dropEpoch() uint64 {
	r.stats.Lock()
	defer r.stats.Unlock()
	return r.stats.dropEpoch
}

// kept ends a drop spell once a batch taken at epoch was kept whole and
// nothing was dropped since.
func (r *Recorder) kept(epoch uint64) {
	r.stats.Lock()
	end := r.stats.dropping && r.stats.dropEpoch == epoch
	var n int64
	if end {
		r.stats.dropping = false
		n = r.stats.dropped - r.stats.spellStart
	}
	r.stats.Unlock()
	if end {
		r.opts.Logger.Warn("invocation records are no longer dropped", "dropped", n)
	}
}

// Close stops taking records and writes those queued, retrying as usual,
// until ctx ends; what is still queued then is dropped (and counted) and
// Close returns an error saying how many. Close is safe to call more than
// once; later calls wait like the first.
func (r *Recorder) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	before := r.Dropped()
	select {
	case <-r.done:
	case <-ctx.Done():
		r.giveUp()
		<-r.done
	}
	if lost := r.Dropped() - before; lost > 0 {
		return fmt.Errorf("invocation recorder: %d records not written before shutdown", lost)
	}
	return nil
}

// next takes the oldest chunk as the next batch once it is full, has
// waited FlushInterval or the Recorder is closing, waiting for that; ok is
// false when the Recorder is closed and nothing waits.
func (r *Recorder) next() (batch []Record, ok bool) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		var due <-chan time.Time
		r.mu.Lock()
		if len(r.chunks) > 0 {
			ready := r.closed || len(r.chunks) > 1 || len(r.chunks[0]) == r.opts.BatchSize
			wait := r.opts.FlushInterval - time.Since(r.since[0])
			if ready || wait <= 0 {
				batch = r.chunks[0]
				r.chunks[0] = nil
				r.chunks = r.chunks[1:]
				r.since = r.since[1:]
				r.waiting -= len(batch)
				r.inflight = len(batch)
				r.mu.Unlock()
				return batch, true
			}
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			due = timer.C
		}
		closed := r.closed
		r.mu.Unlock()
		if closed {
			return nil, false
		}
		select {
		case <-r.wake:
		case <-due:
		case <-r.stop.Done():
		}
	}
}

// release hands a written (or dropped) batch's memory back.
func (r *Recorder) release(batch []Record) {
	clear(batch)
	r.mu.Lock()
	r.inflight = 0
	if len(r.free) < 4 {
		r.free = append(r.free, batch[:0])
	}
	r.mu.Unlock()
}

func (r *Recorder) run() {
	defer close(r.done)
	failing := false
	for {
		epoch := r.dropEpoch()
		records, ok := r.next()
		if !ok {
			return
		}
		r.batchSeq++
		batch := Batch{ID: r.batchPrefix + strconv.FormatUint(r.batchSeq, 10), Records: records}
		backoff := r.opts.MinBackoff
		for {
			err := r.write(batch)
			if err == nil {
				if failing {
					r.opts.Logger.Info("invocation records are being written again", "queued", r.Depth())
					failing = false
				}
				r.kept(epoch)
				break
			}
			if errors.Is(err, ErrPermanent) {
				n := refused(err, len(records))
				r.opts.Logger.Error("invocation records refused by the store; dropping them", "records", n, "batch", len(records), "error", err)
				r.dropped(DropRejected, n)
				break
			}
			if !failing {
				r.opts.Logger.Warn("cannot write invocation records; keeping them queued and retrying", "queued", r.Depth(), "error", err)
				failing = true
			}
			if r.stop.Err() != nil {
				r.dropRest(len(records))
				r.release(records)
				return
			}
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-r.stop.Done():
				t.Stop()
				r.dropRest(len(records))
				r.release(records)
				return
			}
			backoff = min(2*backoff, r.opts.MaxBackoff)
		}
		r.release(records)
	}
}

// dropRest counts the batch in hand and everything still waiting as lost at
// shutdown.
func (r *Recorder) dropRest(inHand int) {
	r.mu.Lock()
	n := inHand + r.waiting
	r.chunks, r.since, r.waiting = nil, nil, 0
	r.mu.Unlock()
	r.dropped(DropShutdown, n)
}

func (r *Recorder) write(b Batch) error {
	// A Close that runs out of time cancels the write in flight too.
	ctx, cancel := context.WithTimeout(r.stop, r.opts.WriteTimeout)
	defer cancel()
	start := time.Now()
	err := r.sink.Write(ctx, b)
	stored := len(b.Records)
	if err != nil {
		r.opts.Metrics.writeFailed()
		if _, ok := errors.AsType[*RefusedError](err); !ok {
			return err
		}
		stored -= refused(err, stored)
	}
	r.stats.Lock()
	r.stats.written += int64(stored)
	r.stats.Unlock()
	r.opts.Metrics.wrote(stored, time.Since(start))
	return err
}
