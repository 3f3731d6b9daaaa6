package api_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/api"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/local/build"
	"github.com/sless-dev/sless/pkg/local/serving"
	"github.com/sless-dev/sless/pkg/logs"
	"github.com/sless-dev/sless/runtimes"
)

// readsEnded counts the reads of a Source that have returned, so a test
// sees a follow end when its client leaves.
type readsEnded struct {
	logs.Source
	ended atomic.Int32
}

func (r *readsEnded) Function(ctx context.Context, fn slessv1alpha1.Workload, q logs.Query, emit logs.Emit) error {
	defer r.ended.Add(1)
	return r.Source.Function(ctx, fn, q, emit)
}

// logsEnv is an API over local mode's log files: a function's in
// <dir>/<ns>/<name>.log and its rotated files, builds' in <builds>.
type logsEnv struct {
	*env
	dir, builds string
	src         *readsEnded
}

func newLogsEnv(t *testing.T) *logsEnv {
	dir, builds := t.TempDir(), t.TempDir()
	b, err := build.New(builds, runtimes.LocalOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	src := &readsEnded{Source: &serving.Logs{LogDir: dir, Builder: b}}
	e := newEnv(t, func(o *api.Options) { o.Logs = src })
	return &logsEnv{env: e, dir: dir, builds: builds, src: src}
}

// write appends stamped lines to a file, as sless dev writes them.
func writeStamped(t *testing.T, path string, at time.Time, lines ...string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i, l := range lines {
		st := &logs.Stamper{W: f, Now: func() time.Time { return at.Add(time.Duration(i) * time.Second) }}
		fmt.Fprintln(st, l)
	}
}

const logDigest = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// The logs routes answer the function's lines, oldest first across its
// rotated files, cut by tail, since and invocation; a build's by its name
// or latest; and refuse bad parameters, strangers and missing functions as
// every route does.
func TestFunctionLogs(t *testing.T) {
	e := newLogsEnv(t)
	tok := e.token("alice")
	want(t, e.do("POST", e.path("functions"), tok, pythonFunction("hello")), http.StatusCreated)
	base := filepath.Join(e.dir, e.ns, "hello.log")
	t0 := time.Now().Add(-2 * time.Hour).UTC().Truncate(time.Second)
	writeStamped(t, base+".2", t0, "oldest")
	writeStamped(t, base+".1", t0.Add(time.Hour), `{"level":"info","msg":"hi","requestId":"req-1"}`, "plain")
	writeStamped(t, base, t0.Add(2*time.Hour-time.Minute), `{"level":"info","msg":"again","requestId":"req-2"}`,
		`{"level":"info","msg":"request","requestId":"req-1"}`, "newest")
	writeStamped(t, filepath.Join(e.builds, logDigest+".log"), t0, "$ pip install", "Successfully installed")

	fnLogs := e.path("functions", "hello", "logs")
	build := "hello-build-" + logDigest[:10]
	rows := []struct {
		name, query string
		want        []string
	}{
		{"all", "", []string{"oldest", `{"level":"info","msg":"hi","requestId":"req-1"}`, "plain",
			`{"level":"info","msg":"again","requestId":"req-2"}`, `{"level":"info","msg":"request","requestId":"req-1"}`, "newest"}},
		{"tail", "?tail=2", []string{`{"level":"info","msg":"request","requestId":"req-1"}`, "newest"}},
		{"tail 0", "?tail=0", nil},
		{"since a time", "?since=" + t0.Add(time.Hour+time.Second).Format(time.RFC3339), []string{"plain",
			`{"level":"info","msg":"again","requestId":"req-2"}`, `{"level":"info","msg":"request","requestId":"req-1"}`, "newest"}},
		{"since a duration", "?since=5m", []string{`{"level":"info","msg":"again","requestId":"req-2"}`,
			`{"level":"info","msg":"request","requestId":"req-1"}`, "newest"}},
		{"one invocation", "?invocation=req-1", []string{`{"level":"info","msg":"hi","requestId":"req-1"}`,
			`{"level":"info","msg":"request","requestId":"req-1"}`}},
		{"one invocation, last line", "?invocation=req-1&tail=1", []string{`{"level":"info","msg":"request","requestId":"req-1"}`}},
		{"timestamps", "?tail=1&timestamps=true", []string{t0.Add(2*time.Hour-time.Minute+2*time.Second).Format(time.RFC3339Nano) + " newest"}},
	}
	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do("GET", fnLogs+tc.query, tok, nil)
			want(t, r, http.StatusOK)
			if ct := r.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
				t.Errorf("Content-Type %q", ct)
			}
			if got := splitLines(string(r.Body)); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("lines\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}

	r := e.do("GET", e.path("functions", "hello", "builds", build, "logs"), tok, nil)
	want(t, r, http.StatusOK)
	if got := string(r.Body); got != "$ pip install\nSuccessfully installed\n" {
		t.Errorf("build log %q", got)
	}
	for _, tc := range []struct {
		name, path, tok string
		code            int
		field           string
	}{
		{name: "latest of a function never built", path: e.path("functions", "hello", "builds", "latest", "logs"), code: 404},
		{name: "another function's build", path: e.path("functions", "other", "builds", "other-build-"+logDigest[:10], "logs"), code: 404},
		{name: "a build of another function by name", path: e.path("functions", "hello", "builds", "other-build-"+logDigest[:10], "logs"), code: 404},
		{name: "a build that never ran", path: e.path("functions", "hello", "builds", "hello-build-ffffffffff", "logs"), code: 404},
		{name: "following a build that never ran", path: e.path("functions", "hello", "builds", "hello-build-ffffffffff", "logs") + "?follow=true", code: 404},
		{name: "a missing function", path: e.path("functions", "nothere", "logs"), code: 404},
		{name: "no token", path: fnLogs, tok: "-", code: 401},
		{name: "another tenant", path: fnLogs, tok: e.token("mallory", "sless.dev/namespace", "t-elsewhere"), code: 403},
		{name: "follow not a boolean", path: fnLogs + "?follow=yes", code: 400, field: "follow"},
		{name: "timestamps not a boolean", path: fnLogs + "?timestamps=2", code: 400, field: "timestamps"},
		{name: "since negative", path: fnLogs + "?since=-5m", code: 400, field: "since"},
		{name: "since a word", path: fnLogs + "?since=yesterday", code: 400, field: "since"},
		{name: "tail negative", path: fnLogs + "?tail=-1", code: 400, field: "tail"},
		{name: "tail a word", path: fnLogs + "?tail=all", code: 400, field: "tail"},
		{name: "empty invocation", path: fnLogs + "?invocation=", code: 400, field: "invocation"},
		{name: "invocation too long", path: fnLogs + "?invocation=" + strings.Repeat("x", 129), code: 400, field: "invocation"},
		{name: "invocation of a build", path: e.path("functions", "hello", "builds", build, "logs") + "?invocation=req-1", code: 400, field: "invocation"},
		{name: "unknown parameter", path: fnLogs + "?container=x", code: 400, field: "container"},
		{name: "repeated parameter", path: fnLogs + "?tail=1&tail=2", code: 400, field: "tail"},
		{name: "bad build name", path: e.path("functions", "hello", "builds", "Bad_Build", "logs"), code: 400, field: "build"},
		{name: "bad function name", path: e.path("functions", "Bad_Name", "logs"), code: 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			token := tok
			switch tc.tok {
			case "-":
				token = ""
			case "":
			default:
				token = tc.tok
			}
			r := e.do("GET", tc.path, token, nil)
			want(t, r, tc.code)
			p := r.problem(t)
			if strings.Contains(p.Detail, ":ns") || strings.Contains(p.Detail, ":name") {
				t.Errorf("detail %q shows a route template", p.Detail)
			}
			if tc.field != "" && (len(p.Errors) == 0 || p.Errors[0].Field != tc.field) {
				t.Errorf("errors %+v do not name %s", p.Errors, tc.field)
			}
		})
	}
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// ?follow=true sends lines as they are written, across a rotation, and
// the read ends when the client leaves.
func TestFollowFunctionLogs(t *testing.T) {
	e := newLogsEnv(t)
	tok := e.token("alice")
	want(t, e.do("POST", e.path("functions"), tok, pythonFunction("hello")), http.StatusCreated)
	base := filepath.Join(e.dir, e.ns, "hello.log")
	writeStamped(t, base, time.Now(), "before")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.url+e.path("functions", "hello", "logs")+"?follow=true&tail=1", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func(want string) {
		t.Helper()
		select {
		case got := <-lines:
			if got != want {
				t.Fatalf("line %q, want %q", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no line %q within 10s", want)
		}
	}
	next("before")
	writeStamped(t, base, time.Now(), "appended")
	next("appended")
	// A rotation, as local mode's logFile makes it: the file becomes .1
	// and a new one starts.
	writeStamped(t, base, time.Now(), "last of the old file")
	if err := os.Rename(base, base+".1"); err != nil {
		t.Fatal(err)
	}
	writeStamped(t, base, time.Now(), "first of the new file")
	next("last of the old file")
	next("first of the new file")

	cancel()
	deadline := time.Now().Add(10 * time.Second)
	for e.src.ended.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the read did not end when the client left")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A SlessService's logs are read at …/services/{name}/logs, apart from a
// Function's of the same name; its build logs answer 404 until it has one.
func TestServiceLogs(t *testing.T) {
	e := newLogsEnv(t)
	tok := e.token("alice")
	want(t, e.do("POST", e.path("services"), tok, webService("web")), http.StatusCreated)
	want(t, e.do("POST", e.path("functions"), tok, pythonFunction("web")), http.StatusCreated)
	t0 := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	writeStamped(t, filepath.Join(e.dir, serving.ServicesDir, e.ns, "web.log"), t0, "service line")
	writeStamped(t, filepath.Join(e.dir, e.ns, "web.log"), t0, "function line")

	rows := []struct {
		name, path string
		status     int
		body       string
	}{
		{"service", e.path("services", "web", "logs"), http.StatusOK, "service line\n"},
		{"function of the same name", e.path("functions", "web", "logs"), http.StatusOK, "function line\n"},
		{"service's build before it has one", e.path("services", "web", "builds", "latest", "logs"), http.StatusNotFound, `SlessService \"web\" has no build yet`},
		{"unknown service", e.path("services", "nope", "logs"), http.StatusNotFound, "nope"},
		{"bad build name", e.path("services", "web", "builds", "Bad_Name", "logs"), http.StatusBadRequest, "build"},
		{"stranger", e.path("services", "web", "logs"), http.StatusForbidden, ""},
	}
	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			who := tok
			if tc.name == "stranger" {
				who = e.token("mallory", "sless.dev/namespace", "t-elsewhere")
			}
			r := e.do("GET", tc.path, who, nil)
			want(t, r, tc.status)
			if !strings.Contains(string(r.Body), tc.body) {
				t.Errorf("body %s, want %q in it", r.Body, tc.body)
			}
		})
	}
}
