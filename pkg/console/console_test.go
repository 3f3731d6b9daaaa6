package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/sless-dev/sless/pkg/adapter/kube"
	"github.com/sless-dev/sless/pkg/api"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/auth"
	"github.com/sless-dev/sless/pkg/console"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/async"
	"github.com/sless-dev/sless/pkg/local/apiserver"
	"github.com/sless-dev/sless/pkg/local/asynccalls"
	"github.com/sless-dev/sless/pkg/local/blobs"
	"github.com/sless-dev/sless/pkg/local/serving"
)

var secret = []byte("console-test-secret-0123456789-abcdef")

// env is a console over a real local store, records and verifier, with
// the invoke proxy in front of a real HTTP server standing for the
// function.
type env struct {
	t       *testing.T
	handler http.Handler
}

func token(t *testing.T, key []byte, claims jwt.MapClaims) string {
	t.Helper()
	if _, ok := claims["exp"]; !ok {
		claims["exp"] = time.Now().Add(time.Hour).Unix()
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func tenant(t *testing.T, ns string) string {
	return token(t, secret, jwt.MapClaims{"sub": "user-of-" + ns, auth.DefaultNamespaceClaim: ns})
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	scheme := runtime.NewScheme()
	if err := slessv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	store, err := apiserver.Open(filepath.Join(dir, "store.db"), scheme)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	for _, fn := range []*slessv1alpha1.Function{
		inline("tenant-a", "hello", map[string]string{
			"main.py":            "# <script>alert(1)</script>\ndef handler(event, context):\n    return {}\n",
			"lib/a?b#c.py":       "x = 1\n",
			"data/blob.bin":      "\x00\x01\x02",
			"templates/page.htm": "<img src=x onerror=alert(1)>",
		}),
		inline("tenant-b", "secret", map[string]string{"main.py": "PASSWORD = 'hunter2'\ndef handler(e, c):\n    return {}\n"}),
	} {
		if fn.Name == "hello" {
			fn.Spec.Volumes = []slessv1alpha1.Volume{
				{Name: "db", MountPath: "/etc/db", Secret: &slessv1alpha1.SecretVolume{SecretName: "db-creds"}},
				{Name: "scratch", MountPath: "/scratch", EmptyDir: &slessv1alpha1.EmptyDirVolume{SizeLimit: ptr.To(resource.MustParse("64Mi"))}},
			}
		}
		if err := store.Create(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	seedObjects(t, store)
	recs, err := store.Records()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	seedRecords(t, recs, now)
	if err := recs.Write(ctx, invoke.Batch{ID: "b1", Records: []invoke.Record{
		{Namespace: "tenant-a", Function: "hello", Trigger: invoke.TriggerHTTP, RequestID: "req-ok-1", StartedAt: now.Add(-2 * time.Hour), Duration: time.Millisecond, Status: 200},
		{Namespace: "tenant-a", Function: "hello", Trigger: invoke.TriggerHTTP, RequestID: "req-bad-2", StartedAt: now.Add(-time.Minute), Duration: time.Millisecond, Status: 503, Error: "<b>not ready</b>"},
		{Namespace: "tenant-b", Function: "secret", Trigger: invoke.TriggerHTTP, RequestID: "req-b-3", StartedAt: now, Status: 200},
	}}); err != nil {
		t.Fatal(err)
	}
	verifier, err := auth.New(ctx, auth.Config{HS256Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	// The function: answers with what it was sent, markup and all.
	fnSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(map[string]string{"path": r.URL.RequestURI(), "got": string(b), "html": "<script>alert(3)</script>"})
	}))
	t.Cleanup(fnSrv.Close)
	addr, _ := url.Parse(fnSrv.URL)
	proxy, err := invoke.NewProxy(invoke.Options{
		Resolver: invoke.ResolverFunc(func(ctx context.Context, ns, name string) (invoke.Target, error) {
			fn := &slessv1alpha1.Function{}
			if err := store.Get(ctx, keyOf(ns, name), fn); err != nil {
				return invoke.Target{}, invoke.ErrNotFound
			}
			return invoke.Target{Address: addr, Ready: true, Revision: name + "-1"}, nil
		}),
		Authenticator: invoke.AuthenticatorFunc(func(r *http.Request) (invoke.Identity, error) {
			id, err := verifier.Authenticate(r)
			if err != nil {
				return invoke.Identity{}, err
			}
			return invoke.Identity(*id), nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	// hello's log, as sless dev keeps it: each line stamped with its time.
	logDir := filepath.Join(dir, "logs")
	if err := os.MkdirAll(filepath.Join(logDir, "tenant-a"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(logDir, "tenant-a", "hello.log"), []byte(
		"2026-12-05T14:25:25.5Z "+`{"level":"error","msg":"a <script>alert(4)</script>\r\nb","requestId":"req-ok-1"}`+"\n"+
			"2026-12-05T14:25:26Z <img src=x onerror=alert(5)>\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	calls, err := asynccalls.Open(filepath.Join(dir, "async-calls.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { calls.Close() })
	for _, j := range []async.Job{
		{Submission: invoke.Submission{Namespace: "tenant-a", Function: "hello", RequestID: "req-async-ok", AcceptedAt: now.Add(-time.Minute)},
			State: async.StateSucceeded, Attempts: 1,
			Response: &async.Response{Status: 200, Body: []byte("<b>done</b>"), Bytes: 11},
			Callback: &async.Callback{URL: "https://hooks.test/ok", State: async.CallbackDelivered, Attempts: 1, Status: 204}},
		{Submission: invoke.Submission{Namespace: "tenant-a", Function: "hello", RequestID: "req-async-dead", AcceptedAt: now.Add(-2 * time.Minute)},
			State: async.StateDeadLettered, Attempts: 3, LastError: "the function answered 500",
			Callback: &async.Callback{URL: "https://hooks.test/failed", State: async.CallbackFailed, Attempts: 5, LastError: "refused <by> policy"}},
		{Submission: invoke.Submission{Namespace: "tenant-b", Function: "secret", RequestID: "req-async-b", AcceptedAt: now},
			State: async.StateQueued},
	} {
		if _, _, err := calls.Create(ctx, &j, 0); err != nil {
			t.Fatal(err)
		}
	}
	c, err := console.New(console.Options{
		Objects: store, Auth: verifier, History: recs, Stats: recs, Secrets: store, Invoke: proxy, Logs: &serving.Logs{LogDir: logDir}, Async: calls,
		TenantNamespaces: &kube.Tenants{Client: store, Prefixes: []string{"tenant-"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, handler: c}
}

func inline(ns, name string, files map[string]string) *slessv1alpha1.Function {
	return &slessv1alpha1.Function{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: slessv1alpha1.FunctionSpec{
			WorkloadSpec: slessv1alpha1.WorkloadSpec{
				Runtime:    "python3.12",
				Entrypoint: "main.handler",
				Source:     slessv1alpha1.FunctionSource{Inline: &slessv1alpha1.InlineSource{Files: files}},
			},
		},
	}
}

// req is one request to the console, as a browser on host console.test
// would send it.
type req struct {
	method  string
	path    string
	session string // the cookie's token; "" sends none
	form    url.Values
	origin  string // "" sends the console's own; "-" sends none
	header  map[string]string
}

func (e *env) do(r req) *httptest.ResponseRecorder {
	e.t.Helper()
	var body io.Reader
	if r.form != nil {
		body = strings.NewReader(r.form.Encode())
	}
	hr := httptest.NewRequest(r.method, "http://console.test"+r.path, body)
	if r.form != nil {
		hr.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	switch r.origin {
	case "":
		if r.method == http.MethodPost {
			hr.Header.Set("Origin", "http://console.test")
		}
	case "-":
	default:
		hr.Header.Set("Origin", r.origin)
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	if r.session != "" {
		hr.AddCookie(&http.Cookie{Name: console.CookieName, Value: r.session})
	}
	w := httptest.NewRecorder()
	e.handler.ServeHTTP(w, hr)
	return w
}

// csrfOf reads the CSRF field of the page a session sees.
func (e *env) csrfOf(session, ns string) string {
	e.t.Helper()
	w := e.do(req{method: "GET", path: "/console/namespaces/" + ns + "/functions/", session: session})
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(w.Body.String())
	if m == nil {
		e.t.Fatalf("no csrf field on the page (%d)", w.Code)
	}
	return m[1]
}

func checkHeaders(t *testing.T, w *httptest.ResponseRecorder) {
	t.Helper()
	h := w.Header()
	csp := h.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'self'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "object-src 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("CSP %q allows inline code", csp)
	}
	if h.Get("X-Frame-Options") != "DENY" || h.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("headers: X-Frame-Options %q, X-Content-Type-Options %q", h.Get("X-Frame-Options"), h.Get("X-Content-Type-Options"))
	}
}

func keyOf(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

// TestMountedInTheAPI: the REST API's router hands /console and everything
// under /console/ to the console, and only those.
func TestMountedInTheAPI(t *testing.T) {
	dir := t.TempDir()
	scheme := runtime.NewScheme()
	if err := slessv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	store, err := apiserver.Open(filepath.Join(dir, "store.db"), scheme)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	blobs, err := blobs.New(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := auth.New(context.Background(), auth.Config{HS256Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	c, err := console.New(console.Options{Objects: store, Auth: verifier})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(api.Options{Objects: store, Auth: verifier, Blobs: blobs, Bucket: "b", Console: c})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		code int
		ct   string
	}{
		{"/console", 301, "text/html"},
		{"/console/login", 200, "text/html"},
		{"/console/static/console.css", 200, "text/css"},
		{"/consoles", 404, "application/problem+json"},
		{"/v1/whoami", 401, "application/problem+json"},
	} {
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, httptest.NewRequest("GET", tc.path, nil))
		if w.Code != tc.code || !strings.HasPrefix(w.Header().Get("Content-Type"), tc.ct) {
			t.Errorf("GET %s: %d %q, want %d %s", tc.path, w.Code, w.Header().Get("Content-Type"), tc.code, tc.ct)
		}
	}
}

// TestLogStream: the live logs panel's stream is server-sent events of
// escaped HTML, a runtime's JSON line shown as its message, level and
// request id; a carriage return or newline in a line cannot end an event.
func TestLogStream(t *testing.T) {
	e := newEnv(t)
	srv := httptest.NewServer(e.handler)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/console/namespaces/tenant-a/functions/hello/logs", nil)
	r.Header.Set("Accept", "text/event-stream")
	r.AddCookie(&http.Cookie{Name: console.CookieName, Value: tenant(t, "tenant-a")})
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var events [][]string
	var ev []string
	sc := bufio.NewScanner(resp.Body)
	for len(events) < 2 && sc.Scan() {
		if sc.Text() == "" {
			events, ev = append(events, ev), nil
			continue
		}
		ev = append(ev, sc.Text())
	}
	cancel()
	want := [][]string{
		{"event: line", "id: 2026-12-05T14:25:25.5Z",
			`data: <div class="line error"><time datetime="2026-12-05T14:25:25.5Z">14:25:25</time><span class="level">error</span>a &lt;script&gt;alert(4)&lt;/script&gt;&#13;&#10;b<span class="req" title="request req-ok-1">req-ok-1</span></div>`},
		{"event: line", "id: 2026-12-05T14:25:26Z",
			`data: <div class="line"><time datetime="2026-12-05T14:25:26Z">14:25:26</time>&lt;img src=x onerror=alert(5)&gt;</div>`},
	}
	if fmt.Sprint(events) != fmt.Sprint(want) {
		t.Errorf("events:\n%q\nwant:\n%q", events, want)
	}
}
