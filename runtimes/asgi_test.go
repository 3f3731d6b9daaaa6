package runtimes_test

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/source"
	"github.com/sless-dev/sless/runtimes"
)

// TestPythonASGIProtocol holds the Python wrapper's ASGI server
// (runtimes/python3.12/sless_asgi.py) to HTTP/1.1 and RFC 6455 where the
// conformance suite's clients do not reach: raw connections that frame,
// fragment, pipeline and misbehave on purpose.
func TestPythonASGIProtocol(t *testing.T) {
	requireTools(t, "python3")
	p := prepareService(t, runtimes.Python312, "web.app", testdataFiles(t, "service/python3.12-asgi"))
	in := p.start(t, runtimes.LocalOptions{FunctionName: "web"})
	addr := strings.TrimPrefix(in.base, "http://")

	t.Run("keep-alive: two requests on one connection, then two pipelined", func(t *testing.T) {
		c := dialASGI(t, addr)
		for _, path := range []string{"/one", "/two"} {
			fmt.Fprintf(c.conn, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
			if got := c.echo(t); got.Path != path {
				t.Errorf("got %+v for %s", got, path)
			}
		}
		io.WriteString(c.conn, "POST /three HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcGET /four HTTP/1.1\r\nHost: x\r\n\r\n")
		if got := c.echo(t); got.Path != "/three" || got.Body != "abc" {
			t.Errorf("pipelined first: %+v", got)
		}
		if got := c.echo(t); got.Path != "/four" {
			t.Errorf("pipelined second: %+v", got)
		}
	})

	t.Run("a body the app does not read is skipped for the next request", func(t *testing.T) {
		c := dialASGI(t, addr)
		// /state answers without reading the body.
		io.WriteString(c.conn, "POST /state HTTP/1.1\r\nHost: x\r\nContent-Length: 7\r\n\r\nunread!"+
			"POST /state HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"+
			"GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
		for range 2 {
			resp := c.response(t, "POST")
			b, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != 200 || !strings.Contains(string(b), "started") {
				t.Fatalf("/state: %d %q %v", resp.StatusCode, b, err)
			}
		}
		if got := c.echo(t); got.Path != "/next" {
			t.Errorf("after unread bodies: %+v", got)
		}
	})

	t.Run("HTTP/1.0 closes after the answer unless asked to keep alive", func(t *testing.T) {
		c := dialASGI(t, addr)
		io.WriteString(c.conn, "GET /old HTTP/1.0\r\n\r\n")
		if got := c.echo(t); got.Path != "/old" {
			t.Errorf("%+v", got)
		}
		if n, err := c.r.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("after an HTTP/1.0 answer: %d bytes, %v; want the connection closed", n, err)
		}
	})

	t.Run("chunked request body", func(t *testing.T) {
		c := dialASGI(t, addr)
		io.WriteString(c.conn, "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
		io.WriteString(c.conn, "1;ext=1\r\n \r\n6\r\nchunks\r\n0\r\nX-Trailer: t\r\n\r\n")
		if got := c.echo(t); got.Body != "hello chunks" {
			t.Errorf("body %q", got.Body)
		}
		// The connection is still good after the trailer.
		io.WriteString(c.conn, "GET /after HTTP/1.1\r\nHost: x\r\n\r\n")
		if got := c.echo(t); got.Path != "/after" {
			t.Errorf("after a chunked body: %+v", got)
		}
	})

	t.Run("malformed chunk size is 400", func(t *testing.T) {
		c := dialASGI(t, addr)
		io.WriteString(c.conn, "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n")
		if resp := c.response(t, "POST"); resp.StatusCode != 400 {
			t.Errorf("status %d", resp.StatusCode)
		}
	})

	t.Run("Expect: 100-continue", func(t *testing.T) {
		c := dialASGI(t, addr)
		io.WriteString(c.conn, "POST /e HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n")
		line, err := c.r.ReadString('\n')
		if err != nil || line != "HTTP/1.1 100 Continue\r\n" {
			t.Fatalf("before the body: %q %v", line, err)
		}
		if blank, _ := c.r.ReadString('\n'); blank != "\r\n" {
			t.Fatalf("100 Continue not ended: %q", blank)
		}
		io.WriteString(c.conn, "body")
		if got := c.echo(t); got.Body != "body" {
			t.Errorf("body %q", got.Body)
		}
	})

	t.Run("HEAD answers the length and no body", func(t *testing.T) {
		c := dialASGI(t, addr)
		io.WriteString(c.conn, "HEAD /h HTTP/1.1\r\nHost: x\r\n\r\nGET /next HTTP/1.1\r\nHost: x\r\n\r\n")
		resp := c.response(t, "HEAD")
		if resp.StatusCode != 200 || resp.ContentLength <= 0 {
			t.Errorf("HEAD: %d, length %d", resp.StatusCode, resp.ContentLength)
		}
		// Had the HEAD answer carried a body, this would read it as a response.
		if got := c.echo(t); got.Path != "/next" {
			t.Errorf("after HEAD: %+v", got)
		}
	})

	t.Run("a stream of unknown length is chunked and flushed", func(t *testing.T) {
		c := dialASGI(t, addr)
		io.WriteString(c.conn, "GET /forever HTTP/1.1\r\nHost: x\r\n\r\n")
		resp := c.response(t, "GET")
		if len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
			t.Errorf("Transfer-Encoding %v", resp.TransferEncoding)
		}
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if err != nil || line != "tick\n" {
			t.Fatalf("first chunk: %q %v", line, err)
		}
	})

	t.Run("client close mid-stream reaches the app as http.disconnect", func(t *testing.T) {
		c := dialASGI(t, addr)
		io.WriteString(c.conn, "GET /forever HTTP/1.1\r\nHost: x\r\n\r\n")
		resp := c.response(t, "GET")
		if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || line != "tick\n" {
			t.Fatalf("first chunk: %q %v", line, err)
		}
		c.conn.Close()
		waitFor(t, 10*time.Second, "the app to see the disconnect", func() bool {
			var got struct{ Disconnects []string }
			getJSON(t, in.base+"/disconnects", &got)
			return len(got.Disconnects) > 0
		})
	})

	t.Run("the wrapper's own answers", func(t *testing.T) {
		for _, tc := range []struct {
			name, request string
			status        int
		}{
			{"head past 1 MiB", "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 1<<20) + "\r\n\r\n", 431},
			{"request line past 1 MiB", "GET /" + strings.Repeat("a", 1<<20) + " HTTP/1.1\r\n\r\n", 431},
			{"malformed request line", "GET /\r\n\r\n", 400},
			{"space before a header's colon", "GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400},
			{"HTTP/2.0 on a HTTP/1 connection", "GET / HTTP/2.0\r\n\r\n", 505},
			{"two Content-Lengths that differ", "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400},
			{"unknown transfer coding", "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
			{"the app raises", "GET /boom HTTP/1.1\r\nHost: x\r\n\r\n", 500},
		} {
			t.Run(tc.name, func(t *testing.T) {
				c := dialASGI(t, addr)
				go io.WriteString(c.conn, tc.request) // a refusal may come before the whole request is read
				if resp := c.response(t, "GET"); resp.StatusCode != tc.status {
					t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
				}
			})
		}
	})

	t.Run("log lines carry the request id, the app's prints too", func(t *testing.T) {
		req, _ := http.NewRequest("GET", in.base+"/print", nil)
		req.Header.Set("X-Request-Id", "rid-asgi-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		waitFor(t, 5*time.Second, "the request's log line", func() bool {
			return strings.Contains(in.stdout.String(), `"path": "/print"`)
		})
		var printed, request bool
		for _, line := range strings.Split(in.stdout.String(), "\n") {
			var rec struct{ Msg, RequestID, Path string }
			if json.Unmarshal([]byte(line), &rec) != nil || rec.RequestID != "rid-asgi-1" {
				continue
			}
			printed = printed || rec.Msg == "printed by the app"
			request = request || rec.Msg == "request" && rec.Path == "/print"
		}
		if !printed || !request {
			t.Errorf("printed %v, request line %v in:\n%s", printed, request, in.stdout)
		}
	})

	t.Run("lifespan startup ran before the first request", func(t *testing.T) {
		var got struct{ Greeting string }
		getJSON(t, in.base+"/state", &got)
		if got.Greeting != "started" {
			t.Errorf("state %+v", got)
		}
	})

	t.Run("WebSocket handshake refusals", func(t *testing.T) {
		key := base64.StdEncoding.EncodeToString(make([]byte, 16))
		for _, tc := range []struct {
			name, headers string
			status        int
		}{
			{"no key", "Sec-WebSocket-Version: 13\r\n", 400},
			{"a key of 8 bytes", "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: AAAAAAAAAAA=\r\n", 400},
			{"version 8", "Sec-WebSocket-Version: 8\r\nSec-WebSocket-Key: " + key + "\r\n", 426},
		} {
			t.Run(tc.name, func(t *testing.T) {
				c := dialASGI(t, addr)
				fmt.Fprintf(c.conn, "GET /ws/echo HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n%s\r\n", tc.headers)
				resp := c.response(t, "GET")
				if resp.StatusCode != tc.status {
					t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
				}
				if tc.status == 426 && resp.Header.Get("Sec-WebSocket-Version") != "13" {
					t.Errorf("426 without Sec-WebSocket-Version: 13: %v", resp.Header)
				}
			})
		}
		t.Run("the app closes before accepting: 403", func(t *testing.T) {
			c := dialASGI(t, addr)
			fmt.Fprintf(c.conn, "GET /ws/reject HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n\r\n", key)
			if resp := c.response(t, "GET"); resp.StatusCode != 403 {
				t.Errorf("status %d", resp.StatusCode)
			}
		})
	})

	t.Run("WebSocket text and binary of each length encoding", func(t *testing.T) {
		ws := dialWS(t, addr, "/ws/echo")
		ws.send(t, 0x1, true, []byte("héllo"))
		ws.expect(t, 0x1, "héllo")
		for _, n := range []int{125, 126, 65535, 70000} {
			data := make([]byte, n)
			rand.Read(data)
			ws.send(t, 0x2, true, data)
			if op, got := ws.read(t); op != 0x2 || !bytes.Equal(got, data) {
				t.Errorf("binary of %d bytes: opcode %d, %d bytes back", n, op, len(got))
			}
		}
	})

	t.Run("WebSocket fragmented message with a ping between the fragments", func(t *testing.T) {
		ws := dialWS(t, addr, "/ws/echo")
		ws.send(t, 0x1, false, []byte("frag"))
		ws.send(t, 0x9, true, []byte("are you there"))
		ws.send(t, 0x0, false, []byte("men"))
		ws.send(t, 0x0, true, []byte("ted"))
		ws.expect(t, 0xA, "are you there")
		ws.expect(t, 0x1, "fragmented")
	})

	t.Run("WebSocket close handshake, client first", func(t *testing.T) {
		ws := dialWS(t, addr, "/ws/echo")
		ws.send(t, 0x8, true, closePayload(1000, "bye"))
		ws.expectClose(t, 1000)
		ws.expectEOF(t)
	})

	t.Run("WebSocket close by the app with its code and reason", func(t *testing.T) {
		ws := dialWS(t, addr, "/ws/echo")
		ws.send(t, 0x1, true, []byte("close please"))
		op, payload := ws.read(t)
		if op != 0x8 || binary.BigEndian.Uint16(payload) != 4000 || string(payload[2:]) != "asked" {
			t.Fatalf("close frame: opcode %d payload %q", op, payload)
		}
		ws.send(t, 0x8, true, payload[:2])
		ws.expectEOF(t)
	})

	for _, tc := range []struct {
		name  string
		frame func(ws *wsConn)
		code  uint16
	}{
		{"an unmasked frame", func(ws *wsConn) { ws.conn.Write([]byte{0x81, 0x02, 'h', 'i'}) }, 1002},
		{"a continuation with no message", func(ws *wsConn) { ws.sendRaw(0x00, true, []byte("x")) }, 1002},
		{"a new message inside a fragmented one", func(ws *wsConn) {
			ws.sendRaw(0x01, false, []byte("a"))
			ws.sendRaw(0x01, true, []byte("b"))
		}, 1002},
		{"a ping of 126 bytes", func(ws *wsConn) { ws.sendRaw(0x09, true, make([]byte, 126)) }, 1002},
		{"text that is not UTF-8", func(ws *wsConn) { ws.sendRaw(0x01, true, []byte{0xff, 0xfe}) }, 1007},
		// Only the header is sent: the server refuses on the declared length.
		{"a message past 16 MiB", func(ws *wsConn) {
			head := []byte{0x82, 0x80 | 127, 0, 0, 0, 0, 0, 0, 0, 0}
			binary.BigEndian.PutUint64(head[2:], 16<<20+1)
			ws.conn.Write(head)
		}, 1009},
		{"fragments past 16 MiB together", func(ws *wsConn) {
			ws.sendRaw(0x02, false, make([]byte, 8<<20))
			ws.sendRaw(0x00, false, make([]byte, 8<<20))
			head := []byte{0x00, 0x80 | 126, 0, 1}
			ws.conn.Write(head)
		}, 1009},
	} {
		t.Run("WebSocket closes on "+tc.name, func(t *testing.T) {
			ws := dialWS(t, addr, "/ws/echo")
			tc.frame(ws)
			ws.expectClose(t, tc.code)
		})
	}

	t.Run("WebSocket closes with 1011 when the app raises after accepting", func(t *testing.T) {
		ws := dialWS(t, addr, "/ws/boom")
		ws.expectClose(t, 1011)
	})

	t.Run("SIGTERM drains: open WebSockets get 1001, the process exits 0", func(t *testing.T) {
		ws := dialWS(t, addr, "/ws/echo")
		ws.send(t, 0x1, true, []byte("still here"))
		ws.expect(t, 0x1, "still here")
		done := make(chan int)
		go func() { done <- in.stop(t, 20*time.Second) }()
		ws.expectClose(t, 1001)
		ws.send(t, 0x8, true, closePayload(1001, ""))
		if code := <-done; code != 0 {
			t.Errorf("exit code %d", code)
		}
		if out := in.stdout.String(); !strings.Contains(out, `"msg": "stopped"`) {
			t.Errorf("no stopped line in:\n%s", out)
		}
	})
}

// TestPythonAppInterface: the app's kind picks the server, and
// PYTHON_APP_INTERFACE overrides it or, misspelt, stops the start.
func TestPythonAppInterface(t *testing.T) {
	requireTools(t, "python3")
	files := testdataFiles(t, "service/python3.12")
	files["sync_asgi.py"] = []byte("from web import app as _wsgi\n\n" +
		"import asyncio\n\n\n" +
		"def app(scope, receive, send):\n    return _asgi(scope, receive, send)\n\n\n" +
		"async def _asgi(scope, receive, send):\n" +
		"    if scope['type'] != 'http':\n        raise RuntimeError('no lifespan here')\n" +
		"    await send({'type': 'http.response.start', 'status': 200, 'headers': []})\n" +
		"    await send({'type': 'http.response.body', 'body': b'asgi by setting'})\n")
	p := prepareService(t, runtimes.Python312, "sync_asgi.app", files)

	t.Run("a plain function returning a coroutine, marked asgi", func(t *testing.T) {
		in := p.start(t, runtimes.LocalOptions{Env: []string{"PYTHON_APP_INTERFACE=asgi"}})
		resp, err := http.Get(in.base + "/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "asgi by setting" {
			t.Errorf("body %q", b)
		}
		if !strings.Contains(in.stdout.String(), `"interface": "asgi"`) {
			t.Errorf("listening line does not say asgi:\n%s", in.stdout)
		}
	})

	t.Run("a failed lifespan startup stops the start", func(t *testing.T) {
		files := source.Files{"failing.py": []byte("async def app(scope, receive, send):\n" +
			"    await receive()\n" +
			"    await send({'type': 'lifespan.startup.failed', 'message': 'no database'})\n")}
		p := prepareService(t, runtimes.Python312, "failing.app", files)
		cmd, err := runtimes.LocalCommand(p.dir, runtimes.LocalOptions{Port: freePort(t)})
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.CombinedOutput()
		if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 1 || !strings.Contains(string(out), "the app's startup failed: no database") {
			t.Errorf("exit %v, output:\n%s", err, out)
		}
	})

	t.Run("a misspelt setting stops the start with a clear line", func(t *testing.T) {
		cmd, err := runtimes.LocalCommand(p.dir, runtimes.LocalOptions{Port: freePort(t), Env: []string{"PYTHON_APP_INTERFACE=asgii"}})
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.CombinedOutput()
		if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 1 || !strings.Contains(string(out), "PYTHON_APP_INTERFACE is 'asgii'") {
			t.Errorf("exit %v, output:\n%s", err, out)
		}
	})
}

// asgiConn is one client connection written by hand.
type asgiConn struct {
	conn net.Conn
	r    *bufio.Reader
}

func dialASGI(t *testing.T, addr string) *asgiConn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	return &asgiConn{conn: conn, r: bufio.NewReader(conn)}
}

func (c *asgiConn) response(t *testing.T, method string) *http.Response {
	t.Helper()
	resp, err := http.ReadResponse(c.r, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	return resp
}

type echoed struct{ Method, Path, Query, Body string }

// echo reads a response of the test app's echo, whole.
func (c *asgiConn) echo(t *testing.T) echoed {
	t.Helper()
	resp := c.response(t, "GET")
	defer resp.Body.Close()
	var got echoed
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != 200 {
		t.Fatalf("echo: %d %v", resp.StatusCode, err)
	}
	return got
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// wsConn is a WebSocket client written by hand, so that it can break the rules.
type wsConn struct {
	*asgiConn
}

func dialWS(t *testing.T, addr, path string) *wsConn {
	t.Helper()
	c := dialASGI(t, addr)
	key := make([]byte, 16)
	rand.Read(key)
	fmt.Fprintf(c.conn, "GET %s HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n",
		path, base64.StdEncoding.EncodeToString(key))
	resp := c.response(t, "GET")
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-WebSocket-Accept") != wsAccept(key) {
		t.Fatalf("upgrade: %d %v", resp.StatusCode, resp.Header)
	}
	return &wsConn{c}
}

func wsAccept(key []byte) string {
	// RFC 6455 4.2.2: base64 of the SHA-1 of the key and the protocol's GUID.
	h := sha1.Sum([]byte(base64.StdEncoding.EncodeToString(key) + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return base64.StdEncoding.EncodeToString(h[:])
}

// sendRaw writes one masked frame, failing nothing: the server may close first.
func (ws *wsConn) sendRaw(opcode byte, fin bool, payload []byte) error {
	b0 := opcode
	if fin {
		b0 |= 0x80
	}
	head := []byte{b0}
	switch n := len(payload); {
	case n < 126:
		head = append(head, 0x80|byte(n))
	case n < 1<<16:
		head = append(head, 0x80|126, byte(n>>8), byte(n))
	default:
		head = binary.BigEndian.AppendUint64(append(head, 0x80|127), uint64(n))
	}
	mask := make([]byte, 4)
	rand.Read(mask)
	masked := make([]byte, len(payload))
	for i := range payload {
		masked[i] = payload[i] ^ mask[i%4]
	}
	_, err := ws.conn.Write(append(append(head, mask...), masked...))
	return err
}

func (ws *wsConn) send(t *testing.T, opcode byte, fin bool, payload []byte) {
	t.Helper()
	if err := ws.sendRaw(opcode, fin, payload); err != nil {
		t.Fatal(err)
	}
}

// read returns the next whole frame, which the server must send unmasked and final.
func (ws *wsConn) read(t *testing.T) (byte, []byte) {
	t.Helper()
	head := make([]byte, 2)
	if _, err := io.ReadFull(ws.r, head); err != nil {
		t.Fatalf("frame head: %v", err)
	}
	if head[0]&0x80 == 0 || head[1]&0x80 != 0 {
		t.Fatalf("frame %x: a server's frames here are final and unmasked", head)
	}
	n := uint64(head[1] & 0x7f)
	switch n {
	case 126:
		b := make([]byte, 2)
		io.ReadFull(ws.r, b)
		n = uint64(binary.BigEndian.Uint16(b))
	case 127:
		b := make([]byte, 8)
		io.ReadFull(ws.r, b)
		n = binary.BigEndian.Uint64(b)
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(ws.r, payload); err != nil {
		t.Fatalf("frame payload: %v", err)
	}
	return head[0] & 0x0f, payload
}

func (ws *wsConn) expect(t *testing.T, opcode byte, text string) {
	t.Helper()
	if op, got := ws.read(t); op != opcode || string(got) != text {
		t.Errorf("frame: opcode %d %q, want %d %q", op, got, opcode, text)
	}
}

func (ws *wsConn) expectClose(t *testing.T, code uint16) {
	t.Helper()
	op, payload := ws.read(t)
	if op != 0x8 || len(payload) < 2 || binary.BigEndian.Uint16(payload) != code {
		t.Errorf("want a close frame with %d, got opcode %d payload %q", code, op, payload)
	}
}

func (ws *wsConn) expectEOF(t *testing.T) {
	t.Helper()
	if n, err := ws.r.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("after the close handshake: %d bytes, %v; want the connection closed", n, err)
	}
}

func closePayload(code uint16, reason string) []byte {
	return append(binary.BigEndian.AppendUint16(nil, code), reason...)
}
