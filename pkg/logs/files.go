package logs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Files reads a log kept as rotated, stamped files: path is the current
// one, path.1 the one before it, and so on (pkg/local's logFile
// writes them). from names the lines (Line.From).
//
// With q.Follow it then waits for lines appended to path, and across a
// rotation reads the file it had to its end before it opens the new one.
// Two rotations between one wake and the next would skip the file between
// them; at local mode's 10 MiB a file that takes a burst no reader keeps up
// with anyway. Following ends when ctx ends, or when stop is closed (the
// writer is done: a build that ended) once what is left has been read.
func Files(ctx context.Context, path, from string, q Query, stop <-chan struct{}, emit Emit) error {
	if q.Tail == 0 && !q.Follow {
		return nil
	}
	var w *fsnotify.Watcher
	if q.Follow {
		// Watching before the first read: a line written between the read
		// and the watch would otherwise wait for the next one.
		var err error
		if w, err = fsnotify.NewWatcher(); err != nil {
			return fmt.Errorf("watch %s: %w", path, err)
		}
		defer w.Close()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("watch %s: %w", path, err)
		}
		if err := w.Add(filepath.Dir(path)); err != nil {
			return fmt.Errorf("watch %s: %w", path, err)
		}
	}
	t := tail{n: q.Tail}
	collect := func(l Line) error {
		if q.Keep(l) {
			t.add(l)
		}
		return nil
	}
	// The rotated files, oldest first, then the current one, which stays
	// open for following.
	for i := rotatedCount(path); i >= 1; i-- {
		f, err := os.Open(path + "." + strconv.Itoa(i))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read log: %w", err)
		}
		rest, err := follow(f, nil, from, collect)
		f.Close()
		if err == nil {
			err = lastLine(rest, from, collect)
		}
		if err != nil {
			return err
		}
	}
	cur, err := os.Open(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read log: %w", err)
	}
	var partial []byte
	if cur != nil {
		defer func() { cur.Close() }()
		if partial, err = follow(cur, nil, from, collect); err != nil {
			return err
		}
		// Following, a line without its newline yet waits for it.
		if !q.Follow {
			if err := lastLine(partial, from, collect); err != nil {
				return err
			}
		}
	}
	for _, l := range t.result() {
		if err := emit(l); err != nil {
			return err
		}
	}
	if !q.Follow {
		return nil
	}
	send := func(l Line) error {
		if q.Keep(l) {
			return emit(l)
		}
		return nil
	}
	// A slow tick besides the events: a file system that drops an event
	// (some network and overlay mounts) then delays a line, never loses it.
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-stop:
			if cur != nil {
				if partial, err = follow(cur, partial, from, send); err != nil {
					return err
				}
				return lastLine(partial, from, send)
			}
			return nil
		case err := <-w.Errors:
			return fmt.Errorf("watch %s: %w", path, err)
		case <-w.Events:
		case <-tick.C:
		}
		if cur != nil {
			if partial, err = follow(cur, partial, from, send); err != nil {
				return err
			}
		}
		// A rotation: the file read so far is now path.1 (or gone), and
		// path a new one or none yet.
		st, err := os.Stat(path)
		if err != nil {
			continue
		}
		if cur != nil {
			if old, err := cur.Stat(); err == nil && os.SameFile(old, st) {
				continue
			}
			// The writer may have added to the old file between the read
			// above and the rotation; it writes there no more.
			if partial, err = follow(cur, partial, from, send); err != nil {
				return err
			}
			if err := lastLine(partial, from, send); err != nil {
				return err
			}
			cur.Close()
			partial = nil
		}
		if cur, err = os.Open(path); err != nil {
			cur = nil
			continue
		}
		if partial, err = follow(cur, nil, from, send); err != nil {
			return err
		}
	}
}

// follow reads what was appended to f since the last call, emits its whole
// lines and returns the start of a line still without its newline.
func follow(f *os.File, partial []byte, from string, send Emit) ([]byte, error) {
	rd := bufio.NewReader(f)
	for {
		chunk, err := rd.ReadBytes('\n')
		partial = append(partial, chunk...)
		if err == io.EOF {
			return partial, nil
		}
		if err != nil {
			return partial, fmt.Errorf("read log: %w", err)
		}
		t, text := ParseStamped(string(partial[:len(partial)-1]))
		partial = partial[:0]
		if err := send(Line{Time: t, Text: text, From: from}); err != nil {
			return nil, err
		}
	}
}

// lastLine emits the text of a file's last line that has no newline.
func lastLine(rest []byte, from string, emit Emit) error {
	if len(rest) == 0 {
		return nil
	}
	t, text := ParseStamped(string(rest))
	return emit(Line{Time: t, Text: text, From: from})
}

// rotatedCount is the highest n for which path.n exists.
func rotatedCount(path string) int {
	n := 0
	for {
		if _, err := os.Stat(path + "." + strconv.Itoa(n+1)); err != nil {
			return n
		}
		n++
	}
}
