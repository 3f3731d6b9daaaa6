package invoke

import (
	"errors"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// errBodyStalled is the error of a request body read that waited out
// Options.BodyIdleTimeout.
var errBodyStalled = errors.New("no byte of the request body arrived within the idle timeout")

// idleWatch cuts off a request body that sends nothing for idle, as
// pkg/api does for uploads: each read moves the connection's read deadline
// to idle from now, never past the call's own (ceiling), so a stalled read
// returns instead of holding the call until the function's timeout. The
// end of the body moves it back to the ceiling: net/http then reads the
// connection in the background, and a deadline passing there would cancel
// the call.
//
// The handler stops the watch before it returns: a transport may read the
// body after that (HTTP/2's writes it on a goroutine of its own), when the
// caller's stream is gone or its connection serves the next request.
type idleWatch struct {
	mu      sync.Mutex               // held while the deadline is set; guards conn
	conn    *http.ResponseController // nil: the connection takes no deadline
	idle    time.Duration
	ceiling time.Time
	stall   bool // the deadline set last is the idle one
	// until is that idle deadline (Unix ns), for passed on another
	// goroutine: net/http cancels the call when the deadline fires, before
	// the read returns its error.
	until atomic.Int64
}

func (w *idleWatch) arm() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.conn == nil {
		return
	}
	d := time.Now().Add(w.idle)
	if w.stall = d.Before(w.ceiling); !w.stall {
		d = w.ceiling
		w.until.Store(0)
	} else {
		w.until.Store(d.UnixNano())
	}
	_ = w.conn.SetReadDeadline(d)
}

// stop ends the watch; the deadline is the handler's again.
func (w *idleWatch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.conn, w.stall = nil, false
	w.until.Store(0)
}

// passed reports whether a read in flight waits past its idle deadline.
func (w *idleWatch) passed() bool {
	u := w.until.Load()
	return u != 0 && time.Now().UnixNano() >= u
}

// ended takes the error a read ended with, lifts the idle deadline and
// tells a stall from the rest.
func (w *idleWatch) ended(err error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.conn == nil {
		return err
	}
	_ = w.conn.SetReadDeadline(w.ceiling)
	if w.stall && errors.Is(err, os.ErrDeadlineExceeded) {
		return errBodyStalled
	}
	return err
}

// bodyStalled answers a call whose body stopped arriving: the caller's
// fault. The rest may still come, so the connection cannot carry another
// request.
func (c *call) bodyStalled(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	c.fail(w, Problem{Status: http.StatusRequestTimeout, Reason: ReasonBodyTimeout,
		Detail: "no byte of the request body arrived for " + c.p.opts.BodyIdleTimeout.String() + "; send it again"},
		"request body stalled: nothing arrived for "+c.p.opts.BodyIdleTimeout.String()+" after "+strconv.FormatInt(c.body.n.Load(), 10)+" bytes")
	// net/http would wait for the rest of the body before it closes the
	// connection: a deadline now ends that wait.
	_ = c.conn.SetReadDeadline(time.Now())
	_ = c.body.Close()
	c.p.opts.Logger.Debug("request body stalled", "namespace", c.ns, "function", c.name, "requestId", c.reqID)
}
