package localdev_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// A function's status.url is its own host under fn.localhost, where its
// cookies reach the caller; on the shared /fn/ they are stripped and the
// answer sandboxed (docs/invoke.md). Both are recorded alike.
func TestFunctionHostAndSharedOrigin(t *testing.T) {
	d := startDev(t, time.Minute)
	fn, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"name": "page"},
		"spec": map[string]any{"runtime": "python3.12", "entrypoint": "main.handler",
			"source": map[string]any{"inline": map[string]any{"files": map[string]string{
				"main.py": "def handler(event, context):\n" +
					"    return {'statusCode': 200, 'headers': {'Set-Cookie': ['session=s3cret; Path=/; HttpOnly', 'theme=dark; Path=/'],\n" +
					"            'Content-Type': 'text/html'}, 'body': '<p>' + event['path'] + '</p>'}\n"}}}},
	})
	if code, b := d.do("POST", "/v1/namespaces/e2e/functions", "application/json", fn); code != 201 {
		t.Fatalf("create function: %d %s", code, b)
	}
	st := d.awaitReady("e2e", "page", 3*time.Minute)
	base, _ := url.Parse(d.base)
	want := "http://page.e2e.fn.localhost:" + base.Port()
	if st.Status.URL != want {
		t.Fatalf("status.url = %q, want %q", st.Status.URL, want)
	}

	// Go's resolver knows no *.localhost: connect to sless dev and name
	// the host, as curl --connect-to does.
	call := func(host, path string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest("GET", d.base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Authorization", "Bearer "+d.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s%s: %d %s", host, path, resp.StatusCode, b)
		}
		return resp, string(b)
	}
	statusURL, _ := url.Parse(st.Status.URL)
	own, body := call(statusURL.Host, "/orders/7")
	if body != "<p>/orders/7</p>" {
		t.Fatalf("on its host the function saw %q, want the whole path", body)
	}
	if got := own.Header.Values("Set-Cookie"); len(got) != 2 || !strings.HasPrefix(got[0], "session=s3cret") {
		t.Fatalf("on its host: Set-Cookie %q, want the function's two", got)
	}
	if csp := own.Header.Values("Content-Security-Policy"); len(csp) != 0 {
		t.Fatalf("on its host: Content-Security-Policy %q, want none", csp)
	}

	shared, body := call(base.Host, "/fn/e2e/page/orders/7")
	if body != "<p>/orders/7</p>" {
		t.Fatalf("on /fn/ the function saw %q", body)
	}
	if got := shared.Header.Values("Set-Cookie"); len(got) != 0 {
		t.Fatalf("on /fn/: Set-Cookie %q reached the caller", got)
	}
	if csp := shared.Header.Values("Content-Security-Policy"); !slices.Equal(csp, []string{"sandbox"}) {
		t.Fatalf("on /fn/: Content-Security-Policy %q, want sandbox", csp)
	}
	if corp := shared.Header.Get("Cross-Origin-Resource-Policy"); corp != "same-origin" {
		t.Fatalf("on /fn/: Cross-Origin-Resource-Policy %q, want same-origin", corp)
	}

	// Both calls are in the function's history.
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, b := d.do("GET", "/v1/namespaces/e2e/functions/page/invocations", "", nil)
		var page struct {
			Items []struct {
				Status int `json:"status"`
			} `json:"items"`
		}
		if code != 200 || json.Unmarshal(b, &page) != nil {
			t.Fatalf("invocations: %d %s", code, b)
		}
		if len(page.Items) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d invocation records after 30 s, want 2: %s", len(page.Items), b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
