package console

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sless-dev/sless/pkg/invoke"
)

// maxShownAnswer is how much of a function's answer the result shows.
const maxShownAnswer = 256 << 10

// invokeForm is what the invoke form sends.
type invokeForm struct {
	Method      string
	Path        string
	ContentType string
	Body        string
}

// invokeResult is the answer of a call made from the form.
type invokeResult struct {
	Status      int
	StatusText  string
	RequestID   string
	Duration    time.Duration
	ContentType string
	Body        string
	Size        int64
	Binary      bool
	Truncated   bool
}

// formMethods are the methods the form may call with.
var formMethods = map[string]bool{http.MethodGet: true, http.MethodPost: true, http.MethodPut: true, http.MethodDelete: true, http.MethodPatch: true}

// invokeFunction calls the function through the invoke proxy, in process
// and with the session's token, as `curl -H "Authorization: Bearer …"`
// would, and shows the function page with the answer.
func (c *Console) invokeFunction(w http.ResponseWriter, r *http.Request, s *session) {
	if c.opts.Invoke == nil {
		c.fail(w, r, http.StatusNotFound, "Not found", "This server has no invoke path.")
		return
	}
	fn := c.getFunction(w, r)
	if fn == nil {
		return
	}
	f := invokeForm{
		Method:      strings.ToUpper(strings.TrimSpace(r.PostFormValue("method"))),
		Path:        strings.TrimSpace(r.PostFormValue("path")),
		ContentType: strings.TrimSpace(r.PostFormValue("contentType")),
		Body:        r.PostFormValue("body"),
	}
	if f.Path == "" {
		f.Path = "/"
	}
	d := c.functionData(r, s, fn)
	d.Invoke = f
	target, problem := callPath(fn.Namespace, fn.Name, f)
	if problem != "" {
		d.Result = &invokeResult{StatusText: problem}
		c.render(w, r, http.StatusBadRequest, "function", d)
		return
	}
	var body *strings.Reader
	if f.Method != http.MethodGet {
		body = strings.NewReader(f.Body)
	} else {
		body = strings.NewReader("")
	}
	call, err := http.NewRequestWithContext(r.Context(), f.Method, target, body)
	if err != nil {
		d.Result = &invokeResult{StatusText: "The call could not be made: " + err.Error()}
		c.render(w, r, http.StatusBadRequest, "function", d)
		return
	}
	call.Host, call.RemoteAddr = r.Host, r.RemoteAddr
	call.Header.Set("Authorization", "Bearer "+s.Token)
	if f.ContentType != "" && f.Method != http.MethodGet {
		call.Header.Set("Content-Type", f.ContentType)
	}
	rec := &capture{header: http.Header{}}
	start := time.Now()
	c.opts.Invoke.ServeHTTP(rec, call)
	d.Result = rec.result(time.Since(start))
	c.render(w, r, http.StatusOK, "function", d)
}

// callPath is the /fn/ URL the form's path names, or why it names none.
func callPath(ns, name string, f invokeForm) (string, string) {
	if !formMethods[f.Method] {
		return "", "Choose a method: GET, POST, PUT, PATCH or DELETE."
	}
	if !strings.HasPrefix(f.Path, "/") || len(f.Path) > 2048 {
		return "", "The path must start with / and be at most 2048 characters."
	}
	u, err := url.Parse(f.Path)
	if err != nil || u.Host != "" || u.Scheme != "" {
		return "", "The path is not a path and query such as /items?limit=5."
	}
	if strings.Contains(u.Path, "/../") || strings.HasSuffix(u.Path, "/..") {
		return "", "The path may not climb out of the function with '..'."
	}
	p := invoke.PathPrefix + ns + "/" + name + u.EscapedPath()
	if u.RawQuery != "" {
		p += "?" + u.RawQuery
	}
	return p, ""
}

// capture keeps the start of a call's answer for the result panel.
type capture struct {
	header http.Header
	status int
	body   bytes.Buffer
	size   int64
}

func (c *capture) Header() http.Header { return c.header }

func (c *capture) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
	}
}

func (c *capture) Write(b []byte) (int, error) {
	c.WriteHeader(http.StatusOK)
	c.size += int64(len(b))
	if room := maxShownAnswer - c.body.Len(); room > 0 {
		c.body.Write(b[:min(room, len(b))])
	}
	return len(b), nil
}

// Flush lets the proxy stream as it would to a client.
func (c *capture) Flush() {}

func (c *capture) result(d time.Duration) *invokeResult {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	res := &invokeResult{
		Status: c.status, StatusText: http.StatusText(c.status), RequestID: c.header.Get(invoke.RequestIDHeader),
		Duration: d.Round(time.Millisecond), ContentType: c.header.Get("Content-Type"), Size: c.size,
		Truncated: c.size > int64(c.body.Len()),
	}
	b := c.body.Bytes()
	if res.Truncated {
		// A cut may fall inside a character.
		for len(b) > 0 && !utf8.Valid(b) && len(b) > c.body.Len()-4 {
			b = b[:len(b)-1]
		}
	}
	if utf8.Valid(b) {
		res.Body = string(b)
	} else {
		res.Binary = true
	}
	return res
}
