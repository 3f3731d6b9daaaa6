package serving

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// Defaults of a function's log file: rotated at 10 MiB, five files kept
// (the current one and <name>.log.1 … .4), so a function keeps at most
// 50 MiB of output on disk however much it writes.
const (
	DefaultLogMaxBytes = 10 << 20
	DefaultLogMaxFiles = 5
)

// logFile is a function's log file, <namespace>/<name>.log, shared by all
// of its processes (a draining revision, the new one, job runs) so that
// they rotate it together. When a write would take it past maxBytes it
// becomes <name>.log.1, an older .1 becomes .2 and so on, and what would
// pass maxFiles files in all is removed. The cut is made at a line end
// where one fits, so a line stays whole in one file unless it alone is
// longer than maxBytes.
//
// Writes never fail: a function's output goes through a pipe that sless
// dev copies, and an error here would stop the copy and with it the
// function at its next write. What cannot be written (a full disk) is
// dropped, and the file opened again on the next write.
type logFile struct {
	path     string
	maxBytes int64
	maxFiles int

	mu   sync.Mutex
	f    *os.File
	size int64
	// refs counts the processes writing; the Server closes the file when
	// the last one ends.
	refs int
}

func newLogFile(path string, maxBytes int64, maxFiles int) *logFile {
	return &logFile{path: path, maxBytes: max(maxBytes, 1), maxFiles: max(maxFiles, 1)}
}

func (l *logFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		if l.f == nil && l.open() != nil {
			return n, nil
		}
		room := l.maxBytes - l.size
		if room <= 0 {
			// A file from before, full or larger (a lower limit since).
			l.rotate()
			continue
		}
		if int64(len(p)) <= room {
			l.write(p)
			break
		}
		cut := 0
		if i := bytes.LastIndexByte(p[:room], '\n'); i >= 0 {
			cut = i + 1
		} else if l.size == 0 {
			cut = int(room) // a line longer than a whole file
		}
		l.write(p[:cut])
		p = p[cut:]
		l.rotate()
	}
	return n, nil
}

func (l *logFile) write(p []byte) {
	if len(p) == 0 {
		return
	}
	m, err := l.f.Write(p)
	l.size += int64(m)
	if err != nil {
		l.f.Close()
		l.f = nil
	}
}

func (l *logFile) open() error {
	if err := os.MkdirAll(filepath.Dir(l.path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	l.f, l.size = f, st.Size()
	return nil
}

// rotate moves the current file to .1 and each older one up a number,
// removes those past maxFiles (also ones a larger maxFiles left), and
// starts an empty current file on the next write.
func (l *logFile) rotate() {
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
	l.size = 0
	numbered := func(i int) string { return l.path + "." + strconv.Itoa(i) }
	for i := l.maxFiles; ; i++ {
		if err := os.Remove(numbered(i)); err != nil {
			break
		}
	}
	for i := l.maxFiles - 1; i >= 1; i-- {
		from := l.path
		if i > 1 {
			from = numbered(i - 1)
		}
		_ = os.Rename(from, numbered(i))
	}
	if l.maxFiles == 1 {
		_ = os.Remove(l.path)
	}
}

// Close closes the current file.
func (l *logFile) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	if err != nil {
		return fmt.Errorf("close %s: %w", l.path, err)
	}
	return nil
}
