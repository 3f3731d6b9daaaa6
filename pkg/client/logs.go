package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// LogQuery selects the lines of a log (docs/api.md, Logs).
type LogQuery struct {
	// Service reads a SlessService's log (…/services/{name}) rather than
	// a Function's.
	Service bool
	// Build, when set, reads that build's output (status.buildRef, or
	// "latest") instead of the function's.
	Build string
	// Follow keeps the stream open for new lines until ctx ends.
	Follow bool
	// Since is a duration back from now ("10m") or an RFC 3339 time.
	Since string
	// Tail, when not nil, keeps only the last *Tail lines.
	Tail *int
	// Invocation keeps only the lines of one call (its request id).
	Invocation string
	// Timestamps starts each line with its time.
	Timestamps bool
}

// WorkloadLogs is Logs, but when q.Service is unset and no function (or
// no such build of one) is named name, it opens the log of the service
// of that name, if there is one: what a NAME means when it is a service's.
func (c *Client) WorkloadLogs(ctx context.Context, ns, name string, q LogQuery) (io.ReadCloser, error) {
	rc, err := c.Logs(ctx, ns, name, q)
	if q.Service || !IsNotFound(err) {
		return rc, err
	}
	q.Service = true
	src, serr := c.Logs(ctx, ns, name, q)
	if serr == nil || !IsNotFound(serr) {
		return src, serr
	}
	return nil, err
}

// Logs opens a function's (or service's) log, or a build's, as text, one line each; the
// caller closes it. It is one request, never retried: a stream half read
// would be read twice. The Client's timeout does not apply (a followed log
// is read until ctx ends), only its transport.
func (c *Client) Logs(ctx context.Context, ns, name string, q LogQuery) (io.ReadCloser, error) {
	u := *c.base
	kind := "/functions/"
	if q.Service {
		kind = "/services/"
	}
	u.Path = c.base.Path + "/v1/namespaces/" + url.PathEscape(ns) + kind + url.PathEscape(name)
	if q.Build != "" {
		u.Path += "/builds/" + url.PathEscape(q.Build)
	}
	u.Path += "/logs"
	v := url.Values{}
	if q.Follow {
		v.Set("follow", "true")
	}
	if q.Since != "" {
		v.Set("since", q.Since)
	}
	if q.Tail != nil {
		v.Set("tail", strconv.Itoa(*q.Tail))
	}
	if q.Invocation != "" {
		v.Set("invocation", q.Invocation)
	}
	if q.Timestamps {
		v.Set("timestamps", "true")
	}
	u.RawQuery = v.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain, application/problem+json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set("User-Agent", c.userAgent)
	hc := &http.Client{Transport: c.http.Transport, CheckRedirect: c.http.CheckRedirect, Jar: c.http.Jar}
	res, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u.String(), err)
	}
	if res.StatusCode != http.StatusOK {
		defer res.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		return nil, parseError(http.MethodGet, u.String(), res, b)
	}
	return res.Body, nil
}
