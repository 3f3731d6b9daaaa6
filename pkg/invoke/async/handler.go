package async

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/callback"
	"github.com/sless-dev/sless/pkg/invoke/wire"
	"github.com/sless-dev/sless/pkg/problems"
)

// MaxWait bounds the long poll of ?wait=.
const MaxWait = 60 * time.Second

// View is an asynchronous call's record as the API shows it; ResponseView
// is the function's answer in it.
type (
	View         = wire.AsyncInvocation
	ResponseView = wire.AsyncResponse
)

// ViewOf is j as the API shows it.
func ViewOf(j *Job) View {
	v := View{RequestID: j.RequestID, Namespace: j.Namespace, Function: j.Function, Mode: "async", State: j.State,
		Attempts: j.Attempts, Method: j.Method, Path: j.Path, IdempotencyKey: j.IdempotencyKey,
		AcceptedAt: j.AcceptedAt.UTC(), StartedAt: when(j.StartedAt), FinishedAt: when(j.FinishedAt),
		NextAttemptAt: when(j.NextAttemptAt), LastError: j.LastError}
	if cb := j.Callback; cb != nil {
		c := *cb
		c.NextAttemptAt, c.FinishedAt = utc(c.NextAttemptAt), utc(c.FinishedAt)
		v.Callback = &c
	}
	if r := j.Response; r != nil {
		rv := &ResponseView{Status: r.Status, Bytes: r.Bytes, Truncated: r.Truncated, Headers: map[string]string{}}
		for k, vs := range r.Header {
			rv.Headers[k] = strings.Join(vs, ", ")
		}
		if utf8.Valid(r.Body) {
			s := string(r.Body)
			rv.Body = &s
		} else {
			rv.BodyBase64 = r.Body
		}
		v.Response = rv
	}
	return v
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

func when(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// Handler serves the records of asynchronous calls: one by its request id
// (long-polled with ?wait=) and a function's list (?state=, ?limit=).
type Handler struct {
	Runner *Runner
}

// Get answers GET …/functions/{name}/invocations/{id}.
func (h Handler) Get(w http.ResponseWriter, r *http.Request, ns, name, id string) {
	v, errs, err := problems.Query(r.URL.RawQuery, "an invocation's record", []string{"wait"})
	if bad(w, r, errs, err) {
		return
	}
	var wait time.Duration
	if s := v.Get("wait"); s != "" {
		wait, err = parseWait(s)
		if err != nil {
			bad(w, r, []invoke.FieldError{{Field: "wait", Detail: err.Error(), Type: string(field.ErrorTypeInvalid)}}, nil)
			return
		}
	}
	deadline := time.Now().Add(wait)
	for {
		changed := h.Runner.Changed()
		j, err := h.Runner.Store.Get(r.Context(), ns, name, id)
		switch {
		case errors.Is(err, ErrNotFound):
			invoke.WriteProblem(w, invoke.Problem{Status: http.StatusNotFound, Reason: invoke.ReasonNotFound,
				Detail: "no asynchronous call " + strconv.Quote(id) + " of function " + ns + "/" + name, Instance: r.URL.Path})
			return
		case err != nil:
			unavailable(w, r, err)
			return
		}
		left := time.Until(deadline)
		if j.State.Done() || left <= 0 {
			writeJSON(w, r, ViewOf(j))
			return
		}
		t := time.NewTimer(left)
		select {
		case <-r.Context().Done():
			t.Stop()
			return
		case <-changed:
			t.Stop()
		case <-t.C:
		}
	}
}

// parseWait reads a Go duration ("30s") or whole seconds ("30").
func parseWait(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		n, nerr := strconv.Atoi(s)
		if nerr != nil {
			return 0, errors.New("must be a duration such as 30s, or seconds")
		}
		d = time.Duration(n) * time.Second
	}
	if d < 0 || d > MaxWait {
		return 0, errors.New("must be between 0s and " + MaxWait.String())
	}
	return d, nil
}

// List answers GET …/functions/{name}/invocations?mode=async.
func (h Handler) List(w http.ResponseWriter, r *http.Request, ns, name string) {
	v, errs, err := problems.Query(r.URL.RawQuery, "the asynchronous calls' listing", []string{"mode", "state", "limit", "cursor"})
	if err == nil {
		if m := v.Get("mode"); m != "async" {
			errs = append(errs, invoke.FieldError{Field: "mode", Detail: "must be async", Type: string(field.ErrorTypeNotSupported)})
		}
	}
	state := State(v.Get("state"))
	if state != "" && !ValidState(state) {
		errs = append(errs, invoke.FieldError{Field: "state", Type: string(field.ErrorTypeNotSupported),
			Detail: "must be queued, running, succeeded, failed or dead-lettered"})
	}
	limit := invoke.DefaultListLimit
	if s := v.Get("limit"); s != "" {
		n, ok := invoke.ParseListLimit(s)
		if !ok {
			errs = append(errs, invoke.FieldError{Field: "limit", Type: string(field.ErrorTypeInvalid), Detail: invoke.ListLimitDetail})
		}
		limit = n
	}
	var after *Cursor
	if s := v.Get("cursor"); s != "" {
		if after, err = ParseCursor(s); err != nil {
			errs = append(errs, invoke.FieldError{Field: "cursor", Type: string(field.ErrorTypeInvalid), Detail: "must be the next value of a previous page"})
			err = nil
		}
	}
	if bad(w, r, errs, err) {
		return
	}
	page, err := h.Runner.Store.List(r.Context(), ListQuery{Namespace: ns, Function: name, State: state, Limit: limit, After: after})
	if err != nil {
		unavailable(w, r, err)
		return
	}
	out := struct {
		Items []View `json:"items"`
		// Next is the cursor of the following page; absent on the last.
		Next string `json:"next,omitempty"`
	}{Items: make([]View, len(page.Items))}
	for i := range page.Items {
		out.Items[i] = ViewOf(&page.Items[i])
	}
	if page.Next != nil {
		out.Next = page.Next.String()
	}
	writeJSON(w, r, out)
}

// SigningKeyView is a namespace's callback signing key as the API shows it.
type SigningKeyView = wire.CallbackSigningKey

// SigningKey answers GET /v1/namespaces/{ns}/callbacks/signing-key: the key
// the namespace's callbacks are signed with, made on first use.
func (h Handler) SigningKey(w http.ResponseWriter, r *http.Request, ns string) {
	_, errs, err := problems.Query(r.URL.RawQuery, "the signing key", nil)
	if bad(w, r, errs, err) {
		return
	}
	if h.Runner.Keys == nil {
		invoke.WriteProblem(w, invoke.Problem{Status: http.StatusNotImplemented, Reason: invoke.ReasonNoCallbacks,
			Detail: "this server posts no callbacks", Instance: r.URL.Path})
		return
	}
	key, err := h.Runner.Keys.SigningKey(r.Context(), ns)
	if err != nil {
		unavailable(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, r, SigningKeyView{Namespace: ns, Key: key, Header: callback.SignatureHeader,
		Scheme: "t=<unix seconds>,v1=<hex HMAC-SHA256 of key over t + \".\" + body>"})
}

func bad(w http.ResponseWriter, r *http.Request, errs []invoke.FieldError, err error) bool {
	if err != nil {
		errs = append(errs, problems.Unparsable(err))
	}
	if len(errs) == 0 {
		return false
	}
	invoke.WriteProblem(w, invoke.Problem{Status: http.StatusBadRequest, Reason: invoke.ReasonInvalid, Title: "Query is invalid",
		Detail: "invalid query parameters", Errors: errs, Instance: r.URL.Path})
	return true
}

func unavailable(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return
	}
	w.Header().Set("Retry-After", "5")
	invoke.WriteProblem(w, invoke.Problem{Status: http.StatusServiceUnavailable, Reason: invoke.ReasonUnavailable,
		Detail: "asynchronous calls cannot be read right now: " + err.Error(), Instance: r.URL.Path})
}

func writeJSON(w http.ResponseWriter, r *http.Request, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		invoke.WriteProblem(w, invoke.Problem{Status: http.StatusInternalServerError, Detail: err.Error()})
		return
	}
	body = append(body, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}
