package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/logs"
)

// liveTail is how many earlier lines the live logs panel starts with.
const liveTail = 100

// lineHTML is one log line as the panel shows it; html/template escapes
// the text, whatever the function printed.
var lineHTML = template.Must(template.New("line").Parse(
	`<div class="line{{if .Note}} note{{end}}{{with .Level}} {{.}}{{end}}">` +
		`{{if not .Time.IsZero}}<time datetime="{{.Stamp}}">{{.Clock}}</time>{{end}}` +
		`{{with .Level}}<span class="level">{{.}}</span>{{end}}` +
		`{{.Text}}` +
		`{{with .RequestID}}<span class="req" title="request {{.}}">{{.}}</span>{{end}}</div>`))

type shownLine struct {
	Time      time.Time
	Stamp     string
	Clock     string
	Level     string
	Text      string
	RequestID string
	Note      bool
}

// logStream streams the function's output to the live logs panel as
// server-sent events, one "line" event of HTML each: the last lines, then
// each new one, until the browser leaves the page. A browser that
// reconnects sends the last event's id, its line's time, and gets what
// came after it.
func (c *Console) logStream(w http.ResponseWriter, r *http.Request, s *session) {
	if c.opts.Logs == nil {
		c.fail(w, r, http.StatusNotFound, "Not found", "This server keeps no logs.")
		return
	}
	fn := c.getFunction(w, r)
	if fn == nil {
		return
	}
	q := logs.Query{Follow: true, Tail: liveTail}
	if id := r.URL.Query().Get("invocation"); id != "" {
		if !requestID(id) {
			c.fail(w, r, http.StatusBadRequest, "Not a request id", "invocation must be a request id as the invocations list shows it.")
			return
		}
		q.Invocation = id
	}
	c.streamLines(w, r, q, func(q logs.Query, emit logs.Emit) error {
		return c.opts.Logs.Function(r.Context(), fn, q, emit)
	}, func(err error) string {
		c.log.Warn("console: stream logs", "namespace", fn.Namespace, "function", fn.Name, "error", err)
		return "The log stream stopped: the logs cannot be read now."
	})
}

// streamLines answers read's lines as server-sent events, one "line"
// event of HTML each. A browser that reconnects sends the last event's id,
// its line's time, and gets what came after it. A read that fails is told
// in a last line, worded by failed.
func (c *Console) streamLines(w http.ResponseWriter, r *http.Request, q logs.Query,
	read func(logs.Query, logs.Emit) error, failed func(error) string) {
	rc := http.NewResponseController(w)
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		if t, err := time.Parse(time.RFC3339Nano, id); err == nil {
			q.Since, q.Tail = t.Add(time.Nanosecond), -1
		}
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no") // a proxy in front must not hold lines back
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()
	send := func(l shownLine) error {
		var buf bytes.Buffer
		buf.WriteString("event: line\n")
		if !l.Time.IsZero() {
			buf.WriteString("id: " + l.Stamp + "\n")
		}
		var html strings.Builder
		if err := lineHTML.Execute(&html, l); err != nil {
			return err
		}
		// A data field ends at a line break: the escaped text keeps its
		// carriage returns and newlines as character references.
		buf.WriteString("data: " + strings.NewReplacer("\r", "&#13;", "\n", "&#10;").Replace(html.String()) + "\n\n")
		if _, err := w.Write(buf.Bytes()); err != nil {
			return err
		}
		return rc.Flush()
	}
	err := read(q, func(l logs.Line) error { return send(lineOf(l)) })
	if err != nil && r.Context().Err() == nil && !errors.Is(err, context.Canceled) {
		_ = send(shownLine{Text: failed(err), Note: true})
	}
}

// lineOf is a line as the panel shows it. The runtime wrappers write JSON
// lines (docs/runtimes.md, Logs): their message, level and request id are
// shown rather than the JSON; any other line is shown as it is.
func lineOf(l logs.Line) shownLine {
	s := shownLine{Time: l.Time, Text: l.Text}
	if !l.Time.IsZero() {
		s.Stamp = l.Time.UTC().Format(time.RFC3339Nano)
		s.Clock = l.Time.UTC().Format("15:04:05")
	}
	if strings.HasPrefix(l.Text, "{") {
		var v struct {
			Level     string  `json:"level"`
			Msg       *string `json:"msg"`
			RequestID string  `json:"requestId"`
		}
		if json.Unmarshal([]byte(l.Text), &v) == nil && v.Msg != nil {
			s.Text, s.RequestID = *v.Msg, v.RequestID
			switch v.Level {
			case "debug", "warn", "error":
				s.Level = v.Level
			}
		}
	}
	return s
}

// requestID tells whether s can be a request id, as the proxy takes one
// from a caller (invoke.RequestID): printable ASCII without space, quote,
// backslash, comma or semicolon.
func requestID(s string) bool {
	if s == "" || len(s) > invoke.MaxRequestIDLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || strings.IndexByte("\"\\,;", c) >= 0 {
			return false
		}
	}
	return true
}
