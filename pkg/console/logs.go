package console

import "net/http"

// LogSource streams function output (wired to pkg/logs once it lands).
type LogSource interface{}

func (c *Console) logStream(w http.ResponseWriter, r *http.Request, s *session) {
	c.fail(w, r, http.StatusNotFound, "Not found", "This server keeps no logs.")
}
