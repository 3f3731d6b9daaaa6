package api

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/sless-dev/sless/pkg/problems"
)

// query refuses a request whose query string this route does not take as
// it is: one that does not parse, a parameter the route does not know, or
// one given twice. Each would otherwise be dropped or half-read without a
// word, and a client would act on an answer to another request than the
// one it sent: ?dryRun=All would write, ?fieldSelector= would list
// everything, and a cursor with a stray % would start the list again.
// The message names the path as sent, not the route's :ns template.
func (s *Server) query(allowed ...string) gin.HandlerFunc {
	return func(c *gin.Context) {
		raw := c.Request.URL.RawQuery
		if raw == "" {
			return
		}
		_, errs, err := problems.Query(raw, c.Request.Method+" "+c.Request.URL.Path, allowed)
		if err != nil {
			p := badRequest("the query string does not parse: %v", err)
			p.Errors = []FieldError{problems.Unparsable(err)}
			writeProblem(c, p)
			return
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
