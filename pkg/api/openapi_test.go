package api_test

import (
	"context"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/gin-gonic/gin"

	"github.com/sless-dev/sless/pkg/api"
)

var ginParam = regexp.MustCompile(`[:*]([a-z]+)`)

// TestOpenAPIMatchesRoutes loads /openapi.json with kin-openapi, validates
// it, and holds its paths against the router's: every registered route is
// documented and every documented operation is registered.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	e := newEnv(t, func(o *api.Options) {
		// The hooks other packages fill; any handler shows the routes exist.
		o.Invoke = http.NotFoundHandler()
		o.Invocations = func(c *gin.Context) { c.Status(http.StatusNoContent) }
	})
	r := e.do("GET", "/openapi.json", "", nil)
	want(t, r, http.StatusOK)
	doc, err := openapi3.NewLoader().LoadFromData(r.Body)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("the document is not valid OpenAPI 3: %v", err)
	}

	documented := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented[method+" "+path] = true
		}
	}
	registered := map[string]bool{}
	for _, rt := range e.srv.Engine().Routes() {
		if rt.Method == "ANY" {
			continue
		}
		registered[rt.Method+" "+ginParam.ReplaceAllString(rt.Path, "{$1}")] = true
	}
	// gin's Any registers the invoke paths under each of its methods; the
	// document lists the ones HTTP clients use.
	var missing, extra []string
	for k := range registered {
		if !documented[k] && !(strings.HasPrefix(k, "CONNECT ") || strings.HasPrefix(k, "TRACE ")) {
			missing = append(missing, k)
		}
	}
	for k := range documented {
		if !registered[k] {
			extra = append(extra, k)
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	if len(missing) > 0 || len(extra) > 0 {
		t.Fatalf("routes not documented: %v\ndocumented but not routed: %v", missing, extra)
	}
	if len(registered) < 30 {
		t.Fatalf("only %d routes registered", len(registered))
	}
}

// TestMetrics checks that requests show up by route pattern, not raw path.
func TestMetrics(t *testing.T) {
	e := newEnv(t)
	want(t, e.do("GET", e.path("functions", "nothere"), e.token("alice"), nil), http.StatusNotFound)
	want(t, e.do("GET", "/healthz", "", nil), http.StatusOK)
	want(t, e.do("GET", "/readyz", "", nil), http.StatusOK)
	r := e.do("GET", "/metrics", "", nil)
	want(t, r, http.StatusOK)
	body := string(r.Body)
	for _, s := range []string{
		`sless_api_requests_total{code="404",method="GET",route="/v1/namespaces/:ns/functions/:name"} 1`,
		`sless_api_requests_total{code="200",method="GET",route="/healthz"} 1`,
		`sless_api_request_duration_seconds_bucket{method="GET",route="/v1/namespaces/:ns/functions/:name"`,
	} {
		if !strings.Contains(body, s) {
			t.Errorf("metrics lack %s", s)
		}
	}
	if strings.Contains(body, "nothere") {
		t.Error("a raw path leaked into a label")
	}
}

// TestReadyz reports the readiness hook's failure as a 503 problem.
func TestReadyz(t *testing.T) {
	e := newEnv(t, func(o *api.Options) {
		o.Ready = func(context.Context) error { return context.DeadlineExceeded }
	})
	r := e.do("GET", "/readyz", "", nil)
	want(t, r, http.StatusServiceUnavailable)
	r.problem(t)
}

// TestOpenAPIQueryParameters holds the document to what the list handlers
// read from the query, and says that a refused upload carries Retry-After.
func TestOpenAPIQueryParameters(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	for _, plural := range []string{"functions", "triggers", "jobs"} {
		op := doc.Paths.Find("/v1/namespaces/{ns}/" + plural).Get
		if op == nil {
			t.Fatalf("no list of %s", plural)
		}
		for _, name := range []string{"limit", "cursor", "labelSelector"} {
			if op.Parameters.GetByInAndName("query", name) == nil {
				t.Errorf("list of %s does not document ?%s", plural, name)
			}
		}
	}
	for path, params := range map[string][]string{
		"/v1/namespaces/{ns}/functions/{name}/logs":                {"follow", "since", "tail", "timestamps", "invocation"},
		"/v1/namespaces/{ns}/functions/{name}/builds/{build}/logs": {"follow", "since", "tail", "timestamps"},
	} {
		op := doc.Paths.Find(path).Get
		if op == nil {
			t.Fatalf("no GET %s", path)
		}
		for _, name := range params {
			if op.Parameters.GetByInAndName("query", name) == nil {
				t.Errorf("GET %s does not document ?%s", path, name)
			}
		}
	}
	put := doc.Paths.Find("/v1/namespaces/{ns}/functions/{name}/source").Put
	if r := put.Responses.Status(http.StatusServiceUnavailable); r == nil || r.Value.Headers["Retry-After"] == nil {
		t.Error("the upload's 503 does not document Retry-After")
	}
}

// A server started without a database answers the documented invocations
// route with 501 and why, after the usual checks of caller and name.
func TestInvocationsWithoutHistory(t *testing.T) {
	e := newEnv(t)
	tok := e.token("alice")
	path := e.path("functions", "hello") + "/invocations"
	r := e.do("GET", path, tok, nil)
	want(t, r, http.StatusNotImplemented)
	if p := r.problem(t); !strings.Contains(p.Detail, "--database-url") {
		t.Fatalf("detail %q does not say how to keep records", p.Detail)
	}
	want(t, e.do("GET", path, "", nil), http.StatusUnauthorized)
	want(t, e.do("GET", e.path("functions", "Not_A_Name")+"/invocations", tok, nil), http.StatusBadRequest)
	// A service's listing, the same way.
	svc := e.path("services", "web") + "/invocations"
	want(t, e.do("GET", svc, tok, nil), http.StatusNotImplemented)
	want(t, e.do("GET", svc, "", nil), http.StatusUnauthorized)
	want(t, e.do("GET", e.path("services", "Not_A_Name")+"/invocations", tok, nil), http.StatusBadRequest)
	// An asynchronous call's record, on a server that keeps none: the
	// Prefer: respond-async calls ran at once.
	one := path + "/some-request-id"
	r = e.do("GET", one, tok, nil)
	want(t, r, http.StatusNotImplemented)
	if p := r.problem(t); !strings.Contains(p.Detail, "respond-async") {
		t.Fatalf("detail %q does not say why", p.Detail)
	}
	want(t, e.do("GET", one, "", nil), http.StatusUnauthorized)
	want(t, e.do("GET", e.path("functions", "Not_A_Name")+"/invocations/x", tok, nil), http.StatusBadRequest)
}
