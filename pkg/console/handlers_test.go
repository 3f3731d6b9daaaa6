package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/sless-dev/sless/pkg/auth"
	"github.com/sless-dev/sless/pkg/console"
)

// TestHandlers: who may see what, and what every refusal answers. A
// tenant never sees another namespace (the same 403 whether or not a
// function is there), a session that does not verify leads back to the
// sign-in form, and a POST needs this origin and the session's CSRF token.
func TestHandlers(t *testing.T) {
	e := newEnv(t)
	alice, bob := tenant(t, "tenant-a"), tenant(t, "tenant-b")
	admin := token(t, secret, jwt.MapClaims{"sub": "root", auth.DefaultAdminClaim: true, auth.DefaultNamespaceClaim: "default"})
	forged := token(t, []byte("another-secret-of-32-bytes-or-more!!"), jwt.MapClaims{"sub": "user-of-tenant-a", auth.DefaultNamespaceClaim: "tenant-a"})
	expired := token(t, secret, jwt.MapClaims{"sub": "user-of-tenant-a", auth.DefaultNamespaceClaim: "tenant-a", "exp": time.Now().Add(-time.Hour).Unix()})
	notTenant := tenant(t, "default")
	aliceCSRF, bobCSRF := e.csrfOf(alice, "tenant-a"), e.csrfOf(bob, "tenant-b")
	fnA := "/console/namespaces/tenant-a/functions/hello"
	fnB := "/console/namespaces/tenant-b/functions/secret"
	call := func(csrf string) url.Values {
		return url.Values{"csrf": {csrf}, "method": {"POST"}, "path": {"/"}, "contentType": {"text/plain"}, "body": {"hi"}}
	}

	rows := []struct {
		name     string
		req      req
		code     int
		location string
		has      []string
		hasNot   []string
	}{
		{name: "home without a session", req: req{method: "GET", path: "/console/"}, code: 303, location: "/console/login"},
		{name: "a page without a session", req: req{method: "GET", path: fnA}, code: 303, location: "/console/login"},
		{name: "the panel without a session", req: req{method: "GET", path: fnA + "/invocations", header: map[string]string{"HX-Request": "true"}}, code: 401},
		{name: "a POST without a session", req: req{method: "POST", path: fnA + "/invoke", form: call(aliceCSRF)}, code: 401},
		{name: "a forged token", req: req{method: "GET", path: fnA, session: forged}, code: 303, location: "/console/login"},
		{name: "a forged token's POST", req: req{method: "POST", path: fnA + "/invoke", session: forged, form: call(aliceCSRF)}, code: 401, has: []string{"signature does not verify"}},
		{name: "an expired token", req: req{method: "GET", path: fnA, session: expired}, code: 303, location: "/console/login"},
		{name: "home", req: req{method: "GET", path: "/console/", session: alice}, code: 303, location: "/console/namespaces/tenant-a/functions/"},
		{name: "bare /console", req: req{method: "GET", path: "/console"}, code: 301, location: "/console/"},

		{name: "own list", req: req{method: "GET", path: "/console/namespaces/tenant-a/functions/", session: alice}, code: 200,
			has: []string{">hello</a>", "503", "python3.12"}, hasNot: []string{">secret<", "functions/secret"}},
		{name: "foreign list", req: req{method: "GET", path: "/console/namespaces/tenant-b/functions/", session: alice}, code: 403, hasNot: []string{">secret<", "functions/secret"}},
		{name: "foreign function", req: req{method: "GET", path: fnB, session: alice}, code: 403, hasNot: []string{"hunter2", "req-b-3"}},
		{name: "foreign missing function", req: req{method: "GET", path: "/console/namespaces/tenant-b/functions/nothere", session: alice}, code: 403},
		{name: "foreign source", req: req{method: "GET", path: fnB + "/source/main.py", session: alice}, code: 403, hasNot: []string{"hunter2"}},
		{name: "foreign panel", req: req{method: "GET", path: fnB + "/invocations", session: alice}, code: 403, hasNot: []string{"req-b-3"}},
		{name: "foreign invoke", req: req{method: "POST", path: fnB + "/invoke", session: alice, form: call(aliceCSRF)}, code: 403},
		{name: "a token for a namespace that is no tenant's", req: req{method: "GET", path: "/console/namespaces/default/functions/", session: notTenant}, code: 403, has: []string{"not a tenant"}},
		{name: "admin sees another namespace", req: req{method: "GET", path: fnB + "/source/main.py", session: admin}, code: 200, has: []string{"hunter2"}},
		{name: "admin picks a namespace", req: req{method: "GET", path: "/console/namespaces/?ns=tenant-b", session: admin}, code: 303, location: "/console/namespaces/tenant-b/functions/"},
		{name: "admin picks a bad namespace", req: req{method: "GET", path: "/console/namespaces/?ns=Not_A_NS", session: admin}, code: 400},

		{name: "missing function", req: req{method: "GET", path: "/console/namespaces/tenant-a/functions/nothere", session: alice}, code: 404},
		{name: "malformed function name", req: req{method: "GET", path: "/console/namespaces/tenant-a/functions/Bad_Name", session: alice}, code: 404},
		{name: "malformed namespace", req: req{method: "GET", path: "/console/namespaces/Bad_NS/functions/", session: alice}, code: 404},
		{name: "missing file", req: req{method: "GET", path: fnA + "/source/nope.py", session: alice}, code: 404},
		{name: "no such page", req: req{method: "GET", path: "/console/nowhere", session: alice}, code: 404},
		{name: "missing function's invoke", req: req{method: "POST", path: "/console/namespaces/tenant-a/functions/nothere/invoke", session: alice, form: call(aliceCSRF)}, code: 404},

		{name: "function page", req: req{method: "GET", path: fnA, session: alice}, code: 200,
			has: []string{"main.py", "req-ok-1", "req-bad-2", "&lt;b&gt;not ready&lt;/b&gt;",
				"<code>/etc/db</code> <span class=\"muted\">db:</span> Secret db-creds", "<code>/scratch</code> <span class=\"muted\">scratch:</span> emptyDir, at most 64Mi", `href="/console/namespaces/tenant-a/functions/hello/source/lib/a%3Fb%23c.py"`},
			hasNot: []string{"<b>not ready</b>"}},
		{name: "source escaped", req: req{method: "GET", path: fnA + "/source/main.py", session: alice}, code: 200,
			has: []string{"&lt;script&gt;alert(1)&lt;/script&gt;", `class="chroma"`}, hasNot: []string{"<script>alert", "style="}},
		{name: "markup file escaped", req: req{method: "GET", path: fnA + "/source/templates/page.htm", session: alice}, code: 200,
			has: []string{`<span class="p">&lt;</span><span class="nt">img</span>`}, hasNot: []string{"<img"}},
		{name: "a file name with ? and #", req: req{method: "GET", path: fnA + "/source/lib/a%3Fb%23c.py", session: alice}, code: 200, has: []string{`<span class="n">x</span>`}},
		{name: "binary file", req: req{method: "GET", path: fnA + "/source/data/blob.bin", session: alice}, code: 200, has: []string{"binary file of 3 bytes"}},
		{name: "status filter", req: req{method: "GET", path: fnA + "?status=5xx", session: alice}, code: 200, has: []string{"req-bad-2"}, hasNot: []string{"req-ok-1"}},
		{name: "exact status filter", req: req{method: "GET", path: fnA + "/invocations?status=200", session: alice}, code: 200, has: []string{"req-ok-1"}, hasNot: []string{"req-bad-2"}},
		{name: "time filter", req: req{method: "GET", path: fnA + "/invocations?window=1h", session: alice}, code: 200, has: []string{"req-bad-2"}, hasNot: []string{"req-ok-1"}},
		{name: "bad status filter", req: req{method: "GET", path: fnA + "?status=abc", session: alice}, code: 400, has: []string{"status: must be a status code"}},
		{name: "bad time filter", req: req{method: "GET", path: fnA + "/invocations?window=3h", session: alice}, code: 400, has: []string{"window: choose one"}},
		{name: "asynchronous calls on the page", req: req{method: "GET", path: fnA, session: alice}, code: 200,
			has: []string{`id="async-card"`, "req-async-ok", "&lt;b&gt;done&lt;/b&gt;", "dead-lettered", "the function answered 500", "callback: refused &lt;by&gt; policy"}, hasNot: []string{"req-async-b", "<b>done"}},
		{name: "asynchronous calls by state", req: req{method: "GET", path: fnA + "/async?astate=dead-lettered", session: alice}, code: 200,
			has: []string{"req-async-dead", `hx-get="/console/namespaces/tenant-a/functions/hello/async?astate=dead-lettered"`}, hasNot: []string{"req-async-ok"}},
		{name: "asynchronous calls in no state", req: req{method: "GET", path: fnA + "/async?astate=running", session: alice}, code: 200, has: []string{"No asynchronous calls in this state"}},
		{name: "bad asynchronous state", req: req{method: "GET", path: fnA + "/async?astate=lost", session: alice}, code: 400, has: []string{"state: choose one"}},
		{name: "bad asynchronous state on the page", req: req{method: "GET", path: fnA + "?astate=%3Cx%3E", session: alice}, code: 400, has: []string{"state: choose one"}, hasNot: []string{"<x>"}},
		{name: "foreign asynchronous calls", req: req{method: "GET", path: fnB + "/async", session: alice}, code: 403, hasNot: []string{"req-async-b"}},
		{name: "asynchronous calls without a session", req: req{method: "GET", path: fnA + "/async", header: map[string]string{"HX-Request": "true"}}, code: 401},
		{name: "bad cursor", req: req{method: "GET", path: fnA + "/invocations?cursor=xyz", session: alice}, code: 400, has: []string{"cursor: must be"}},

		{name: "invoke", req: req{method: "POST", path: fnA + "/invoke", session: alice, form: call(aliceCSRF)}, code: 200,
			has: []string{`&#34;got&#34;:&#34;hi&#34;`, "&lt;script&gt;alert(3)&lt;/script&gt;", `class="chip ok">200<`}, hasNot: []string{"<script>alert(3)"}},
		{name: "invoke with a path and query", req: req{method: "POST", path: fnA + "/invoke", session: alice,
			form: url.Values{"csrf": {aliceCSRF}, "method": {"GET"}, "path": {"/items?limit=5"}}}, code: 200, has: []string{`/items?limit=5`}},
		{name: "invoke without csrf", req: req{method: "POST", path: fnA + "/invoke", session: alice, form: call("")}, code: 403, has: []string{"security token"}},
		{name: "invoke with a wrong csrf", req: req{method: "POST", path: fnA + "/invoke", session: alice, form: call(strings.Repeat("0", 64))}, code: 403},
		{name: "invoke with another session's csrf", req: req{method: "POST", path: fnA + "/invoke", session: alice, form: call(bobCSRF)}, code: 403},
		{name: "invoke from another origin", req: req{method: "POST", path: fnA + "/invoke", session: alice, form: call(aliceCSRF), origin: "https://evil.test"}, code: 403, has: []string{"another origin"}},
		{name: "invoke without origin or referer", req: req{method: "POST", path: fnA + "/invoke", session: alice, form: call(aliceCSRF), origin: "-"}, code: 403},
		{name: "invoke with a same-origin referer", req: req{method: "POST", path: fnA + "/invoke", session: alice, form: call(aliceCSRF), origin: "-",
			header: map[string]string{"Referer": "http://console.test" + fnA}}, code: 200},
		{name: "invoke sent cross-site", req: req{method: "POST", path: fnA + "/invoke", session: alice, form: call(aliceCSRF), header: map[string]string{"Sec-Fetch-Site": "cross-site"}}, code: 403},
		{name: "invoke with a bad path", req: req{method: "POST", path: fnA + "/invoke", session: alice, form: url.Values{"csrf": {aliceCSRF}, "method": {"POST"}, "path": {"items"}}}, code: 400, has: []string{"must start with /"}},
		{name: "invoke climbing out", req: req{method: "POST", path: fnA + "/invoke", session: alice, form: url.Values{"csrf": {aliceCSRF}, "method": {"GET"}, "path": {"/a/../../b"}}}, code: 400, has: []string{"climb"}},
		{name: "invoke with a bad method", req: req{method: "POST", path: fnA + "/invoke", session: alice, form: url.Values{"csrf": {aliceCSRF}, "method": {"TRACE"}, "path": {"/"}}}, code: 400, has: []string{"Choose a method"}},
		{name: "foreign logs", req: req{method: "GET", path: fnB + "/logs", session: alice}, code: 403},
		{name: "logs without a session", req: req{method: "GET", path: fnA + "/logs", header: map[string]string{"Accept": "text/event-stream"}}, code: 401},
		{name: "logs of a missing function", req: req{method: "GET", path: "/console/namespaces/tenant-a/functions/nothere/logs", session: alice}, code: 404},
		{name: "logs of a bad request id", req: req{method: "GET", path: fnA + "/logs?invocation=a%20b", session: alice}, code: 400},
		{name: "one call's logs", req: req{method: "GET", path: fnA + "?invocation=req-ok-1", session: alice}, code: 200,
			has: []string{`sse-connect="/console/namespaces/tenant-a/functions/hello/logs?invocation=req-ok-1"`, `href="/console/namespaces/tenant-a/functions/hello?invocation=req-ok-1#logs-card"`}},
		{name: "GET of the invoke path", req: req{method: "GET", path: fnA + "/invoke", session: alice}, code: 404},

		{name: "login form", req: req{method: "GET", path: "/console/login"}, code: 200, has: []string{`name="token"`}},
		{name: "login form when signed in", req: req{method: "GET", path: "/console/login", session: alice}, code: 303, location: "/console/"},
		{name: "login with no token", req: req{method: "POST", path: "/console/login", form: url.Values{"token": {""}}}, code: 401, has: []string{"Paste your sless token"}},
		{name: "login with a forged token", req: req{method: "POST", path: "/console/login", form: url.Values{"token": {forged}}}, code: 401, has: []string{"signature does not verify"}},
		{name: "login with a huge token", req: req{method: "POST", path: "/console/login", form: url.Values{"token": {strings.Repeat("a", 5000)}}}, code: 401, has: []string{"too long"}},
		{name: "login from another origin", req: req{method: "POST", path: "/console/login", form: url.Values{"token": {alice}}, origin: "https://evil.test"}, code: 403},
		{name: "login for a namespace that is no tenant's", req: req{method: "POST", path: "/console/login", form: url.Values{"token": {notTenant}}}, code: 403},
		{name: "logout from another origin", req: req{method: "POST", path: "/console/logout", session: alice, origin: "https://evil.test"}, code: 403},

		{name: "htmx", req: req{method: "GET", path: "/console/static/vendor/htmx.min.js"}, code: 200, has: []string{"htmx"}},
		{name: "stylesheet", req: req{method: "GET", path: "/console/static/console.css"}, code: 200, has: []string{".logs"}},
		{name: "highlighter's stylesheet", req: req{method: "GET", path: "/console/static/chroma.css"}, code: 200, has: []string{".chroma"}},
	}
	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			w := e.do(tc.req)
			checkHeaders(t, w)
			body := w.Body.String()
			if w.Code != tc.code {
				t.Fatalf("%s %s: %d, want %d\n%.1500s", tc.req.method, tc.req.path, w.Code, tc.code, body)
			}
			if tc.location != "" && w.Header().Get("Location") != tc.location {
				t.Errorf("Location %q, want %q", w.Header().Get("Location"), tc.location)
			}
			for _, s := range tc.has {
				if !strings.Contains(body, s) {
					t.Errorf("the answer lacks %q:\n%.3000s", s, body)
				}
			}
			for _, s := range tc.hasNot {
				if strings.Contains(body, s) {
					t.Errorf("the answer has %q:\n%.3000s", s, body)
				}
			}
		})
	}
}

// TestSessionCookie: signing in sets the token in a cookie only the
// console's paths get, which scripts cannot read, sent on no cross-site
// request, and Secure when the browser came over TLS; a session that no
// longer verifies is dropped; signing out drops it.
func TestSessionCookie(t *testing.T) {
	e := newEnv(t)
	alice := tenant(t, "tenant-a")
	for _, tls := range []bool{false, true} {
		r := req{method: "POST", path: "/console/login", form: url.Values{"token": {alice}}}
		if tls {
			r.header = map[string]string{"X-Forwarded-Proto": "https"}
		}
		w := e.do(r)
		if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/console/" {
			t.Fatalf("login: %d %q", w.Code, w.Header().Get("Location"))
		}
		cs := w.Result().Cookies()
		if len(cs) != 1 {
			t.Fatalf("login set %d cookies", len(cs))
		}
		c := cs[0]
		if c.Name != console.CookieName || c.Value != alice || c.Path != "/console/" || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure != tls {
			t.Errorf("cookie (tls %v): %+v", tls, c)
		}
		if strings.Contains(w.Header().Get("Location"), alice) {
			t.Error("the token is in the redirect's URL")
		}
	}

	forged := token(t, []byte("another-secret-of-32-bytes-or-more!!"), jwt.MapClaims{"sub": "x"})
	w := e.do(req{method: "GET", path: "/console/namespaces/tenant-a/functions/", session: forged})
	if cs := w.Result().Cookies(); len(cs) != 1 || cs[0].MaxAge >= 0 || cs[0].Value != "" {
		t.Errorf("a session that does not verify is not dropped: %+v", cs)
	}
	w = e.do(req{method: "POST", path: "/console/logout", session: alice})
	if cs := w.Result().Cookies(); w.Code != http.StatusSeeOther || len(cs) != 1 || cs[0].MaxAge >= 0 {
		t.Errorf("logout: %d, %+v", w.Code, cs)
	}
}
