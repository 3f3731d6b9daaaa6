package console

import (
	"bytes"
	"errors"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/async"
)

// maxListed bounds the functions one list page shows.
const maxListed = 500

// lastShown is how many invocations the list shows per function.
const lastShown = 5

// page is what every signed-in page shows in its frame.
type page struct {
	Title     string
	Who       string
	Admin     bool
	Namespace string
	CSRF      string
}

func pageOf(s *session, ns, title string) page {
	return page{Title: title, Who: s.ID.Subject, Admin: s.ID.Admin, Namespace: ns, CSRF: s.CSRF}
}

func (c *Console) home(w http.ResponseWriter, r *http.Request, s *session) {
	http.Redirect(w, r, nsPath(s.ID.Namespace), http.StatusSeeOther)
}

// pickNamespace takes an admin to the namespace named by ?ns=.
func (c *Console) pickNamespace(w http.ResponseWriter, r *http.Request, s *session) {
	ns := strings.TrimSpace(r.URL.Query().Get("ns"))
	if ns == "" {
		ns = s.ID.Namespace
	}
	if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
		c.fail(w, r, http.StatusBadRequest, "Not a namespace", "A namespace name "+msgs[0]+".")
		return
	}
	http.Redirect(w, r, nsPath(ns), http.StatusSeeOther)
}

func nsPath(ns string) string { return Prefix + "namespaces/" + ns + "/functions/" }

func fnPath(ns, name string) string { return nsPath(ns) + name }

type listData struct {
	page
	Functions []listedFunction
	More      bool
	// NoHistory is set when the server keeps no invocation records.
	NoHistory bool
}

type listedFunction struct {
	Fn   *slessv1alpha1.Function
	Path string
	Last []invoke.Invocation
	// HistoryError is set when the invocations could not be read.
	HistoryError bool
}

func (c *Console) functionList(w http.ResponseWriter, r *http.Request, s *session) {
	ns := r.PathValue("ns")
	var list slessv1alpha1.FunctionList
	if err := c.opts.Objects.List(r.Context(), &list, client.InNamespace(ns), client.Limit(maxListed)); err != nil {
		c.storeFailed(w, r, "list functions", err)
		return
	}
	d := listData{page: pageOf(s, ns, "Functions"), More: list.Continue != "", NoHistory: c.opts.History == nil}
	for i := range list.Items {
		fn := &list.Items[i]
		lf := listedFunction{Fn: fn, Path: fnPath(ns, fn.Name)}
		if c.opts.History != nil {
			p, err := c.opts.History.List(r.Context(), invoke.Query{Namespace: ns, Function: fn.Name, Limit: lastShown})
			if err != nil {
				c.log.Warn("console: list invocations", "namespace", ns, "function", fn.Name, "error", err)
				lf.HistoryError = true
			}
			for _, rec := range p.Items {
				lf.Last = append(lf.Last, invoke.InvocationOf(rec))
			}
		}
		d.Functions = append(d.Functions, lf)
	}
	c.render(w, r, http.StatusOK, "list", d)
}

type functionData struct {
	page
	Fn         *slessv1alpha1.Function
	Path       string
	Conditions []metav1.Condition
	Source     sourceView
	Inv        invocationsData
	// Invoke is the invoke form's values (kept after a call) and Result
	// the answer of the call just made.
	CanInvoke bool
	Invoke    invokeForm
	Result    *invokeResult
	// Logs is the live logs panel; nil when the server keeps no logs.
	Logs *logsView
	// Async is the asynchronous calls panel; nil when the server runs none.
	Async *asyncData
	// Charts are drawn from the invocation stats; nil when none are kept.
	Charts *chartsData
}

type logsView struct {
	// URL is the panel's event stream; Invocation the call whose lines
	// alone it shows, "" for all.
	URL        string
	Invocation string
}

// getFunction reads the function the path names, answering 404 when there
// is none. It returns nil when it answered.
func (c *Console) getFunction(w http.ResponseWriter, r *http.Request) *slessv1alpha1.Function {
	ns, name := r.PathValue("ns"), r.PathValue("name")
	fn := &slessv1alpha1.Function{}
	err := c.opts.Objects.Get(r.Context(), types.NamespacedName{Namespace: ns, Name: name}, fn)
	if apierrors.IsNotFound(err) {
		c.fail(w, r, http.StatusNotFound, "Not found", "There is no function "+name+" in namespace "+ns+".")
		return nil
	}
	if err != nil {
		c.storeFailed(w, r, "get function", err)
		return nil
	}
	return fn
}

func (c *Console) functionPage(w http.ResponseWriter, r *http.Request, s *session) {
	fn := c.getFunction(w, r)
	if fn == nil {
		return
	}
	d := c.functionData(r, s, fn)
	status := http.StatusOK
	if d.Inv.Error != "" || (d.Async != nil && d.Async.Error != "") || (d.Charts != nil && d.Charts.Error != "") {
		status = http.StatusBadRequest
	}
	c.render(w, r, status, "function", d)
}

func (c *Console) functionData(r *http.Request, s *session, fn *slessv1alpha1.Function) functionData {
	ns := fn.Namespace
	d := functionData{
		page: pageOf(s, ns, fn.Name), Fn: fn, Path: fnPath(ns, fn.Name),
		Conditions: fn.Status.Conditions,
		Source:     c.sourceOf(r.Context(), fn, ""),
		Inv:        c.invocations(r, fn),
		Async:      c.asyncCalls(r, fn),
		Charts:     c.charts(r, ns, fn.Name, fnPath(ns, fn.Name), false),
		CanInvoke:  c.opts.Invoke != nil,
		Invoke:     invokeForm{Method: http.MethodPost, Path: "/", ContentType: "application/json", Body: "{}"},
	}
	if c.opts.Logs != nil {
		d.Logs = &logsView{URL: d.Path + "/logs"}
		d.Inv.HasLogs = true
		// ?invocation= narrows the panel to one call's lines; a value no
		// call can have is left out rather than refused.
		if id := r.URL.Query().Get("invocation"); requestID(id) {
			d.Logs.Invocation = id
			d.Logs.URL += "?" + url.Values{"invocation": {id}}.Encode()
		}
	}
	return d
}

// invocationsData is the invocations panel: its filters, its rows, and
// the link to the next page.
type invocationsData struct {
	Path   string
	Status string
	Window string
	Cursor string
	Items  []invoke.Invocation
	Next   string
	// RefreshURL is the panel alone with the same filters; NextURL the
	// function page at the next page.
	RefreshURL string
	NextURL    string
	Error      string
	Available  bool
	// Live makes the panel refresh itself: only the first page does, so
	// that a page of older calls stays put.
	Live bool
	// HasLogs links each call to its log lines.
	HasLogs bool
}

// windows are the time filters the panel offers.
var windows = []struct{ Value, Label string }{
	{"", "any time"}, {"15m", "last 15 minutes"}, {"1h", "last hour"}, {"24h", "last day"}, {"168h", "last week"},
}

// invocations reads the panel's page for the request's filters: status
// (a code or a class such as 5xx), window (one of windows) and cursor.
// Bad values are reported, as the API reports them.
func (c *Console) invocations(r *http.Request, fn *slessv1alpha1.Function) invocationsData {
	q := r.URL.Query()
	d := invocationsData{
		Path: fnPath(fn.Namespace, fn.Name), Available: c.opts.History != nil, HasLogs: c.opts.Logs != nil,
		Status: strings.TrimSpace(q.Get("status")), Window: q.Get("window"), Cursor: q.Get("cursor"),
	}
	d.Live = d.Cursor == ""
	filters := url.Values{}
	if d.Status != "" {
		filters.Set("status", d.Status)
	}
	if d.Window != "" {
		filters.Set("window", d.Window)
	}
	d.RefreshURL = d.Path + "/invocations"
	if q := filters.Encode(); q != "" {
		d.RefreshURL += "?" + q
	}
	if !d.Available {
		return d
	}
	raw := url.Values{"limit": {"20"}}
	if d.Status != "" {
		raw.Set("status", d.Status)
	}
	if d.Window != "" {
		known := false
		for _, o := range windows {
			known = known || o.Value == d.Window
		}
		dur, err := time.ParseDuration(d.Window)
		if !known || err != nil {
			d.Error = "window: choose one of the offered time windows"
			return d
		}
		raw.Set("since", time.Now().Add(-dur).UTC().Format(time.RFC3339Nano))
	}
	if d.Cursor != "" {
		raw.Set("cursor", d.Cursor)
	}
	iq, errs, err := invoke.ParseQuery(fn.Namespace, fn.Name, raw.Encode())
	if err != nil || len(errs) > 0 {
		var msgs []string
		for _, e := range errs {
			msgs = append(msgs, e.Field+": "+e.Detail)
		}
		if err != nil {
			msgs = append(msgs, err.Error())
		}
		d.Error = strings.Join(msgs, "; ")
		return d
	}
	p, err := c.opts.History.List(r.Context(), iq)
	if err != nil {
		c.log.Error("console: list invocations", "namespace", fn.Namespace, "function", fn.Name, "error", err)
		d.Error = "The invocation history cannot be read now."
		return d
	}
	for _, rec := range p.Items {
		d.Items = append(d.Items, invoke.InvocationOf(rec))
	}
	if p.Next != nil {
		d.Next = p.Next.String()
		filters.Set("cursor", d.Next)
		d.NextURL = d.Path + "?" + filters.Encode() + "#invocations"
	}
	return d
}

// invocationsPanel is the panel alone, which htmx fetches to refresh it.
func (c *Console) invocationsPanel(w http.ResponseWriter, r *http.Request, s *session) {
	fn := c.getFunction(w, r)
	if fn == nil {
		return
	}
	d := c.invocations(r, fn)
	status := http.StatusOK
	if d.Error != "" {
		status = http.StatusBadRequest
	}
	c.render(w, r, status, "invocations", d)
}

type sourceData struct {
	page
	Fn     *slessv1alpha1.Function
	Path   string
	Source sourceView
	File   string
}

func (c *Console) sourcePage(w http.ResponseWriter, r *http.Request, s *session) {
	fn := c.getFunction(w, r)
	if fn == nil {
		return
	}
	file := r.PathValue("file")
	v := c.sourceOf(r.Context(), fn, file)
	if v.Error == "" && v.Shown == nil {
		c.fail(w, r, http.StatusNotFound, "Not found", "Function "+fn.Name+" has no file "+file+".")
		return
	}
	c.render(w, r, http.StatusOK, "source", sourceData{page: pageOf(s, fn.Namespace, fn.Name+": "+file),
		Fn: fn, Path: fnPath(fn.Namespace, fn.Name), Source: v, File: file})
}

// storeFailed answers a store error that is not the caller's doing.
func (c *Console) storeFailed(w http.ResponseWriter, r *http.Request, what string, err error) {
	c.log.Error("console: "+what, "error", err)
	c.fail(w, r, http.StatusServiceUnavailable, "Unavailable", "The function store cannot be read now; try again.")
}

type errorData struct {
	page
	Status int
	Detail string
}

// fail answers an error page. Its text is the console's own, with names
// the caller gave, escaped as every value is.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, status int, title, detail string) {
	c.render(w, r, status, "error", errorData{page: page{Title: title}, Status: status, Detail: detail})
}

// render writes a page whole, so a template error is a 500 rather than
// half a page.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, data any) {
	var buf bytes.Buffer
	if err := c.pages[name].ExecuteTemplate(&buf, name+".html", data); err != nil {
		c.log.Error("console: render", "page", name, "error", err)
		http.Error(w, "the page could not be made", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(buf.Bytes())
	}
}

// parsePages makes one template set per page: the layout and the page.
// The invocations panel is a page of its own too, for htmx.
func parsePages() (map[string]*template.Template, error) {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		base := strings.TrimSuffix(path.Base(n), ".html")
		if base == "layout" || strings.HasPrefix(base, "_") {
			continue
		}
		t, err := template.New(base).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/_*.html", n)
		if err != nil {
			return nil, err
		}
		pages[base] = t
	}
	for _, want := range []string{"login", "error", "list", "function", "source", "invocations", "async",
		"services", "service", "triggers", "jobs", "secrets", "build"} {
		if pages[want] == nil {
			return nil, errors.New("console: no template " + want)
		}
	}
	return pages, nil
}

var funcs = template.FuncMap{
	"ago":         ago,
	"when":        func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 MST") },
	"statusClass": statusClass,
	"phaseClass":  phaseClass,
	"ready":       ready,
	"fileURL":     fileURL,
	"windows":     func() any { return windows },
	"methods":     func() []string { return []string{"POST", "GET", "PUT", "PATCH", "DELETE"} },
	"ms":          func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) + " ms" },
	"int32":       func(p *int32) string { return deref(p) },
	"text": func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	},
	"volumeSource":    volumeSource,
	"asyncStates":     func() []async.State { return asyncStates },
	"asyncStateClass": asyncStateClass,
	"since":           since,
	"bool": func(p *bool) string {
		if p == nil || *p {
			return "yes"
		}
		return "no"
	},
}

// volumeSource words where a volume's files come from, as its spec says.
func volumeSource(v slessv1alpha1.Volume) string {
	switch {
	case v.Secret != nil:
		return "Secret " + v.Secret.SecretName
	case v.ConfigMap != nil:
		return "ConfigMap " + v.ConfigMap.Name
	case v.EmptyDir != nil:
		out := "emptyDir"
		if v.EmptyDir.Medium != "" {
			out += " in " + string(v.EmptyDir.Medium)
		}
		if v.EmptyDir.SizeLimit != nil {
			out += ", at most " + v.EmptyDir.SizeLimit.String()
		}
		return out
	case v.PersistentVolumeClaim != nil:
		out := "PersistentVolumeClaim " + v.PersistentVolumeClaim.ClaimName
		if v.PersistentVolumeClaim.ReadOnly {
			out += ", read-only"
		}
		return out
	}
	return ""
}

func deref(p *int32) string {
	if p == nil {
		return "default"
	}
	return strconv.Itoa(int(*p))
}

func ago(t time.Time) string {
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return strconv.Itoa(max(int(d.Seconds()), 0)) + "s ago"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + "m ago"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d.Hours())) + "h ago"
	}
	return strconv.Itoa(int(d.Hours()/24)) + "d ago"
}

func statusClass(code int) string {
	switch {
	case code >= 500:
		return "bad"
	case code >= 400:
		return "warn"
	case code > 0:
		return "ok"
	}
	return "none"
}

func phaseClass(p slessv1alpha1.FunctionPhase) string {
	switch p {
	case slessv1alpha1.FunctionPhaseReady:
		return "ok"
	case slessv1alpha1.FunctionPhaseFailed:
		return "bad"
	case "":
		return "none"
	}
	return "warn"
}

// ready is the Ready condition's message when it is not True, for the list.
func ready(fn *slessv1alpha1.Function) string {
	c := meta.FindStatusCondition(fn.Status.Conditions, "Ready")
	if c == nil || c.Status == metav1.ConditionTrue {
		return ""
	}
	return c.Reason + ": " + c.Message
}

// fileURL is the link to one source file, each segment escaped: a file
// name may hold '?', '#' or '%'.
func fileURL(fnPath, file string) string {
	segs := strings.Split(file, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return fnPath + "/source/" + strings.Join(segs, "/")
}
