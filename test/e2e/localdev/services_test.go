package localdev_test

import (
	"bufio"
	"encoding/json"
	"github.com/gorilla/websocket"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// nodeService is a web app on an http.Server: it echoes the request,
// streams server-sent events, echoes WebSocket frames, reads a secret
// from its env and exits on /crash.
const nodeService = `const http = require('node:http');
const crypto = require('node:crypto');

let release;
const released = new Promise((resolve) => { release = resolve; });

const server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://x');
  if (url.pathname === '/crash') { console.log('crashing on purpose'); process.exit(3); }
  if (url.pathname === '/events') {
    res.writeHead(200, { 'Content-Type': 'text/event-stream' });
    res.write('data: first\n\n');
    released.then(() => res.end('data: second\n\n'));
    return;
  }
  if (url.pathname === '/release') { release(); res.writeHead(204).end(); return; }
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    console.log('served ' + req.method + ' ' + url.pathname);
    res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({
      method: req.method, path: url.pathname, query: url.search.slice(1), body: Buffer.concat(chunks).toString(),
      secret: process.env.API_KEY || '', pid: process.pid, prefix: req.headers['x-forwarded-prefix'] || '' }));
  });
});

server.on('upgrade', (req, socket) => {
  const accept = crypto.createHash('sha1')
    .update(req.headers['sec-websocket-key'] + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64');
  socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
    'Sec-WebSocket-Accept: ' + accept + '\r\n\r\n');
  socket.on('data', (buf) => {
    const len = buf[1] & 0x7f;
    const mask = buf.subarray(2, 6);
    const data = Buffer.from(buf.subarray(6, 6 + len).map((b, i) => b ^ mask[i % 4]));
    socket.write(Buffer.concat([Buffer.from([0x81, len]), data]));
  });
});

module.exports = { server };
`

// pythonService is the same app on ASGI.
const pythonService = `import asyncio
import json
import os

released = asyncio.Event()


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] == "websocket":
        await receive()
        await send({"type": "websocket.accept"})
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                return
            await send({"type": "websocket.send", "text": message.get("text")})
    path = scope["path"]
    if path == "/crash":
        print("crashing on purpose", flush=True)
        os._exit(3)
    if path == "/events":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": b"data: first\n\n", "more_body": True})
        await asyncio.wait_for(released.wait(), 20)
        await send({"type": "http.response.body", "body": b"data: second\n\n"})
        return
    if path == "/release":
        released.set()
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body"})
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    print("served", scope["method"], path, flush=True)
    headers = dict(scope["headers"])
    out = json.dumps({"method": scope["method"], "path": path, "query": scope["query_string"].decode(),
                      "body": body.decode(), "secret": os.environ.get("API_KEY", ""), "pid": os.getpid(),
                      "prefix": headers.get(b"x-forwarded-prefix", b"").decode()}).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": out})
`

type echoed struct {
	Method, Path, Query, Body, Secret, Prefix string
	PID                                       int
}

// Two services, Node.js and Python (ASGI), deployed through the REST API
// on a real sless dev: built, Ready, answering GET and POST with their
// paths through /svc/, streaming server-sent events, echoing WebSocket
// frames, restarted after a crash, re-rolled on a secret's rotation, and
// their output read back through the logs route.
func TestServicesThroughDev(t *testing.T) {
	d := startDev(t, time.Minute)
	if code, b := d.do("POST", "/v1/namespaces/e2e/secrets", "application/json",
		[]byte(`{"metadata":{"name":"api"},"stringData":{"key":"first-Qm3v-value"}}`)); code != 201 {
		t.Fatalf("create secret: %d %s", code, b)
	}
	cases := []struct{ name, runtime, entrypoint, file, code string }{
		{"web-node", "nodejs22", "app.server", "app.js", nodeService},
		{"web-py", "python3.12", "app.app", "app.py", pythonService},
	}
	for _, c := range cases {
		body, _ := json.Marshal(map[string]any{
			"metadata": map[string]any{"name": c.name},
			"spec": map[string]any{"runtime": c.runtime, "entrypoint": c.entrypoint,
				"env": []any{map[string]any{"name": "API_KEY", "valueFrom": map[string]any{
					"secretKeyRef": map[string]any{"name": "api", "key": "key"}}}},
				"source": map[string]any{"inline": map[string]any{"files": map[string]string{c.file: c.code}}}},
		})
		if code, b := d.do("POST", "/v1/namespaces/e2e/services", "application/json", body); code != 201 {
			t.Fatalf("create %s: %d %s", c.name, code, b)
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d.t = t
			st := d.awaitServiceReady("e2e", c.name, 3*time.Minute)
			if want := d.base + "/svc/e2e/" + c.name + "/"; st.Status.URL != want {
				t.Errorf("status.url %q, want %q", st.Status.URL, want)
			}
			base := "/svc/e2e/" + c.name

			got := d.callService("GET", base+"/notes/a%2Fb?sort=desc&x=1", "")
			if got.Method != "GET" || got.Path != "/notes/a/b" && got.Path != "/notes/a%2Fb" || got.Query != "sort=desc&x=1" || got.Prefix != base {
				t.Errorf("GET: %+v", got)
			}
			if got := d.callService("GET", base, ""); got.Path != "/" {
				t.Errorf("GET of the root without a slash: %+v", got)
			}
			if got := d.callService("POST", base+"/api/notes", `{"text":"hi"}`); got.Method != "POST" || got.Path != "/api/notes" || got.Body != `{"text":"hi"}` {
				t.Errorf("POST: %+v", got)
			}

			t.Run("server-sent events stream", func(t *testing.T) {
				req, _ := http.NewRequest("GET", d.base+base+"/events", nil)
				req.Header.Set("Authorization", "Bearer "+d.token)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
					t.Errorf("Content-Type %q", ct)
				}
				r := bufio.NewReader(resp.Body)
				// The second event waits for /release: the first arrives
				// only if every hop streams.
				timer := time.AfterFunc(15*time.Second, func() { resp.Body.Close() })
				line, err := r.ReadString('\n')
				timer.Stop()
				if err != nil || strings.TrimSpace(line) != "data: first" {
					t.Fatalf("first event: %q %v", line, err)
				}
				if code, b := d.do("POST", base+"/release", "", nil); code != 204 {
					t.Fatalf("release: %d %s", code, b)
				}
				rest, err := io.ReadAll(r)
				if err != nil || !strings.Contains(string(rest), "data: second") {
					t.Errorf("after the release: %q %v", rest, err)
				}
			})

			t.Run("WebSocket echo", func(t *testing.T) {
				for _, msg := range []string{"hello", "through /svc/"} {
					if got := d.wsEcho(base+"/ws/echo", msg); got != msg {
						t.Errorf("echo of %q: %q", msg, got)
					}
				}
			})

			t.Run("a crash is restarted", func(t *testing.T) {
				before := d.callService("GET", base+"/", "")
				if code, _ := d.do("GET", base+"/crash", "", nil); code != http.StatusBadGateway {
					t.Errorf("the call that crashed the process: %d, want 502", code)
				}
				// minScale 1: the server starts it again on its own, with
				// no call needed.
				deadline := time.Now().Add(30 * time.Second)
				for !strings.Contains(d.devLog(), `msg="process started" service=e2e/`+c.name) ||
					strings.Count(d.devLog(), `msg="process started" service=e2e/`+c.name) < 2 {
					if time.Now().After(deadline) {
						t.Fatalf("no restart after the crash; sless dev said:\n%s", d.devLog())
					}
					time.Sleep(100 * time.Millisecond)
				}
				after := d.callService("GET", base+"/", "")
				if after.PID == before.PID || after.PID == 0 {
					t.Errorf("the same process answers after the crash: %d, %d", before.PID, after.PID)
				}
				if log := d.devLog(); !strings.Contains(log, `msg="process crashed" service=e2e/`+c.name) || !strings.Contains(log, "exitCode=3") ||
					!strings.Contains(log, `lastOutput="crashing on purpose"`) {
					t.Errorf("sless dev did not tell the crash:\n%s", log)
				}
			})

			t.Run("logs", func(t *testing.T) {
				code, b := d.do("GET", "/v1/namespaces/e2e/services/"+c.name+"/logs", "", nil)
				if code != 200 || !strings.Contains(string(b), "served POST /api/notes") || !strings.Contains(string(b), "crashing on purpose") {
					t.Errorf("logs: %d %s", code, b)
				}
				if code, b := d.do("GET", "/v1/namespaces/e2e/services/"+c.name+"/builds/latest/logs", "", nil); code != 200 {
					t.Errorf("build logs: %d %s", code, b)
				}
			})
		})
	}
	d.t = t

	// The secret rotated: each service rolls a revision that sees the new value.
	for _, c := range cases {
		if got := d.callService("GET", "/svc/e2e/"+c.name+"/", ""); got.Secret != "first-Qm3v-value" {
			t.Fatalf("%s before the rotation: %+v", c.name, got)
		}
	}
	if code, b := d.do("PUT", "/v1/namespaces/e2e/secrets/api", "application/json",
		[]byte(`{"stringData":{"key":"second-Wx7p-value"}}`)); code != 200 {
		t.Fatalf("rotate: %d %s", code, b)
	}
	for _, c := range cases {
		deadline := time.Now().Add(2 * time.Minute)
		for {
			got := d.callService("GET", "/svc/e2e/"+c.name+"/", "")
			if got.Secret == "second-Wx7p-value" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s did not see the rotated value: %+v", c.name, got)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// Each call was recorded with trigger service and a revision, the crash
	// as a 502, and the service's listing holds them.
	for _, c := range cases {
		deadline := time.Now().Add(30 * time.Second)
		for {
			code, b := d.do("GET", "/v1/namespaces/e2e/services/"+c.name+"/invocations?limit=1000", "", nil)
			var page struct {
				Items []struct {
					Function, Trigger, Revision string
					Status                      int
				}
			}
			_ = json.Unmarshal(b, &page)
			seen := map[int]int{}
			bad := false
			for _, it := range page.Items {
				seen[it.Status]++
				bad = bad || it.Trigger != "service" || it.Function != c.name || it.Revision == ""
			}
			if code == 200 && !bad && seen[200] >= 6 && seen[502] == 1 {
				break
			}
			if time.Now().After(deadline) || bad {
				t.Fatalf("%s's records: %d %s", c.name, code, b)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	// The CLI reads them, and a service's logs, as a function's.
	for _, args := range [][]string{{"history", "web-node", "--service"}, {"logs", "web-py", "--tail", "50"}, {"services"}} {
		cmd := exec.Command(slessBin, args...)
		cmd.Env = append(os.Environ(), "SLESS_SERVER="+d.base, "SLESS_TOKEN="+d.token, "SLESS_NAMESPACE=e2e",
			"SLESS_CONFIG="+filepath.Join(t.TempDir(), "config"))
		out, err := cmd.CombinedOutput()
		want := map[string]string{"history": " service ", "logs": "served POST /api/notes", "services": "web-py"}[args[0]]
		if err != nil || !strings.Contains(string(out), want) {
			t.Errorf("sless %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	// No file of the data directory holds a value in the clear.
	records, _ := filepath.Glob(filepath.Join(d.data, "*.db"))
	for _, f := range records {
		raw, _ := os.ReadFile(f)
		if strings.Contains(string(raw), "first-Qm3v-value") || strings.Contains(string(raw), "second-Wx7p-value") {
			t.Errorf("%s holds a secret's value in the clear", f)
		}
	}
}

func (d *dev) callService(method, path, body string) echoed {
	d.t.Helper()
	code, b := d.do(method, path, "application/json", []byte(body))
	var e echoed
	if code != 200 || json.Unmarshal(b, &e) != nil {
		d.t.Fatalf("%s %s: %d %s", method, path, code, b)
	}
	return e
}

// devLog is what sless dev wrote to its terminal so far.
func (d *dev) devLog() string {
	b, _ := os.ReadFile(filepath.Join(d.data, "e2e-dev.log"))
	return string(b)
}

func (d *dev) awaitServiceReady(ns, name string, within time.Duration) fnStatus {
	d.t.Helper()
	deadline := time.Now().Add(within)
	for {
		code, b := d.do("GET", "/v1/namespaces/"+ns+"/services/"+name, "", nil)
		if code != 200 {
			d.t.Fatalf("GET service: %d %s", code, b)
		}
		var st fnStatus
		_ = json.Unmarshal(b, &st)
		if st.Status.ObservedGeneration == st.Metadata.Generation {
			switch st.Status.Phase {
			case "Ready":
				return st
			case "Failed":
				d.t.Fatalf("service failed: %s", b)
			}
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("service not Ready within %s: %s", within, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// wsEcho opens a WebSocket at path through sless dev with the dev token
// (gorilla's client checks the handshake), sends msg as a text message and
// returns the text that comes back.
func (d *dev) wsEcho(path, msg string) string {
	t := d.t
	t.Helper()
	return echoOver(t, "ws"+strings.TrimPrefix(d.base, "http")+path, http.Header{"Authorization": {"Bearer " + d.token}}, msg)
}

func echoOver(t *testing.T, url string, header http.Header, msg string) string {
	t.Helper()
	dialer := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	conn, resp, err := dialer.Dial(url, header)
	if err != nil {
		t.Fatalf("upgrade %s: %v %v", url, resp, err)
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	if err := conn.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	typ, data, err := conn.ReadMessage()
	if err != nil || typ != websocket.TextMessage {
		t.Fatalf("message %d %q: %v", typ, data, err)
	}
	return string(data)
}
