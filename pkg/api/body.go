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

// errBodyStalled is the error of a body read that waited out the idle timeout.
var errBodyStalled = errors.New("no part of the body arrived in time")

// idleBody reads a request body with a read deadline that moves forward
// with every read, so a slow client that keeps sending is served while one
// that stops is cut off. The deadline is the connection's, so a stalled read
// returns when it passes instead of blocking until the client goes away.
type idleBody struct {
	r    io.Reader
	rc   *http.ResponseController
	idle time.Duration
	// armed is false where the connection takes no deadline (a test
	// recorder); then reads are as they were.
	armed bool
}

// watchBody makes c's body idleBody's and returns a stop that lifts the
// deadline once the handler has read what it needs: left in place, it could
// pass while the handler writes to S3 and the apiserver, and the server's
// background read of the connection would then cancel the request.
func (s *Server) watchBody(c *gin.Context) (stop func()) {
	b := &idleBody{r: c.Request.Body, rc: http.NewResponseController(c.Writer), idle: s.opts.BodyIdleTimeout}
	b.armed = b.rc.SetReadDeadline(time.Now().Add(b.idle)) == nil
	c.Request.Body = readCloser{b, c.Request.Body}
	return func() {
		if b.armed {
			_ = b.rc.SetReadDeadline(time.Time{})
		}
	}
}

func (b *idleBody) Read(p []byte) (int, error) {
	if b.armed {
		_ = b.rc.SetReadDeadline(time.Now().Add(b.idle))
	}
	n, err := b.r.Read(p)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		return n, errBodyStalled
	}
	return n, err
}

type readCloser struct {
	io.Reader
	io.Closer
}

// bodyReadProblem answers a failed read of a request body: 408 when the
// client stopped sending, else 400 (the client went away or sent a broken
// chunked encoding).
func (s *Server) bodyReadProblem(c *gin.Context, what string, err error) *Problem {
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
