package queue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// Headers a trigger's call carries to the invoke proxy. The proxy records a
// call with TriggerHeader's value as its trigger when the bearer token is a
// credential of a trigger of that type for that function.
const (
	TriggerHeader   = "X-Sless-Trigger"
	RequestIDHeader = "X-Request-Id"
	// MessageIDHeader and AttemptHeader tell a queue-triggered function which
	// message it got and how many times it has been tried (1 the first time).
	// They are not X-Sless-* headers, which the proxy keeps from functions.
	MessageIDHeader = "X-Queue-Message-Id"
	AttemptHeader   = "X-Queue-Attempt"
)

// Call is one call of a function through the invoke proxy.
type Call struct {
	// Trigger is the trigger type the call is recorded with ("cron", "queue").
	Trigger     string
	Body        []byte
	ContentType string
	RequestID   string
	// Header is added to the request (message id, attempt).
	Header http.Header
}

// Outcome is what a call came back with.
type Outcome struct {
	// Status is the HTTP status; 0 when no response came.
	Status int
	// Body is the start of the response body (at most MaxOutcomeBody bytes).
	Body []byte
	// Err is why no response came (connection refused, timeout).
	Err error
	// PlatformError is the proxy's X-Sless-Error reason, set when sless
	// rather than the function answered (not ready, timeout, unreachable).
	PlatformError string
}

// OK says whether the function took the call: a 2xx response.
func (o Outcome) OK() bool { return o.Err == nil && o.Status >= 200 && o.Status < 300 }

func (o Outcome) String() string {
	switch {
	case o.Err != nil:
		return o.Err.Error()
	case o.PlatformError != "":
		return fmt.Sprintf("HTTP %d (%s)", o.Status, o.PlatformError)
	}
	return "HTTP " + strconv.Itoa(o.Status)
}

// MaxOutcomeBody bounds how much of a response an Outcome keeps.
const MaxOutcomeBody = 4096

// Caller makes one call of a function and tells how it went.
type Caller interface {
	Invoke(ctx context.Context, c Call) Outcome
}

// Invoker calls one function through the invoke proxy with a trigger's
// credential. It is safe for concurrent use.
type Invoker struct {
	// URL is the function's invoke URL: {proxy}/fn/{namespace}/{name}.
	URL string
	// Token is the trigger's credential, sent as a bearer token.
	Token string
	// Timeout bounds one call: the function's timeout plus a cold start.
	Timeout time.Duration
	// Client; a client with its own keep-alive pool when nil.
	Client *http.Client
}

var defaultClient = &http.Client{Transport: &http.Transport{
	DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	MaxIdleConnsPerHost: 128,
	IdleConnTimeout:     90 * time.Second,
}}

// Invoke makes one call. It never retries: the queue consumer's retries are
// the message's, and a cron run is one call.
func (iv *Invoker) Invoke(ctx context.Context, c Call) Outcome {
	if iv.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, iv.Timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, iv.URL, bytes.NewReader(c.Body))
	if err != nil {
		return Outcome{Err: err}
	}
	for k, vs := range c.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	ct := c.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	req.Header.Set("Content-Type", ct)
	if iv.Token != "" {
		req.Header.Set("Authorization", "Bearer "+iv.Token)
	}
	if c.Trigger != "" {
		req.Header.Set(TriggerHeader, c.Trigger)
	}
	if c.RequestID != "" {
		req.Header.Set(RequestIDHeader, c.RequestID)
	}
	injectTrace(ctx, req.Header)
	client := iv.Client
	if client == nil {
		client = defaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no answer within %v: %w", iv.Timeout, err)
		}
		return Outcome{Err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxOutcomeBody))
	// Drain the rest so the connection can be reused.
	_, _ = io.Copy(io.Discard, resp.Body)
	out := Outcome{Status: resp.StatusCode, Body: body, PlatformError: resp.Header.Get("X-Sless-Error")}
	if err != nil {
		out.Err = fmt.Errorf("read response: %w", err)
	}
	return out
}
