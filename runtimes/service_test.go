package runtimes_test

import (
	"bufio"
	"encoding/json"
	"github.com/gorilla/websocket"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/source"
	"github.com/sless-dev/sless/runtimes"
)

// prepareService is prepare for a service's build context.
func prepareService(t testing.TB, runtime, entrypoint string, files source.Files) prepared {
	t.Helper()
	bc, err := source.BuildContext(source.Input{Runtime: runtime, Entrypoint: entrypoint, Mode: "service", Files: files})
	if err != nil {
		t.Fatalf("build context: %v", err)
	}
	dir := t.TempDir()
	unpack(t, bc.TarGz, dir)
	cmds, err := runtimes.LocalSetup(dir, runtimes.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range cmds {
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
		}
	}
	return prepared{runtime: runtime, dir: dir}
}

// TestServiceConformance serves each runtime's test web app in service
// mode and holds it to the service contract (docs/services.md): the whole
// path and query reach the app, bodies both ways, the wrapper keeps only
// its health path, server-sent events stream as written, and (where the
// runtime serves upgrades) a WebSocket echoes. Python runs twice: a WSGI
// app (wsgiref) and an ASGI app (the wrapper's sless_asgi).
func TestServiceConformance(t *testing.T) {
	requireTools(t, "python3", "node", "go")
	cases := []struct {
		name, runtime, entrypoint, testdata string
		websocket                           bool
	}{
		{"python3.12-wsgi", runtimes.Python312, "web.app", "service/python3.12", false},
		{"python3.12-asgi", runtimes.Python312, "web.app", "service/python3.12-asgi", true},
		{runtimes.NodeJS22, runtimes.NodeJS22, "web.server", "service/nodejs22", true},
		{runtimes.Go124, runtimes.Go124, "web.Handler", "service/go1.24", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := prepareService(t, tc.runtime, tc.entrypoint, testdataFiles(t, tc.testdata))
			in := p.start(t, runtimes.LocalOptions{FunctionName: "web", Namespace: "team-a", Revision: "web-00001"})

			t.Run("GET and POST with the whole path", func(t *testing.T) {
				for _, m := range []struct{ method, target, body string }{
					{"GET", "/", ""},
					{"GET", "/notes/42/edit?x=1&y=two", ""},
					{"POST", "/api/v1/notes", `{"text":"hi"}`},
					{"POST", "/_sless/health", "mine"},
				} {
					req, _ := http.NewRequest(m.method, in.base+m.target, strings.NewReader(m.body))
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					var got struct{ Method, Path, Query, Body string }
					err = json.NewDecoder(resp.Body).Decode(&got)
					resp.Body.Close()
					path, query, _ := strings.Cut(m.target, "?")
					if err != nil || resp.StatusCode != 200 || got.Method != m.method || got.Path != path || got.Query != query || got.Body != m.body {
						t.Errorf("%s %s: %d %+v (%v)", m.method, m.target, resp.StatusCode, got, err)
					}
				}
			})
			t.Run("health", func(t *testing.T) {
				resp, err := http.Get(in.base + runtimes.HealthPath)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || string(b) != `{"status":"ok"}` {
					t.Errorf("health: %d %s", resp.StatusCode, b)
				}
			})
			t.Run("server-sent events stream", func(t *testing.T) {
				resp, err := http.Get(in.base + "/events")
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
					t.Errorf("Content-Type %q", ct)
				}
				r := bufio.NewReader(resp.Body)
				// The second event waits for /release, so the first arrives
				// only if the wrapper streams.
				line, err := readLine(r, 10*time.Second, resp.Body)
				if err != nil || line != "data: first" {
					t.Fatalf("first event: %q %v", line, err)
				}
				rel, err := http.Post(in.base+"/release", "text/plain", nil)
				if err != nil {
					t.Fatal(err)
				}
				rel.Body.Close()
				rest, err := io.ReadAll(r)
				if err != nil || !strings.Contains(string(rest), "data: second") {
					t.Errorf("after the release: %q %v", rest, err)
				}
			})
			if tc.websocket {
				t.Run("WebSocket echo", func(t *testing.T) {
					for _, msg := range []string{"hello", "sless services"} {
						if got := wsEcho(t, in.base, "/ws/echo", msg); got != msg {
							t.Errorf("echo of %q: %q", msg, got)
						}
					}
				})
			}
		})
	}
}

// readLine reads one line, failing after limit (the body is closed then).
func readLine(r *bufio.Reader, limit time.Duration, body io.Closer) (string, error) {
	timer := time.AfterFunc(limit, func() { body.Close() })
	defer timer.Stop()
	line, err := r.ReadString('\n')
	return strings.TrimRight(line, "\r\n"), err
}

// wsEcho opens a WebSocket at path (gorilla's client checks the
// handshake), sends msg as a text message and returns the text that comes
// back.
func wsEcho(t *testing.T, base, path, msg string) string {
	t.Helper()
	dialer := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	conn, resp, err := dialer.Dial("ws"+strings.TrimPrefix(base, "http")+path, nil)
	if err != nil {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if err := conn.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	typ, data, err := conn.ReadMessage()
	if err != nil || typ != websocket.TextMessage {
		t.Fatalf("message %d %q: %v", typ, data, err)
	}
	return string(data)
}
