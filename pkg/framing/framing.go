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
//
// HTTP/2 (cleartext, by prior knowledge, as gRPC clients speak it) frames
// every body itself, in DATA frames that end the stream: there is no second
// length to disagree with. net/http's HTTP/2 server refuses the
// connection-specific fields, Transfer-Encoding among them (RFC 9113
// §8.2.2), and a Content-Length its DATA frames do not match (§8.1.1), and
// writes what it forwards with HTTP/1.1 framing of its own; so the guard
// lets HTTP/2 requests pass and the scanner stops where a connection turns
// to HTTP/2. An HTTP/1.1 "Upgrade: h2c" (RFC 7540 §3.2, deprecated by RFC
// 9113 §3.1) is declined: the request is served as HTTP/1.1, as RFC 9110
// §7.8 allows, and its connection stays HTTP/1.1 and scanned.
package framing

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"slices"
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

// PrefaceReason is the reason of the refusal of a "PRI * HTTP/2.0" request
// that net/http's HTTP/1 server reads: HTTP/2's connection preface (RFC 9113
// §3.4) cut short or sent after the connection's start.
const PrefaceReason = "MalformedPreface"

// Serve serves srv on ln as srv.Serve does, with every request checked
// first: an ambiguous one is answered 400 and its connection closed. It
// sets srv.Handler and srv.ConnContext (calling the one set before), so it
// is called once per server; ln carries plain HTTP/1.1 and, when
// srv.Protocols has UnencryptedHTTP2, HTTP/2 by prior knowledge.
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
	switch {
	case !ok:
		g.next.ServeHTTP(w, r)
		return
	case r.Method == "PRI":
		// net/http's HTTP/1 server serves "PRI * HTTP/2.0" whose preface
		// does not go on as RFC 9113 §3.4 has it; no resource is behind it.
		// The scanner queued no head for it.
		c.stop()
		refusePreface(w, r)
		return
	case r.ProtoMajor != 1:
		// HTTP/2 frames its own bodies: see the package comment.
		g.next.ServeHTTP(w, r)
		return
	}
	declineH2C(r.Header)
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

// declineH2C takes the h2c offer out of an HTTP/1.1 request's Upgrade
// (with HTTP2-Settings, which only it uses), so that nothing behind the
// guard switches protocols on it: the request is served as HTTP/1.1.
func declineH2C(h http.Header) {
	if !httpguts.HeaderValuesContainsToken(h["Upgrade"], "h2c") {
		return
	}
	h.Del("Http2-Settings")
	if others := dropTokens(h["Upgrade"], "h2c"); len(others) > 0 {
		h["Upgrade"] = others
		return
	}
	h.Del("Upgrade")
	if conn := dropTokens(h["Connection"], "upgrade", "http2-settings"); len(conn) > 0 {
		h["Connection"] = conn
	} else {
		h.Del("Connection")
	}
}

// dropTokens is the comma-separated values without the tokens named,
// however spelt.
func dropTokens(values []string, drop ...string) []string {
	var out []string
	for _, v := range values {
		for tok := range strings.SplitSeq(v, ",") {
			tok = strings.TrimSpace(tok)
			if tok != "" && !slices.ContainsFunc(drop, func(d string) bool { return strings.EqualFold(d, tok) }) {
				out = append(out, tok)
			}
		}
	}
	return out
}

// refuse answers an ambiguous request 400 and closes.
func refuse(w http.ResponseWriter, r *http.Request, h *head) {
	detail := "a request may not carry both Content-Length and Transfer-Encoding (RFC 9112 §6.1): " +
		"a server in front could take another length for its body than sless; send one of them"
	fieldDetail := "not allowed together with Content-Length"
	if h.http10 {
		detail = "HTTP/1.0 has no Transfer-Encoding (RFC 9112 §6.1): a server in front could take another length for its body than sless; " +
			"send Content-Length, or HTTP/1.1"
		fieldDetail = "not allowed in HTTP/1.0"
	}
	writeRefusal(w, r, problems.Details{
		Type: problems.TypeBase + "ambiguous-framing", Detail: detail, Reason: Reason,
		Errors: []problems.FieldError{{Field: "Transfer-Encoding", Type: string(field.ErrorTypeForbidden), Detail: fieldDetail}},
	})
}

// refusePreface answers a "PRI * HTTP/2.0" request 400 and closes.
func refusePreface(w http.ResponseWriter, r *http.Request) {
	writeRefusal(w, r, problems.Details{
		Type: problems.TypeBase + "malformed-preface", Reason: PrefaceReason,
		Detail: "PRI * HTTP/2.0 begins HTTP/2's connection preface (RFC 9113 §3.4), which must open a connection, whole, " +
			"followed by HTTP/2 frames; send HTTP/2 from the connection's first byte, or HTTP/1.1",
	})
}

// writeRefusal answers 400 with p in the shape of both the REST API's
// problems and the invoke path's (reason, requestId, X-Sless-Error), and
// closes.
func writeRefusal(w http.ResponseWriter, r *http.Request, p problems.Details) {
	id := invoke.RequestID(r)
	p.Title, p.Status, p.Instance, p.RequestID = "Bad request", http.StatusBadRequest, r.URL.Path, id
	body, _ := json.Marshal(p)
	body = append(body, '\n')
	hdr := w.Header()
	hdr.Set("Content-Type", problems.ContentType)
	hdr.Set("Content-Length", strconv.Itoa(len(body)))
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("Connection", "close")
	hdr.Set(invoke.ErrorHeader, p.Reason)
	hdr.Set(invoke.RequestIDHeader, id)
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(body)
	// Nothing more of this connection is read: net/http would otherwise
	// read on through the body before it closes.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}
