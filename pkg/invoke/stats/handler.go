package stats

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/problems"
)

// Handler serves GET …/functions/{name}/invocations/stats and the
// services' route. It checks no credentials: mount it behind the API's
// authentication and tenant check.
type Handler struct {
	Source Source
	// Functions (Services for the services' route), when set, tells a
	// name nothing was ever recorded under and that names nothing from
	// one never called: a 404 instead of a window of zeros.
	Functions invoke.Resolver
	Services  invoke.Resolver
	Logger    *slog.Logger
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Function answers the stats of a Function.
func (h Handler) Function(w http.ResponseWriter, r *http.Request, namespace, name string) {
	h.serve(w, r, namespace, name, false)
}

// Service answers the stats of a SlessService.
func (h Handler) Service(w http.ResponseWriter, r *http.Request, namespace, name string) {
	h.serve(w, r, namespace, name, true)
}

func (h Handler) serve(w http.ResponseWriter, r *http.Request, namespace, name string, service bool) {
	noun, resolver := "function", h.Functions
	if service {
		noun, resolver = "service", h.Services
	}
	fail := func(status int, slug, reason, detail string, errs []invoke.FieldError) {
		p := invoke.Problem{Type: problems.TypeBase + slug, Status: status, Reason: reason, Detail: detail,
			Instance: r.URL.Path, Errors: errs}
		if errs != nil {
			p.Title = "Query is invalid"
		}
		invoke.WriteProblem(w, p)
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		fail(http.StatusMethodNotAllowed, "method-not-allowed", invoke.ReasonMethodNotAllowed, "invocation stats are read with GET", nil)
		return
	}
	if len(validation.IsDNS1123Label(namespace)) > 0 || len(validation.IsDNS1123Label(name)) > 0 {
		fail(http.StatusNotFound, "not-found", invoke.ReasonNotFound, "no "+noun+" "+strconv.Quote(namespace+"/"+name), nil)
		return
	}
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	q, errs, err := Parse(namespace, name, r.URL.RawQuery, now())
	q.Service = service
	if err != nil {
		fail(http.StatusBadRequest, "invalid", invoke.ReasonInvalid, "the query string does not parse: "+err.Error(),
			[]invoke.FieldError{problems.Unparsable(err)})
		return
	}
	if len(errs) > 0 {
		fail(http.StatusBadRequest, "invalid", invoke.ReasonInvalid, "invalid query parameters", errs)
		return
	}
	buckets, err := h.Source.Stats(r.Context(), q)
	if err != nil {
		if r.Context().Err() != nil {
			return // the client went away
		}
		invoke.HistoryFailed(w, r, h.Logger, "invocation stats", err, "namespace", namespace, noun, name)
		return
	}
	if len(buckets) == 0 && resolver != nil {
		if _, err := resolver.Resolve(r.Context(), namespace, name); errors.Is(err, invoke.ErrNotFound) {
			fail(http.StatusNotFound, "not-found", invoke.ReasonNotFound,
				"no "+noun+" "+strconv.Quote(namespace+"/"+name)+", and no invocations recorded under that name in the window", nil)
			return
		}
	}
	invoke.WriteJSON(w, r, SeriesOf(q, buckets))
}
