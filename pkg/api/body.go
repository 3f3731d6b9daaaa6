package api

import (
	"errors"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/gin-gonic/gin"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// DefaultBodyIdleTimeout is how long a request body may go without sending a
// byte before the request is answered 408. A source upload holds one of the
// few upload slots while its body arrives, so without it a handful of
// clients that open an upload and stop sending would refuse every other
// upload for as long as they kept their connections open.
const DefaultBodyIdleTimeout = 30 * time.Second

// DefaultUploadMinRate and DefaultUploadRateWindow are the slowest an
// upload body may arrive once it holds a slot: 10 KiB/s averaged over every
// 10 s, an 80 kbit/s link. A client that sends a byte now and then passes
// the idle timeout, so without a floor on the rate eight of them would keep
// every slot for as long as they liked (mod_reqtimeout's MinRate).
const (
	DefaultUploadMinRate    = 10 << 10
	DefaultUploadRateWindow = 10 * time.Second
)

// errBodyStalled is the error of a body read that waited out the idle timeout.
var errBodyStalled = errors.New("no part of the body arrived in time")

// errBodyTooSlow is the error of a body read that found the body arriving
// below the minimum rate.
var errBodyTooSlow = errors.New("the body arrived too slowly")

// idleBody reads a request body with a read deadline that moves forward
// with every read, so a slow client that keeps sending is served while one
// that stops is cut off. The deadline is the connection's, so a stalled read
// returns when it passes instead of blocking until the client goes away.
// With a rate floor the deadline is also never later than the moment the
// body falls below the minimum rate if nothing more arrives.
type idleBody struct {
	r    io.Reader
	rc   *http.ResponseController
	idle time.Duration
	// armed is false where the connection takes no deadline (a test
	// recorder); then reads are as they were.
	armed bool
	floor *rateFloor
	// floorFirst says the deadline set last was the floor's, so that its
	// passing is told apart from the idle timeout's.
	floorFirst bool
}

// watchBody makes c's body idleBody's and returns a stop that lifts the
// deadline once the handler has read what it needs: left in place, it could
// pass while the handler writes to S3 and the apiserver, and the server's
// background read of the connection would then cancel the request.
func (s *Server) watchBody(c *gin.Context) (stop func()) { return s.watch(c).stop }

func (s *Server) watch(c *gin.Context) *idleBody {
	b := &idleBody{r: c.Request.Body, rc: http.NewResponseController(c.Writer), idle: s.opts.BodyIdleTimeout}
	b.armed = b.rc.SetReadDeadline(time.Now().Add(b.idle)) == nil
	c.Request.Body = readCloser{b, c.Request.Body}
	return b
}

func (b *idleBody) stop() {
	if b.armed {
		_ = b.rc.SetReadDeadline(time.Time{})
	}
}

// holdToRate starts judging the body's rate from now: an upload calls it
// once it holds a slot, since the time it waited for one sent nothing.
func (b *idleBody) holdToRate(minRate int64, window time.Duration) {
	if minRate > 0 {
		b.floor = newRateFloor(time.Now(), minRate, window)
	}
}

func (b *idleBody) Read(p []byte) (int, error) {
	now := time.Now()
	if b.floor != nil && !b.floor.deadline(now).After(now) {
		return 0, errBodyTooSlow
	}
	if b.armed {
		d := now.Add(b.idle)
		b.floorFirst = false
		if b.floor != nil {
			if fd := b.floor.deadline(now); fd.Before(d) {
				d, b.floorFirst = fd, true
			}
		}
		_ = b.rc.SetReadDeadline(d)
	}
	n, err := b.r.Read(p)
	if b.floor != nil {
		b.floor.add(time.Now(), n)
	}
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		if b.floorFirst {
			return n, errBodyTooSlow
		}
		return n, errBodyStalled
	}
	return n, err
}

// rateFloor is a minimum rate over a sliding window: from one window after
// it starts, every window must have brought need bytes.
type rateFloor struct {
	window time.Duration
	need   int64
	from   time.Time
	// seen holds the reads of the last window, oldest first, those within a
	// sixteenth of a window of each other summed, so it stays short.
	seen  []sample
	total int64
}

type sample struct {
	first, last time.Time
	n           int64
}

func newRateFloor(start time.Time, minRate int64, window time.Duration) *rateFloor {
	need := int64(float64(minRate) * window.Seconds())
	return &rateFloor{window: window, need: max(need, 1), from: start.Add(window)}
}

func (f *rateFloor) add(now time.Time, n int) {
	if n <= 0 {
		return
	}
	f.prune(now)
	if k := len(f.seen); k > 0 && now.Sub(f.seen[k-1].first) < f.window/16 {
		f.seen[k-1].last = now
		f.seen[k-1].n += int64(n)
	} else {
		f.seen = append(f.seen, sample{first: now, last: now, n: int64(n)})
	}
	f.total += int64(n)
}

// prune forgets the reads that left the window.
func (f *rateFloor) prune(now time.Time) {
	i := 0
	for i < len(f.seen) && !f.seen[i].last.Add(f.window).After(now) {
		f.total -= f.seen[i].n
		i++
	}
	f.seen = f.seen[i:]
}

// deadline is when the body falls below the rate if nothing more arrives:
// the moment enough of what it sent has left the window, and never before
// the first window has passed.
func (f *rateFloor) deadline(now time.Time) time.Time {
	f.prune(now)
	at, left := now, f.total
	for _, s := range f.seen {
		if left < f.need {
			break
		}
		left -= s.n
		at = s.last.Add(f.window)
	}
	if at.Before(f.from) {
		return f.from
	}
	return at
}

type readCloser struct {
	io.Reader
	io.Closer
}

// bodyReadProblem answers a failed read of a request body: 408 when the
// client stopped sending or sent too slowly, else 400 (the client went away
// or sent a broken chunked encoding).
func (s *Server) bodyReadProblem(c *gin.Context, what string, err error) *Problem {
	if errors.Is(err, errBodyTooSlow) {
		c.Header("Connection", "close")
		return problem(http.StatusRequestTimeout, "body-too-slow", "Request body too slow",
			"the %s arrived at less than %d bytes/s averaged over %s, the least an upload holding a slot must send; nothing was changed, send it again over a faster link",
			what, s.opts.UploadMinRate, s.opts.UploadRateWindow).
			naming("body", field.ErrorTypeInvalid, "arrived too slowly")
	}
	if errors.Is(err, errBodyStalled) {
		// The rest of the body may still arrive: the connection cannot be
		// read for another request.
		c.Header("Connection", "close")
		return problem(http.StatusRequestTimeout, "body-timeout", "Request body timed out",
			"no byte of the %s arrived for %s; nothing was changed, send it again", what, s.opts.BodyIdleTimeout).
			naming("body", field.ErrorTypeRequired, "stopped arriving")
	}
	return badRequest("reading the %s: %v", what, err).naming("body", field.ErrorTypeInvalid, err.Error())
}
