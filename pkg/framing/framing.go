// Package framing refuses HTTP/1.1 requests whose body length a server in
// front of sless could read differently from sless: Content-Length
// together with Transfer-Encoding, or Transfer-Encoding in HTTP/1.0. RFC
// 9112 §6.1 calls both faulty and says to close the connection after them.
//
// net/http serves such a request by its chunked coding, keeps the
// connection open, and serves the bytes after the chunked body as the next
// request: a proxy that framed the body by Content-Length sent those bytes
// as part of its client's body, and another request rides in on them
// (request smuggling). net/http also removes Content-Length from the
// request it hands the handler, so a handler cannot tell; the listener here
// follows the bytes of each connection as net/http reads them, and the
// handler asks it about each request.
package framing

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/problems"
)

// Reason is the reason of the refusal's problem and its X-Sless-Error.
const Reason = "AmbiguousFraming"

// Serve serves srv on ln as srv.Serve does, with every request checked
// first: an ambiguous one is answered 400 and its connection closed. It
// sets srv.Handler and srv.ConnContext (calling the one set before), so it
// is called once per server; ln carries plain HTTP/1.1.
func Serve(srv *http.Server, ln net.Listener) error {
	next := srv.Handler
	if next == nil {
		next = http.DefaultServeMux
	}
	srv.Handler = guard{next}
	connContext := srv.ConnContext
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if connContext != nil {
			ctx = connContext(ctx, c)
		}
		if fc, ok := c.(*conn); ok {
			ctx = context.WithValue(ctx, connKey{}, fc)
		}
		return ctx
	}
	return srv.Serve(listener{ln})
}

type listener struct{ net.Listener }

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &conn{Conn: c}, nil
}

type connKey struct{}

// conn scans what it reads before net/http parses it.
type conn struct {
	net.Conn
	mu sync.Mutex
	s  scanner
}

func (c *conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		c.s.feed(p[:n])
		c.mu.Unlock()
	}
	return n, err
}

// CloseWrite lets net/http close its side first when it ends a connection,
// so that the client reads the last answer rather than a reset.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// next takes the head of the next request, if the scanner followed it.
func (c *conn) next() (head, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.s.next()
}

// stop ends the scanning of a connection that closes after this request.
func (c *conn) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.s.state, c.s.heads = stopped, nil
}

type guard struct{ next http.Handler }

func (g guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, ok := r.Context().Value(connKey{}).(*conn)
	if !ok || r.ProtoMajor != 1 {
		g.next.ServeHTTP(w, r)
		return
	}
	h, known := c.next()
	switch {
	case known && h.is(r) && h.ambiguous():
		c.stop()
		refuse(w, r, &h)
		return
	case !known || !h.is(r) || !h.framedAs(r):
		// The scanner lost the thread (a line longer than it keeps, a
		// field it cannot read): serve this one, then close, as RFC 9112
		// allows for a request whose framing is in doubt.
		c.stop()
		w.Header().Set("Connection", "close")
	case r.Header.Get("Upgrade") != "" && httpguts.HeaderValuesContainsToken(r.Header["Connection"], "upgrade"):
		// What follows a switch of protocols is not HTTP; should the switch
		// be refused, the next request is served and the connection closed.
		c.stop()
	}
	g.next.ServeHTTP(w, r)
}

// is tells whether h is r's head.
func (h *head) is(r *http.Request) bool {
	if h.method != r.Method {
		return false
	}
	if h.targetCut {
		return strings.HasPrefix(r.RequestURI, h.target)
	}
	return h.target == r.RequestURI
}

// framedAs tells whether the scanner framed r's body as net/http did.
func (h *head) framedAs(r *http.Request) bool {
	if h.lost || h.chunked != (len(r.TransferEncoding) > 0) {
		return false
	}
	switch {
	case h.chunked:
		return r.ContentLength == -1
	case h.contentLength < 0:
		return r.ContentLength == 0
	}
	return r.ContentLength == h.contentLength
}

// refuse answers 400 in the shape of both the REST API's problems and the
// invoke path's (reason, requestId, X-Sless-Error), and closes.
func refuse(w http.ResponseWriter, r *http.Request, h *head) {
	detail := "a request may not carry both Content-Length and Transfer-Encoding (RFC 9112 §6.1): " +
		"a server in front could take another length for its body than sless; send one of them"
	fieldDetail := "not allowed together with Content-Length"
	if h.http10 {
		detail = "HTTP/1.0 has no Transfer-Encoding (RFC 9112 §6.1): a server in front could take another length for its body than sless; " +
			"send Content-Length, or HTTP/1.1"
		fieldDetail = "not allowed in HTTP/1.0"
	}
	id := invoke.RequestID(r)
	body, _ := json.Marshal(problems.Details{
		Type: problems.TypeBase + "ambiguous-framing", Title: "Bad request", Status: http.StatusBadRequest,
		Detail: detail, Instance: r.URL.Path, Reason: Reason, RequestID: id,
		Errors: []problems.FieldError{{Field: "Transfer-Encoding", Type: string(field.ErrorTypeForbidden), Detail: fieldDetail}},
	})
	body = append(body, '\n')
	hdr := w.Header()
	hdr.Set("Content-Type", problems.ContentType)
	hdr.Set("Content-Length", strconv.Itoa(len(body)))
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("Connection", "close")
	hdr.Set(invoke.ErrorHeader, Reason)
	hdr.Set(invoke.RequestIDHeader, id)
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(body)
	// Nothing more of this connection is read: net/http would otherwise
	// read on through the body before it closes.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}
