package framing_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/sless-dev/sless/pkg/framing"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/problems"
)

// h2Answer is what the server sent back on an HTTP/2 connection.
type h2Answer struct {
	status map[uint32]string        // :status by stream
	body   map[uint32]string        // DATA by stream
	reset  map[uint32]http2.ErrCode // RST_STREAM by stream
	goAway *http2.ErrCode
	open   bool // still open after 500 ms of quiet
}

// h2Exchange opens a connection, writes HTTP/2's client preface and then
// what frames writes, and reads frames until the server closes the
// connection or says nothing for 500 ms.
func (s *server) h2Exchange(t *testing.T, frames func(fr *http2.Framer, raw io.Writer)) h2Answer {
	t.Helper()
	conn, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var out bytes.Buffer
	out.WriteString(http2.ClientPreface)
	frames(http2.NewFramer(&out, nil), &out)
	if _, err := conn.Write(out.Bytes()); err != nil {
		t.Fatal(err)
	}
	a := h2Answer{status: map[uint32]string{}, body: map[uint32]string{}, reset: map[uint32]http2.ErrCode{}}
	fr := http2.NewFramer(conn, conn)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	for {
		conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		f, err := fr.ReadFrame()
		if err != nil {
			var ne net.Error
			a.open = errors.As(err, &ne) && ne.Timeout()
			return a
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.MetaHeadersFrame:
			if st := f.PseudoValue("status"); st != "" {
				a.status[f.StreamID] = st
			}
		case *http2.DataFrame:
			a.body[f.StreamID] += string(f.Data())
		case *http2.RSTStreamFrame:
			a.reset[f.StreamID] = f.ErrCode
		case *http2.GoAwayFrame:
			code := f.ErrCode
			a.goAway = &code
		}
	}
}

// request writes a request's HEADERS on stream id, with the fields after
// the pseudo-header ones, and its body in one DATA frame when not "".
func request(fr *http2.Framer, id uint32, method, path, body string, fields ...string) {
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", method}, {":scheme", "http"}, {":authority", "x"}, {":path", path}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	for i := 0; i+1 < len(fields); i += 2 {
		_ = enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block.Bytes(), EndHeaders: true, EndStream: body == ""})
	if body != "" {
		_ = fr.WriteData(id, true, []byte(body))
	}
}

// HTTP/2 by prior knowledge is served; its bodies are framed by DATA alone,
// and net/http refuses what HTTP/2 does not allow (Transfer-Encoding, a
// body past its Content-Length), so nothing is smuggled on it either.
func TestServeHTTP2PriorKnowledge(t *testing.T) {
	s := serve(t)
	smuggle := "0\r\n\r\n" + smuggled
	// The frame header "GET" reads as is longer than the server takes.
	frameSize := http2.ErrCodeFrameSize
	cases := []struct {
		name   string
		frames func(*http2.Framer, io.Writer)
		status map[uint32]string
		body   map[uint32]string
		reset  map[uint32]http2.ErrCode
		goAway *http2.ErrCode
		served []string
	}{
		{name: "requests on two streams",
			frames: func(fr *http2.Framer, raw io.Writer) {
				_ = fr.WriteSettings()
				request(fr, 1, "GET", "/h2", "")
				request(fr, 3, "POST", "/h2-body", "hello", "content-length", "5")
			},
			status: map[uint32]string{1: "200", 3: "200"},
			body: map[uint32]string{1: `served HTTP/2.0 upgrade="" connection="" settings=""`,
				3: `served HTTP/2.0 upgrade="" connection="" settings=""`},
			served: []string{"GET /h2 ", "POST /h2-body hello"}},
		{name: "Transfer-Encoding with Content-Length",
			frames: func(fr *http2.Framer, raw io.Writer) {
				_ = fr.WriteSettings()
				request(fr, 1, "POST", "/te", smuggle, "content-length", strconv.Itoa(len(smuggle)), "transfer-encoding", "chunked")
			},
			status: map[uint32]string{1: "400"}},
		{name: "a body past its Content-Length",
			frames: func(fr *http2.Framer, raw io.Writer) {
				_ = fr.WriteSettings()
				request(fr, 1, "POST", "/long", smuggle, "content-length", "5")
			},
			reset: map[uint32]http2.ErrCode{1: http2.ErrCodeProtocol}},
		{name: "garbage after the preface",
			frames: func(fr *http2.Framer, raw io.Writer) {
				raw.Write([]byte("GET /garbage HTTP/1.1\r\nHost: x\r\n\r\n"))
			},
			goAway: &frameSize},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			from := len(s.served())
			a := s.h2Exchange(t, tc.frames)
			if tc.status == nil {
				tc.status = map[uint32]string{}
			}
			if !maps.Equal(a.status, tc.status) || tc.body != nil && !maps.Equal(a.body, tc.body) || !maps.Equal(a.reset, orEmpty(tc.reset)) {
				t.Fatalf("status %v, body %v, reset %v; want %v, %v, %v", a.status, a.body, a.reset, tc.status, tc.body, tc.reset)
			}
			switch {
			case tc.goAway == nil && (a.goAway != nil || !a.open):
				t.Fatalf("GOAWAY %v, open %v; want the connection kept", a.goAway, a.open)
			case tc.goAway != nil && (a.goAway == nil || *a.goAway != *tc.goAway):
				// net/http closes the connection a second after its GOAWAY.
				t.Fatalf("GOAWAY %v; want %v", a.goAway, *tc.goAway)
			}
			if got := s.served()[from:]; !slices.Equal(got, tc.served) {
				t.Fatalf("served %q, want %q", got, tc.served)
			}
		})
	}
}

// "PRI * HTTP/2.0" read as HTTP/1 (a preface cut short, or one after the
// connection's start) is refused and its connection closed; an HTTP/1.1
// Upgrade to h2c is declined: served as HTTP/1.1 without the offer, on a
// connection the guard goes on checking.
func TestServeHTTP1AroundHTTP2(t *testing.T) {
	s := serve(t)
	upgrade := "GET /up HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n"
	cases := []struct {
		name   string
		raw    string
		status []int
		reason string // of the last answer
		body   string // of the first answer, when served
		served []string
		open   bool
	}{
		{name: "a preface cut short", raw: "PRI * HTTP/2.0\r\n\r\nXY\r\n\r\n" + smuggled,
			status: []int{400}, reason: framing.PrefaceReason},
		{name: "a preface after a request", raw: "GET /first HTTP/1.1\r\nHost: x\r\n\r\n" + http2.ClientPreface + smuggled,
			status: []int{200, 400}, reason: framing.PrefaceReason, served: []string{"GET /first "}},
		{name: "PRI as an HTTP/1.1 method", raw: "PRI /x HTTP/1.1\r\nHost: x\r\n\r\n" + smuggled,
			status: []int{400}, reason: framing.PrefaceReason},
		{name: "Upgrade: h2c", raw: upgrade + "GET /after HTTP/1.1\r\nHost: x\r\n\r\n",
			status: []int{200, 200}, served: []string{"GET /up ", "GET /after "}, open: true,
			body: `served HTTP/1.1 upgrade="" connection="keep-alive" settings=""`},
		{name: "Upgrade: h2c, then an ambiguous request",
			raw:    upgrade + ambiguous("/a", "Content-Length: {n}\r\nTransfer-Encoding: chunked"),
			status: []int{200, 400}, reason: framing.Reason, served: []string{"GET /up "}},
		{name: "h2c among other upgrades",
			raw:    "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: h2c, websocket\r\nHTTP2-Settings: AAMAAABk\r\n\r\n",
			status: []int{200}, served: []string{"GET /ws "}, open: true,
			body: `served HTTP/1.1 upgrade="websocket" connection="Upgrade" settings=""`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			from := len(s.served())
			answers, bodies, open := s.exchange(t, tc.raw)
			var status []int
			for _, a := range answers {
				status = append(status, a.StatusCode)
			}
			if !slices.Equal(status, tc.status) || open != tc.open {
				t.Fatalf("answers %v %q, open %v; want %v, open %v", status, bodies, open, tc.status, tc.open)
			}
			if tc.body != "" && bodies[0] != tc.body {
				t.Fatalf("first answer %q, want %q", bodies[0], tc.body)
			}
			last, lastBody := answers[len(answers)-1], bodies[len(bodies)-1]
			if tc.reason != "" {
				var p problems.Details
				if err := json.Unmarshal([]byte(lastBody), &p); err != nil || last.Header.Get(invoke.ErrorHeader) != tc.reason ||
					p.Reason != tc.reason || p.Status != http.StatusBadRequest || p.RequestID == "" {
					t.Fatalf("last answer %s %q: %s (%v), want reason %s", last.Status, last.Header.Get(invoke.ErrorHeader), lastBody, err, tc.reason)
				}
			}
			if got := s.served()[from:]; !slices.Equal(got, tc.served) {
				t.Fatalf("served %q, want %q", got, tc.served)
			}
		})
	}
}

// A client speaking h2c through net/http's own transport is served over
// HTTP/2, streams and all.
func TestServeH2CClient(t *testing.T) {
	s := serve(t)
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	client := &http.Client{Transport: &http.Transport{Protocols: &protocols}}
	defer client.CloseIdleConnections()
	pr, pw := io.Pipe()
	go func() {
		io.WriteString(pw, "streamed ")
		io.WriteString(pw, "body")
		pw.Close()
	}()
	resp, err := client.Post("http://"+s.addr+"/stream", "text/plain", pr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.ProtoMajor != 2 || !strings.HasPrefix(string(b), "served HTTP/2.0") {
		t.Fatalf("%s %s (%v)", resp.Proto, b, err)
	}
	if got := s.served(); !slices.Contains(got, "POST /stream streamed body") {
		t.Fatalf("served %q", got)
	}
}

func orEmpty[K comparable, V any](m map[K]V) map[K]V {
	if m == nil {
		return map[K]V{}
	}
	return m
}
