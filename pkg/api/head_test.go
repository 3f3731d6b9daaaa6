package api_test

import (
	"net/http"
	"strconv"
	"testing"
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
