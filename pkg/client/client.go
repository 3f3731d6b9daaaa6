// Package client is a small Go client of sless's REST API (DESIGN §6). The
// bodies are the resources' own JSON, so it speaks in the v1alpha1 types.
//
// Every call retries what the API says is worth retrying — 503 (storage or
// the cluster briefly unavailable), 429, and 409 answers that carry
// Retry-After (an object of the same name still being deleted) — with
// exponential backoff that honours Retry-After, until the context ends or the
// retry budget is spent. Idempotent calls (everything but POST) are retried on
// transport errors too, and every call on a refused connection (nothing was
// sent), though only for Retry.Unreachable: a server restarting is back by
// then, and a mistyped endpoint is told without waiting out the budget.
// Errors no wait mends — a certificate that does not verify, a host name
// that does not resolve — are not retried.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sless-dev/sless/pkg/retry"
)

// Retry says how hard a call tries before it gives up.
type Retry struct {
	// Budget bounds the time spent waiting between attempts of one call.
	Budget time.Duration
	// Initial is the first wait; each later one doubles up to Max.
	Initial time.Duration
	Max     time.Duration
	// Unreachable bounds the time spent waiting while the endpoint refuses
	// connections; zero means Budget.
	Unreachable time.Duration
}

// DefaultRetry is what New uses.
var DefaultRetry = Retry{Budget: 2 * time.Minute, Initial: 250 * time.Millisecond, Max: 8 * time.Second, Unreachable: 15 * time.Second}

// Client calls one sless API endpoint with one bearer token.
type Client struct {
	base      *url.URL
	token     string
	http      *http.Client
	retry     Retry
	userAgent string
	// maxAnswer bounds a JSON answer held in memory (maxJSONAnswer).
	maxAnswer int64
	// sleep waits between attempts; tests need not replace it.
	sleep func(ctx context.Context, d time.Duration) error
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient replaces the HTTP client (timeouts, TLS).
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// WithRetry replaces DefaultRetry.
func WithRetry(r Retry) Option { return func(c *Client) { c.retry = r } }

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// New makes a client of the API at endpoint (http or https URL, with or
// without a trailing path prefix).
func New(endpoint, token string, opts ...Option) (*Client, error) {
	if endpoint == "" {
		return nil, errors.New("endpoint is empty")
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("endpoint %q: %w", endpoint, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("endpoint %q: scheme must be http or https", endpoint)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("endpoint %q: no host", endpoint)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("endpoint %q: must not have a query or fragment", endpoint)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	// net/http refuses such a header on every attempt; say so once, here.
	if strings.IndexFunc(token, func(r rune) bool { return r != '\t' && (r < 0x20 || r == 0x7f) }) >= 0 {
		return nil, errors.New("the token holds a control character (a line break?), which an HTTP header cannot carry")
	}
	c := &Client{
		base:      u,
		token:     token,
		http:      &http.Client{Timeout: 5 * time.Minute},
		retry:     DefaultRetry,
		userAgent: "sless-go-client",
		maxAnswer: maxJSONAnswer,
		sleep:     retry.Sleep,
	}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Endpoint is the API's base URL.
func (c *Client) Endpoint() string { return c.base.String() }

const (
	// maxJSONAnswer bounds a JSON answer: a list page of 500 Functions with
	// inline code fits.
	maxJSONAnswer = 64 << 20
	// maxSourceAnswer bounds a downloaded zip, well above the API's
	// default archive limit of 64 MiB, which a server may raise.
	maxSourceAnswer = 1 << 30
)

// request is one API call; body is replayed on each attempt.
type request struct {
	method      string
	path        string
	query       url.Values
	body        []byte
	contentType string
	accept      string
	// ifMatch, when set, is sent as If-Match (a quoted ETag).
	ifMatch string
	// maxAnswer bounds the answer; 0 is the Client's.
	maxAnswer int64
}

// response is a successful answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends r, retrying as the package comment says, and returns a 2xx
// response or an error (an *Error for API answers).
func (c *Client) do(ctx context.Context, r request) (*response, error) {
	u := *c.base
	u.Path = c.base.Path + r.path
	u.RawQuery = r.query.Encode()
	var waited, refusedFor time.Duration
	backoff := c.retry.Initial
	for attempt := 1; ; attempt++ {
		resp, err := c.once(ctx, r, u.String())
		if err == nil {
			return resp, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		wait, again := c.retryable(r.method, err)
		if !again {
			return nil, err
		}
		if wait == 0 {
			// Full jitter keeps many clients from retrying in step.
			wait = backoff/2 + rand.N(backoff/2+1)
			backoff = min(backoff*2, c.retry.Max)
		}
		if waited+wait > c.retry.Budget {
			return nil, fmt.Errorf("gave up after %d attempts in %s: %w", attempt, waited.Round(time.Millisecond), err)
		}
		if retry.Refused(err) {
			if limit := c.retry.Unreachable; limit > 0 && refusedFor+wait > limit {
				return nil, fmt.Errorf("nothing answers at %s (connections refused for %s; is the endpoint right?): %w", c.base, refusedFor.Round(time.Millisecond), err)
			}
			refusedFor += wait
		}
		if serr := c.sleep(ctx, wait); serr != nil {
			return nil, err
		}
		waited += wait
	}
}

// retryable says whether err is worth another attempt and how long the
// server asked to wait (0: use the backoff).
func (c *Client) retryable(method string, err error) (time.Duration, bool) {
	var apiErr *Error
	if errors.As(err, &apiErr) {
		switch apiErr.Status {
		case http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusBadGateway, http.StatusGatewayTimeout:
			return min(apiErr.RetryAfter, c.retry.Max*4), true
		case http.StatusConflict:
			// A 409 the API expects to pass (an object still being deleted,
			// writers that kept winning the update race) says Retry-After.
			// One without it does not pass by waiting — a live object of the
			// same name, a metadata.resourceVersion that is no longer
			// current — and retrying would only delay the error.
			if apiErr.HasRetryAfter {
				return min(apiErr.RetryAfter, c.retry.Max*4), true
			}
		}
		return 0, false
	}
	switch {
	case retry.Refused(err):
		// Nothing was sent: safe to try again, a POST too.
		return 0, true
	case retry.Pointless(err):
		return 0, false
	}
	// A transport error: the request may or may not have arrived.
	return 0, method != http.MethodPost
}

func (c *Client) once(ctx context.Context, r request, u string) (*response, error) {
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, body)
	if err != nil {
		return nil, err
	}
	if r.body != nil {
		req.Header.Set("Content-Type", r.contentType)
	}
	accept := r.accept
	if accept == "" {
		accept = "application/json"
	}
	req.Header.Set("Accept", accept+", application/problem+json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set("User-Agent", c.userAgent)
	if r.ifMatch != "" {
		req.Header.Set("If-Match", r.ifMatch)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", r.method, u, err)
	}
	defer res.Body.Close()
	limit := r.maxAnswer
	if limit <= 0 {
		limit = c.maxAnswer
	}
	b, err := io.ReadAll(io.LimitReader(res.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading the answer: %w", r.method, u, err)
	}
	if int64(len(b)) > limit {
		// Cut short, it would pass for the whole answer: a zip missing its
		// end, a document that does not parse.
		return nil, fmt.Errorf("%s %s: the answer is larger than %d bytes", r.method, u, limit)
	}
	if res.StatusCode >= 200 && res.StatusCode < 300 {
		return &response{status: res.StatusCode, header: res.Header, body: b}, nil
	}
	return nil, parseError(r.method, u, res, b)
}

// Error is an API answer other than 2xx, from its RFC 9457 problem document
// when it sent one.
type Error struct {
	Method string
	URL    string
	Status int
	Type   string `json:"type"`
	Title  string `json:"title"`
	Detail string `json:"detail"`
	// Fields lists the invalid fields of a 400, by their JSON path in the
	// resource ("spec.memoryMB").
	Fields []FieldError `json:"errors"`
	// RetryAfter is the server's Retry-After; HasRetryAfter says whether
	// it sent one (Retry-After: 0 means "again, now").
	RetryAfter    time.Duration
	HasRetryAfter bool
}

// FieldError is one invalid field.
type FieldError struct {
	Field  string `json:"field"`
	Detail string `json:"detail"`
	Type   string `json:"type"`
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: %d", e.Method, e.URL, e.Status)
	switch {
	case e.Title != "" && e.Detail != "" && e.Detail != e.Title:
		fmt.Fprintf(&b, " %s: %s", e.Title, e.Detail)
	case e.Detail != "":
		fmt.Fprintf(&b, " %s", e.Detail)
	case e.Title != "":
		fmt.Fprintf(&b, " %s", e.Title)
	default:
		fmt.Fprintf(&b, " %s", http.StatusText(e.Status))
	}
	for _, f := range e.Fields {
		fmt.Fprintf(&b, "; %s: %s", f.Field, f.Detail)
	}
	return b.String()
}

func parseError(method, u string, res *http.Response, body []byte) *Error {
	e := &Error{Method: method, URL: u, Status: res.StatusCode}
	ct := res.Header.Get("Content-Type")
	if strings.Contains(ct, "json") {
		// A body that is not a problem document still leaves Status.
		_ = json.Unmarshal(body, e)
	} else if s := strings.TrimSpace(string(body)); s != "" {
		if len(s) > 512 {
			s = s[:512] + "…"
		}
		e.Detail = s
	}
	if ra := res.Header.Get("Retry-After"); ra != "" {
		e.HasRetryAfter = true
		if secs, err := strconv.Atoi(ra); err == nil && secs >= 0 {
			e.RetryAfter = time.Duration(secs) * time.Second
		} else if t, err := http.ParseTime(ra); err == nil {
			e.RetryAfter = max(time.Until(t), time.Millisecond)
		}
	}
	return e
}

// StatusOf is the HTTP status of an API error, 0 for any other error.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// IsNotFound says whether the API answered 404.
func IsNotFound(err error) bool { return StatusOf(err) == http.StatusNotFound }

// IsConflict says whether the API answered 409.
func IsConflict(err error) bool { return StatusOf(err) == http.StatusConflict }

func (c *Client) getJSON(ctx context.Context, path string, query url.Values, out any) error {
	res, err := c.do(ctx, request{method: http.MethodGet, path: path, query: query})
	if err != nil {
		return err
	}
	return decode(res, out)
}

func (c *Client) sendJSON(ctx context.Context, method, path, contentType string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	res, err := c.do(ctx, request{method: method, path: path, body: b, contentType: contentType})
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	return decode(res, out)
}

func decode(res *response, out any) error {
	if err := json.Unmarshal(res.body, out); err != nil {
		return fmt.Errorf("decoding the API's answer (%d, %d bytes): %w", res.status, len(res.body), err)
	}
	return nil
}
