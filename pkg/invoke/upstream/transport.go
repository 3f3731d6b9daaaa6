// Package upstream is the invoke proxy's HTTP/1.1 client to functions.
//
// net/http's Transport runs two goroutines per connection (one writes
// requests, one reads responses) and hands every call between them and the
// caller over channels. For a proxy that forwards small calls, those
// hand-offs and the thread wake-ups behind them cost more CPU than the
// socket calls themselves: measured on loopback, they were half of the
// proxy's CPU per call. Transport here writes the request and reads the
// response on the caller's goroutine, reusing net/http's own wire code
// (Request.Write, ReadResponse), and hands everything it does not do
// (https, protocol upgrades) to a standard Transport.
package upstream

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Transport is an http.RoundTripper for plain-HTTP/1.1 upstreams with
// keep-alive connection pools. The zero value is ready to use.
type Transport struct {
	// DialContext opens connections; a net.Dialer with a 10 s timeout and
	// TCP keep-alive when nil.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// MaxIdlePerHost caps the idle connections kept per host. Default 512.
	MaxIdlePerHost int
	// IdleTimeout closes connections idle this long. Default 90 s. A
	// connection the server closed while idle is found before it is reused.
	IdleTimeout time.Duration
	// BufferSize is the read and write buffer of each connection. Default 32 KiB.
	BufferSize int
	// MaxHeaderBytes caps a response's head (status line and headers,
	// informational responses before it included). Default
	// DefaultMaxHeaderBytes.
	MaxHeaderBytes int64
	// Fallback serves what Transport does not: https and protocol upgrades.
	// A plain http.Transport when nil.
	Fallback http.RoundTripper

	once     sync.Once
	dialer   net.Dialer
	fallback http.RoundTripper

	mu      sync.Mutex
	idle    map[string][]*conn
	pruning bool
}

func (t *Transport) init() {
	t.once.Do(func() {
		if t.MaxIdlePerHost <= 0 {
			t.MaxIdlePerHost = 512
		}
		if t.IdleTimeout <= 0 {
			t.IdleTimeout = 90 * time.Second
		}
		if t.BufferSize <= 0 {
			t.BufferSize = 32 << 10
		}
		if t.MaxHeaderBytes <= 0 {
			t.MaxHeaderBytes = DefaultMaxHeaderBytes
		}
		t.dialer = net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
		t.fallback = t.Fallback
		if t.fallback == nil {
			t.fallback = &http.Transport{
				DialContext:            t.dial,
				MaxIdleConnsPerHost:    t.MaxIdlePerHost,
				IdleConnTimeout:        t.IdleTimeout,
				DisableCompression:     true,
				MaxResponseHeaderBytes: t.MaxHeaderBytes,
			}
		}
		t.idle = map[string][]*conn{}
	})
}

func (t *Transport) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if t.DialContext != nil {
		return t.DialContext(ctx, network, addr)
	}
	return t.dialer.DialContext(ctx, network, addr)
}

// DefaultMaxHeaderBytes is the response head cap of a Transport that sets
// none: the proxy serves every tenant, so no function may make it hold
// unbounded headers in memory.
const DefaultMaxHeaderBytes = 1 << 20

// ErrHeaderTooLarge is the error of a call whose response head is larger
// than MaxHeaderBytes.
var ErrHeaderTooLarge = errors.New("upstream: response head too large")

// headReader counts what a connection's reader takes while a response head
// is read, and fails past the cap. Body bytes pass uncounted.
type headReader struct {
	nc       net.Conn
	limiting bool
	left     int64
}

func (r *headReader) Read(p []byte) (int, error) {
	if !r.limiting {
		return r.nc.Read(p)
	}
	if r.left <= 0 {
		return 0, ErrHeaderTooLarge
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.nc.Read(p)
	r.left -= int64(n)
	return n, err
}

// conn is one pooled connection.
type conn struct {
	nc       net.Conn
	hr       headReader
	br       *bufio.Reader
	bw       *bufio.Writer
	addr     string
	idleFrom time.Time
	probe    prober
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.init()
	if req.URL.Scheme != "http" || isUpgrade(req.Header) {
		return t.fallback.RoundTrip(req)
	}
	if req.URL.Host == "" {
		return nil, errors.New("upstream: request has no host")
	}
	addr := req.URL.Host
	if req.URL.Port() == "" {
		addr = net.JoinHostPort(req.URL.Hostname(), "80")
	}
	ctx := req.Context()
	// A reused connection found closed before any answer came was most
	// likely closed idle by the server as the request went out; but the
	// server may also have read the request and died working on it. So only
	// requests that may run twice are sent again, as net/http does: without
	// a body, and idempotent by method or by an idempotency key.
	replayable := (req.Body == nil || req.Body == http.NoBody) && idempotent(req)
	for {
		c, reused, err := t.get(ctx, addr)
		if err != nil {
			return nil, err
		}
		resp, err := t.exchange(c, req)
		if err == nil {
			return resp, nil
		}
		if !reused || !replayable || ctx.Err() != nil || !closedBeforeAnswer(err) {
			return nil, err
		}
	}
}

// CloseIdleConnections closes the connections no call is using.
func (t *Transport) CloseIdleConnections() {
	t.init()
	t.mu.Lock()
	idle := t.idle
	t.idle = map[string][]*conn{}
	t.mu.Unlock()
	for _, cs := range idle {
		for _, c := range cs {
			_ = c.nc.Close()
		}
	}
	if ci, ok := t.fallback.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// get takes the most recently used idle connection that is still open, or
// dials a new one.
func (t *Transport) get(ctx context.Context, addr string) (*conn, bool, error) {
	now := time.Now()
	t.mu.Lock()
	for cs := t.idle[addr]; len(cs) > 0; cs = t.idle[addr] {
		c := cs[len(cs)-1]
		t.idle[addr] = cs[:len(cs)-1]
		if now.Sub(c.idleFrom) < t.IdleTimeout {
			t.mu.Unlock()
			if c.probe.alive() {
				return c, true, nil
			}
			_ = c.nc.Close()
			t.mu.Lock()
			continue
		}
		_ = c.nc.Close()
	}
	t.mu.Unlock()
	nc, err := t.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, false, err
	}
	c := &conn{
		nc:   nc,
		hr:   headReader{nc: nc},
		bw:   bufio.NewWriterSize(nc, t.BufferSize),
		addr: addr,
	}
	c.br = bufio.NewReaderSize(&c.hr, t.BufferSize)
	c.probe.init(nc)
	return c, false, nil
}

// put keeps c for the next call to its host, or closes it past the cap.
func (t *Transport) put(c *conn) {
	c.idleFrom = time.Now()
	t.mu.Lock()
	cs := t.idle[c.addr]
	if len(cs) >= t.MaxIdlePerHost {
		t.mu.Unlock()
		_ = c.nc.Close()
		return
	}
	t.idle[c.addr] = append(cs, c)
	arm := !t.pruning
	t.pruning = true
	t.mu.Unlock()
	if arm {
		time.AfterFunc(t.IdleTimeout, t.prune)
	}
}

// prune closes connections idle past IdleTimeout, and looks again later
// while any are idle.
func (t *Transport) prune() {
	now := time.Now()
	var stale []*conn
	t.mu.Lock()
	left := 0
	for addr, cs := range t.idle {
		keep := cs[:0]
		for _, c := range cs {
			if now.Sub(c.idleFrom) >= t.IdleTimeout {
				stale = append(stale, c)
			} else {
				keep = append(keep, c)
			}
		}
		clear(cs[len(keep):])
		if len(keep) == 0 {
			delete(t.idle, addr)
		} else {
			t.idle[addr] = keep
		}
		left += len(keep)
	}
	t.pruning = left > 0
	t.mu.Unlock()
	for _, c := range stale {
		_ = c.nc.Close()
	}
	if left > 0 {
		time.AfterFunc(t.IdleTimeout/2, t.prune)
	}
}

// exchange sends req on c and reads the response head. A request body is
// written by a goroutine of its own, as net/http does, so that a function
// that answers before it has read the whole body (or streams its answer
// while it reads) does not stall the call.
func (t *Transport) exchange(c *conn, req *http.Request) (*http.Response, error) {
	// The call's context ending (the caller gone, the deadline passed)
	// closes the connection, which ends any read or write on it.
	stop := context.AfterFunc(req.Context(), func() { _ = c.nc.Close() })
	var written chan error
	if req.Body == nil || req.Body == http.NoBody {
		err := req.Write(c.bw)
		if err == nil {
			err = c.bw.Flush()
		}
		if err != nil {
			stop()
			_ = c.nc.Close()
			return nil, t.wrap(req, err)
		}
	} else {
		written = make(chan error, 1)
		src := &sourceBody{ReadCloser: req.Body}
		out := *req
		out.Body = src
		go func() {
			err := out.Write(c.bw)
			if err == nil {
				err = c.bw.Flush()
			}
			if src.err != nil {
				// The request's own body failed (past the proxy's cap, the
				// caller gone): the function would wait for the rest of it
				// until the deadline. Closing the connection ends its read
				// with an error, so it never takes the part sent for a
				// whole body, and ends the wait for its answer here.
				_ = c.nc.Close()
			}
			written <- err
		}()
	}
	c.hr.limiting, c.hr.left = true, t.MaxHeaderBytes
	resp, err := readResponse(c.br, req)
	c.hr.limiting = false
	if err != nil {
		stop()
		_ = c.nc.Close()
		return nil, t.wrap(req, err)
	}
	b := &body{t: t, c: c, stop: stop, written: written, close: resp.Close}
	if resp.Body == http.NoBody {
		b.finish(true)
		return resp, nil
	}
	b.rc = resp.Body
	resp.Body = b
	return resp, nil
}

// sourceBody notes the error reading a request's body returned, which
// Request.Write does not tell apart from a failed write to the connection.
// Only the writing goroutine reads it.
type sourceBody struct {
	io.ReadCloser
	err error
}

func (b *sourceBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}

// wrap reports the context's error when it ended the call: a connection
// closed under a read reads as "use of closed network connection".
func (t *Transport) wrap(req *http.Request, err error) error {
	if cerr := context.Cause(req.Context()); cerr != nil {
		return cerr
	}
	return err
}

// readResponse reads the response to req, passing over informational
// answers (100 Continue, 103 Early Hints); 101 is never asked for here.
func readResponse(br *bufio.Reader, req *http.Request) (*http.Response, error) {
	for {
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue
		}
		return resp, nil
	}
}

// writeWait is how long a finished response waits for its request's body
// to be written before the connection is given up rather than reused
// (net/http waits as long).
const writeWait = 50 * time.Millisecond

// body is a response body that hands its connection back to the pool once
// it is read to the end, the request was written whole and neither side
// asked to close.
type body struct {
	t       *Transport
	c       *conn
	rc      io.ReadCloser
	stop    func() bool
	written chan error
	close   bool
	done    bool
	err     error // what Read returns once done
}

func (b *body) Read(p []byte) (int, error) {
	if b.done {
		return 0, b.err
	}
	n, err := b.rc.Read(p)
	if err != nil {
		b.err = err
		b.finish(err == io.EOF)
	}
	return n, err
}

func (b *body) Close() error {
	if !b.done {
		b.err = http.ErrBodyReadAfterClose
		b.finish(false)
	}
	return nil
}

// finish releases the connection: back to the pool after a clean end,
// closed otherwise.
func (b *body) finish(clean bool) {
	b.done = true
	// stop reports false when the context already fired and closed the
	// connection.
	reusable := b.stop() && clean && !b.close
	if reusable && b.written != nil {
		// The writer has usually just finished; if it has not within
		// writeWait, the function answered while the request body was
		// still being sent and the connection is mid-request.
		timer := time.NewTimer(writeWait)
		select {
		case err := <-b.written:
			reusable = err == nil
		case <-timer.C:
			reusable = false
		}
		timer.Stop()
	}
	if reusable {
		b.t.put(b.c)
		return
	}
	_ = b.c.nc.Close()
}

// isUpgrade tells a request for another protocol on the connection
// (WebSocket): Connection names the Upgrade token.
func isUpgrade(h http.Header) bool {
	if h.Get("Upgrade") == "" {
		return false
	}
	for _, v := range h["Connection"] {
		for _, tok := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "upgrade") {
				return true
			}
		}
	}
	return false
}

// idempotent tells whether running req twice is as running it once.
func idempotent(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, key := req.Header["Idempotency-Key"]
	_, xkey := req.Header["X-Idempotency-Key"]
	return key || xkey
}

// closedBeforeAnswer tells whether err means the server closed the
// connection before answering: the mark of a keep-alive connection it
// timed out just as it was reused.
func closedBeforeAnswer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		strings.Contains(err.Error(), "connection reset by peer")
}
