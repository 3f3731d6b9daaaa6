package invoke

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sless-dev/sless/pkg/invoke/wire"
	"github.com/sless-dev/sless/pkg/problems"
)

// History lists a function's invocations, newest first. pkg/adapter/postgres
// implements it; local mode implements it over its own store.
//
// List returns at most q.Limit records of q.Namespace/q.Function that match
// every filter set in q, ordered by StartedAt then ID, both descending, and
// starting strictly after q.After when set. Page.Next is the position of the
// last record when more may follow (nil when the list is complete), so the
// next call with After = Next continues exactly where this one stopped even
// while new records arrive.
type History interface {
	List(ctx context.Context, q Query) (Page, error)
}

// Query selects invocations of one function. Zero fields do not filter.
type Query struct {
	Namespace string
	Function  string
	// StatusClass keeps records whose Status/100 equals it (2 for 2xx ...).
	StatusClass int
	// Status, when set, keeps records with exactly this status; StatusClass
	// is then its class.
	Status int
	// Trigger keeps records of one trigger (TriggerHTTP ...).
	Trigger string
	// Service lists the SlessService named Function (its records have
	// TriggerService) instead of the Function, whose records have any
	// other trigger: the two kinds share names but not records.
	Service bool
	// Since keeps records that started at or after it.
	Since time.Time
	// Until keeps records that started before it.
	Until time.Time
	// After continues a listing after this position.
	After *Cursor
	// Limit is the page size, 1 to MaxListLimit.
	Limit int
}

// Bounds of a page.
const (
	DefaultListLimit = 50
	MaxListLimit     = 1000
)

// Page is one page of a listing.
type Page struct {
	Items []Record
	Next  *Cursor
}

// Cursor is a position in a listing: the sort key of the last record seen,
// its start time and then what orders records of one start time: the
// request id in PostgreSQL (unique there with the start time), the
// record's ID in local mode.
type Cursor struct {
	StartedAt time.Time
	ID        int64
	RequestID string
}

// cursorVersion 2 adds the request id to version 1's start time and ID.
const cursorVersion = 2

// String encodes the cursor as the opaque token clients pass back.
func (c Cursor) String() string {
	b := make([]byte, 17, 17+len(c.RequestID))
	b[0] = cursorVersion
	binary.BigEndian.PutUint64(b[1:9], uint64(c.StartedAt.UnixMicro()))
	binary.BigEndian.PutUint64(b[9:17], uint64(c.ID))
	return base64.RawURLEncoding.EncodeToString(append(b, c.RequestID...))
}

// ErrBadCursor is returned by ParseCursor for a token it did not make.
var ErrBadCursor = errors.New("cursor is not one a listing returned")

// ParseCursor decodes a token made by Cursor.String, of this version or
// version 1 (no request id: a listing continues after its start time). A
// request id is one the records hold: cleanText leaves it as it is.
func ParseCursor(s string) (Cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 17 || (b[0] == 1 && len(b) != 17) || (b[0] != 1 && b[0] != cursorVersion) ||
		len(b) > 17+MaxRequestIDLength || cleanText(string(b[17:]), MaxRequestIDLength) != string(b[17:]) {
		return Cursor{}, ErrBadCursor
	}
	id := int64(binary.BigEndian.Uint64(b[9:17]))
	if id < 0 {
		return Cursor{}, ErrBadCursor
	}
	return Cursor{StartedAt: time.UnixMicro(int64(binary.BigEndian.Uint64(b[1:9]))).UTC(), ID: id, RequestID: string(b[17:])}, nil
}

// listParams are the query parameters the invocations listing takes.
var listParams = []string{"status", "trigger", "since", "until", "limit", "cursor"}

// ParseQuery reads the listing's raw query string: status (2xx, 3xx, 4xx,
// 5xx), trigger, since and until (RFC 3339), limit (1 to 1000, default 50)
// and cursor (a previous page's next). Every bad value, unknown parameter
// or repeated one is reported, each with its parameter's name; the error is
// a query string that does not parse.
func ParseQuery(namespace, function, raw string) (Query, []FieldError, error) {
	q := Query{Namespace: namespace, Function: function, Limit: DefaultListLimit}
	v, errs, err := problems.Query(raw, "the invocations listing", listParams)
	if err != nil {
		return q, nil, err
	}
	invalid := func(name, detail string) {
		errs = append(errs, FieldError{Field: name, Detail: detail, Type: string(field.ErrorTypeInvalid)})
	}
	get := func(name string) (string, bool) {
		if vals := v[name]; len(vals) == 1 {
			return vals[0], true
		}
		return "", false // absent, or repeated and so reported already
	}
	if s, ok := get("status"); ok {
		code, err := strconv.Atoi(s)
		switch {
		case len(s) == 3 && s[0] >= '1' && s[0] <= '5' && strings.EqualFold(s[1:], "xx"):
			q.StatusClass = int(s[0] - '0')
		case len(s) == 3 && err == nil && code >= 100 && code <= 599:
			q.Status, q.StatusClass = code, code/100
		default:
			invalid("status", "must be a status code such as 504 or a class: 1xx, 2xx, 3xx, 4xx or 5xx")
		}
	}
	if s, ok := get("trigger"); ok {
		if ValidTrigger(s) {
			q.Trigger = s
		} else {
			invalid("trigger", "must be one of http, cron, queue, job, service")
		}
	}
	for _, p := range []struct {
		name string
		into *time.Time
	}{{"since", &q.Since}, {"until", &q.Until}} {
		if s, ok := get(p.name); ok {
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				invalid(p.name, "must be an RFC 3339 time such as 2026-01-02T15:04:05Z")
				continue
			}
			*p.into = t
		}
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Since.Before(q.Until) {
		invalid("until", "must be after since")
	}
	if s, ok := get("limit"); ok {
		if n, ok := ParseListLimit(s); ok {
			q.Limit = n
		} else {
			invalid("limit", ListLimitDetail)
		}
	}
	if s, ok := get("cursor"); ok {
		c, err := ParseCursor(s)
		if err != nil {
			invalid("cursor", "must be the next value of a previous page")
		} else {
			q.After = &c
		}
	}
	return q, errs, nil
}

// ParseListLimit reads a listing's ?limit=, 1 to MaxListLimit.
func ParseListLimit(s string) (int, bool) {
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 1 && n <= MaxListLimit
}

// ListLimitDetail is why a ?limit= is refused.
var ListLimitDetail = "must be a whole number from 1 to " + strconv.Itoa(MaxListLimit)

// Invocation is a Record as the invocations API shows it.
type Invocation = wire.Invocation

// InvocationOf is the API view of r.
func InvocationOf(r Record) Invocation {
	return Invocation{
		ID:         strconv.FormatInt(r.ID, 10),
		Namespace:  r.Namespace,
		Function:   r.Function,
		Revision:   r.Revision,
		Trigger:    r.Trigger,
		RequestID:  r.RequestID,
		StartedAt:  r.StartedAt.UTC(),
		DurationMs: float64(r.Duration.Microseconds()) / 1000,
		Status:     r.Status,
		BytesIn:    r.BytesIn,
		BytesOut:   r.BytesOut,
		ColdStart:  r.ColdStart,
		Error:      r.Error,
	}
}

// InvocationList is the body of GET …/functions/{name}/invocations.
type InvocationList struct {
	Items []Invocation `json:"items"`
	// Next is the cursor of the following page; absent on the last page.
	Next string `json:"next,omitempty"`
}

// ListHandler serves GET /v1/namespaces/{ns}/functions/{name}/invocations.
// It checks no credentials: mount it behind the API's authentication and
// tenant check.
type ListHandler struct {
	History History
	// Functions, when set, tells a function that does not exist from one
	// never called: an empty first page of a name it does not know is a
	// 404. A deleted function's records stay listable.
	Functions Resolver
	// Logger hears the store's errors in full; callers only learn that the
	// store is unavailable. Default slog.Default().
	Logger *slog.Logger
}

// HistoryUnavailable is the detail of every problem a history store's error
// causes. The error itself may name the database's host, user and
// database, so it goes to the server's log only.
const HistoryUnavailable = "history store unavailable"

// ServeHTTP takes the namespace and function from the request's path
// values "namespace" and "name" (a Go 1.22 ServeMux pattern such as
// "GET /v1/namespaces/{namespace}/functions/{name}/invocations"), or
// failing those from the path itself.
func (h ListHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if ns == "" || name == "" {
		var ok bool
		if ns, name, ok = invocationsPath(r.URL.Path); !ok {
			writeProblem(w, listProblem(r, http.StatusNotFound, "not-found", ReasonNotFound, "path is not /v1/namespaces/{namespace}/functions/{name}/invocations"))
			return
		}
	}
	h.List(w, r, ns, name)
}

func invocationsPath(p string) (ns, name string, ok bool) {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	n := len(parts)
	if n < 6 || parts[n-1] != "invocations" || parts[n-3] != "functions" || parts[n-5] != "namespaces" {
		return "", "", false
	}
	return parts[n-4], parts[n-2], true
}

// ListService answers the listing of a SlessService's records, those of
// trigger service under its name. h.Functions, when set, resolves services.
func (h ListHandler) ListService(w http.ResponseWriter, r *http.Request, namespace, service string) {
	h.list(w, r, namespace, service, true)
}

// List answers the listing of namespace/function; for routers that hand out
// path parameters themselves, e.g. gin:
//
//	r.GET("/v1/namespaces/:ns/functions/:name/invocations", func(c *gin.Context) {
//		h.List(c.Writer, c.Request, c.Param("ns"), c.Param("name"))
//	})
func (h ListHandler) List(w http.ResponseWriter, r *http.Request, namespace, function string) {
	h.list(w, r, namespace, function, false)
}

func (h ListHandler) list(w http.ResponseWriter, r *http.Request, namespace, function string, service bool) {
	noun := "function"
	if service {
		noun = "service"
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeProblem(w, listProblem(r, http.StatusMethodNotAllowed, "method-not-allowed", "", "invocations are read with GET"))
		return
	}
	if !validNamespace(namespace) || !validFunctionName(function) {
		writeProblem(w, listProblem(r, http.StatusNotFound, "not-found", ReasonNotFound, "no "+noun+" "+strconv.Quote(namespace+"/"+function)))
		return
	}
	q, errs, err := ParseQuery(namespace, function, r.URL.RawQuery)
	q.Service = service
	switch {
	case service && q.Trigger != "" && q.Trigger != TriggerService:
		errs = append(errs, FieldError{Field: "trigger", Detail: "a SlessService's calls have trigger service", Type: string(field.ErrorTypeInvalid)})
	case !service && q.Trigger == TriggerService:
		errs = append(errs, FieldError{Field: "trigger", Detail: "a Function's calls have trigger http, cron, queue or job; a SlessService's are listed at …/services/{name}/invocations", Type: string(field.ErrorTypeInvalid)})
	}
	if err != nil {
		p := listProblem(r, http.StatusBadRequest, "invalid", ReasonInvalid, "the query string does not parse: "+err.Error())
		p.Title, p.Errors = "Query is invalid", []FieldError{problems.Unparsable(err)}
		writeProblem(w, p)
		return
	}
	if len(errs) > 0 {
		p := listProblem(r, http.StatusBadRequest, "invalid", ReasonInvalid, "invalid query parameters")
		p.Title, p.Errors = "Query is invalid", errs
		writeProblem(w, p)
		return
	}
	page, err := h.History.List(r.Context(), q)
	if err != nil {
		if r.Context().Err() != nil {
			return // the client went away
		}
		HistoryFailed(w, r, h.Logger, "list invocations", err, "namespace", namespace, "function", function)
		return
	}
	if len(page.Items) == 0 && q.After == nil && h.Functions != nil {
		if _, err := h.Functions.Resolve(r.Context(), namespace, function); errors.Is(err, ErrNotFound) {
			writeProblem(w, listProblem(r, http.StatusNotFound, "not-found", ReasonNotFound,
				"no "+noun+" "+strconv.Quote(namespace+"/"+function)+", and no invocations recorded under that name"))
			return
		}
	}
	out := InvocationList{Items: make([]Invocation, len(page.Items))}
	for i, rec := range page.Items {
		out.Items[i] = InvocationOf(rec)
	}
	if page.Next != nil {
		out.Next = page.Next.String()
	}
	WriteJSON(w, r, out)
}

// WriteJSON answers v as JSON with 200, without the body for a HEAD.
func WriteJSON(w http.ResponseWriter, r *http.Request, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeProblem(w, listProblem(r, http.StatusInternalServerError, "internal", "", err.Error()))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// listProblem is a problem of the listing, shaped as the REST API's are:
// a type URI and the request's path as instance.
func listProblem(r *http.Request, status int, slug, reason, detail string) Problem {
	return Problem{Type: problems.TypeBase + slug, Status: status, Reason: reason, Detail: detail, Instance: r.URL.Path}
}

// HistoryFailed logs a history store's error in full and answers 503: the
// error may name the database's host and user, which callers never see.
func HistoryFailed(w http.ResponseWriter, r *http.Request, log *slog.Logger, what string, err error, attrs ...any) {
	if log == nil {
		log = slog.Default()
	}
	log.Error(what, append(attrs, "error", err)...)
	w.Header().Set("Retry-After", "5")
	writeProblem(w, listProblem(r, http.StatusServiceUnavailable, "unavailable", ReasonUnavailable, HistoryUnavailable))
}
