package api

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/gin-gonic/gin"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// query refuses a request whose query string this route does not take as
// it is: one that does not parse, a parameter the route does not know, or
// one given twice. Each would otherwise be dropped or half-read without a
// word, and a client would act on an answer to another request than the
// one it sent: ?dryRun=All would write, ?fieldSelector= would list
// everything, and a cursor with a stray % would start the list again.
func (s *Server) query(allowed ...string) gin.HandlerFunc {
	takes := "takes no query parameters"
	if len(allowed) > 0 {
		takes = "takes only " + strings.Join(allowed, ", ")
	}
	return func(c *gin.Context) {
		raw := c.Request.URL.RawQuery
		if raw == "" {
			return
		}
		values, err := url.ParseQuery(raw)
		if err != nil {
			p := badRequest("the query string does not parse: %v", err)
			p.Errors = []FieldError{{Field: "query", Detail: err.Error(), Type: string(field.ErrorTypeInvalid)}}
			writeProblem(c, p)
			return
		}
		names := make([]string, 0, len(values))
		for name := range values {
			names = append(names, name)
		}
		sort.Strings(names)
		var errs []FieldError
		for _, name := range names {
			known := false
			for _, a := range allowed {
				known = known || a == name
			}
			switch {
			case !known:
				errs = append(errs, FieldError{Field: name, Type: string(field.ErrorTypeNotSupported),
					Detail: fmt.Sprintf("unknown query parameter: %s %s", c.FullPath(), takes)})
			case len(values[name]) > 1:
				errs = append(errs, FieldError{Field: name, Type: string(field.ErrorTypeDuplicate), Detail: "give it once"})
			}
		}
		if len(errs) > 0 {
			p := problem(http.StatusBadRequest, "invalid", "The query is invalid", "%s", joinFieldErrors(errs))
			p.Errors = errs
			writeProblem(c, p)
		}
	}
}

func joinFieldErrors(errs []FieldError) string {
	parts := make([]string, len(errs))
	for i, e := range errs {
		parts[i] = e.Field + ": " + e.Detail
	}
	return strings.Join(parts, "; ")
}
