package api_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sless-dev/sless/pkg/api"
	"github.com/sless-dev/sless/pkg/invoke"
)

// TestMetricSeriesBounded sends requests whose method, status and headers
// are made up, over raw sockets so nothing tidies them, and expects the
// API's and the invoke proxy's series on /metrics to stay the same set
// however many such values arrive: every label fed by a request, or by a
// function's answer, takes its value from a closed set, with "other" for
// the rest. Before, each made-up method (and each unregistered status a
// function answered) was a new series for good.
func TestMetricSeriesBounded(t *testing.T) {
	// A function that answers the status its path asks for, behind the
	// real invoke proxy, both counting into the API's registry.
	fn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		if err != nil || code < 200 || code > 999 {
			code = http.StatusOK
		}
		w.WriteHeader(code)
	}))
	defer fn.Close()
	fnURL, _ := url.Parse(fn.URL)
	reg := prometheus.NewRegistry()
	im, err := invoke.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := invoke.NewProxy(invoke.Options{Metrics: im,
		Resolver: invoke.ResolverFunc(func(ctx context.Context, ns, name string) (invoke.Target, error) {
			return invoke.Target{Address: fnURL, Ready: true, Public: true}, nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(o *api.Options) { o.Registerer, o.Gatherer, o.Invoke = reg, reg, proxy })
	host := strings.TrimPrefix(e.url, "http://")
	alice := e.token("alice")

	// Each row is one kind of made-up value; {i} in it is replaced by a
	// number that differs per request, so each request brings a new value.
	rows := []struct {
		name   string
		method string
		path   string
		header string // one extra header line, if any
	}{
		{name: "made-up method on a route", method: "FROB{i}", path: "/healthz"},
		{name: "made-up method on an unknown path", method: "X-{i}", path: "/nowhere"},
		{name: "made-up method with a token", method: "PROPFIND{i}", path: e.path("functions"), header: "Authorization: Bearer " + alice},
		{name: "made-up method on the invoke path", method: "BREW{i}", path: "/fn/a/b"},
		{name: "lower-case method", method: "get{i}", path: "/readyz"},
		{name: "method of symbols", method: "!#$%&'*+-.^_`|~{i}", path: "/healthz"},
		{name: "long method", method: strings.Repeat("M", 2000) + "{i}", path: "/healthz"},
		{name: "made-up content type", method: "POST", path: e.path("functions"), header: "Content-Type: application/x-{i}"},
		{name: "unknown path", method: "GET", path: "/v1/namespaces/" + e.ns + "/widgets{i}"},
		{name: "unregistered status of a function", method: "GET", path: "/fn/a/b/{i}"},
	}
	send := func(method, path, header string) {
		t.Helper()
		conn, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		req := method + " " + path + " HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\nContent-Length: 0\r\n"
		if header != "" {
			req += header + "\r\n"
		}
		if _, err := io.WriteString(conn, req+"\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%.40s %s: %v", method, path, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// Statuses a function may answer that are not registered: 600 to 999
	// and the gaps below.
	var odd []int
	for c := 200; c <= 999; c++ {
		if http.StatusText(c) == "" {
			odd = append(odd, c)
		}
	}
	round := func(from, n int) {
		t.Helper()
		for _, r := range rows {
			for i := from; i < from+n; i++ {
				v := strconv.Itoa(i)
				if strings.HasPrefix(r.path, "/fn/a/b/") {
					v = strconv.Itoa(odd[i%len(odd)])
				}
				send(strings.ReplaceAll(r.method, "{i}", v), strings.ReplaceAll(r.path, "{i}", v), strings.ReplaceAll(r.header, "{i}", v))
			}
		}
	}
	series := func() (map[string]bool, string) {
		t.Helper()
		r := e.do("GET", "/metrics", "", nil)
		want(t, r, http.StatusOK)
		out := map[string]bool{}
		for line := range strings.Lines(string(r.Body)) {
			if strings.HasPrefix(line, "sless_api_") || strings.HasPrefix(line, "sless_invoke_") {
				out[line[:strings.LastIndexByte(line, ' ')]] = true
			}
		}
		return out, string(r.Body)
	}

	round(0, 5)
	series() // the scrape itself is counted once it is answered
	first, _ := series()
	round(5, 20)
	second, body := series()
	var grown []string
	for s := range second {
		if !first[s] {
			grown = append(grown, s)
		}
	}
	slices.Sort(grown)
	if len(grown) > 0 {
		t.Fatalf("%d series appeared for made-up values, e.g. %.300s", len(grown), strings.Join(grown, "\n"))
	}

	// Every value of a request-fed label is from its closed set.
	methods := []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE", "other"}
	label := regexp.MustCompile(`(method|code|class|route)="([^"]*)"`)
	for s := range second {
		for _, m := range label.FindAllStringSubmatch(s, -1) {
			ok := false
			switch m[1] {
			case "method":
				ok = slices.Contains(methods, m[2])
			case "code":
				c, err := strconv.Atoi(m[2])
				ok = m[2] == "other" || err == nil && http.StatusText(c) != ""
			case "class":
				ok = slices.Contains([]string{"1xx", "2xx", "3xx", "4xx", "5xx"}, m[2])
			case "route":
				ok = m[2] == "unmatched" || slices.ContainsFunc(e.srv.Engine().Routes(), func(ri gin.RouteInfo) bool { return ri.Path == m[2] })
			}
			if !ok {
				t.Errorf("label %s=%q is not from its closed set: %s", m[1], m[2], s)
			}
		}
	}
	for _, s := range []string{`method="other"`, `code="other"`} {
		if !strings.Contains(body, s) {
			t.Errorf("/metrics has no %s series", s)
		}
	}
	if len(body) > 256<<10 {
		t.Errorf("/metrics is %d bytes", len(body))
	}
}
