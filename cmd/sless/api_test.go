package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/sless-dev/sless/test/testbed"
)

// TestMain stops the test apiserver and S3 server the tests of this package
// start. (One TestMain per package: tests of other subcommands share it.)
// The tests get a user config directory of their own: the login of whoever
// runs them must not answer for "not logged in", nor a test's login
// replace theirs.
func TestMain(m *testing.M) {
	home, err := os.MkdirTemp("", "sless-cli-config-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("XDG_CONFIG_HOME", home)
	testbed.Main(m, func() { os.RemoveAll(home) })
}

// TestAPICommand runs `sless api` as wired for a cluster against the test
// apiserver and S3 server: it becomes ready, serves an authenticated create
// and read, answers the invoke path, and stops cleanly on cancel.
func TestAPICommand(t *testing.T) {
	k := testbed.SharedKube(t)
	s3srv := testbed.SharedS3(t)
	bucket := s3srv.Bucket(t)
	dir := t.TempDir()
	secret := "sless-cmd-test-secret-0123456789abcdef"
	secretFile := filepath.Join(dir, "secret")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", k.Kubeconfig)
	t.Setenv("SLESS_S3_ACCESS_KEY", s3srv.AccessKey)
	t.Setenv("SLESS_S3_SECRET_KEY", s3srv.SecretKey)
	// The test bed's namespaces (t-…) are tenants' by their prefix: the
	// token below names one, which is a 403 without this.
	t.Setenv("SLESS_TENANT_NAMESPACE_PREFIXES", "t-")
	port, err := testbed.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	publicPort, err := testbed.FreePort()
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- runAPI(ctx, []string{"-listen", "127.0.0.1:" + strconv.Itoa(port), "-public-listen", "127.0.0.1:" + strconv.Itoa(publicPort),
			"-s3-endpoint", "http://" + s3srv.Endpoint, "-s3-bucket", bucket,
			"-jwt-secret-file", secretFile, "-jwt-audience", "sless", "-max-uploads", "3", "-max-uploads-per-tenant", "1", "-idle-conn-timeout", "300ms",
			"-database-url", testbed.DatabaseURL(t)})
	}()

	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-done:
			t.Fatalf("sless api exited: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("sless api not ready: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// A keep-alive connection that sends no next request is closed.
	conn, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(conn)
	if resp, err := http.ReadResponse(br, nil); err != nil {
		t.Fatal(err)
	} else {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("an idle keep-alive connection: %v, want closed by the server (EOF) after -idle-conn-timeout", err)
	}
	refusesAmbiguousFraming(t, "127.0.0.1:"+strconv.Itoa(port))
	// The public door serves the same front door.
	if resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(publicPort) + "/readyz"); err != nil {
		t.Fatalf("public door: %v", err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusOK {
		t.Fatalf("public door's /readyz: %s", resp.Status)
	}

	ns := k.Namespace(t)
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "cmd-test", "aud": "sless",
		"exp": time.Now().Add(time.Hour).Unix(), "sless.dev/namespace": ns}).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	do := func(method, path, body string) *http.Response {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	fn := `{"metadata":{"name":"hello"},"spec":{"runtime":"python3.12","entrypoint":"main.handler",` +
		`"source":{"inline":{"files":{"main.py":"def handler(e, c):\n    return 1\n"}}}}}`
	if resp := do("POST", "/v1/namespaces/"+ns+"/functions", fn); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d", resp.StatusCode)
	}
	resp := do("GET", "/v1/namespaces/"+ns+"/functions/hello", "")
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(buf.String(), `"name":"hello"`) {
		t.Fatalf("read: %d %s", resp.StatusCode, buf.String())
	}
	// The invoke proxy is mounted: a function that is not ready yet is not a 404 of the router.
	resp = do("GET", "/fn/"+ns+"/nothing", "")
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Type") == "" {
		t.Fatalf("invoke of a missing function: %d", resp.StatusCode)
	}

	// A call of the function that is not built is recorded (once the
	// proxy's cache has it; 404 before), and the proxy's and the
	// recorder's metrics count it.
	deadline = time.Now().Add(30 * time.Second)
	for {
		resp = do("GET", "/fn/"+ns+"/hello", "")
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			break
		}
		if resp.StatusCode != http.StatusNotFound || time.Now().After(deadline) {
			t.Fatalf("invoke of a function not built: %d, want 503", resp.StatusCode)
		}
		time.Sleep(50 * time.Millisecond)
	}
	metrics := func() string {
		resp := do("GET", "/metrics", "")
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	deadline = time.Now().Add(30 * time.Second)
	for m := metrics(); !strings.Contains(m, "\nsless_invocation_records_written_total 1\n") ||
		!strings.Contains(m, "\nsless_invoke_requests_total{class=\"5xx\",source=\"platform\"} 1\n"); m = metrics() {
		if time.Now().After(deadline) {
			t.Fatalf("metrics do not count the call and its record:\n%s", m)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// -max-uploads reaches the server: it reports its upload slots.
	if m := metrics(); !strings.Contains(m, "\nsless_api_source_upload_slots 3\n") {
		t.Fatalf("metrics do not show 3 upload slots:\n%s", m)
	}
	if m := metrics(); !strings.Contains(m, "\nsless_api_source_upload_tenant_slots 1\n") {
		t.Fatalf("metrics do not show 1 upload slot per tenant:\n%s", m)
	}

	// Services resolve on /svc/ (not 501, as on a server without them):
	// one that is not built answers 503 once the proxy's cache has it.
	svc := `{"metadata":{"name":"web"},"spec":{"runtime":"python3.12","entrypoint":"app.app",` +
		`"source":{"inline":{"files":{"app.py":"app = None\n"}}}}}`
	if resp := do("POST", "/v1/namespaces/"+ns+"/services", svc); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create service: %d", resp.StatusCode)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		resp = do("GET", "/svc/"+ns+"/web/notes?x=1", "")
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("X-Sless-Error") == "FunctionNotReady" {
			break
		}
		if resp.StatusCode != http.StatusNotFound || time.Now().After(deadline) {
			t.Fatalf("call of a service not built: %d %s, want 503 FunctionNotReady", resp.StatusCode, resp.Header.Get("X-Sless-Error"))
		}
		time.Sleep(50 * time.Millisecond)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("sless api stopped with %v", err)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("sless api did not stop")
	}
}

func TestAPIFlagsRefused(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no uploads at once", []string{"-max-uploads", "0"}, "-max-uploads must be at least 1"},
		{"negative uploads", []string{"-max-uploads", "-2"}, "-max-uploads must be at least 1"},
		{"zero queue wait", []string{"-upload-queue-wait", "0s"}, "-upload-queue-wait must be positive"},
		{"queue wait not a duration", []string{"-upload-queue-wait", "2"}, "invalid value"},
		{"path style not a boolean", nil, `SLESS_S3_PATH_STYLE="yes" (the default of -s3-path-style)`},
		{"zero body idle timeout", []string{"-body-idle-timeout", "0s"}, "-body-idle-timeout must be positive"},
		{"function domain with a wildcard", []string{"-fn-domain", "*.fn.example.com"}, `-fn-domain: the function domain "*.fn.example.com" starts with a wildcard`},
		{"function domain a URL", []string{"-fn-domain", "https://fn.example.com"}, "-fn-domain: the function domain \"https://fn.example.com\" is a URL"},
		{"function domain with a port", []string{"-fn-domain", "fn.localhost:8080"}, "has a port"},
		{"function domain upper case", []string{"-fn-domain", "Fn.Example.com"}, "is not a DNS label"},
		{"tenant share over the slots", []string{"-max-uploads", "4", "-max-uploads-per-tenant", "5"}, "-max-uploads-per-tenant must be between 0"},
		{"negative tenant share", []string{"-max-uploads-per-tenant", "-1"}, "-max-uploads-per-tenant must be between 0"},
		{"negative minimum rate", []string{"-upload-min-rate", "-1"}, "-upload-min-rate must not be negative"},
		{"zero rate window", []string{"-upload-rate-window", "0s"}, "-upload-rate-window must be positive"},
		{"spool size not a size", []string{"-spool-max-size", "huge"}, `-spool-max-size "huge": want a size`},
		{"spool size too small", []string{"-spool-max-size", "64Ki"}, `-spool-max-size "64Ki": want at least 1Mi`},
		{"JWKS file without an audience", []string{"-jwks-file", "/nonexistent/jwks.json"}, "need -jwt-audience"},
		{"JWKS URL without an audience", []string{"-jwks-url", "https://idp.example.com/jwks"}, "need -jwt-audience"},
		{"audience of commas", []string{"-jwt-audience", " , "}, "names no audience"},
		{"tenant prefix taking in kube-*", []string{"-tenant-namespace-prefixes", "team-,kube-"}, "default or kube-*"},
		{"tenant prefix not a name", []string{"-tenant-namespace-prefixes", "Team_"}, "does not start a namespace name"},
		{"maximum not a quantity", []string{"-max-resources", "memory=2GB"}, `--max-resources (SLESS_MAX_RESOURCES): memory=2GB: "2GB" is not a quantity`},
		{"one address for both doors", []string{"-listen", ":8080", "-public-listen", ":8080"}, "-public-listen must be another address than -listen"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.args == nil {
				t.Setenv("SLESS_S3_PATH_STYLE", "yes")
			}
			err := runAPI(context.Background(), tc.args)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestParseList(t *testing.T) {
	for in, want := range map[string][]string{
		"":                nil,
		"sless":           {"sless"},
		"sless, other":    {"sless", "other"},
		" sless ,,other ": {"sless", "other"},
	} {
		got, err := parseList("-jwt-audience", "audience", in)
		if err != nil || strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("parseList(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if got, err := parseList("-tenant-namespace-prefixes", "prefix", " , "); err == nil || err.Error() != `-tenant-namespace-prefixes " , " names no prefix` {
		t.Errorf("parseList of commas = %q, %v; want an error naming the flag", got, err)
	}
}
