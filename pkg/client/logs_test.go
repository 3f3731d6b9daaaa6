package client

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// A NAME that is no function's is a service's, for logs as for the rest.
func TestWorkloadLogsFallsBackToTheService(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/namespaces/ns/services/web/logs":
			_, _ = io.WriteString(w, "service line\n")
		case "/v1/namespaces/ns/functions/fn/logs":
			_, _ = io.WriteString(w, "function line\n")
		case "/v1/namespaces/ns/services/broken/logs":
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `{"title":"Forbidden","status":403}`)
		default:
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"title":"Not Found","status":404,"detail":"`+r.URL.Path+`"}`)
		}
	}))
	defer srv.Close()
	c, err := New(srv.URL, "tok")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	read := func(name string, q LogQuery) (string, error) {
		rc, err := c.WorkloadLogs(ctx, "ns", name, q)
		if err != nil {
			return "", err
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		return string(b), err
	}
	if got, err := read("fn", LogQuery{}); err != nil || got != "function line\n" {
		t.Errorf("a function's log: %q, %v", got, err)
	}
	if got, err := read("web", LogQuery{}); err != nil || got != "service line\n" {
		t.Errorf("a service's log without --service: %q, %v", got, err)
	}
	if _, err := read("fn", LogQuery{Service: true}); !IsNotFound(err) {
		t.Errorf("--service of a function's name: %v, want 404", err)
	}
	if _, err := read("none", LogQuery{}); !IsNotFound(err) || StatusOf(err) != http.StatusNotFound {
		t.Errorf("neither: %v, want the function's 404", err)
	} else if e, ok := err.(*Error); !ok || e.Detail != "/v1/namespaces/ns/functions/none/logs" {
		t.Errorf("neither: %v, want the function's 404, not the service's", err)
	}
	if _, err := read("broken", LogQuery{}); StatusOf(err) != http.StatusForbidden {
		t.Errorf("the service's refusal: %v, want its 403", err)
	}
}
