package client

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/invoke/wire"
)

// Invocation is one record of GET …/functions/{name}/invocations, as the
// server writes it.
type Invocation = wire.Invocation

// InvocationQuery narrows a listing of invocations. Zero fields do not filter.
type InvocationQuery struct {
	// Status is a status class: "2xx" … "5xx".
	Status  string
	Trigger string
	Since   time.Time
	Until   time.Time
	// Limit is the page size (the API's default when 0).
	Limit  int
	Cursor string
	// Service lists a SlessService's records (…/services/{name}) rather
	// than a Function's.
	Service bool
}

// ListInvocations reads one page of a Function's invocation records,
// newest first.
func (c *Client) ListInvocations(ctx context.Context, ns, name string, q InvocationQuery) (*List[Invocation], error) {
	v := url.Values{}
	if q.Status != "" {
		v.Set("status", q.Status)
	}
	if q.Trigger != "" {
		v.Set("trigger", q.Trigger)
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339Nano))
	}
	if !q.Until.IsZero() {
		v.Set("until", q.Until.UTC().Format(time.RFC3339Nano))
	}
	if q.Limit > 0 {
		v.Set("limit", fmt.Sprint(q.Limit))
	}
	if q.Cursor != "" {
		v.Set("cursor", q.Cursor)
	}
	var out List[Invocation]
	item := functions.item(ns, name)
	if q.Service {
		item = services.item(ns, name)
	}
	if err := c.getJSON(ctx, item+"/invocations", v, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ReplaceFunction replaces a Function's spec, labels and annotations with
// fn's (PUT). A fn.ResourceVersion that is no longer current is a 409.
func (c *Client) ReplaceFunction(ctx context.Context, fn *slessv1alpha1.Function) (*slessv1alpha1.Function, error) {
	fn.APIVersion, fn.Kind = slessv1alpha1.SchemeGroupVersion.String(), "Function"
	return replace(ctx, c, functions, fn.Namespace, fn.Name, fn)
}

// Call is one request to a function through the invoke path.
type Call struct {
	// Method defaults to POST with a body, GET without.
	Method string
	// Path is appended to /fn/{ns}/{name}; it may carry a query.
	Path   string
	Header http.Header
	Body   []byte
}

// Answer is a function's answer as the invoke path sent it.
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
}

// ErrorHeader marks answers sless made itself (no capacity, a timeout, a
// failed function), as opposed to the function's own.
const ErrorHeader = "X-Sless-Error"

// SlessError says whether sless, not the function, made the answer.
func (a *Answer) SlessError() bool { return a.Header.Get(ErrorHeader) != "" }

// Invoke calls a function once through the API's invoke path
// (/fn/{ns}/{name}). It is never retried: a second call of a function with
// side effects is the caller's choice. Any status is an Answer; err is for
// calls that got none.
func (c *Client) Invoke(ctx context.Context, ns, name string, call Call) (*Answer, error) {
	u := *c.base
	path, query, _ := strings.Cut(call.Path, "?")
	u.Path = c.base.Path + "/fn/" + url.PathEscape(ns) + "/" + url.PathEscape(name)
	if path != "" {
		u.Path += "/" + strings.TrimPrefix(path, "/")
	}
	u.RawQuery = query
	method := call.Method
	if method == "" {
		method = http.MethodGet
		if call.Body != nil {
			method = http.MethodPost
		}
	}
	var body io.Reader
	if call.Body != nil {
		body = bytes.NewReader(call.Body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, u.String(), err)
	}
	for k, vs := range call.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if call.Body != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" && req.Header.Get("Authorization") == "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set("User-Agent", c.userAgent)
	res, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, u.String(), err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, c.maxAnswer+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading the answer: %w", method, u.String(), err)
	}
	if int64(len(b)) > c.maxAnswer {
		return nil, fmt.Errorf("%s %s: the answer is larger than %d bytes", method, u.String(), c.maxAnswer)
	}
	return &Answer{Status: res.StatusCode, Header: res.Header, Body: b}, nil
}

// AsyncInvocation is the record of a call made with Prefer:
// respond-async, AsyncResponse the function's answer in it, and
// CallbackSigningKey the key a namespace's callbacks are signed with, as
// the server writes them.
type (
	AsyncInvocation    = wire.AsyncInvocation
	AsyncResponse      = wire.AsyncResponse
	CallbackSigningKey = wire.CallbackSigningKey
)

// GetCallbackSigningKey reads ns's callback signing key (made on first use).
func (c *Client) GetCallbackSigningKey(ctx context.Context, ns string) (*CallbackSigningKey, error) {
	var out CallbackSigningKey
	if err := c.getJSON(ctx, "/v1/namespaces/"+url.PathEscape(ns)+"/callbacks/signing-key", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetAsyncInvocation reads an asynchronous call's record; wait > 0 lets
// the server hold the answer until the call ends or wait passes (at most
// 60 s).
func (c *Client) GetAsyncInvocation(ctx context.Context, ns, name, id string, wait time.Duration) (*AsyncInvocation, error) {
	v := url.Values{}
	if wait > 0 {
		v.Set("wait", wait.String())
	}
	var out AsyncInvocation
	if err := c.getJSON(ctx, functions.item(ns, name)+"/invocations/"+url.PathEscape(id), v, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AwaitAsyncInvocation follows an asynchronous call's record, a long
// poll at a time, until the call reaches a final state or ctx ends.
func (c *Client) AwaitAsyncInvocation(ctx context.Context, ns, name, id string) (*AsyncInvocation, error) {
	for {
		rec, err := c.GetAsyncInvocation(ctx, ns, name, id, 30*time.Second)
		if err != nil {
			return nil, err
		}
		if rec.Done() {
			return rec, nil
		}
	}
}

// ListAsyncInvocations lists a function's asynchronous calls, newest
// first, those in state only unless it is empty, at most limit (the API's
// default when 0).
func (c *Client) ListAsyncInvocations(ctx context.Context, ns, name, state string, limit int) ([]AsyncInvocation, error) {
	v := url.Values{"mode": {"async"}}
	if state != "" {
		v.Set("state", state)
	}
	if limit > 0 {
		v.Set("limit", fmt.Sprint(limit))
	}
	var out struct {
		Items []AsyncInvocation `json:"items"`
	}
	if err := c.getJSON(ctx, functions.item(ns, name)+"/invocations", v, &out); err != nil {
		return nil, err
	}
	if out.Items == nil {
		out.Items = []AsyncInvocation{}
	}
	return out.Items, nil
}
