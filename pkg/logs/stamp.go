package logs

import (
	"bytes"
	"io"
	"sync"
	"time"
)

// The files local mode keeps hold one line per line of output, prefixed
// with the time it was written, as the kubelet's do:
//
//	2026-12-05T14:25:25.123456789Z {"level":"info","msg":"hello"}
//
// so that ?since= and the times of `sless logs` mean the same on one
// machine as on a cluster.

// MaxLine is the longest line a Stamper keeps whole; a longer one is
// written in pieces of MaxLine bytes, each stamped as a line.
const MaxLine = 1 << 20

// Stamper writes whole lines to W, each prefixed with its time. A line
// waits for its newline; Flush writes what is left of one.
type Stamper struct {
	W   io.Writer
	Now func() time.Time // default time.Now

	mu  sync.Mutex
	buf []byte
}

// Write never fails: it feeds the output of a process, which must not
// stop because a log cannot be written.
func (s *Stamper) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		end := len(p)
		if i >= 0 {
			end = i
		}
		if room := MaxLine - len(s.buf); end > room {
			s.buf = append(s.buf, p[:room]...)
			p = p[room:]
			s.line()
			continue
		}
		s.buf = append(s.buf, p[:end]...)
		if i < 0 {
			break
		}
		p = p[i+1:]
		s.line()
	}
	return n, nil
}

// Flush writes a line left without its newline.
func (s *Stamper) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.buf) > 0 {
		s.line()
	}
}

func (s *Stamper) line() {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	out := make([]byte, 0, len(s.buf)+32)
	out = now().UTC().AppendFormat(out, time.RFC3339Nano)
	out = append(out, ' ')
	out = append(out, s.buf...)
	out = append(out, '\n')
	_, _ = s.W.Write(out)
	s.buf = s.buf[:0]
}

// ParseStamped splits a line of a stamped file (or of a Pod log read with
// timestamps) into its time and text. A line without a time (a file
// written before sless stamped them) is all text, with a zero time.
func ParseStamped(line string) (time.Time, string) {
	i := 0
	for i < len(line) && i < 40 && line[i] != ' ' {
		i++
	}
	if i == len(line) || line[i] != ' ' {
		return time.Time{}, line
	}
	t, err := time.Parse(time.RFC3339Nano, line[:i])
	if err != nil {
		return time.Time{}, line
	}
	return t, line[i+1:]
}
