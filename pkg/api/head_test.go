package api_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/sless-dev/sless/pkg/api"
)

// TestHeadAnswersLikeGet: every GET route answers HEAD with the status and
// headers GET would send and no body (RFC 9110 9.1); before, each was a 405
// that did not even list HEAD in Allow.
func TestHeadAnswersLikeGet(t *testing.T) {
	e := newEnv(t)
	tok := e.token("alice")
	want(t, e.do("POST", e.path("functions"), tok, pythonFunction("h")), http.StatusCreated)
	zip := pythonZip(t, `"head"`)
	want(t, e.do("PUT", e.path("functions", "h", "source"), tok, zip, "Content-Type", "application/zip"), http.StatusOK)
	fn := e.getFunction("h")

	for _, tc := range []struct {
		path, token string
		code        int
		etag        string
		length      int
	}{
		{path: "/healthz", code: http.StatusOK},
		{path: "/openapi.json", code: http.StatusOK},
		{path: "/v1/whoami", token: tok, code: http.StatusOK},
		{path: "/v1/whoami", code: http.StatusUnauthorized},
		{path: e.path("functions"), token: tok, code: http.StatusOK},
		{path: e.path("functions", "h"), token: tok, code: http.StatusOK, etag: `"` + fn.ResourceVersion + `"`},
		{path: e.path("functions", "nothing"), token: tok, code: http.StatusNotFound},
		{path: e.path("functions", "h", "source"), token: tok, code: http.StatusOK, etag: `"` + sha256hex(zip) + `"`, length: len(zip)},
		{path: e.path("jobs") + "?limit=0", token: tok, code: http.StatusBadRequest},
	} {
		t.Run(tc.path, func(t *testing.T) {
			r := e.do("HEAD", tc.path, tc.token, nil)
			if r.Code != tc.code {
				t.Fatalf("HEAD %s: %d, want %d", tc.path, r.Code, tc.code)
			}
			if len(r.Body) != 0 {
				t.Fatalf("HEAD answered with a body: %q", r.Body)
			}
			g := e.do("GET", tc.path, tc.token, nil)
			if g.Code != r.Code || g.Header.Get("Content-Type") != r.Header.Get("Content-Type") || g.Header.Get("ETag") != r.Header.Get("ETag") {
				t.Fatalf("HEAD %d %q %q, GET %d %q %q", r.Code, r.Header.Get("Content-Type"), r.Header.Get("ETag"), g.Code, g.Header.Get("Content-Type"), g.Header.Get("ETag"))
			}
			if tc.etag != "" && r.Header.Get("ETag") != tc.etag {
				t.Fatalf("ETag %q, want %q", r.Header.Get("ETag"), tc.etag)
			}
			if tc.length != 0 && r.Header.Get("Content-Length") != strconv.Itoa(tc.length) {
				t.Fatalf("Content-Length %q, want %d", r.Header.Get("Content-Length"), tc.length)
			}
		})
	}
}

// TestConditionalGet: If-None-Match naming the current tag (strong, weak or
// "*") is a 304 with the tag and no body, for an object and for its source;
// any other tag gets the full answer. Before, If-None-Match was ignored.
func TestConditionalGet(t *testing.T) {
	e := newEnv(t)
	tok := e.token("alice")
	want(t, e.do("POST", e.path("functions"), tok, pythonFunction("c")), http.StatusCreated)
	zip := pythonZip(t, `"cond"`)
	want(t, e.do("PUT", e.path("functions", "c", "source"), tok, zip, "Content-Type", "application/zip"), http.StatusOK)
	item, src := e.path("functions", "c"), e.path("functions", "c", "source")
	rv := `"` + e.getFunction("c").ResourceVersion + `"`
	sum := `"` + sha256hex(zip) + `"`
	for _, tc := range []struct {
		name, method, path, inm string
		code                    int
		etag                    string
	}{
		{"current version", "GET", item, rv, http.StatusNotModified, rv},
		{"weak form of it", "GET", item, "W/" + rv, http.StatusNotModified, rv},
		{"one of a list", "GET", item, `"1", ` + rv, http.StatusNotModified, rv},
		{"any", "HEAD", item, "*", http.StatusNotModified, rv},
		{"an old version", "GET", item, `"1"`, http.StatusOK, rv},
		{"source held", "GET", src, sum, http.StatusNotModified, sum},
		{"source changed", "GET", src, `"` + sha64 + `"`, http.StatusOK, sum},
		{"version tag is not the source's", "GET", src, rv, http.StatusOK, sum},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(tc.method, tc.path, tok, nil, "If-None-Match", tc.inm)
			if r.Code != tc.code || r.Header.Get("ETag") != tc.etag {
				t.Fatalf("%d ETag %q, want %d %q: %s", r.Code, r.Header.Get("ETag"), tc.code, tc.etag, r.Body)
			}
			if tc.code == http.StatusNotModified && len(r.Body) != 0 {
				t.Fatalf("304 with a body: %q", r.Body)
			}
		})
	}

	// An upload with If-None-Match: * is for a Function not created yet.
	r := e.do("PUT", e.path("functions", "later", "source"), tok, zip, "Content-Type", "application/zip", "If-None-Match", "*")
	want(t, r, http.StatusOK)
	// A write whose If-None-Match names an old version goes through.
	r = e.do("PATCH", item, tok, `{"spec":{"memoryMB":256}}`, "Content-Type", api.MergePatchContentType, "If-None-Match", `"1"`)
	want(t, r, http.StatusOK)
}
