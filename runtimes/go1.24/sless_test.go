package sless

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"testing"
)

func TestEventJSONRoundTrip(t *testing.T) {
	for _, ev := range []Event{
		{Method: "POST", Path: "/", Headers: map[string]string{"content-type": "application/json"}, Body: []byte(`{"a":1}`)},
		{Method: "PUT", Path: "/t", Headers: map[string]string{"content-type": "text/plain"}, Body: []byte("hi")},
		{Method: "POST", Path: "/b", Body: []byte{0xff, 0, 1}},
		{Method: "GET", Path: "/e"},
	} {
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		var back Event
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if string(back.Body) != string(ev.Body) || back.Method != ev.Method || back.Path != ev.Path {
			t.Errorf("%s: round trip gave %+v", b, back)
		}
	}
}

func TestEncodeResult(t *testing.T) {
	tests := []struct {
		in         any
		status     int
		ctype, out string
	}{
		{map[string]int{"a": 1}, 200, "application/json", `{"a":1}`},
		{nil, 200, "application/json", `null`},
		{[]byte("raw"), 200, "application/octet-stream", "raw"},
		{&Response{StatusCode: 201, Body: "made"}, 201, "text/plain; charset=utf-8", "made"},
		{Response{StatusCode: 202, Body: "cmF3", IsBase64Encoded: true}, 202, "application/octet-stream", "raw"},
		{&Response{StatusCode: 200, Headers: map[string]string{"content-type": "image/png"}, Body: []byte{1}}, 200, "", "\x01"},
		{map[string]any{"statusCode": float64(404), "body": map[string]any{"x": 1}}, 404, "application/json", `{"x":1}`},
	}
	for _, tc := range tests {
		enc, err := encodeResult(tc.in)
		if err != nil {
			t.Fatalf("%#v: %v", tc.in, err)
		}
		if enc.status != tc.status || strings.Join(enc.headers["Content-Type"], ",") != tc.ctype || string(enc.body) != tc.out {
			t.Errorf("%#v: got %d %q %q", tc.in, enc.status, enc.headers["Content-Type"], enc.body)
		}
	}
	if _, err := encodeResult(&Response{StatusCode: 42}); err == nil {
		t.Error("status 42 accepted")
	}
}

type myErr struct{}

func (myErr) Error() string { return "mine" }

func TestErrorType(t *testing.T) {
	for err, want := range map[error]string{
		errors.New("x"):                                "Error",
		fmt.Errorf("w: %w", errors.New("x")):           "Error",
		&fs.PathError{Op: "open", Err: fs.ErrNotExist}: "PathError",
		myErr{}:                               "myErr",
		&Error{Status: 409, Type: "Conflict"}: "Conflict",
	} {
		if got := errorType(err); got != want {
			t.Errorf("errorType(%T) = %q, want %q", err, got, want)
		}
	}
	if errorStatus(&Error{Status: 409}) != 409 || errorStatus(errors.New("x")) != 500 {
		t.Error("errorStatus")
	}
}

func TestAdaptDecodesIntoUserTypes(t *testing.T) {
	type in struct {
		Body struct{ Name string } `json:"body"`
	}
	h := adapt(func(ctx context.Context, ev in) (string, error) { return "hi " + ev.Body.Name, nil })
	out, err := h(context.Background(), &Event{Headers: map[string]string{"content-type": "application/json"}, Body: []byte(`{"Name":"Ada"}`)})
	if err != nil || out != "hi Ada" {
		t.Fatalf("got %v, %v", out, err)
	}
	// An event that does not fit the type is the caller's 400 (docs/runtimes.md);
	// the handler is not called.
	_, err = h(context.Background(), &Event{Headers: map[string]string{"content-type": "application/json"}, Body: []byte(`[1,2]`)})
	var e *Error
	if !errors.As(err, &e) || e.Status != 400 || e.Type != "BadRequest" || !strings.Contains(e.Message, "cannot decode the event into") {
		t.Errorf("array body for a struct: %v, want a 400 BadRequest", err)
	}
}

// The expectations are what Python's parse_qsl and Node.js's URLSearchParams
// give for the same strings, first value of each key.
func TestParseQueryMatchesPythonAndNode(t *testing.T) {
	for raw, want := range map[string]map[string]string{
		"t=1;u=2&bad=%zz&t=2": {"t": "1;u=2", "bad": "%zz"},
		"+p=%41+b&flag&&=e":   {" p": "A b", "flag": "", "": "e"},
		"%e9=1&k=%C3%A9":      {"\ufffd": "1", "k": "\u00e9"},
		"a=%e2%82A":           {"a": "\ufffdA"},
		"a=%ff%fe":            {"a": "\ufffd\ufffd"},
		"a=%f0%9f%98":         {"a": "\ufffd"},
		"a=%ed%a0%80":         {"a": "\ufffd\ufffd\ufffd"},
		"a=%F4%90%80%80":      {"a": "\ufffd\ufffd\ufffd\ufffd"},
		"a=%e0%80":            {"a": "\ufffd\ufffd"},
		"a=%":                 {"a": "%"},
		"a=%4":                {"a": "%4"},
		"a=%2B%2b":            {"a": "++"},
		"a=b=c":               {"a": "b=c"},
		"==":                  {"": "="},
		"a=%f0%9f%98%80":      {"a": "\U0001F600"},
		"":                    {},
	} {
		if got := parseQuery(raw); !maps.Equal(got, want) {
			t.Errorf("parseQuery(%q) = %q, want %q", raw, got, want)
		}
	}
}

// What a Go handler prints is pumped into log lines; a line longer than the
// limit goes out in pieces, and the pump keeps reading after it: a pipe
// left unread blocks every later print of the handler.
func TestPumpLines(t *testing.T) {
	long := strings.Repeat("a", maxOutputLine)
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"lines", "one\ntwo\n", []string{"one", "two"}},
		{"empty lines kept", "a\n\nb\n", []string{"a", "", "b"}},
		{"crlf", "a\r\nb\r\n", []string{"a", "b"}},
		{"unterminated last line", "a\nrest", []string{"a", "rest"}},
		{"exactly the limit", long + "\nafter\n", []string{long, "after"}},
		{"over the limit", long + "bc\nafter\n", []string{long, "bc", "after"}},
		{"twice the limit", long + long + "\nafter\n", []string{long, long, "after"}},
		{"over the limit, unterminated", "x\n" + long + "z", []string{"x", long, "z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			pumpLines(strings.NewReader(tc.in), func(l string) { got = append(got, l) })
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %d lines %.40q, want %d lines %.40q", len(got), got, len(tc.want), tc.want)
			}
		})
	}
}
