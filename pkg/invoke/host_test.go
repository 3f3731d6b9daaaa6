package invoke_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/invoketest"
)

func TestCheckDomain(t *testing.T) {
	cases := []struct {
		domain string
		err    string // "" accepts
	}{
		{"fn.localhost", ""},
		{"localhost", ""},
		{"fn.example.com", ""},
		{"a-1.b2.example", ""},
		{"", "empty"},
		{"https://fn.example.com", "a URL"},
		{"*.fn.example.com", "wildcard"},
		{"fn.localhost:8080", "port"},
		{"Fn.Example.com", "not a DNS label"},
		{"fn..example.com", "not a DNS label"},
		{"fn.example.com.", "not a DNS label"},
		{"-fn.example.com", "not a DNS label"},
		{"fn_1.example.com", "not a DNS label"},
		{strings.Repeat("a", 64) + ".com", "not a DNS label"},
		{strings.Repeat("abcdefghi.", 14) + "com", "at most 136"},
	}
	for _, tc := range cases {
		t.Run(tc.domain, func(t *testing.T) {
			err := invoke.CheckDomain(tc.domain)
			if tc.err == "" {
				if err != nil {
					t.Fatalf("CheckDomain(%q) = %v, want nil", tc.domain, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("CheckDomain(%q) = %v, want an error about %q", tc.domain, err, tc.err)
			}
		})
	}
	if _, err := invoke.NewProxy(invoke.Options{Resolver: &targets{}, Domain: "*.fn.test"}); err == nil {
		t.Fatal("NewProxy took a wildcard domain")
	}
}

// hostRig serves a proxy with a domain in front of an "API" that answers
// everything else, as cmd/sless mounts them.
func hostRig(t *testing.T) (*rig, string) {
	t.Helper()
	r := newRig(t, invoke.Options{Domain: "fn.test"})
	mux := http.NewServeMux()
	mux.Handle(invoke.PathPrefix, r.proxy)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "api") })
	srv := httptest.NewServer(r.proxy.Hosts(mux))
	t.Cleanup(srv.Close)
	return r, srv.URL
}

// A function's host is {name}.{namespace}.{domain}, matched as DNS
// matches names; every other host is the API's, and a host below the
// domain that names no function is refused.
func TestProxyHosts(t *testing.T) {
	r, base := hostRig(t)
	helloCalls := make(chan seen, 20)
	r.targets.set("team-a", "hello", invoke.Target{Address: echo(t, helloCalls), Ready: true, Public: true})
	r.targets.set("team-a", "private", invoke.Target{Address: echo(t, nil), Ready: true})
	cases := []struct {
		name, host, path string
		method           string
		token            string
		status           int
		reason           string // a refusal's
		api              bool   // the API answered
		fnPath           string // the path hello saw
	}{
		{name: "function host", host: "hello.team-a.fn.test", path: "/orders/7", status: 201, fnPath: "/orders/7"},
		{name: "any case, a port", host: "HELLO.Team-A.fn.TEST:8080", path: "/", status: 201, fnPath: "/"},
		{name: "trailing dot", host: "hello.team-a.fn.test.", path: "/x", status: 201, fnPath: "/x"},
		{name: "the whole path is the function's", host: "hello.team-a.fn.test", path: "/fn/team-b/secret", status: 201, fnPath: "/fn/team-b/secret"},
		{name: "API paths too", host: "hello.team-a.fn.test", path: "/v1/whoami", status: 201, fnPath: "/v1/whoami"},
		{name: "the domain itself is the API's", host: "fn.test", path: "/v1/whoami", status: 200, api: true},
		{name: "another host", host: "api.example", path: "/", status: 200, api: true},
		{name: "a domain that only ends alike", host: "hello.team-a.xfn.test", path: "/", status: 200, api: true},
		{name: "the domain inside another", host: "hello.team-a.fn.test.example", path: "/", status: 200, api: true},
		{name: "/fn/ on another host", host: "api.example", path: "/fn/team-a/hello/y", status: 201, fnPath: "/y"},
		{name: "one label", host: "team-a.fn.test", path: "/", status: 404, reason: invoke.ReasonNotFound},
		{name: "three labels", host: "x.hello.team-a.fn.test", path: "/", status: 404, reason: invoke.ReasonNotFound},
		{name: "name starts with a digit", host: "9lives.team-a.fn.test", path: "/", status: 404, reason: invoke.ReasonNotFound},
		{name: "name too long", host: strings.Repeat("a", 53) + ".team-a.fn.test", path: "/", status: 404, reason: invoke.ReasonNotFound},
		{name: "unknown function", host: "nope.team-a.fn.test", path: "/", token: "team-a:alice", status: 404, reason: invoke.ReasonNotFound},
		{name: "underscore", host: "hello.team_a.fn.test", path: "/", status: 400, reason: invoke.ReasonInvalid},
		{name: "empty label", host: "hello..fn.test", path: "/", status: 400, reason: invoke.ReasonInvalid},
		{name: "label ends in a dash", host: "hello-.team-a.fn.test", path: "/", status: 400, reason: invoke.ReasonInvalid},
		{name: "CONNECT", host: "hello.team-a.fn.test", method: "CONNECT", path: "/", status: 405, reason: invoke.ReasonMethodNotAllowed},
		{name: "TRACE", host: "hello.team-a.fn.test", method: "TRACE", path: "/", status: 405, reason: invoke.ReasonMethodNotAllowed},
		// The same tenancy as on /fn/.
		{name: "private, no token", host: "private.team-a.fn.test", path: "/", status: 401, reason: invoke.ReasonUnauthorized},
		{name: "private, other tenant", host: "private.team-a.fn.test", path: "/", token: "team-b:bob", status: 403, reason: invoke.ReasonForbidden},
		{name: "private, own tenant", host: "private.team-a.fn.test", path: "/", token: "team-a:alice", status: 201},
		{name: "unknown, other tenant", host: "nope.team-a.fn.test", path: "/", token: "team-b:bob", status: 403, reason: invoke.ReasonForbidden},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			method := tc.method
			if method == "" {
				method = "GET"
			}
			req, err := http.NewRequest(method, base+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = tc.host
			req.Header.Set(invoke.PrefixHeader, "/forged")
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if tc.reason != "" {
				invoketest.Refusal(t, resp, tc.status, tc.reason)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || (string(b) == "api") != tc.api {
				t.Fatalf("got %d %q, want %d from the API %v", resp.StatusCode, b, tc.status, tc.api)
			}
			if tc.fnPath == "" {
				return
			}
			c := <-helloCalls
			if c.Path != tc.fnPath {
				t.Fatalf("hello saw path %q, want %q", c.Path, tc.fnPath)
			}
			if strings.HasSuffix(tc.host, ".fn.test") || strings.HasSuffix(tc.host, ".fn.test.") || strings.Contains(tc.host, ".fn.TEST") {
				if got := c.Header.Get(invoke.PrefixHeader); got != "" {
					t.Fatalf("on its host the function got %s %q; nothing was taken off the path", invoke.PrefixHeader, got)
				}
				if got := c.Header.Get("X-Forwarded-Host"); got != tc.host {
					t.Fatalf("X-Forwarded-Host %q, want %q", got, tc.host)
				}
			} else if got := c.Header.Get(invoke.PrefixHeader); got != "/fn/team-a/hello" {
				t.Fatalf("on /fn/ the function got %s %q", invoke.PrefixHeader, got)
			}
		})
	}
	// Calls by host are recorded as calls by path are.
	r.records(t, "team-a", "hello", 6)
	r.records(t, "team-a", "private", 1)
}

// On its own host a function's answer is its own; on the shared /fn/ it
// sets no cookie and is sandboxed (docs/invoke.md).
func TestProxySharedOriginIsolation(t *testing.T) {
	r, base := hostRig(t)
	fn := function(t, func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h.Add("Set-Cookie", "session=s3cret; Path=/; HttpOnly")
		h.Add("Set-Cookie", "theme=dark; Path=/")
		h.Set("Content-Security-Policy", "default-src 'self'")
		h.Set("Cross-Origin-Resource-Policy", "cross-origin")
		h.Set("Content-Type", "text/html")
		io.WriteString(w, "<script>document.cookie</script>")
	})
	r.targets.set("team-a", "page", invoke.Target{Address: fn, Ready: true, Public: true})
	get := func(host, path string) *http.Response {
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}

	own := get("page.team-a.fn.test", "/")
	if got := own.Header.Values("Set-Cookie"); len(got) != 2 {
		t.Fatalf("on its host: Set-Cookie %q, want the function's two", got)
	}
	if got := own.Header.Values("Content-Security-Policy"); !slices.Equal(got, []string{"default-src 'self'"}) {
		t.Fatalf("on its host: Content-Security-Policy %q, want the function's alone", got)
	}
	if got := own.Header.Values("Cross-Origin-Resource-Policy"); !slices.Equal(got, []string{"cross-origin"}) {
		t.Fatalf("on its host: Cross-Origin-Resource-Policy %q, want the function's", got)
	}

	for _, path := range []string{"/fn/team-a/page", "/fn/team-a/page/deep"} {
		shared := get("api.example", path)
		if shared.StatusCode != 200 {
			t.Fatalf("%s: status %d", path, shared.StatusCode)
		}
		if got := shared.Header.Values("Set-Cookie"); len(got) != 0 {
			t.Fatalf("%s: Set-Cookie %q reached the caller", path, got)
		}
		if got := shared.Header.Values("Content-Security-Policy"); !slices.Equal(got, []string{"sandbox", "default-src 'self'"}) {
			t.Fatalf("%s: Content-Security-Policy %q, want the function's and sandbox", path, got)
		}
		if got := shared.Header.Values("Cross-Origin-Resource-Policy"); !slices.Equal(got, []string{"same-origin"}) {
			t.Fatalf("%s: Cross-Origin-Resource-Policy %q, want same-origin alone", path, got)
		}
	}
	// sless's own answers on /fn/ are sandboxed too.
	refused := get("api.example", "/fn/team-a/nope")
	if refused.StatusCode != 401 || refused.Header.Get("Content-Security-Policy") != "sandbox" || refused.Header.Get("Cross-Origin-Resource-Policy") != "same-origin" {
		t.Fatalf("refusal on /fn/: %d CSP %q CORP %q", refused.StatusCode, refused.Header.Get("Content-Security-Policy"), refused.Header.Get("Cross-Origin-Resource-Policy"))
	}
}
