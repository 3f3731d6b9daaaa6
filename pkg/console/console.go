// Package console is sless's web console at /console/: server-rendered
// pages of a tenant's functions, their source, conditions, invocations and
// live logs, and a form to call them. It reads the same stores the REST API
// reads, in process, and signs the caller in with the same token, kept in
// an HttpOnly cookie instead of a header (docs/console.md).
//
// Pages are html/template (every value the user wrote is escaped by it);
// the one script is htmx, vendored as a static file, for the live parts.
package console

import (
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/adapter/s3"
	"github.com/sless-dev/sless/pkg/api"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/stats"
	"github.com/sless-dev/sless/pkg/logs"
	"github.com/sless-dev/sless/pkg/source"
)

// Prefix is where the console is served.
const Prefix = "/console/"

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Options configure a Console. Objects and Auth are required.
type Options struct {
	// Objects reads Functions, as the REST API's ObjectStore does.
	Objects client.Reader
	// Auth verifies the session's token exactly as the API verifies a
	// bearer token.
	Auth api.Authenticator
	// TenantNamespaces, when set, refuses a non-admin whose namespace is no
	// tenant's, as the API does.
	TenantNamespaces api.TenantNamespaces
	// Blobs holds uploaded source archives; nil shows only inline source.
	Blobs s3.Store
	// Limits bound an archive read back for display (zero: the defaults).
	Limits source.Limits
	// History lists invocations; nil shows none.
	History invoke.History
	// Stats aggregates History for the charts; nil draws none.
	Stats stats.Source
	// Invoke serves /fn/{ns}/{name}: the invoke form calls it in process
	// with the session's token, so a call from the console is recorded and
	// checked like any other. Nil hides the form.
	Invoke http.Handler
	// Logs streams functions' output to the live logs panel, in process;
	// nil hides the panel.
	Logs logs.Source
	// Secrets lists the namespace's secrets (names, keys and versions are
	// shown, never values); nil shows none.
	Secrets client.Reader
	// Async lists asynchronous calls; nil hides their panel.
	Async  AsyncCalls
	Logger *slog.Logger
}

// Console serves the web console.
type Console struct {
	opts  Options
	pages map[string]*template.Template
	mux   *http.ServeMux
	log   *slog.Logger
}

// New checks opts, parses the templates and builds the routes.
func New(opts Options) (*Console, error) {
	if opts.Objects == nil || opts.Auth == nil {
		return nil, errors.New("console: Objects and Auth are required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	c := &Console{opts: opts, pages: pages, log: opts.Logger}
	c.mux = c.routes()
	return c, nil
}

// ServeHTTP serves every path under /console/, each answer with the
// console's security headers.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	secure(w.Header())
	c.mux.ServeHTTP(w, r)
}

func (c *Console) routes() *http.ServeMux {
	m := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	m.HandleFunc("GET /console/static/chroma.css", c.serveChromaCSS)
	m.Handle("GET /console/static/", http.StripPrefix("/console/static/", cacheStatic(http.FileServerFS(static))))
	m.HandleFunc("GET /console", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
	})
	m.HandleFunc("GET /console/{$}", c.signedIn(c.home))
	m.HandleFunc("GET /console/login", c.loginForm)
	m.HandleFunc("POST /console/login", c.login)
	m.HandleFunc("POST /console/logout", c.logout)
	m.HandleFunc("GET /console/namespaces/{$}", c.signedIn(c.pickNamespace))
	fn := "/console/namespaces/{ns}/functions/{name}"
	m.HandleFunc("GET /console/namespaces/{ns}/functions/{$}", c.inNamespace(c.functionList))
	m.HandleFunc("GET "+fn, c.inNamespace(c.functionPage))
	m.HandleFunc("GET "+fn+"/invocations", c.inNamespace(c.invocationsPanel))
	m.HandleFunc("GET "+fn+"/async", c.inNamespace(c.asyncPanel))
	m.HandleFunc("GET "+fn+"/source/{file...}", c.inNamespace(c.sourcePage))
	m.HandleFunc("POST "+fn+"/invoke", c.inNamespace(c.checkForm(c.invokeFunction)))
	m.HandleFunc("GET "+fn+"/logs", c.inNamespace(c.logStream))
	m.HandleFunc("GET "+fn+"/build", c.inNamespace(c.buildPage(false)))
	m.HandleFunc("GET "+fn+"/build/stream", c.inNamespace(c.buildStream(false)))
	svc := "/console/namespaces/{ns}/services/{name}"
	m.HandleFunc("GET /console/namespaces/{ns}/services/{$}", c.inNamespace(c.serviceList))
	m.HandleFunc("GET "+svc, c.inNamespace(c.servicePage))
	m.HandleFunc("GET "+svc+"/logs", c.inNamespace(c.serviceLogStream))
	m.HandleFunc("GET "+svc+"/build", c.inNamespace(c.buildPage(true)))
	m.HandleFunc("GET "+svc+"/build/stream", c.inNamespace(c.buildStream(true)))
	m.HandleFunc("GET /console/namespaces/{ns}/triggers/{$}", c.inNamespace(c.triggerList))
	m.HandleFunc("GET /console/namespaces/{ns}/jobs/{$}", c.inNamespace(c.jobList))
	m.HandleFunc("GET /console/namespaces/{ns}/secrets/{$}", c.inNamespace(c.secretList))
	m.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, http.StatusNotFound, "Not found", "There is no page at "+r.URL.Path+".")
	})
	return m
}

// secure sets the headers every answer carries: scripts, styles and
// everything else only from the console's own files (no inline script or
// style), never framed, no sniffing of types, and no caching of pages that
// show a tenant's data.
func secure(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "+
		"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// cacheStatic lets a browser keep the embedded files for an hour: they
// change only with the binary.
func cacheStatic(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		h.ServeHTTP(w, r)
	})
}
