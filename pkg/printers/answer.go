package printers

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/sless-dev/sless/pkg/client"
)

// Head writes a response's status line and headers, sorted, as
// sless invoke -i shows them.
func Head(w io.Writer, status int, header http.Header) {
	fmt.Fprintf(w, "HTTP %d %s\n", status, http.StatusText(status))
	for _, k := range slices.Sorted(maps.Keys(header)) {
		for _, v := range header[k] {
			fmt.Fprintf(w, "%s: %s\n", k, v)
		}
	}
	fmt.Fprintln(w)
}

// Body writes b and ends it with a line break, so the shell's prompt does
// not follow it on the same line.
func Body(w io.Writer, b []byte) {
	w.Write(b)
	if len(b) > 0 && b[len(b)-1] != '\n' {
		fmt.Fprintln(w)
	}
}

// AsyncAnswer writes the function's answer kept in an asynchronous call's
// record, with its head when head is set; a call with no answer writes
// nothing.
func AsyncAnswer(w io.Writer, rec *client.AsyncInvocation, head bool) {
	r := rec.Response
	if r == nil {
		return
	}
	if head {
		h := http.Header{}
		for k, v := range r.Headers {
			h.Set(k, v)
		}
		Head(w, r.Status, h)
	}
	if r.Body != nil {
		Body(w, []byte(*r.Body))
	} else {
		Body(w, r.BodyBase64)
	}
}

// Problem is the one-line form of a problem+json answer sless made.
func Problem(a *client.Answer) string {
	var p struct {
		Title  string `json:"title"`
		Detail string `json:"detail"`
	}
	_ = json.Unmarshal(a.Body, &p)
	line := fmt.Sprintf("%d %s", a.Status, http.StatusText(a.Status))
	if p.Title != "" && !strings.EqualFold(p.Title, http.StatusText(a.Status)) {
		line += ": " + p.Title
	}
	if p.Detail != "" {
		line += ": " + p.Detail
	}
	if r := a.Header.Get(client.ErrorHeader); r != "" {
		line += " (" + r + ")"
	}
	return line
}
