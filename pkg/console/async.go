package console

import (
	"context"
	"net/http"
	"net/url"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/invoke/async"
)

// AsyncCalls lists a function's asynchronous calls, as async.Store does.
type AsyncCalls interface {
	List(ctx context.Context, q async.ListQuery) (async.ListPage, error)
}

// asyncShown is how many asynchronous calls the panel shows.
const asyncShown = 20

// asyncStates are the panel's state filter, in a call's order of life.
var asyncStates = []async.State{async.StateQueued, async.StateRunning, async.StateSucceeded, async.StateFailed, async.StateDeadLettered}

// asyncData is the asynchronous calls panel.
type asyncData struct {
	Path       string
	State      string
	RefreshURL string
	Items      []async.View
	Error      string
}

// asyncCalls reads the panel for the request's ?astate= filter.
func (c *Console) asyncCalls(r *http.Request, fn *slessv1alpha1.Function) *asyncData {
	if c.opts.Async == nil {
		return nil
	}
	d := &asyncData{Path: fnPath(fn.Namespace, fn.Name), State: r.URL.Query().Get("astate")}
	d.RefreshURL = d.Path + "/async"
	if d.State != "" {
		d.RefreshURL += "?" + url.Values{"astate": {d.State}}.Encode()
		if !async.ValidState(async.State(d.State)) {
			d.Error = "state: choose one of the offered states"
			return d
		}
	}
	page, err := c.opts.Async.List(r.Context(), async.ListQuery{Namespace: fn.Namespace, Function: fn.Name, State: async.State(d.State), Limit: asyncShown})
	if err != nil {
		c.log.Error("console: list asynchronous calls", "namespace", fn.Namespace, "function", fn.Name, "error", err)
		d.Error = "The asynchronous calls cannot be read now."
		return d
	}
	for i := range page.Items {
		d.Items = append(d.Items, async.ViewOf(&page.Items[i]))
	}
	return d
}

// asyncPanel is the panel alone, which htmx fetches to refresh it.
func (c *Console) asyncPanel(w http.ResponseWriter, r *http.Request, s *session) {
	fn := c.getFunction(w, r)
	if fn == nil {
		return
	}
	d := c.asyncCalls(r, fn)
	if d == nil {
		c.fail(w, r, http.StatusNotFound, "Not found", "This server runs no asynchronous calls.")
		return
	}
	status := http.StatusOK
	if d.Error != "" {
		status = http.StatusBadRequest
	}
	c.render(w, r, status, "async", d)
}

// asyncStateClass colours a call's state as statusClass colours a status.
func asyncStateClass(s async.State) string {
	switch s {
	case async.StateSucceeded:
		return "ok"
	case async.StateFailed, async.StateDeadLettered:
		return "bad"
	}
	return "warn"
}
