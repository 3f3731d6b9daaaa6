package function_test

import (
	"testing"

	"github.com/sless-dev/sless/pkg/reconciler/function"
)

func TestInvokeURL(t *testing.T) {
	cases := []struct {
		base, domain, want string
	}{
		{"https://sless.example.com", "", "https://sless.example.com/fn/team-a/hello"},
		{"https://sless.example.com/", "", "https://sless.example.com/fn/team-a/hello"},
		{"https://sless.example.com", "fn.example.com", "https://hello.team-a.fn.example.com"},
		{"http://127.0.0.1:8080", "fn.localhost", "http://hello.team-a.fn.localhost:8080"},
		{"http://[::1]:8080", "fn.localhost", "http://hello.team-a.fn.localhost:8080"},
	}
	for _, tc := range cases {
		got := function.Config{PublicBaseURL: tc.base, FunctionDomain: tc.domain}.InvokeURL("team-a", "hello")
		if got != tc.want {
			t.Errorf("base %q domain %q: %q, want %q", tc.base, tc.domain, got, tc.want)
		}
	}
}
