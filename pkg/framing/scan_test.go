package framing

import (
	"reflect"
	"testing"
)

// The scanner reads what any client sends, in whatever pieces the
// connection's reads return: it must not panic on any of it, and must read
// the same heads however the bytes are cut.
func FuzzScanner(f *testing.F) {
	for _, seed := range []string{
		"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /b HTTP/1.1\r\n\r\n",
		"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;x=1\r\nhello\r\n0\r\nX-Sum: 1\r\n\r\nGET /b HTTP/1.0\r\n\r\n",
		"PUT /c HTTP/1.1\nContent-Length: 2\n\nokGET /d HTTP/1.1\r\nX: a\r\n b\r\n\r\n",
		"\r\n\r\nPOST /e HTTP/1.0\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\nabc",
	} {
		f.Add(seed, uint8(7))
	}
	f.Fuzz(func(t *testing.T, raw string, cut uint8) {
		var whole, pieces scanner
		whole.feed([]byte(raw))
		step := int(cut%64) + 1
		for i := 0; i < len(raw); i += step {
			pieces.feed([]byte(raw[i:min(i+step, len(raw))]))
		}
		if !reflect.DeepEqual(whole.heads, pieces.heads) || whole.state != pieces.state {
			t.Fatalf("in one piece: %+v (state %d)\nin pieces of %d: %+v (state %d)", whole.heads, whole.state, step, pieces.heads, pieces.state)
		}
	})
}
