package callback_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/invoke/callback"
)

func TestParseAllowListRefuses(t *testing.T) {
	for _, entry := range []string{"10.0.0.0/33", "10.0.0/8", "not a host", "-bad.example", "a..b", "fe80::/129", "http://x.example"} {
		if _, err := callback.ParseAllowList([]string{entry}); err == nil {
			t.Errorf("ParseAllowList(%q) accepted it", entry)
		}
	}
	p, err := callback.ParseAllowList([]string{" 127.0.0.1 ", "10.1.0.0/16", "Hooks.Internal.", "", "::1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(p.Allowed()); got != 4 {
		t.Errorf("Allowed() = %v", p.Allowed())
	}
}

func TestCheckURL(t *testing.T) {
	open := &callback.Policy{}
	allow, err := callback.ParseAllowList([]string{"127.0.0.1", "10.1.0.0/16", "hooks.internal", "receiver.ns.svc"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		url            string
		open, allowed  bool
		refused, wrong bool // refused: by policy; wrong: not a callback URL at all
	}{
		{url: "https://hooks.example.com/done", open: true, allowed: true},
		{url: "http://93.184.216.34:8080/cb", open: true, allowed: true},
		{url: "http://[2606:2800:220:1::1]/cb", open: true, allowed: true},
		{url: "http://127.0.0.1:9000/cb", allowed: true, refused: true},
		{url: "http://127.0.0.2/cb", refused: true},
		{url: "http://[::1]/cb", refused: true},
		{url: "http://[::ffff:127.0.0.1]/cb", allowed: true, refused: true},
		{url: "http://10.1.2.3/cb", allowed: true, refused: true},
		{url: "http://10.2.0.1/cb", refused: true},
		{url: "http://172.16.0.1/cb", refused: true},
		{url: "http://192.168.1.1/cb", refused: true},
		{url: "http://[fd00::1]/cb", refused: true},
		{url: "http://100.64.0.1/cb", refused: true},
		{url: "http://169.254.169.254/latest/meta-data", refused: true},
		{url: "http://[fe80::1]/cb", refused: true},
		{url: "http://224.0.0.1/cb", refused: true},
		{url: "http://0.0.0.0/cb", refused: true},
		{url: "http://[::]/cb", refused: true},
		{url: "http://255.255.255.255/cb", refused: true},
		{url: "http://localhost:8080/cb", refused: true},
		{url: "http://LOCALHOST./cb", refused: true},
		{url: "http://api.fn.localhost/cb", refused: true},
		{url: "http://kubernetes/cb", refused: true},
		{url: "http://127.1/cb", refused: true},
		{url: "http://0x7f.0.0.1/cb", refused: true},
		{url: "http://2130706433.0/cb", refused: true},
		{url: "http://1.2.3.example.com/cb", open: true, allowed: true},
		{url: "http://receiver.ns.svc/cb", allowed: true, refused: true},
		{url: "http://receiver.ns.svc.cluster.local/cb", refused: true},
		{url: "https://hooks.internal/cb", open: true, allowed: true},
		{url: "ftp://hooks.example.com/", wrong: true},
		{url: "https://user:pw@hooks.example.com/", wrong: true},
		{url: "/relative", wrong: true},
		{url: "", wrong: true},
	} {
		for _, pc := range []struct {
			name string
			p    *callback.Policy
			ok   bool
		}{{"no allow-list", open, tc.open}, {"allow-list", allow, tc.allowed}} {
			err := pc.p.CheckURL(tc.url)
			switch {
			case pc.ok && err != nil:
				t.Errorf("%s: CheckURL(%q) = %v, want admitted", pc.name, tc.url, err)
			case !pc.ok && err == nil:
				t.Errorf("%s: CheckURL(%q) admitted it", pc.name, tc.url)
			case !pc.ok && tc.refused && !callback.IsRefused(err):
				t.Errorf("%s: CheckURL(%q) = %v, want a refusal by policy", pc.name, tc.url, err)
			case !pc.ok && tc.wrong && callback.IsRefused(err):
				t.Errorf("%s: CheckURL(%q) = %v, want a malformed URL, not a refusal", pc.name, tc.url, err)
			}
		}
	}
}

// receiver answers each delivery with status and hands over its request.
func receiver(t *testing.T, status int) (*httptest.Server, chan *http.Request, chan []byte) {
	reqs, bodies := make(chan *http.Request, 10), make(chan []byte, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		reqs <- r
		bodies <- b
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv, reqs, bodies
}

func port(t *testing.T, srv *httptest.Server) string {
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Port()
}

// A delivery is signed so a receiver verifies it, and a receiver's 5xx is
// worth another try where its 4xx is not.
func TestPostSigned(t *testing.T) {
	srv, reqs, bodies := receiver(t, http.StatusNoContent)
	allow, _ := callback.ParseAllowList([]string{"127.0.0.1"})
	s := callback.NewSender(allow, time.Second, nil)
	key, err := callback.NewKey()
	if err != nil || !strings.HasPrefix(key, callback.KeyPrefix) || len(key) != len(callback.KeyPrefix)+64 {
		t.Fatalf("NewKey = %q, %v", key, err)
	}
	body := []byte(`{"requestId":"r1"}`)
	status, err := s.Post(context.Background(), srv.URL+"/cb", key, "r1", 1, body)
	if status != 204 || err != nil {
		t.Fatalf("Post = %d, %v", status, err)
	}
	r, got := <-reqs, <-bodies
	sig := r.Header.Get(callback.SignatureHeader)
	if err := callback.Verify(key, sig, got, time.Now(), 5*time.Minute); err != nil {
		t.Fatalf("Verify(%q): %v", sig, err)
	}
	if r.Header.Get("X-Request-Id") != "r1" || r.Header.Get("Content-Type") != "application/json" || r.Method != "POST" {
		t.Errorf("headers: %s %v", r.Method, r.Header)
	}
	for name, check := range map[string]error{
		"another key":     callback.Verify(key+"x", sig, got, time.Now(), 5*time.Minute),
		"another body":    callback.Verify(key, sig, []byte(`{"requestId":"r2"}`), time.Now(), 5*time.Minute),
		"an old delivery": callback.Verify(key, sig, got, time.Now().Add(10*time.Minute), 5*time.Minute),
		"no timestamp":    callback.Verify(key, "v1=00", got, time.Now(), 5*time.Minute),
	} {
		if check == nil {
			t.Errorf("%s verified", name)
		}
	}

	for code, retry := range map[int]bool{500: true, 503: true, 429: true, 408: true, 400: false, 404: false, 410: false} {
		srv, _, _ := receiver(t, code)
		status, err := s.Post(context.Background(), srv.URL, key, "r1", 1, body)
		if status != code || err == nil || callback.Retryable(status, err) != retry {
			t.Errorf("receiver %d: Post = %d, %v; retryable %v, want %v", code, status, err, callback.Retryable(status, err), retry)
		}
	}
}

// A name is checked by the addresses it resolves to at delivery, and the
// connection goes to the address checked: a name resolving to loopback is
// refused, one the allow-list names reaches it.
func TestPostResolvesAndChecks(t *testing.T) {
	srv, reqs, _ := receiver(t, http.StatusOK)
	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "rebind.example.com", "hooks.internal":
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		case "mixed.example.com":
			return []netip.Addr{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("10.0.0.1")}, nil
		}
		return nil, errors.New("unexpected lookup of " + host)
	}
	allow, _ := callback.ParseAllowList([]string{"hooks.internal"})
	s := callback.NewSender(allow, time.Second, lookup)
	p := port(t, srv)
	for _, host := range []string{"rebind.example.com", "mixed.example.com"} {
		status, err := s.Post(context.Background(), "http://"+host+":"+p+"/cb", "k", "r", 1, []byte("{}"))
		if status != 0 || !callback.IsRefused(err) || callback.Retryable(status, err) {
			t.Errorf("%s: Post = %d, %v; want a refusal, not retried", host, status, err)
		}
	}
	if len(reqs) != 0 {
		t.Fatalf("a refused delivery reached the receiver")
	}
	status, err := s.Post(context.Background(), "http://hooks.internal:"+p+"/cb", "k", "r", 1, []byte("{}"))
	if status != 200 || err != nil {
		t.Fatalf("an allowed name: Post = %d, %v", status, err)
	}
	if r := <-reqs; r.Host != "hooks.internal:"+p {
		t.Errorf("the request's Host is %q", r.Host)
	}
}

// A redirect is followed only as a POST and only where the policy admits.
func TestPostRedirects(t *testing.T) {
	target, reqs, bodies := receiver(t, http.StatusOK)
	redirect := func(code int, to string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, to, code)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	allow, _ := callback.ParseAllowList([]string{"127.0.0.1"})
	s := callback.NewSender(allow, time.Second, nil)
	if status, err := s.Post(context.Background(), redirect(307, target.URL+"/moved"), "k", "r", 1, []byte(`{"a":1}`)); status != 200 || err != nil {
		t.Fatalf("307 to an admitted host: %d, %v", status, err)
	}
	if r, b := <-reqs, <-bodies; r.Method != "POST" || string(b) != `{"a":1}` || r.URL.Path != "/moved" {
		t.Errorf("after the 307: %s %s %s", r.Method, r.URL, b)
	}
	for name, from := range map[string]string{
		"307 to a private address": redirect(307, "http://10.0.0.1/x"),
		"308 to localhost":         redirect(308, "http://localhost/x"),
	} {
		status, err := s.Post(context.Background(), from, "k", "r", 1, []byte("{}"))
		if status != 0 || !callback.IsRefused(err) {
			t.Errorf("%s: Post = %d, %v; want a refusal", name, status, err)
		}
	}
	if status, err := s.Post(context.Background(), redirect(302, target.URL), "k", "r", 1, []byte("{}")); err == nil || !strings.Contains(err.Error(), "drop the body") {
		t.Errorf("302: Post = %d, %v; want refused for dropping the body", status, err)
	}
	if len(reqs) != 0 {
		t.Errorf("a refused redirect reached the receiver")
	}
}
