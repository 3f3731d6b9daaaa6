// Package web is a web app for the service-mode conformance test, with a
// WebSocket echo written out by hand (standard library only).
package web

import (
	"bufio"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"sync"
)

var (
	releaseOnce sync.Once
	released    = make(chan struct{})
)

// Handler serves the test's routes.
var Handler http.Handler = http.HandlerFunc(serve)

func serve(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/events":
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("data: first\n\n"))
		w.(http.Flusher).Flush()
		<-released
		w.Write([]byte("data: second\n\n"))
	case "/release":
		releaseOnce.Do(func() { close(released) })
		w.WriteHeader(http.StatusNoContent)
	case "/ws/echo":
		echo(w, r)
	default:
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"method": r.Method, "path": r.URL.Path, "query": r.URL.RawQuery, "body": string(body)})
	}
}

// echo answers one masked text frame under 126 bytes with the same text.
func echo(w http.ResponseWriter, r *http.Request) {
	sum := sha1.Sum([]byte(r.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	conn, rw, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " +
		base64.StdEncoding.EncodeToString(sum[:]) + "\r\n\r\n")
	rw.Flush()
	br := bufio.NewReader(rw)
	head := make([]byte, 6)
	if _, err := io.ReadFull(br, head); err != nil {
		return
	}
	data := make([]byte, head[1]&0x7f)
	io.ReadFull(br, data)
	for i := range data {
		data[i] ^= head[2+i%4]
	}
	conn.Write(append([]byte{0x81, byte(len(data))}, data...))
}
