// Package invoketest holds the checks every test of a refusal on the invoke
// path makes, so that the proxy's own refusals and those of handlers in front
// of it (the trigger call check) are held to one shape.
package invoketest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/problems"
)

// Refusal reads resp's body and fails t unless it is the problem sless
// answers for the platform (docs/invoke.md): the status, X-Sless-Error and
// the problem's reason both reason, a detail, a requestId equal to
// X-Request-Id, a type under problems.TypeBase, the request's path as its
// instance, WWW-Authenticate on a 401, Allow on a 405 and Retry-After on a
// 503 that is worth retrying. It returns the problem.
func Refusal(t testing.TB, resp *http.Response, status int, reason string) invoke.Problem {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("reading the refusal: %v", err)
	}
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", resp.StatusCode, status, b)
	}
	h := resp.Header
	if got := h.Get(invoke.ErrorHeader); got != reason {
		t.Fatalf("%s = %q, want %q: %s", invoke.ErrorHeader, got, reason, b)
	}
	if ct := h.Get("Content-Type"); ct != problems.ContentType {
		t.Fatalf("Content-Type %q, want %s", ct, problems.ContentType)
	}
	var p invoke.Problem
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("problem %s: %v", b, err)
	}
	if p.Status != status || p.Reason != reason || p.Title == "" || p.Detail == "" || p.RequestID == "" {
		t.Fatalf("problem %s, want status %d, reason %s, a title, a detail and a requestId", b, status, reason)
	}
	if !strings.HasPrefix(p.Type, problems.TypeBase) {
		t.Fatalf("problem type %q is not under %s: %s", p.Type, problems.TypeBase, b)
	}
	if resp.Request != nil && p.Instance != resp.Request.URL.Path {
		t.Fatalf("problem instance %q, want the request's path %q", p.Instance, resp.Request.URL.Path)
	}
	if id := h.Get(invoke.RequestIDHeader); id != p.RequestID {
		t.Fatalf("%s %q, the problem's requestId %q", invoke.RequestIDHeader, id, p.RequestID)
	}
	if status == http.StatusUnauthorized && h.Get("WWW-Authenticate") == "" {
		t.Fatal("401 without WWW-Authenticate")
	}
	if status == http.StatusMethodNotAllowed && h.Get("Allow") == "" {
		t.Fatal("405 without Allow")
	}
	if reason == invoke.ReasonUnavailable && h.Get("Retry-After") == "" {
		t.Fatalf("503 %s without Retry-After", reason)
	}
	return p
}
