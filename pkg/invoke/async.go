package invoke

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/tracing"
)

// TriggerAsync is an attempt of a call accepted with Prefer: respond-async.
const TriggerAsync = "async"

// Headers of asynchronous calls.
const (
	PreferHeader            = "Prefer"
	PreferenceAppliedHeader = "Preference-Applied"
	IdempotencyKeyHeader    = "Idempotency-Key"
	// MaxIdempotencyKeyLength bounds an Idempotency-Key.
	MaxIdempotencyKeyLength = 255
)

// Reasons of the refusals only asynchronous calls have.
const (
	ReasonIdempotencyKey  = "InvalidIdempotencyKey"
	ReasonRequestIDTaken  = "RequestIDTaken"
	ReasonNoCallbacks     = "CallbacksNotSupported"
	ReasonCallbackURL     = "InvalidCallbackUrl"
	ReasonCallbackRefused = "CallbackUrlRefused"
)

// CallbackURLHeader names where a caller wants an asynchronous call's
// result posted, in place of the function's spec.async.onSuccess and
// onFailure.
const CallbackURLHeader = "X-Callback-Url"

// ErrNoCallbacks is what an Async that posts no results answers
// CheckCallbackURL.
var ErrNoCallbacks = errors.New("this server posts no callbacks")

// Submission is a call accepted for running later, everything the call
// needs once its caller has gone.
type Submission struct {
	Namespace, Function string
	RequestID           string
	Method              string
	// Path is the escaped path the function sees; RawQuery its query.
	Path, RawQuery string
	Header         http.Header
	Body           []byte
	RemoteAddr     string
	// Subject is who called, for private functions; empty for public ones.
	Subject string
	// ByHost marks a call on the function's own host (no path prefix).
	ByHost         bool
	IdempotencyKey string
	AcceptedAt     time.Time
	// CallbackURL is the call's X-Callback-Url, checked by the Async.
	CallbackURL string `json:",omitempty"`
}

// Accepted says where an accepted call is kept.
type Accepted struct {
	// RequestID is the call's id; for a repeated Idempotency-Key, the
	// first call's.
	RequestID string
	// Replayed is true when the Idempotency-Key named an earlier call.
	Replayed bool
}

// ErrRequestIDTaken is what an Async answers for a request id that already
// names an asynchronous call of the function.
var ErrRequestIDTaken = errors.New("request id already names an asynchronous call")

// Async keeps calls made with Prefer: respond-async and runs them later.
// Accept returns once the call is durable: its 202 promises the call runs.
// CheckCallbackURL says whether the Async would post a result to raw (a
// well-formed URL): ErrNoCallbacks, or why its policy refuses the host.
type Async interface {
	Accept(ctx context.Context, s Submission) (Accepted, error)
	CheckCallbackURL(raw string) error
}

// InvocationPath is where an asynchronous call's record is read.
func InvocationPath(ns, name, requestID string) string {
	return "/v1/namespaces/" + url.PathEscape(ns) + "/functions/" + url.PathEscape(name) + "/invocations/" + url.PathEscape(requestID)
}

// prefersAsync reports whether a Prefer header asks for respond-async
// (RFC 7240: comma-separated preferences, names compared without case).
func prefersAsync(h http.Header) bool {
	for _, v := range h.Values(PreferHeader) {
		for _, pref := range strings.Split(v, ",") {
			name, _, _ := strings.Cut(pref, ";")
			name, _, _ = strings.Cut(name, "=")
			if strings.EqualFold(strings.TrimSpace(name), "respond-async") {
				return true
			}
		}
	}
	return false
}

// wantsAsync reports whether the proxy answers c 202 and runs it later: a
// function call (not a service's, nor an upgrade) asking for it, on a
// proxy that keeps such calls. Elsewhere the preference is ignored, as RFC
// 7240 lets a server do: the call runs at once and no Preference-Applied
// says otherwise.
func (c *call) wantsAsync(r *http.Request) bool {
	return c.p.opts.Async != nil && c.trigger == TriggerHTTP && r.Header.Get("Upgrade") == "" && prefersAsync(r.Header)
}

// hopHeaders are not kept with an accepted call: they concern the
// connection it came on, or ask for the answer the 202 already gave.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer",
	"Transfer-Encoding", "Upgrade", "Expect", PreferHeader, "Content-Length"}

// accept checks c as a synchronous call would be checked, keeps it with the
// Async and answers 202 Accepted.
func (c *call) accept(w http.ResponseWriter, r *http.Request) {
	p := c.p
	if c.target.Failed != "" {
		c.refuse(w, r, failedProblem(c))
		return
	}
	callbackURL, prob := c.callbackURL(r)
	if prob != nil {
		c.refuse(w, r, *prob)
		return
	}
	keys := r.Header.Values(IdempotencyKeyHeader)
	key := r.Header.Get(IdempotencyKeyHeader)
	if len(keys) > 1 || len(keys) == 1 && (key == "" || len(key) > MaxIdempotencyKeyLength || !safeToken(key)) {
		c.refuse(w, r, Problem{Status: http.StatusBadRequest, Reason: ReasonIdempotencyKey,
			Detail: fmt.Sprintf("Idempotency-Key must be one value of 1 to %d printable characters without spaces, quotes, commas or semicolons", MaxIdempotencyKeyLength),
			Errors: []FieldError{{Field: "header:" + IdempotencyKeyHeader, Detail: "not a valid key", Type: "FieldValueInvalid"}}})
		return
	}
	if r.ContentLength > p.opts.MaxRequestBytes {
		c.refuse(w, r, tooLargeProblem(p.opts.MaxRequestBytes))
		return
	}
	body, prob := c.readBody(w, r)
	if prob != nil {
		c.refuse(w, r, *prob)
		return
	}
	header := r.Header.Clone()
	for _, k := range hopHeaders {
		header.Del(k)
	}
	header.Del(CallbackURLHeader) // sless posts there, not the function
	for k := range header {
		if strings.HasPrefix(k, "X-Sless-") {
			delete(header, k)
		}
	}
	if c.private || c.slessToken {
		// The credentials were for sless, and a kept call must not keep them.
		header.Del("Authorization")
	}
	if c.span != nil {
		// Its attempts continue this call's trace.
		header.Del("Traceparent")
		header.Del("Tracestate")
		tracing.Propagator.Inject(c.traceCtx, propagation.HeaderCarrier(header))
	}
	sub := Submission{
		Namespace: c.ns, Function: c.name, RequestID: c.reqID, Method: r.Method,
		Path: c.rest, RawQuery: r.URL.RawQuery, Header: header, Body: body, RemoteAddr: r.RemoteAddr,
		Subject: c.subject, ByHost: c.byHost, IdempotencyKey: key, AcceptedAt: c.start, CallbackURL: callbackURL,
	}
	acc, err := p.opts.Async.Accept(r.Context(), sub)
	switch {
	case errors.Is(err, ErrRequestIDTaken):
		c.refuse(w, r, Problem{Status: http.StatusConflict, Reason: ReasonRequestIDTaken,
			Detail: "X-Request-Id " + c.reqID + " already names an asynchronous call of " + c.named() + "; send Idempotency-Key to submit a call once"})
		return
	case err != nil:
		p.opts.Logger.Warn("cannot keep an asynchronous call", "namespace", c.ns, "function", c.name, "requestId", c.reqID, "error", err)
		c.refuse(w, r, Problem{Status: http.StatusServiceUnavailable, Reason: ReasonUnavailable,
			Detail: "the asynchronous call of " + c.named() + " could not be kept; nothing will run"})
		return
	}
	c.reqID = acc.RequestID
	loc := InvocationPath(c.ns, c.name, acc.RequestID)
	h := w.Header()
	h.Set("Location", p.opts.APIBaseURL+loc)
	h.Set(RequestIDHeader, acc.RequestID)
	h.Set(PreferenceAppliedHeader, "respond-async")
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	if acc.Replayed {
		h.Set("Idempotent-Replayed", "true")
	}
	if !c.byHost {
		isolate(h)
	}
	out, _ := json.Marshal(map[string]string{"requestId": acc.RequestID, "namespace": c.ns, "function": c.name,
		"state": "queued", "location": loc})
	w.WriteHeader(http.StatusAccepted)
	_, _ = w.Write(append(out, '\n'))
	p.opts.Metrics.request(http.StatusAccepted, true, time.Since(c.start), c.spanContext())
	c.platform = true
	c.endSpan(http.StatusAccepted, http.StatusAccepted)
}

// callbackURL reads X-Callback-Url: one well-formed URL whose host the
// Async's policy admits (the addresses it resolves to are checked when the
// result is posted), or none.
func (c *call) callbackURL(r *http.Request) (string, *Problem) {
	vals := r.Header.Values(CallbackURLHeader)
	if len(vals) == 0 {
		return "", nil
	}
	fe := []FieldError{{Field: "header:" + CallbackURLHeader, Type: "FieldValueInvalid"}}
	u := vals[0]
	msg := slessv1alpha1.CheckCallbackURL(u)
	if len(vals) > 1 {
		msg = "must be given once"
	}
	if msg != "" {
		fe[0].Detail = msg
		return "", &Problem{Status: http.StatusBadRequest, Reason: ReasonCallbackURL, Detail: CallbackURLHeader + " " + msg, Errors: fe}
	}
	err := c.p.opts.Async.CheckCallbackURL(u)
	switch {
	case errors.Is(err, ErrNoCallbacks):
		return "", &Problem{Status: http.StatusNotImplemented, Reason: ReasonNoCallbacks,
			Detail: "this server posts no callbacks: poll the call's record (Location, ?wait=30s) instead"}
	case err != nil:
		fe[0].Detail = err.Error()
		return "", &Problem{Status: http.StatusBadRequest, Reason: ReasonCallbackRefused, Detail: CallbackURLHeader + ": " + err.Error(), Errors: fe}
	}
	return u, nil
}

// readBody reads an accepted call's whole body, within the cap and the
// function's timeout, since the call must be kept whole before the 202.
func (c *call) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *Problem) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	limit := c.p.opts.MaxRequestBytes
	rc := http.NewResponseController(w)
	deadline := time.Now().Add(c.target.Timeout + c.p.opts.TimeoutGrace)
	if rc.SetReadDeadline(deadline) == nil {
		defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
	}
	var buf bytes.Buffer
	n, err := io.Copy(&buf, io.LimitReader(r.Body, limit+1))
	var prob Problem
	switch {
	case n > limit:
		prob = tooLargeProblem(limit)
	case err == nil:
		return buf.Bytes(), nil
	case errors.Is(err, io.ErrUnexpectedEOF):
		prob = bodyIncompleteProblem()
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		prob = bodyTimeoutProblem(c.target.Timeout)
	default:
		prob = bodyMalformedProblem(err)
	}
	// The rest of the body was not read.
	w.Header().Set("Connection", "close")
	return nil, &prob
}

func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

// RunAsync makes one attempt of an accepted call: it resolves the function
// again (it may have changed or gone since) and forwards the call with the
// function's own timeout, answering w as the proxy answers a caller. ctx
// ends the attempt early (shutdown); the call is recorded with
// TriggerAsync.
func (p *Proxy) RunAsync(ctx context.Context, w http.ResponseWriter, s *Submission) {
	u := &url.URL{RawQuery: s.RawQuery}
	if path, err := url.PathUnescape(s.Path); err == nil {
		u.Path, u.RawPath = path, s.Path
	} else {
		u.Path = s.Path
	}
	r, err := http.NewRequestWithContext(ctx, s.Method, u.String(), bytes.NewReader(s.Body))
	if err != nil {
		r, _ = http.NewRequestWithContext(ctx, http.MethodPost, "/", bytes.NewReader(s.Body))
	}
	r.URL = u
	r.RequestURI = u.RequestURI()
	r.Header = s.Header.Clone()
	if r.Header == nil {
		r.Header = http.Header{}
	}
	r.ContentLength = int64(len(s.Body))
	if len(s.Body) == 0 {
		r.Body = http.NoBody
	}
	r.RemoteAddr = s.RemoteAddr
	c := &call{p: p, ns: s.Namespace, name: s.Function, rest: s.Path, trigger: TriggerAsync, start: time.Now(),
		reqID: s.RequestID, subject: s.Subject, private: s.Subject != "", byHost: s.ByHost}
	c.startSpan(r, true)
	target, err := p.resolve(ctx, p.opts.Resolver, s.Namespace, s.Function)
	if err != nil {
		c.byHost = true // no isolation headers: nobody's browser reads this
		c.refuseResolve(w, r, err)
		return
	}
	c.target = target
	c.forward(w, r)
}
