package runtimes_test

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/source"
	"github.com/sless-dev/sless/runtimes"
)

// The conformance suite runs the same checks against every runtime's wrapper,
// started as a local process with the real python3, node and go, on the
// function under testdata/<runtime>/, through the path local mode takes:
// pkg/source builds the context, it is unpacked, runtimes.LocalSetup installs
// the dependencies (pip from a local wheel, npm from the registry, go from the
// module proxy) and runtimes.LocalCommand serves it.

// conformanceTimeout is the functions' deadline in this suite.
const conformanceTimeout = 2

type conformanceCase struct {
	runtime    string
	entrypoint string
	// tagsPrints: the runtime can tag what a handler prints with its request
	// id (Go has no goroutine-local state; its Logger(ctx) does instead).
	tagsPrints bool
}

var conformanceCases = []conformanceCase{
	{runtimes.Python312, "app.main.handler", true},
	{runtimes.NodeJS22, "lib/api.handle", true},
	{runtimes.Go124, "handlers.Handle", false},
}

func conformanceFiles(t testing.TB, runtime string) map[string][]byte {
	files := testdataFiles(t, runtime)
	if runtime == runtimes.Python312 {
		files["wheels/tinydep-1.0-py3-none-any.whl"] = tinyWheel(t)
	}
	return files
}

func TestConformance(t *testing.T) {
	requireTools(t, "python3", "node", "npm", "go")
	for _, tc := range conformanceCases {
		t.Run(tc.runtime, func(t *testing.T) {
			t.Parallel()
			fn := prepare(t, tc.runtime, tc.entrypoint, conformanceFiles(t, tc.runtime))
			in := fn.start(t, runtimes.LocalOptions{FunctionName: "conf", Namespace: "team-a", Revision: "conf-00001",
				TimeoutSeconds: conformanceTimeout})
			c := &client{t: t, base: in.base}

			t.Run("health", func(t *testing.T) {
				c.t = t
				r := c.do("GET", runtimes.HealthPath, nil, nil)
				r.status(200).jsonEq(`{"status":"ok"}`)
				// Only GET on that path is the wrapper's; the rest is the handler's.
				r = c.do("POST", runtimes.HealthPath, nil, nil)
				r.status(404)
			})
			t.Run("json body", func(t *testing.T) {
				c.t = t
				r := c.do("POST", "/echo?a=1&a=2&b=", map[string]string{
					"Content-Type": "application/json", "X-Request-Id": "req-json-1", "X-Custom-Header": "abc"},
					[]byte(`{"name":"sless","n":[1,2]}`))
				r.status(200).header("X-Request-Id", "req-json-1").header("Content-Type", "application/json")
				var got struct {
					Event struct {
						Method, Path, RawQuery string
						Query                  map[string]string
						Headers                map[string]string
						Body                   any
						IsBase64Encoded        bool
					}
					Context struct {
						FunctionName, Namespace, Revision, RequestID string
						DeadlineMs, RemainingMs                      float64
					}
				}
				r.decode(&got)
				ev, ctx := got.Event, got.Context
				if ev.Method != "POST" || ev.Path != "/echo" || ev.RawQuery != "a=1&a=2&b=" {
					t.Errorf("method/path/rawQuery = %q %q %q", ev.Method, ev.Path, ev.RawQuery)
				}
				if ev.Query["a"] != "1" || ev.Query["b"] != "" || len(ev.Query) != 2 {
					t.Errorf("query = %v, want first values {a:1 b:}", ev.Query)
				}
				if ev.Headers["x-custom-header"] != "abc" || ev.Headers["content-type"] != "application/json" {
					t.Errorf("headers not lower-cased or missing: %v", ev.Headers)
				}
				if b, _ := json.Marshal(ev.Body); string(b) != `{"n":[1,2],"name":"sless"}` || ev.IsBase64Encoded {
					t.Errorf("body = %s (base64 %v), want the parsed JSON", b, ev.IsBase64Encoded)
				}
				if ctx.FunctionName != "conf" || ctx.Namespace != "team-a" || ctx.Revision != "conf-00001" || ctx.RequestID != "req-json-1" {
					t.Errorf("context = %+v", ctx)
				}
				now := float64(time.Now().UnixMilli())
				if ctx.DeadlineMs < now || ctx.DeadlineMs > now+conformanceTimeout*1000+1000 || ctx.RemainingMs <= 0 || ctx.RemainingMs > conformanceTimeout*1000 {
					t.Errorf("deadline %v / remaining %v not within the %ds timeout", ctx.DeadlineMs, ctx.RemainingMs, conformanceTimeout)
				}
			})
			t.Run("raw text body", func(t *testing.T) {
				c.t = t
				r := c.do("PUT", "/echo", map[string]string{"Content-Type": "text/plain"}, []byte("hello raw"))
				r.status(200)
				ev := r.event()
				if ev["body"] != "hello raw" || ev["isBase64Encoded"] != false || ev["method"] != "PUT" {
					t.Errorf("event = %v", ev)
				}
				if id := r.resp.Header.Get("X-Request-Id"); id == "" {
					t.Error("no generated X-Request-Id")
				}
			})
			t.Run("large request headers", func(t *testing.T) {
				c.t = t
				// Up to the platform's 1 MiB, in any number: Python answered
				// 431 past 100 headers or a 64 KiB line, Node.js past 16 KiB.
				hs := map[string]string{"Cookie": "session=" + strings.Repeat("c", 200<<10)}
				for i := range 150 {
					hs[fmt.Sprintf("X-H%d", i)] = "v"
				}
				ev := c.do("GET", "/echo", hs, nil).status(200).event()
				headers, _ := ev["headers"].(map[string]any)
				if cookie, _ := headers["cookie"].(string); len(headers) < 150 || len(cookie) != len(hs["Cookie"]) {
					t.Errorf("the event has %d headers and a cookie of %d bytes, want 150+ and %d", len(headers), len(cookie), len(hs["Cookie"]))
				}
			})
			t.Run("long request line", func(t *testing.T) {
				c.t = t
				// Within the same 1 MiB of request line and headers: Python
				// answered 414 past a 64 KiB request line.
				q := "q=" + strings.Repeat("a", 900<<10)
				ev := c.do("GET", "/echo?"+q, nil, nil).status(200).event()
				if got, _ := ev["rawQuery"].(string); got != q {
					t.Errorf("rawQuery has %d bytes, want %d", len(got), len(q))
				}
				query, _ := ev["query"].(map[string]any)
				if got, _ := query["q"].(string); len(got) != 900<<10 {
					t.Errorf("query q has %d bytes, want %d", len(got), 900<<10)
				}
			})
			t.Run("request head over 1 MiB is refused", func(t *testing.T) {
				c.t = t
				// Past 1 MiB, in the request line or in headers that are
				// each within it: 431 from every wrapper. Python answered
				// 414 to the one and took headers of any total size.
				for _, tc := range []struct {
					what    string
					path    string
					headers map[string]string
				}{
					{"request line", "/echo?q=" + strings.Repeat("a", 1100<<10), nil},
					{"headers", "/echo", map[string]string{"X-A": strings.Repeat("a", 600<<10), "X-B": strings.Repeat("b", 600<<10)}},
				} {
					c.do("GET", tc.path, tc.headers, nil).status(http.StatusRequestHeaderFieldsTooLarge)
				}
			})
			t.Run("chunked body", func(t *testing.T) {
				c.t = t
				// A reader of unknown length: the client sends it chunked.
				req, err := http.NewRequest("POST", in.base+"/echo", io.MultiReader(strings.NewReader("sent in "), strings.NewReader("chunks")))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Content-Type", "text/plain")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var got struct {
					Event struct {
						Headers map[string]string
						Body    any
					}
				}
				if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != 200 {
					t.Fatalf("status %d, %v", resp.StatusCode, err)
				}
				if got.Event.Body != "sent in chunks" || got.Event.Headers["transfer-encoding"] != "chunked" {
					t.Errorf("body %q, transfer-encoding header %q; want the whole body and chunked", got.Event.Body, got.Event.Headers["transfer-encoding"])
				}
			})
			t.Run("binary body", func(t *testing.T) {
				c.t = t
				raw := []byte{0xff, 0xfe, 0x00, 0x01}
				r := c.do("POST", "/echo", map[string]string{"Content-Type": "application/octet-stream"}, raw)
				ev := r.status(200).event()
				if ev["isBase64Encoded"] != true || ev["body"] != base64.StdEncoding.EncodeToString(raw) {
					t.Errorf("event body = %v (base64 %v)", ev["body"], ev["isBase64Encoded"])
				}
			})
			t.Run("empty body", func(t *testing.T) {
				c.t = t
				ev := c.do("GET", "/echo", nil, nil).status(200).event()
				if ev["body"] != nil {
					t.Errorf("body = %#v, want null", ev["body"])
				}
			})
			t.Run("invalid json is refused", func(t *testing.T) {
				c.t = t
				c.do("POST", "/echo", map[string]string{"Content-Type": "application/json"}, []byte("{nope")).
					status(400).errorType("BadRequest")
			})
			all := make([]byte, 256)
			for i := range all {
				all[i] = byte(i)
			}
			t.Run("json bodies are RFC 8259 JSON", func(t *testing.T) {
				c.t = t
				// What JSON.parse and Go refuse, Python's json.loads takes
				// (NaN, Infinity, a BOM), and what Python and Go refuse or pass
				// raw, Node.js's utf8 decoding turns into U+FFFD: each of these
				// is one 400 in every language.
				for _, body := range []string{
					"NaN", "Infinity", "-Infinity", `{"a":NaN}`, `[1,-Infinity]`,
					"\xef\xbb\xbf{}",
					"\"a\xffb\"", "{\"k\":\"\xc3\"}", "{\"\xed\xa0\x80\":1}",
				} {
					c.do("POST", "/echo", map[string]string{"Content-Type": "application/json"}, []byte(body)).
						status(400).errorType("BadRequest")
				}
				ev := c.do("POST", "/echo", map[string]string{"Content-Type": "application/json"}, []byte("{\"k\":\"caf\u00e9 \u2615\",\"n\":1e308}")).
					status(200).event()
				if b, _ := json.Marshal(ev["body"]); string(b) != `{"k":"café ☕","n":1e+308}` {
					t.Errorf("body = %s", b)
				}
			})
			t.Run("results are JSON", func(t *testing.T) {
				c.t = t
				// NaN and Infinity have no JSON: Python would write the
				// non-JSON token NaN, Node.js null; both are a BadResult, as in Go.
				for _, v := range []string{"nan", "inf", "-inf"} {
					for _, as := range []string{"value", "body"} {
						c.do("GET", "/nonfinite?v="+v+"&as="+as, nil, nil).status(500).errorType("BadResult")
					}
				}
				// Logged as a handler's error is: one error line whose errorType
				// is the answer's (Python and Node.js named the encoder's
				// exception, Go left errorType out).
				c.do("GET", "/nonfinite?v=nan&as=value", map[string]string{"X-Request-Id": "req-bad-1"}, nil).status(500)
				waitFor(t, 5*time.Second, "a BadResult error log line with a stack", func() bool {
					for _, rec := range logRecords(in.stdout.String()) {
						if rec["level"] == "error" && rec["requestId"] == "req-bad-1" && rec["errorType"] == "BadResult" && rec["stack"] != "" && rec["stack"] != nil {
							return true
						}
					}
					return false
				})
				// The result's own code failing while it is encoded (Python's
				// default, a JS toJSON, a Go MarshalJSON that panics, which
				// took the connection down) is a BadResult too.
				c.do("GET", "/encode-fails", nil, nil).status(500).errorType("BadResult")
				c.do("GET", "/echo", nil, nil).status(200)
				// Bytes anywhere in a result are base64, whatever their type; an
				// object that merely looks like a serialized Buffer is data.
				c.do("GET", "/nested-bytes", nil, nil).status(200).jsonEq(fmt.Sprintf(
					`{"b":%q,"list":["AQI="],"lookalike":{"type":"Buffer","data":[104,105]}}`,
					base64.StdEncoding.EncodeToString(all)))
			})
			t.Run("status and headers", func(t *testing.T) {
				c.t = t
				r := c.do("GET", "/status", nil, nil)
				r.status(201).header("X-Custom", "yes").header("Content-Type", "text/plain")
				if string(r.body) != "created" {
					t.Errorf("body = %q", r.body)
				}
			})
			t.Run("binary response", func(t *testing.T) {
				c.t = t
				r := c.do("GET", "/binary", nil, nil).status(200).header("Content-Type", "image/png")
				if !bytes.Equal(r.body, all) {
					t.Errorf("body = %x", r.body)
				}
				r = c.do("GET", "/binary64", nil, nil).status(202).header("Content-Type", "application/octet-stream")
				if !bytes.Equal(r.body, all) {
					t.Errorf("base64 body decoded to %x", r.body)
				}
				r = c.do("GET", "/bytes", nil, nil).status(200).header("Content-Type", "application/octet-stream")
				if !bytes.Equal(r.body, all) {
					t.Errorf("bytes result = %x", r.body)
				}
			})
			t.Run("base64 bodies", func(t *testing.T) {
				c.t = t
				// Standard base64, padded, line breaks skipped: what Go's
				// StdEncoding takes. Python's b64decode dropped stray and
				// URL-safe characters, Node.js's Buffer took anything; each
				// sent other bytes where this is a BadResult.
				for b, want := range map[string]string{
					"aGk=": "hi", "aGVsbG8g\r\nd29ybGQ=": "hello world", "": "", "/w==": "\xff",
				} {
					if r := c.do("GET", "/base64?"+url.Values{"b": {b}}.Encode(), nil, nil).status(200); string(r.body) != want {
						t.Errorf("base64 body %q sent as %q, want %q", b, r.body, want)
					}
				}
				for _, b := range []string{"aGk", "aGk=aGk=", "aGk-_w==", "not base64!!", " aGk=", "a===", "====", "aG=k"} {
					c.do("GET", "/base64?"+url.Values{"b": {b}}.Encode(), nil, nil).status(500).errorType("BadResult")
				}
			})
			t.Run("plain value", func(t *testing.T) {
				c.t = t
				c.do("GET", "/print?marker=plain", nil, nil).status(200).header("Content-Type", "application/json").jsonEq(`"ok"`)
				c.do("GET", "/missing", nil, nil).status(404).jsonEq(`{"notFound":"/missing"}`)
			})
			t.Run("error keeps serving", func(t *testing.T) {
				c.t = t
				r := c.do("GET", "/error", map[string]string{"X-Request-Id": "req-err-1"}, nil).status(500).header("Content-Type", "application/json")
				var body struct {
					Error     struct{ Type, Message string }
					RequestID string
				}
				r.decode(&body)
				if body.Error.Type != "Boom" || body.Error.Message != "boom" || body.RequestID != "req-err-1" {
					t.Errorf("error body = %s", r.body)
				}
				waitFor(t, 5*time.Second, "an error log line with the stack", func() bool {
					for _, rec := range logRecords(in.stdout.String()) {
						if rec["level"] == "error" && rec["requestId"] == "req-err-1" && rec["stack"] != nil && rec["stack"] != "" {
							return true
						}
					}
					return false
				})
				c.do("GET", "/echo", nil, nil).status(200)
			})
			t.Run("dependency", func(t *testing.T) {
				c.t = t
				c.do("GET", "/dep", nil, nil).status(200).jsonEq(`{"dep":"DEP!"}`)
			})
			t.Run("logs", func(t *testing.T) {
				c.t = t
				c.do("GET", "/print?marker=m-42", map[string]string{"X-Request-Id": "req-log-1"}, nil).status(200)
				waitFor(t, 5*time.Second, "the printed line as a JSON log line", func() bool {
					for _, rec := range logRecords(in.stdout.String()) {
						if msg, _ := rec["msg"].(string); strings.Contains(msg, "printed m-42") {
							return !tc.tagsPrints || rec["requestId"] == "req-log-1"
						}
					}
					return false
				})
				// Writes straight to stdout and stderr are log lines as well,
				// an unterminated one included: raw text would break the
				// JSON lines, and glue itself to the next one.
				c.do("GET", "/write-raw?marker=m-43", map[string]string{"X-Request-Id": "req-log-2"}, nil).status(200).jsonEq(`"ok"`)
				for _, want := range []struct{ msg, level string }{{"raw-out m-43", "info"}, {"raw-err m-43", "error"}} {
					waitFor(t, 5*time.Second, "the raw write "+want.msg+" as a JSON log line", func() bool {
						for _, rec := range logRecords(in.stdout.String()) {
							if rec["msg"] == want.msg && rec["level"] == want.level && rec["source"] == "function" {
								return !tc.tagsPrints || rec["requestId"] == "req-log-2"
							}
						}
						return false
					})
				}
				if !tc.tagsPrints {
					waitFor(t, 5*time.Second, "the Logger(ctx) line with the request id", func() bool {
						for _, rec := range logRecords(in.stdout.String()) {
							if rec["msg"] == "logged m-42" && rec["requestId"] == "req-log-1" {
								return true
							}
						}
						return false
					})
				}
				for _, line := range strings.Split(strings.TrimSpace(in.stdout.String()), "\n") {
					var rec map[string]any
					if err := json.Unmarshal([]byte(line), &rec); err != nil {
						t.Errorf("stdout line is not JSON: %q", line)
						continue
					}
					for _, k := range []string{"time", "level", "msg"} {
						if _, ok := rec[k]; !ok {
							t.Errorf("log line without %q: %s", k, line)
						}
					}
				}
			})
			t.Run("long printed line", func(t *testing.T) {
				c.t = t
				// Longer than the Go wrapper's 1 MiB log line: it is logged
				// in pieces, and what the handler prints later still goes
				// out (a pump that stopped at the long line blocked every
				// later print, so each call ran into its deadline).
				const n = 2<<20 + 5
				for i := 0; i < 2; i++ {
					c.do("GET", fmt.Sprintf("/print-long?n=%d", n), nil, nil).status(200)
				}
				c.do("GET", "/print?marker=after-long", nil, nil).status(200)
				waitFor(t, 5*time.Second, "the line printed after the long ones", func() bool {
					return strings.Contains(in.stdout.String(), "printed after-long")
				})
				total := 0
				for _, rec := range logRecords(in.stdout.String()) {
					if msg, _ := rec["msg"].(string); strings.HasPrefix(msg, "LLLL") {
						total += len(msg)
					}
				}
				if total != 2*n {
					t.Errorf("the long lines logged %d bytes, want %d", total, 2*n)
				}
			})
			t.Run("deadline", func(t *testing.T) {
				c.t = t
				start := time.Now()
				r := c.do("GET", "/slow?ms=6000", map[string]string{"X-Request-Id": "req-slow-1"}, nil).status(504)
				r.errorType("Timeout")
				if el := time.Since(start); el < conformanceTimeout*time.Second || el > conformanceTimeout*time.Second+2*time.Second {
					t.Errorf("504 after %v, want about %ds", el, conformanceTimeout)
				}
				c.do("GET", "/echo", nil, nil).status(200)
			})
			t.Run("unsafe response headers are refused", func(t *testing.T) {
				c.t = t
				for _, h := range []struct{ name, value string }{
					{"X-Echo", "a\r\nX-Injected: 1"},
					{"X-Echo", "a\nX-Injected: 1"},
					{"X-Echo", "a\rb"},
					{"X-Echo", "a\x00b"},
					{"X-Echo", "a\x01b"},
					{"X-Echo", "a\x7fb"},
					{"X Bad", "v"},
					{"X:Bad", "v"},
					{"X-Injected: 1\r\nX-Echo", "v"},
					{"X-Caf\u00e9", "v"},
				} {
					r := c.do("GET", "/header?"+url.Values{"name": {h.name}, "value": {h.value}}.Encode(), nil, nil)
					r.status(500).errorType("BadResult").header("X-Injected", "").header("X-Echo", "")
				}
				// Tabs and non-ASCII text are fine; the latter goes out as UTF-8.
				c.do("GET", "/header?"+url.Values{"value": {"a\tb caf\u00e9 \u2615"}}.Encode(), nil, nil).
					status(200).header("X-Echo", "a\tb caf\u00e9 \u2615")
				// A value crafted to end the response early must not leave a second
				// response behind for the next caller on the same connection.
				conn := dialRaw(t, in.base)
				splitting := "x\r\nContent-Length: 0\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\npoisoned"
				first := conn.get(t, "/header?"+url.Values{"value": {splitting}}.Encode())
				if first.StatusCode != 500 {
					t.Errorf("crafted header: status %d, want 500", first.StatusCode)
				}
				if next := conn.get(t, "/echo"); next.StatusCode != 200 || !strings.Contains(next.body, `"path"`) {
					t.Errorf("the next response on the connection is %d %q, not the echo", next.StatusCode, next.body)
				}
			})
			t.Run("header lists", func(t *testing.T) {
				c.t = t
				r := c.do("GET", "/headers-list", nil, nil).status(200).header("X-Num", "7")
				for name, want := range map[string][]string{"X-Multi": {"a", "b"}, "Set-Cookie": {"c1=1", "c2=2"}} {
					if got := r.resp.Header.Values(name); !slices.Equal(got, want) {
						t.Errorf("%s = %q, want the lines %q", name, got, want)
					}
				}
			})
			t.Run("header values", func(t *testing.T) {
				c.t = t
				// Scalars read as JavaScript's String(v) has them in every
				// language: Python sent 2.0 and 1e-07, Go 1000000000000000000000
				// and 0.0000001. A map, a nested list, NaN have no agreed text
				// (Python sent its repr, Node.js [object Object], Go map[a:1]).
				for k, want := range map[string][]string{
					"float": {"1.5"}, "intf": {"2"}, "big": {"1e+21"}, "small": {"1e-7"}, "micro": {"0.000001"},
					"neg": {"-0.5"}, "int": {"7"}, "bool": {"true"}, "null": {"null"}, "list": {"1.5", "null", "false"},
				} {
					r := c.do("GET", "/header-value?k="+k, nil, nil).status(200)
					if got := r.resp.Header.Values("X-V"); !slices.Equal(got, want) {
						t.Errorf("%s: X-V %q, want %q", k, got, want)
					}
				}
				for _, k := range []string{"obj", "nested", "nan", "inf"} {
					c.do("GET", "/header-value?k="+k, nil, nil).status(500).errorType("BadResult").header("X-V", "")
				}
			})
			t.Run("date and server headers", func(t *testing.T) {
				c.t = t
				// One Date, the handler's when it gives one, and no Server
				// line of the wrapper's: Python sent its own Date and Server
				// beside the handler's, two Date headers.
				const date = "Mon, 01 Jan 2024 00:00:00 GMT"
				for _, tc := range []struct{ path, date, server string }{
					{"/echo", "", ""},
					{"/header?" + url.Values{"name": {"Date"}, "value": {date}}.Encode(), date, ""},
					{"/header?" + url.Values{"name": {"Server"}, "value": {"mine"}}.Encode(), "", "mine"},
				} {
					r := c.do("GET", tc.path, nil, nil).status(200)
					dates, servers := r.resp.Header.Values("Date"), r.resp.Header.Values("Server")
					if len(dates) != 1 || tc.date != "" && dates[0] != tc.date {
						t.Errorf("%s: Date %q, want one %q", tc.path, dates, tc.date)
					}
					if want := []string{tc.server}; tc.server == "" && len(servers) != 0 || tc.server != "" && !slices.Equal(servers, want) {
						t.Errorf("%s: Server %q, want %q", tc.path, servers, tc.server)
					}
				}
			})
			t.Run("framing headers are the wrapper's", func(t *testing.T) {
				c.t = t
				conn := dialRaw(t, in.base)
				r := conn.get(t, "/framing")
				if r.StatusCode != 200 || r.body != "framed" || r.Header.Get("X-Request-Id") == "from-handler" ||
					len(r.Header.Values("Content-Length")) != 1 || r.TransferEncoding != nil {
					t.Errorf("framing: %d %q headers %v", r.StatusCode, r.body, r.Header)
				}
				if next := conn.get(t, "/echo"); next.StatusCode != 200 || !strings.Contains(next.body, `"path"`) {
					t.Errorf("the next response on the connection is %d %q, not the echo", next.StatusCode, next.body)
				}
			})
			t.Run("status codes", func(t *testing.T) {
				c.t = t
				for _, code := range []string{"1000", "0", "99", "-1", "100", "103", "600"} {
					c.do("GET", "/code?c="+code, nil, nil).status(500).errorType("BadResult")
				}
				c.do("GET", "/code?c=599", nil, nil).status(599)
				if r := c.do("GET", "/code?c=201.0", nil, nil).status(201); string(r.body) != "x" {
					t.Errorf("201.0: body %q", r.body)
				}
				// Not an integer: not a response object, so the dict itself is the JSON result.
				c.do("GET", "/code?c=200.5", nil, nil).status(200).jsonEq(`{"statusCode":200.5,"body":"x"}`)
				// 204 and 304 have no body; one sent anyway would be read as the next response.
				conn := dialRaw(t, in.base)
				for _, code := range []int{204, 304} {
					if r := conn.get(t, fmt.Sprintf("/code?c=%d", code)); r.StatusCode != code || r.body != "" {
						t.Errorf("%d: got %d %q", code, r.StatusCode, r.body)
					}
				}
				if next := conn.get(t, "/echo"); next.StatusCode != 200 || !strings.Contains(next.body, `"path"`) {
					t.Errorf("the next response on the connection is %d %q, not the echo", next.StatusCode, next.body)
				}
			})
			t.Run("path and query as received", func(t *testing.T) {
				c.t = t
				const path = "/echo/a%2Fb/c%20d/%41/./x/../y"
				const raw = "t=1;u=2&bad=%zz&t=2&+p=%41+b&flag&&=e&%e9=1&k=%C3%A9"
				ev := c.do("GET", path+"?"+raw, nil, nil).status(200).event()
				if ev["path"] != path || ev["rawQuery"] != raw {
					t.Errorf("path %q rawQuery %q, want them as sent", ev["path"], ev["rawQuery"])
				}
				b, _ := json.Marshal(ev["query"])
				var got, want map[string]string
				json.Unmarshal(b, &got)
				want = map[string]string{"t": "1;u=2", "bad": "%zz", " p": "A b", "flag": "", "": "e", "\ufffd": "1", "k": "\u00e9"}
				if !maps.Equal(got, want) {
					t.Errorf("query = %q, want %q", got, want)
				}
			})
			// Last: it stops the process.
			t.Run("graceful drain", func(t *testing.T) {
				c.t = t
				type result struct {
					status int
					body   string
					err    error
				}
				done := make(chan result, 1)
				go func() {
					resp, err := http.Get(in.base + "/slow?ms=1000")
					if err != nil {
						done <- result{err: err}
						return
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					done <- result{status: resp.StatusCode, body: string(b)}
				}()
				// The handler prints on entry, so its line proves the request is in flight.
				waitFor(t, 5*time.Second, "the slow request to be in flight", func() bool {
					return strings.Contains(in.stdout.String(), "slow start ms=1000")
				})
				if code := in.stop(t, 10*time.Second); code != 0 {
					t.Errorf("exit code %d after SIGTERM, want 0", code)
				}
				res := <-done
				if res.err != nil || res.status != 200 || !strings.Contains(res.body, `"slept"`) {
					t.Errorf("in-flight request during drain: status %d body %q err %v", res.status, res.body, res.err)
				}
				if _, err := http.Get(in.base + "/echo"); err == nil {
					t.Error("the stopped wrapper still accepts requests")
				}
			})
		})
	}
	t.Run("job mode", func(t *testing.T) {
		for _, tc := range conformanceCases {
			t.Run(tc.runtime, func(t *testing.T) {
				t.Parallel()
				fn := prepare(t, tc.runtime, tc.entrypoint, conformanceFiles(t, tc.runtime))
				code, term, out := fn.runJob(t, `{"x":1,"s":"two"}`)
				if code != 0 {
					t.Fatalf("exit code %d, want 0\n%s", code, out)
				}
				var ok map[string]any
				if err := json.Unmarshal(term, &ok); err != nil {
					t.Fatalf("termination message %q: %v", term, err)
				}
				if b, _ := json.Marshal(ok); string(b) != `{"job":{"s":"two","x":1}}` {
					t.Errorf("termination message = %s", b)
				}
				code, term, out = fn.runJob(t, `{"fail":true}`)
				if code != 1 {
					t.Fatalf("exit code %d on error, want 1\n%s", code, out)
				}
				var fail struct {
					Error struct{ Type, Message string }
				}
				if err := json.Unmarshal(term, &fail); err != nil || fail.Error.Type != "Boom" || fail.Error.Message != "job failed on purpose" {
					t.Errorf("termination message on error = %s (%v)", term, err)
				}
				// A result with no JSON fails the run as over HTTP: exit 1 with
				// a BadResult, not a missing termination message (Node.js) or
				// a NaN that is not JSON (Python).
				for _, payload := range []string{`{"nonfinite":true}`, `{"encodefails":true}`} {
					code, term, out = fn.runJob(t, payload)
					fail.Error.Type = ""
					if err := json.Unmarshal(term, &fail); code != 1 || err != nil || fail.Error.Type != "BadResult" {
						t.Errorf("unencodable result %s: exit code %d, termination message %q (%v)\n%s", payload, code, term, err, out)
					}
				}
			})
		}
	})
}

// A Node.js handler may throw (or reject with) what is not an Error; the
// answer still reads as the contract's error: its own name or "Error" as the
// type (not typeof), and a message that says something.
func TestNodeThrowsNonErrors(t *testing.T) {
	requireTools(t, "node", "npm")
	fn := prepare(t, runtimes.NodeJS22, "lib/api.handle", testdataFiles(t, runtimes.NodeJS22))
	in := fn.start(t, runtimes.LocalOptions{FunctionName: "conf", TimeoutSeconds: conformanceTimeout})
	c := &client{t: t, base: in.base}
	for what, want := range map[string][2]string{
		"string": {"Error", "plain text"},
		"named":  {"NotFound", "no such order"},
		"object": {"Error", `{"code":7}`},
		"null":   {"Error", "null"},
		"number": {"Error", "42"},
	} {
		var body struct {
			Error struct{ Type, Message string }
		}
		c.do("GET", "/throw?what="+what, nil, nil).status(500).decode(&body)
		if body.Error.Type != want[0] || body.Error.Message != want[1] {
			t.Errorf("throw %s: type %q message %q, want %q %q", what, body.Error.Type, body.Error.Message, want[0], want[1])
		}
	}
}

// A Python module named like one of the standard library's that the wrapper
// has loaded (email, json, ...) cannot be the entrypoint's: the load says so,
// instead of "email has no function 'handler'" about a file that has one. A
// name the wrapper has not loaded works as it does under plain Python.
func TestPythonEntrypointNamedLikeTheStandardLibrary(t *testing.T) {
	requireTools(t, "python3")
	src := []byte("def handler(event, context):\n    return 'own module'\n")
	for _, tc := range []struct{ file, entrypoint, want string }{
		{"email.py", "email.handler", "rename it"},
		{"json/__init__.py", "json.handler", "rename it"},
		{"queue.py", "queue.handler", ""},
	} {
		fn := prepare(t, runtimes.Python312, tc.entrypoint, source.Files{tc.file: src})
		code, term, out := fn.runJob(t, `{}`)
		var fail struct {
			Error struct{ Type, Message string }
		}
		_ = json.Unmarshal(term, &fail)
		switch {
		case tc.want == "" && (code != 0 || string(term) != `"own module"`):
			t.Errorf("%s: exit %d, termination %s\n%s", tc.entrypoint, code, term, out)
		case tc.want != "" && (code != 1 || fail.Error.Type != "LoadError" || !strings.Contains(fail.Error.Message, tc.want)):
			t.Errorf("%s: exit %d, termination %s; want a LoadError saying %q", tc.entrypoint, code, term, tc.want)
		}
	}
}

func TestNodeInstallWithoutLock(t *testing.T) {
	requireTools(t, "node", "npm")
	files := testdataFiles(t, runtimes.NodeJS22)
	delete(files, "package-lock.json")
	fn := prepare(t, runtimes.NodeJS22, "lib/api.handle", files)
	if _, err := os.Stat(filepath.Join(fn.dir, runtimes.FunctionDir, "node_modules", "is-number", "package.json")); err != nil {
		t.Fatalf("npm install did not install is-number: %v", err)
	}
}

func logRecords(out string) []map[string]any {
	var recs []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 16<<20) // Python and Node.js log a long printed line whole
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) == nil {
			recs = append(recs, rec)
		}
	}
	return recs
}

type client struct {
	t    *testing.T
	base string
}

type response struct {
	t    *testing.T
	resp *http.Response
	body []byte
}

func (c *client) do(method, path string, headers map[string]string, body []byte) *response {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return &response{t: c.t, resp: resp, body: b}
}

func (r *response) status(want int) *response {
	r.t.Helper()
	if r.resp.StatusCode != want {
		r.t.Fatalf("%s %s: status %d, want %d; body %s", r.resp.Request.Method, r.resp.Request.URL.Path, r.resp.StatusCode, want, r.body)
	}
	return r
}

func (r *response) header(name, want string) *response {
	r.t.Helper()
	if got := r.resp.Header.Get(name); got != want {
		r.t.Errorf("header %s = %q, want %q", name, got, want)
	}
	return r
}

func (r *response) decode(v any) {
	r.t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		r.t.Fatalf("body %q: %v", r.body, err)
	}
}

func (r *response) jsonEq(want string) *response {
	r.t.Helper()
	var got, exp any
	r.decode(&got)
	if err := json.Unmarshal([]byte(want), &exp); err != nil {
		r.t.Fatal(err)
	}
	g, _ := json.Marshal(got)
	e, _ := json.Marshal(exp)
	if !bytes.Equal(g, e) {
		r.t.Errorf("body = %s, want %s", g, e)
	}
	return r
}

func (r *response) event() map[string]any {
	r.t.Helper()
	var got struct{ Event map[string]any }
	r.decode(&got)
	return got.Event
}

func (r *response) errorType(want string) *response {
	r.t.Helper()
	var body struct {
		Error     struct{ Type, Message string }
		RequestID string
	}
	r.decode(&body)
	if body.Error.Type != want || body.Error.Message == "" || body.RequestID == "" {
		r.t.Errorf("error body = %s, want type %q with a message and request id", r.body, want)
	}
	return r
}

// rawConn sends requests one after another on a single connection, so a
// response that leaves stray bytes behind shows up in the next one.
type rawConn struct {
	conn net.Conn
	br   *bufio.Reader
}

type rawResponse struct {
	*http.Response
	body string
}

func dialRaw(t *testing.T, base string) *rawConn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &rawConn{conn: conn, br: bufio.NewReader(conn)}
}

func (c *rawConn) get(t *testing.T, target string) rawResponse {
	t.Helper()
	c.conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c.conn, "GET %s HTTP/1.1\r\nHost: fn\r\n\r\n", target); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(c.br, &http.Request{Method: "GET"})
	if err != nil {
		t.Fatalf("GET %s: %v", target, err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("GET %s: body: %v", target, err)
	}
	return rawResponse{resp, string(b)}
}
