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

// isolate marks an answer to the caller on the shared origin (/fn/, where
// every tenant's functions live) so that no function reaches another's
// callers through it: its pages get an opaque origin and other sites may
// not embed it. Functions that need cookies or pages are served on their
// own hosts (Options.Domain). h is the caller's header, which the
// function's is copied into after: a function's own
// Content-Security-Policy joins the sandbox (browsers enforce every
// policy), and writing here rather than into the function's header adds
// no keys to a map per call.
func isolate(h http.Header) {
	h["Cross-Origin-Resource-Policy"] = sameOrigin
	h["Content-Security-Policy"] = sandbox
}

// dropCookies takes from a function's answer on the shared origin its
// cookies, which the browser would send to every function, and its own
// Cross-Origin-Resource-Policy, which beside isolate's would make the
// header a list that browsers ignore.
func dropCookies(fn http.Header) {
	delete(fn, "Set-Cookie")
	delete(fn, "Cross-Origin-Resource-Policy")
}
