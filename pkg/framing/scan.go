package framing

import (
	"bytes"
	"strconv"
)

// keep is how much of a line the scanner holds: enough for any valid
// Content-Length or Transfer-Encoding line and the start of a request line.
const keep = 256

// maxQueued bounds the heads read ahead of the handler.
const maxQueued = 32

// tailLen is how much of a request line's end the scanner holds: " HTTP/1.0\r".
const tailLen = 10

// head is what the scanner read of one request's head.
type head struct {
	method, target string
	targetCut      bool // target is only the start of a longer one
	http10         bool // net/http ignores Transfer-Encoding in HTTP/1.0
	contentLength  int64
	lengths        int // Content-Length fields
	encodings      int // Transfer-Encoding fields
	chunked        bool
	// lost: the scanner cannot tell how net/http frames this request (a
	// Content-Length it cannot read, a framing field folded onto lines).
	lost bool
}

// ambiguous tells a request RFC 9112 §6.1 calls faulty: Transfer-Encoding
// with Content-Length, or in an HTTP/1.0 message.
func (h *head) ambiguous() bool { return h.encodings > 0 && (h.lengths > 0 || h.http10) }

type state int

const (
	inHead state = iota
	inBody
	inChunkSize
	inChunkData
	inChunkEnd
	inTrailer
	stopped // the scanner lost the thread; nothing more is queued
)

// Framing fields, as scanner.field.
const (
	fieldLength = iota + 1
	fieldEncoding
)

// scanner follows what a client sends on one connection as net/http reads
// it: each request's head, then its body by chunked coding or by
// Content-Length. It queues the heads until the handler takes them.
type scanner struct {
	state   state
	line    []byte        // the first keep bytes of the line being read
	lineLen int           // the line's length so far
	tail    [tailLen]byte // a request line's last bytes: its version, however long it is
	tailN   int
	cur     head
	started bool  // cur's request line is read
	field   int   // the framing field the last header line was, or 0
	left    int64 // bytes left of a body or chunk
	heads   []head
}

func (s *scanner) feed(p []byte) {
	for len(p) > 0 && s.state != stopped {
		if s.state == inBody || s.state == inChunkData {
			n := min(int64(len(p)), s.left)
			p, s.left = p[n:], s.left-n
			if s.left == 0 && s.state == inBody {
				s.state = inHead
			} else if s.left == 0 {
				s.state = inChunkEnd
			}
			continue
		}
		end := bytes.IndexByte(p, '\n')
		seg := p
		if end >= 0 {
			seg = p[:end]
		}
		if room := keep - len(s.line); room > 0 {
			s.line = append(s.line, seg[:min(len(seg), room)]...)
		}
		if s.state == inHead && !s.started {
			s.keepTail(seg)
		}
		s.lineLen += len(seg)
		if end < 0 {
			return
		}
		p = p[end+1:]
		s.endLine(s.line, s.lineLen <= keep)
		s.line, s.lineLen, s.tailN = s.line[:0], 0, 0
	}
}

// keepTail keeps the last tailLen bytes of the line, seg its next part.
func (s *scanner) keepTail(seg []byte) {
	if len(seg) >= tailLen {
		s.tailN = copy(s.tail[:], seg[len(seg)-tailLen:])
		return
	}
	old := min(s.tailN, tailLen-len(seg))
	copy(s.tail[:old], s.tail[s.tailN-old:s.tailN])
	s.tailN = old + copy(s.tail[old:], seg)
}

// endLine takes one line without its LF; whole is false when only its
// start was kept.
func (s *scanner) endLine(line []byte, whole bool) {
	cr := []byte("\r")
	switch s.state {
	case inHead:
		s.headLine(bytes.TrimSuffix(line, cr), whole)
	case inChunkSize:
		// As net/http reads it: CRLF and no other CR, then a size in hex
		// of at most 16 digits before any extension.
		if !whole || !bytes.HasSuffix(line, cr) {
			s.state = stopped
			return
		}
		line = bytes.TrimRight(line[:len(line)-1], " \t")
		if i := bytes.IndexByte(line, ';'); i >= 0 {
			line = line[:i]
		}
		n, err := strconv.ParseUint(string(line), 16, 64)
		if err != nil || len(line) > 16 || n > 1<<62 {
			s.state = stopped
			return
		}
		if n == 0 {
			s.state = inTrailer
			return
		}
		s.state, s.left = inChunkData, int64(n)
	case inChunkEnd:
		if !whole || string(line) != "\r" {
			s.state = stopped // net/http refuses the body and closes
			return
		}
		s.state = inChunkSize
	case inTrailer:
		if whole && len(bytes.TrimSuffix(line, cr)) == 0 {
			s.state = inHead
		}
	}
}

// headLine takes one line of a request's head.
func (s *scanner) headLine(line []byte, whole bool) {
	if !s.started {
		if whole && len(line) == 0 {
			return // net/http passes over empty lines after a POST
		}
		s.requestLine(line, whole)
		return
	}
	if whole && len(line) == 0 {
		s.endHead()
		return
	}
	if line[0] == ' ' || line[0] == '\t' {
		// net/http folds this line into the last field's value.
		if s.field != 0 {
			s.cur.lost = true
		}
		return
	}
	s.field = 0
	name, value, ok := bytes.Cut(line, []byte(":"))
	if !ok {
		return // net/http refuses the head
	}
	value = bytes.Trim(value, " \t")
	switch {
	case bytes.EqualFold(name, []byte("Content-Length")):
		s.field = fieldLength
		s.cur.lengths++
		n, err := strconv.ParseInt(string(value), 10, 64)
		if !whole || err != nil || n < 0 || value[0] == '+' || s.cur.lengths > 1 && n != s.cur.contentLength {
			s.cur.lost = true
		}
		s.cur.contentLength = n
	case bytes.EqualFold(name, []byte("Transfer-Encoding")):
		s.field = fieldEncoding
		s.cur.encodings++
		s.cur.chunked = s.cur.encodings == 1 && whole && bytes.EqualFold(value, []byte("chunked"))
	}
}

// requestLine takes "method SP target SP version", split as net/http does.
func (s *scanner) requestLine(line []byte, whole bool) {
	s.started = true
	s.cur = head{contentLength: -1}
	method, rest, ok1 := bytes.Cut(line, []byte(" "))
	target, _, ok2 := bytes.Cut(rest, []byte(" "))
	if !whole && !ok2 {
		target, ok2, s.cur.targetCut = rest, true, true
	}
	if !ok1 || !ok2 || len(method) == 0 {
		s.cur.lost = true
		return
	}
	if string(method) == "PRI" {
		// HTTP/2's preface, or a request the guard refuses: either way
		// nothing after it on the connection is read as HTTP/1.
		s.state = stopped
		return
	}
	s.cur.method, s.cur.target = string(method), string(target)
	s.cur.http10 = bytes.HasSuffix(bytes.TrimSuffix(s.tail[:s.tailN], []byte("\r")), []byte(" HTTP/1.0"))
}

// endHead queues the head just read and goes on to its body.
func (s *scanner) endHead() {
	h := s.cur
	s.cur, s.started, s.field = head{}, false, 0
	if h.http10 {
		h.chunked = false // net/http frames an HTTP/1.0 body by its length alone
	}
	if len(s.heads) == maxQueued {
		// net/http takes one request at a time: this is no client's
		// pipeline, and the connection is closed at its next request.
		s.state, s.heads = stopped, nil
		return
	}
	s.heads = append(s.heads, h)
	switch {
	case h.lost:
		s.state = stopped
	case h.chunked:
		s.state = inChunkSize
	case h.encodings > 0 && !h.http10:
		s.state = stopped // net/http refuses any other coding, and closes
	case h.contentLength > 0:
		s.state, s.left = inBody, h.contentLength
	}
}

// next takes the oldest queued head, if any.
func (s *scanner) next() (head, bool) {
	if len(s.heads) == 0 {
		return head{}, false
	}
	h := s.heads[0]
	s.heads = append(s.heads[:0], s.heads[1:]...)
	return h, true
}
