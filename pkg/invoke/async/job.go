// Package async runs the calls the invoke proxy accepted with Prefer:
// respond-async: it keeps each in a Store before the proxy answers 202,
// runs it at least once through the proxy with the function's own timeout,
// at most spec.async.concurrency of a function at once, retries 5xx answers
// and timeouts with backoff, and dead-letters what still fails. Local mode
// keeps the Store in its data directory.
package async

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/wire"
)

// State is where an asynchronous call is in its life.
type State = wire.AsyncState

const (
	StateQueued       = wire.AsyncQueued
	StateRunning      = wire.AsyncRunning
	StateSucceeded    = wire.AsyncSucceeded
	StateFailed       = wire.AsyncFailed
	StateDeadLettered = wire.AsyncDeadLettered
)

// ValidState reports whether s is one of the states.
func ValidState(s State) bool {
	return s == StateQueued || s == StateRunning || s.Done()
}

// IdempotencyWindow is how long an Idempotency-Key names its first call.
const IdempotencyWindow = 24 * time.Hour

// DefaultMaxResponseBytes is how much of a function's answer a record keeps.
const DefaultMaxResponseBytes = 1 << 20

// Job is an accepted call and what became of it.
type Job struct {
	invoke.Submission
	State    State `json:"state"`
	Attempts int   `json:"attempts"`
	// Failures counts the attempts that spend the retry budget.
	Failures int `json:"failures"`
	// StartedAt is when the last attempt began, FinishedAt when the call
	// reached its final state, NextAttemptAt when a retry is due.
	StartedAt     time.Time `json:"startedAt,omitzero"`
	FinishedAt    time.Time `json:"finishedAt,omitzero"`
	NextAttemptAt time.Time `json:"nextAttemptAt,omitzero"`
	// LastError says why the last attempt failed.
	LastError string    `json:"lastError,omitempty"`
	Response  *Response `json:"response,omitempty"`
	// Callback is the posting of the result, once the call is final and
	// has somewhere to post it.
	Callback *Callback `json:"callback,omitempty"`
}

// CallbackPending reports whether j's result is still to be posted.
func (j *Job) CallbackPending() bool {
	return j.Callback != nil && j.Callback.State == CallbackPending
}

// Callback is the posting of a call's result to its URL; CallbackState
// is where it stands.
type (
	Callback      = wire.Callback
	CallbackState = wire.CallbackState
)

// The states of a Callback.
const (
	CallbackPending   = wire.CallbackPending
	CallbackDelivered = wire.CallbackDelivered
	CallbackFailed    = wire.CallbackFailed
)

// Response is a function's answer to the last attempt.
type Response struct {
	Status int         `json:"status"`
	Header http.Header `json:"headers,omitempty"`
	Body   []byte      `json:"body,omitempty"`
	// Bytes is the whole body's length; Truncated says Body holds less.
	Bytes     int64 `json:"bytes"`
	Truncated bool  `json:"truncated,omitempty"`
}

// ErrNotFound is a Store's answer for a call it does not keep.
var ErrNotFound = errors.New("no such asynchronous call")

// Store keeps asynchronous calls durably.
type Store interface {
	// Create keeps j, queued. When j.IdempotencyKey names a call of the
	// same function accepted within window, nothing is kept and that
	// call's id is returned with replayed true. A request id the function
	// already has is invoke.ErrRequestIDTaken.
	Create(ctx context.Context, j *Job, window time.Duration) (id string, replayed bool, err error)
	// Update replaces the kept state of j.
	Update(ctx context.Context, j *Job) error
	// Get reads one call; ErrNotFound when it is not kept.
	Get(ctx context.Context, ns, function, id string) (*Job, error)
	// List lists a function's calls as q asks, newest first, without
	// their request bodies.
	List(ctx context.Context, q ListQuery) (ListPage, error)
	// Unfinished lists every call not yet in a final state, or whose
	// result is still to be posted (CallbackPending).
	Unfinished(ctx context.Context) ([]Job, error)
}

// Keys keeps each namespace's callback signing key, made on first use.
type Keys interface {
	SigningKey(ctx context.Context, ns string) (string, error)
}

// ListQuery picks a page of one function's calls.
type ListQuery struct {
	Namespace, Function string
	// State, when set, keeps only the calls in it.
	State State
	Limit int
	// After continues a listing after the last call of its page.
	After *Cursor
}

// ListPage is a page of calls; Next continues after it (nil: the last).
type ListPage struct {
	Items []Job
	Next  *Cursor
}

// Cursor is a position in a listing, newest first: the last call shown.
type Cursor struct {
	AcceptedAt time.Time
	RequestID  string
}

// CursorOf is the position of j.
func CursorOf(j *Job) *Cursor { return &Cursor{AcceptedAt: j.AcceptedAt, RequestID: j.RequestID} }

// Follows reports whether a call accepted at with id comes after c in a
// listing: accepted earlier, or at the same time with a smaller id.
func (c *Cursor) Follows(at time.Time, id string) bool {
	if c == nil {
		return true
	}
	return at.Before(c.AcceptedAt) || at.Equal(c.AcceptedAt) && id < c.RequestID
}

// String is the cursor as the opaque token clients pass back.
func (c *Cursor) String() string {
	b := binary.BigEndian.AppendUint64([]byte{cursorVersion}, uint64(c.AcceptedAt.UnixNano()))
	return base64.RawURLEncoding.EncodeToString(append(b, c.RequestID...))
}

const cursorVersion = 1

// ErrBadCursor is ParseCursor's answer for a token no listing gave.
var ErrBadCursor = errors.New("cursor is not one a listing returned")

// ParseCursor reads a token String made.
func ParseCursor(s string) (*Cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 10 || b[0] != cursorVersion || !utf8.Valid(b[9:]) {
		return nil, ErrBadCursor
	}
	return &Cursor{AcceptedAt: time.Unix(0, int64(binary.BigEndian.Uint64(b[1:9]))).UTC(), RequestID: string(b[9:])}, nil
}
