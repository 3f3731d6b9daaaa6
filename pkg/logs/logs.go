// Package logs reads a function's output and its builds' output from
// wherever they are kept: rotated files on disk in local mode
// (pkg/local), Pod logs on a cluster (pkg/adapter/kube). The REST
// API serves a Source; the web console may call one in process. Terminal
// shows sless dev's events and the functions' output to a person.
package logs

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// Query is what a caller asks of a log.
type Query struct {
	// Follow keeps the stream open for new lines until ctx ends.
	Follow bool
	// Since drops the lines written before it; zero keeps them all.
	Since time.Time
	// Tail keeps only the last Tail lines (of those the other fields
	// select) written before the call; negative keeps all.
	Tail int
	// Invocation keeps only the lines tagged with this request id (see
	// InvocationOf).
	Invocation string
}

// Line is one line of output.
type Line struct {
	// Time is when the line was written; zero when unknown.
	Time time.Time
	// Text is the line without its newline.
	Text string
	// From names where the line came from: the revision or pod of a
	// function's instance, the step of a build.
	From string
}

// Emit receives lines in the order they were written (per From); an
// error from it ends the stream with that error.
type Emit func(Line) error

// Source reads logs. Both methods block until the log is read (or, with
// Query.Follow, until ctx ends) and return nil then.
type Source interface {
	// Function streams the output of fn's instances: a Function's, or a
	// SlessService's.
	Function(ctx context.Context, fn slessv1alpha1.Workload, q Query, emit Emit) error
	// Build streams the output of fn's build named build (the name
	// status.buildRef gives). An unknown build is an error for which
	// errors.Is(err, ErrNotFound) holds.
	Build(ctx context.Context, fn slessv1alpha1.Workload, build string, q Query, emit Emit) error
}

// ErrNotFound is a build (or log) that does not exist.
var ErrNotFound = errors.New("not found")

// InvocationOf is the request id a line is tagged with, "" when none. The
// runtime wrappers write JSON lines with a "requestId" field for what
// belongs to a call (docs/runtimes.md, Logs).
func InvocationOf(text string) string {
	if !strings.HasPrefix(text, "{") || !strings.Contains(text, `"requestId"`) {
		return ""
	}
	var v struct {
		RequestID string `json:"requestId"`
	}
	if json.Unmarshal([]byte(text), &v) != nil {
		return ""
	}
	return v.RequestID
}

// Keep tells whether l passes the part of q a Source applies line by
// line: Since and Invocation.
func (q Query) Keep(l Line) bool {
	if !q.Since.IsZero() && (l.Time.IsZero() || l.Time.Before(q.Since)) {
		return false
	}
	if q.Invocation != "" && (!strings.Contains(l.Text, q.Invocation) || InvocationOf(l.Text) != q.Invocation) {
		return false
	}
	return true
}

// tail keeps the last n lines given to it; n < 0 keeps all.
type tail struct {
	n     int
	lines []Line
}

func (t *tail) add(l Line) {
	if t.n == 0 {
		return
	}
	t.lines = append(t.lines, l)
	if t.n > 0 && len(t.lines) > 2*t.n+64 {
		t.lines = append(t.lines[:0:0], t.lines[len(t.lines)-t.n:]...)
	}
}

func (t *tail) result() []Line {
	if t.n >= 0 && len(t.lines) > t.n {
		return t.lines[len(t.lines)-t.n:]
	}
	return t.lines
}

// Tail is the last n of lines (all when n < 0), for Sources that gather
// lines from several places before they cut them.
func Tail(lines []Line, n int) []Line {
	t := tail{n: n, lines: lines}
	return t.result()
}
