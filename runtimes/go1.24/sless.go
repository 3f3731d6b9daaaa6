// Package sless is the sless runtime for Go functions: the event, context and
// response types a handler uses, and Start, which serves a handler over HTTP
// (or runs it once in job mode) under the contract in docs/runtimes.md.
//
// A function is a Go package that exports a handler:
//
//	func Handle(ctx context.Context, ev sless.Event) (any, error)
//
// The event parameter may be any type the event's JSON decodes into (a
// map[string]any, or a struct of the user's own), and the result any type:
// a *Response (or Response) is sent as given, []byte as
// application/octet-stream, anything else as JSON. sless generates the main
// package that calls Start with the handler; a function author never writes it.
//
// The package uses the standard library only, so a build needs the network
// for the function's own requirements and nothing else.
package sless

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"mime"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// HealthPath answers 200 {"status":"ok"} once the handler is loaded.
const HealthPath = "/_sless/health"

// Event is one invocation: an HTTP request, or the payload of a job run.
type Event struct {
	Method string
	Path   string
	// Query holds the first value of each query parameter; RawQuery all of them.
	Query    map[string]string
	RawQuery string
	// Headers are keyed by lower-case name; repeated headers are joined by ", ".
	Headers map[string]string
	// Body is the request body as received.
	Body []byte
}

// IsJSON tells whether the request declared a JSON body.
func (e *Event) IsJSON() bool { return isJSONType(e.Headers["content-type"]) }

// Bind decodes a JSON body into v.
func (e *Event) Bind(v any) error {
	if len(e.Body) == 0 {
		return errors.New("sless: empty request body")
	}
	return json.Unmarshal(e.Body, v)
}

// Text is the body as a string.
func (e *Event) Text() string { return string(e.Body) }

// eventJSON is the contract's JSON form of an event, the same in every
// language: body parsed when JSON, text when UTF-8, base64 otherwise.
type eventJSON struct {
	Method          string            `json:"method"`
	Path            string            `json:"path"`
	Query           map[string]string `json:"query"`
	RawQuery        string            `json:"rawQuery"`
	Headers         map[string]string `json:"headers"`
	Body            json.RawMessage   `json:"body"`
	IsBase64Encoded bool              `json:"isBase64Encoded"`
}

// MarshalJSON writes the event in the form every sless runtime hands its
// handlers.
func (e Event) MarshalJSON() ([]byte, error) {
	out := eventJSON{Method: e.Method, Path: e.Path, Query: e.Query, RawQuery: e.RawQuery, Headers: e.Headers}
	if out.Query == nil {
		out.Query = map[string]string{}
	}
	if out.Headers == nil {
		out.Headers = map[string]string{}
	}
	switch {
	case len(e.Body) == 0:
		out.Body = json.RawMessage("null")
	case e.IsJSON() && json.Valid(e.Body):
		out.Body = e.Body
	case utf8.Valid(e.Body):
		out.Body, _ = json.Marshal(string(e.Body))
	default:
		out.Body, _ = json.Marshal(base64.StdEncoding.EncodeToString(e.Body))
		out.IsBase64Encoded = true
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads the form MarshalJSON writes.
func (e *Event) UnmarshalJSON(b []byte) error {
	var in eventJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*e = Event{Method: in.Method, Path: in.Path, Query: in.Query, RawQuery: in.RawQuery, Headers: in.Headers}
	body := strings.TrimSpace(string(in.Body))
	switch {
	case body == "" || body == "null":
	case in.IsBase64Encoded:
		var s string
		if err := json.Unmarshal(in.Body, &s); err != nil {
			return err
		}
		raw, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return err
		}
		e.Body = raw
	case body[0] == '"' && !isJSONType(in.Headers["content-type"]):
		var s string
		if err := json.Unmarshal(in.Body, &s); err != nil {
			return err
		}
		e.Body = []byte(s)
	default:
		e.Body = []byte(body)
	}
	return nil
}

func isJSONType(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

// Response is a handler result sent as given. Body may be []byte (sent raw,
// application/octet-stream unless Headers say otherwise), a string (text/plain)
// or any other value (JSON). With IsBase64Encoded, a string Body is decoded
// from base64 first.
type Response struct {
	StatusCode      int               `json:"statusCode"`
	Headers         map[string]string `json:"headers,omitempty"`
	Body            any               `json:"body,omitempty"`
	IsBase64Encoded bool              `json:"isBase64Encoded,omitempty"`
}

// Context is what a handler knows about its invocation; FromContext gets it.
type Context struct {
	FunctionName string
	Namespace    string
	Revision     string
	RequestID    string
	// Deadline is when the wrapper answers 504; ctx.Done() closes then too.
	Deadline time.Time
	// TraceID and SpanID name the call's span ("" when tracing is off);
	// TraceParent is its W3C traceparent, for calls the handler makes.
	TraceID, SpanID, TraceParent string
	logger                       *slog.Logger
}

type contextKey struct{}

// FromContext returns the invocation's Context, or nil outside a handler.
func FromContext(ctx context.Context) *Context {
	c, _ := ctx.Value(contextKey{}).(*Context)
	return c
}

// Remaining is the time left before the deadline.
func Remaining(ctx context.Context) time.Duration {
	d, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	return max(0, time.Until(d))
}

// Logger returns a structured logger whose lines carry the request id (and
// the trace and span ids when tracing is on).
func Logger(ctx context.Context) *slog.Logger {
	if c := FromContext(ctx); c != nil && c.logger != nil {
		return c.logger
	}
	return baseLogger
}

// Error lets a handler choose the status and type of its error response.
type Error struct {
	Status  int
	Type    string
	Message string
}

func (e *Error) Error() string { return e.Message }

// handler is a user's function, adapted to one shape.
type handler func(ctx context.Context, ev *Event) (any, error)

// adapt turns func(context.Context, E) (T, error) into a handler. An E other
// than Event (or *Event) receives the event's JSON form decoded into it.
func adapt[E, T any](h func(context.Context, E) (T, error)) handler {
	var zero E
	switch any(zero).(type) {
	case Event:
		return func(ctx context.Context, ev *Event) (any, error) {
			out, err := h(ctx, any(*ev).(E))
			return out, err
		}
	case *Event:
		return func(ctx context.Context, ev *Event) (any, error) {
			out, err := h(ctx, any(ev).(E))
			return out, err
		}
	}
	return func(ctx context.Context, ev *Event) (any, error) {
		b, err := json.Marshal(ev)
		if err != nil {
			return nil, err
		}
		var in E
		if err := json.Unmarshal(b, &in); err != nil {
			return nil, &Error{Status: 400, Type: "BadRequest", Message: fmt.Sprintf("cannot decode the event into %T: %v", in, err)}
		}
		out, err := h(ctx, in)
		return out, err
	}
}

// encoded is a handler result ready to send.
type encoded struct {
	status int
	// headers holds each name as the handler spelled it, with one value per
	// header line.
	headers map[string][]string
	body    []byte
}

// encodeResult turns what a handler returned into a status, headers and body.
func encodeResult(v any) (encoded, error) {
	switch r := v.(type) {
	case *Response:
		if r == nil {
			return encodeJSON(200, nil)
		}
		return encodeResponse(*r, nil)
	case Response:
		return encodeResponse(r, nil)
	case []byte:
		return encoded{200, map[string][]string{"Content-Type": {"application/octet-stream"}}, r}, nil
	case map[string]any:
		if status, ok := intValue(r["statusCode"]); ok {
			resp := Response{StatusCode: status, Body: r["body"]}
			resp.IsBase64Encoded, _ = r["isBase64Encoded"].(bool)
			var lists map[string][]string
			switch hs := r["headers"].(type) {
			case map[string]any:
				lists = make(map[string][]string, len(hs))
				for k, v := range hs {
					vs, err := headerValues(k, v)
					if err != nil {
						return encoded{}, err
					}
					lists[k] = vs
				}
			case map[string]string:
				resp.Headers = hs
			case map[string][]string:
				lists = hs
			}
			return encodeResponse(resp, lists)
		}
	}
	return encodeJSON(200, v)
}

// headerValues is a header value of a map result as lines: a list is one
// line per element, and scalars read as Node.js's String(v) would have them.
func headerValues(name string, v any) ([]string, error) {
	switch x := v.(type) {
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			t, err := headerText(name, e)
			if err != nil {
				return nil, err
			}
			out = append(out, t)
		}
		return out, nil
	case []string:
		return x, nil
	}
	t, err := headerText(name, v)
	return []string{t}, err
}

// headerText is a scalar header value as text, the same in every wrapper:
// JavaScript's String(v), whose numbers encoding/json writes alike (2, not
// 2.0; 1e+21; 1e-7). Anything else — a map, a nested list, a struct — has no
// agreed text (fmt.Sprint would send "map[a:1]"), nor has NaN or an infinity.
func headerText(name string, v any) (string, error) {
	if v == nil {
		return "null", nil
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.String:
		return rv.String(), nil
	case reflect.Bool:
		return strconv.FormatBool(rv.Bool()), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(rv.Int(), 10), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return strconv.FormatUint(rv.Uint(), 10), nil
	case reflect.Float32, reflect.Float64:
		f := rv.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return "", fmt.Errorf("header %s has the value %v, which is not a finite number", name, f)
		}
		b, err := json.Marshal(f)
		return string(b), err
	}
	return "", fmt.Errorf("header %s has a value of type %T; a header value is a string, number, boolean or null, or a list of them", name, v)
}

func intValue(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case int64:
		return int(n), true
	case float64:
		// Bounded so that the conversion is exact; anything that large is no status anyway.
		if n == math.Trunc(n) && math.Abs(n) < 1<<31 {
			return int(n), true
		}
	case json.Number:
		i, err := n.Int64()
		return int(i), err == nil
	}
	return 0, false
}

func encodeJSON(status int, v any) (encoded, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return encoded{}, err
	}
	return encoded{status, map[string][]string{"Content-Type": {"application/json"}}, b}, nil
}

// wrapperHeaders are the wrapper's own: it frames the body and names the
// request itself, and a handler's Content-Length or Transfer-Encoding would
// contradict the bytes sent, which a client or proxy on a shared connection
// reads as the start of another response.
var wrapperHeaders = map[string]bool{"content-length": true, "transfer-encoding": true, "x-request-id": true}

// encodeResponse encodes r; lists, when not nil, stands in for r.Headers with
// several lines per name.
func encodeResponse(r Response, lists map[string][]string) (encoded, error) {
	if r.StatusCode < 200 || r.StatusCode > 599 {
		// 1xx are interim responses: a client would read the body as the real one.
		return encoded{}, fmt.Errorf("statusCode %d is not a final HTTP status (200-599)", r.StatusCode)
	}
	if lists == nil {
		lists = make(map[string][]string, len(r.Headers))
		for k, v := range r.Headers {
			lists[k] = []string{v}
		}
	}
	headers := make(map[string][]string, len(lists)+1)
	hasType := false
	for k, vs := range lists {
		if !isToken(k) {
			return encoded{}, fmt.Errorf("header name %q is not an HTTP token", k)
		}
		if wrapperHeaders[strings.ToLower(k)] {
			continue
		}
		for _, v := range vs {
			// CR and LF would let the value write headers, or a response, of its own.
			if strings.ContainsFunc(v, func(c rune) bool { return (c < ' ' && c != '\t') || c == 0x7f }) {
				return encoded{}, fmt.Errorf("header %s has a control character in its value %q", k, v)
			}
		}
		headers[k] = vs
		if strings.EqualFold(k, "Content-Type") {
			hasType = true
		}
	}
	var body []byte
	var ctype string
	switch b := r.Body.(type) {
	case nil:
	case []byte:
		body, ctype = b, "application/octet-stream"
	case string:
		if r.IsBase64Encoded {
			raw, err := base64.StdEncoding.DecodeString(b)
			if err != nil {
				return encoded{}, fmt.Errorf("body is not base64: %v", err)
			}
			body, ctype = raw, "application/octet-stream"
		} else {
			body, ctype = []byte(b), "text/plain; charset=utf-8"
		}
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return encoded{}, err
		}
		body, ctype = j, "application/json"
	}
	if ctype != "" && !hasType {
		headers["Content-Type"] = []string{ctype}
	}
	return encoded{r.StatusCode, headers, body}, nil
}

// isToken tells whether s is an RFC 9110 token, what a header name must be.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// errorType names an error for the "type" of an error body: the error's own
// choice, else its Go type without package or pointer.
func errorType(err error) string {
	var se *Error
	if errors.As(err, &se) && se.Type != "" {
		return se.Type
	}
	if t, ok := err.(interface{ ErrorType() string }); ok {
		return t.ErrorType()
	}
	t := reflect.TypeOf(err)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	name := t.Name()
	switch name {
	case "", "errorString", "wrapError", "wrapErrors", "joinError":
		return "Error"
	}
	return name
}

func errorStatus(err error) int {
	var se *Error
	if errors.As(err, &se) && se.Status >= 400 && se.Status <= 599 {
		return se.Status
	}
	return 500
}

type errorDetail struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

type errorBody struct {
	Error     errorDetail `json:"error"`
	RequestID string      `json:"requestId"`
}

func newErrorBody(typ, msg, requestID string) errorBody {
	return errorBody{Error: errorDetail{Type: typ, Message: msg}, RequestID: requestID}
}
