package logs

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// Formats of sless dev's terminal (Terminal): pretty for a person (one short,
// aligned line per event, the functions' JSON lines as text), text and
// json for machines (slog's handlers, every field as logged).
const (
	FormatAuto   = "auto"
	FormatPretty = "pretty"
	FormatText   = "text"
	FormatJSON   = "json"
)

// Terminal is the logger of sless dev's events and the writer the
// functions' output is echoed to, in format (auto: pretty on a terminal,
// text otherwise).
func Terminal(format string, w *os.File) (*slog.Logger, io.Writer, error) {
	if format == FormatAuto {
		format = FormatText
		if st, err := w.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			format = FormatPretty
		}
	}
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	switch format {
	case FormatText:
		return slog.New(slog.NewTextHandler(w, opts)), w, nil
	case FormatJSON:
		return slog.New(slog.NewJSONHandler(w, opts)), w, nil
	case FormatPretty:
		mu := &sync.Mutex{}
		return slog.New(&prettyHandler{w: w, mu: mu, level: slog.LevelInfo}), &prettyConsole{w: w, mu: mu}, nil
	}
	return nil, nil, fmt.Errorf("--log-format %q: want auto, pretty, text or json", format)
}

// prettyHandler writes a record as
//
//	14:25:31  build succeeded   default/hello         build=hello-build-0a1b2c3d4e took=2.1s
//
// the function in a column of its own, an error's further lines indented
// below it.
type prettyHandler struct {
	w     io.Writer
	mu    *sync.Mutex
	level slog.Level
	attrs []slog.Attr
}

func (h *prettyHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *prettyHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return &c
}

// WithGroup is not used by sless dev; groups' attributes print unqualified.
func (h *prettyHandler) WithGroup(string) slog.Handler { return h }

func (h *prettyHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Time.Format("15:04:05"))
	b.WriteString("  ")
	msg := r.Message
	if r.Level >= slog.LevelWarn {
		msg = r.Level.String() + " " + msg
	}
	fmt.Fprintf(&b, "%-17s", msg)
	fn := ""
	var rest []slog.Attr
	var more []string
	add := func(a slog.Attr) bool {
		switch {
		case a.Key == "function":
			fn = a.Value.String()
		case a.Key == "service":
			// As the services' output is prefixed: [svc:ns/name].
			fn = "svc:" + a.Value.String()
		case a.Value.Kind() == slog.KindString && strings.Contains(a.Value.String(), "\n"):
			// A build's output or a stack: first line here, the rest below.
			first, tail, _ := strings.Cut(strings.TrimSpace(a.Value.String()), "\n")
			rest = append(rest, slog.String(a.Key, first))
			more = append(more, strings.Split(tail, "\n")...)
		default:
			rest = append(rest, a)
		}
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	fmt.Fprintf(&b, " %-22s", fn)
	for _, a := range rest {
		b.WriteByte(' ')
		b.WriteString(a.Key)
		b.WriteByte('=')
		b.WriteString(quoteIfNeeded(a.Value.String()))
	}
	out := strings.TrimRight(b.String(), " ") + "\n"
	const maxMore = 12
	if len(more) > maxMore {
		more = append(more[:maxMore], fmt.Sprintf("… %d more lines", len(more)-maxMore))
	}
	for _, m := range more {
		out += "          " + m + "\n"
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, out)
	return err
}

func quoteIfNeeded(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\"=") {
		return fmt.Sprintf("%q", s)
	}
	return s
}

// prettyConsole receives the functions' output as "[ns/name] line" lines
// (serving.ServerOptions.Console in pkg/local/serving) and shows a runtime wrapper's JSON line
// as its time, the function, its level and message, and its other fields;
// other lines as they are.
type prettyConsole struct {
	w  io.Writer
	mu *sync.Mutex
}

func (p *prettyConsole) Write(b []byte) (int, error) {
	n := len(b)
	var out strings.Builder
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if line == "" {
			continue
		}
		out.WriteString(prettyLine(strings.TrimSuffix(line, "\n"), time.Now()))
		out.WriteByte('\n')
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_, err := io.WriteString(p.w, out.String())
	if err != nil {
		return 0, err
	}
	return n, nil
}

func prettyLine(line string, now time.Time) string {
	fn, text := "", line
	if strings.HasPrefix(line, "[") {
		if i := strings.Index(line, "] "); i > 0 {
			fn, text = line[1:i], line[i+2:]
		}
	}
	at := now.Format("15:04:05")
	var rec map[string]any
	if !strings.HasPrefix(text, "{") || json.Unmarshal([]byte(text), &rec) != nil {
		return fmt.Sprintf("%s  %-17s %-22s %s", at, "output", fn, text)
	}
	if s, ok := rec["time"].(string); ok {
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			at = t.Local().Format("15:04:05")
		}
	}
	level, _ := rec["level"].(string)
	msg, _ := rec["msg"].(string)
	delete(rec, "time")
	delete(rec, "level")
	delete(rec, "msg")
	// What the handler printed is its own line; the wrapper's say where
	// they come from.
	if rec["source"] == "function" {
		delete(rec, "source")
	}
	var b strings.Builder
	kind := "log " + level
	fmt.Fprintf(&b, "%s  %-17s %-22s %s", at, kind, fn, msg)
	for _, k := range sortedKeys(rec) {
		v := rec[k]
		s, ok := v.(string)
		if !ok {
			raw, _ := json.Marshal(v)
			s = string(raw)
		}
		b.WriteString(" " + k + "=" + quoteIfNeeded(s))
	}
	return b.String()
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	// requestId last: the rest of the line is about the call.
	slices.SortFunc(keys, func(a, b string) int {
		if (a == "requestId") != (b == "requestId") {
			if a == "requestId" {
				return 1
			}
			return -1
		}
		return strings.Compare(a, b)
	})
	return keys
}
