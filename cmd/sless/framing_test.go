package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/framing"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/problems"
)

// refusesAmbiguousFraming sends, on the REST API and on the invoke path of
// the server at addr, a request with both Content-Length and
// Transfer-Encoding and another hidden behind its chunked body: the first
// is answered 400 and the connection closed before the hidden one is read.
func refusesAmbiguousFraming(t *testing.T, addr string) {
	t.Helper()
	const hidden = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
	for _, path := range []string{"/v1/namespaces/default/functions", "/fn/default/hello"} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n%s",
			path, len("0\r\n\r\n"+hidden), hidden)
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var p problems.Details
		if err := json.Unmarshal(b, &p); err != nil || resp.StatusCode != http.StatusBadRequest || p.Reason != framing.Reason ||
			resp.Header.Get(invoke.ErrorHeader) != framing.Reason || p.RequestID == "" {
			t.Fatalf("%s: %d %s (%v), want 400 %s", path, resp.StatusCode, b, err, framing.Reason)
		}
		if _, err := br.ReadByte(); err != io.EOF {
			t.Fatalf("%s: after the refusal: %v, want the connection closed (EOF) and the hidden request never answered", path, err)
		}
		conn.Close()
	}
}

// sless dev refuses a request with both Content-Length and
// Transfer-Encoding as sless api does (TestAPICommand).
func TestDevRefusesAmbiguousFraming(t *testing.T) {
	addr := startDev(t)
	refusesAmbiguousFraming(t, addr)
}
