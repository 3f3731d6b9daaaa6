package invoke

import (
	"net/http"
	"time"
)

// Header values are shared, never built per call: net/http and
// ReverseProxy copy them out and never write into them.
var (
	// allowedMethods answers a refused CONNECT or TRACE.
	allowedMethods = []string{"GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"}
	// sameOrigin keeps other origins from embedding an answer of /fn/
	// (<script>, <img>) with the caller's credentials.
	sameOrigin = []string{"same-origin"}
	// sandbox without allow-same-origin puts a document in an opaque
	// origin, with no scripts, forms or popups: a page one function serves
	// on /fn/ cannot read the origin's storage nor script other functions.
	sandbox = []string{"sandbox"}
)

// refuseMethod reports whether the invoke path refuses method: CONNECT
// would tunnel through the function's address, and TRACE echoes the
// request, credentials included, back to a script (cross-site tracing).
func refuseMethod(method string) bool {
	return method == http.MethodConnect || method == http.MethodTrace
}

func (p *Proxy) refuseMethod(w http.ResponseWriter, r *http.Request, start time.Time, sharedOrigin bool) {
	w.Header()["Allow"] = allowedMethods
	c := &call{p: p, start: start, reqID: RequestID(r), byHost: !sharedOrigin}
	c.refuse(w, r, Problem{Status: http.StatusMethodNotAllowed, Reason: ReasonMethodNotAllowed,
		Detail: r.Method + " is not served on the invoke path"})
}

// isolate takes from an answer on the shared origin (/fn/, where every
// tenant's functions live) what would let one function reach another's
// callers: its cookies would be sent to every function, and its pages
// could script any of them. Functions that need cookies or pages are
// served on their own hosts (Options.Domain).
func isolate(h http.Header) {
	delete(h, "Set-Cookie")
	h["Cross-Origin-Resource-Policy"] = sameOrigin
	if own, ok := h["Content-Security-Policy"]; ok {
		// Every policy is enforced: the function's own, and the sandbox.
		h["Content-Security-Policy"] = append(own[:len(own):len(own)], sandbox[0])
	} else {
		h["Content-Security-Policy"] = sandbox
	}
}
