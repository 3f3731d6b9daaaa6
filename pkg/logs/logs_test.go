package logs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A Stamper writes whole lines, each with its time, whatever the writes'
// boundaries; an overlong line in MaxLine pieces; Flush the rest.
func TestStamper(t *testing.T) {
	at := time.Date(2026, 12, 5, 14, 0, 0, 123000000, time.UTC)
	for _, tc := range []struct {
		name   string
		writes []string
		flush  bool
		want   []string
	}{
		{name: "whole lines", writes: []string{"a\nb\n"}, want: []string{"a", "b"}},
		{name: "split writes", writes: []string{"he", "llo\nwor", "ld\n"}, want: []string{"hello", "world"}},
		{name: "no newline waits", writes: []string{"x\npartial"}, want: []string{"x"}},
		{name: "flush writes the rest", writes: []string{"x\npartial"}, flush: true, want: []string{"x", "partial"}},
		{name: "empty line", writes: []string{"\n"}, want: []string{""}},
		{name: "overlong line", writes: []string{strings.Repeat("y", MaxLine+5) + "\n"}, want: []string{strings.Repeat("y", MaxLine), "yyyyy"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			s := &Stamper{W: &out, Now: func() time.Time { return at }}
			for _, w := range tc.writes {
				if n, err := s.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			if tc.flush {
				s.Flush()
			}
			var got []string
			for _, l := range strings.SplitAfter(out.String(), "\n") {
				if l == "" {
					continue
				}
				if !strings.HasSuffix(l, "\n") {
					t.Fatalf("a line without its newline: %q", l)
				}
				ts, text := ParseStamped(strings.TrimSuffix(l, "\n"))
				if !ts.Equal(at) {
					t.Errorf("time %v, want %v", ts, at)
				}
				got = append(got, text)
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("lines %q, want %q", short(got), short(tc.want))
			}
		})
	}
}

// short keeps a failure's message readable when lines are long.
func short(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		if len(l) > 40 {
			l = fmt.Sprintf("%s…(%d bytes)", l[:20], len(l))
		}
		out[i] = l
	}
	return out
}

func TestParseStamped(t *testing.T) {
	for _, tc := range []struct {
		in, text string
		zero     bool
	}{
		{in: "2026-12-05T14:00:00.5Z hello world", text: "hello world"},
		{in: "2026-12-05T14:00:00Z ", text: ""},
		{in: "hello world", text: "hello world", zero: true},
		{in: "notatime hello", text: "notatime hello", zero: true},
		{in: "", text: "", zero: true},
	} {
		ts, text := ParseStamped(tc.in)
		if text != tc.text || ts.IsZero() != tc.zero {
			t.Errorf("ParseStamped(%q) = %v, %q", tc.in, ts, text)
		}
	}
}

func TestInvocationOf(t *testing.T) {
	for in, want := range map[string]string{
		`{"level":"info","msg":"hi","requestId":"abc"}`: "abc",
		`{"level":"info","msg":"requestId"}`:            "",
		`plain requestId abc`:                           "",
		`{"requestId": 5}`:                              "",
	} {
		if got := InvocationOf(in); got != want {
			t.Errorf("InvocationOf(%s) = %q, want %q", in, got, want)
		}
	}
}

func stamped(t *testing.T, path string, at time.Time, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := &Stamper{W: f, Now: func() time.Time { return at }}
	for _, l := range lines {
		fmt.Fprintln(s, l)
	}
}

func collect(t *testing.T, path string, q Query) []string {
	t.Helper()
	var got []string
	err := Files(context.Background(), path, "fn", q, nil, func(l Line) error {
		got = append(got, l.Text)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// Files reads the rotated files oldest first, then the current one, and
// cuts by tail and since across them; a missing log is no lines.
func TestFiles(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "fn.log")
	if got := collect(t, p, Query{Tail: -1}); len(got) != 0 {
		t.Fatalf("a missing log gave %q", got)
	}
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	stamped(t, p+".2", t0, "1", "2")
	stamped(t, p+".1", t0.Add(time.Hour), "3")
	stamped(t, p, t0.Add(2*time.Hour), "4", "5")
	// A line left without its newline by a process that died.
	f, _ := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(t0.Add(2*time.Hour).Format(time.RFC3339Nano) + " 6")
	f.Close()
	for _, tc := range []struct {
		name string
		q    Query
		want string
	}{
		{"all", Query{Tail: -1}, "1 2 3 4 5 6"},
		{"tail reaches into rotated files", Query{Tail: 5}, "2 3 4 5 6"},
		{"tail 0", Query{Tail: 0}, ""},
		{"since", Query{Tail: -1, Since: t0.Add(time.Hour)}, "3 4 5 6"},
		{"since and tail", Query{Tail: 1, Since: t0.Add(time.Hour)}, "6"},
	} {
		if got := strings.Join(collect(t, p, tc.q), " "); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// Following waits for lines, not for a tick: a line appended shows at
// once; one without its newline waits for it; a rotation is followed; and
// stop ends the read after what is left.
func TestFilesFollow(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "fn.log")
	lines := make(chan string, 16)
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- Files(context.Background(), p, "fn", Query{Tail: -1, Follow: true}, stop, func(l Line) error {
			lines <- l.Text
			return nil
		})
	}()
	next := func(want string) {
		t.Helper()
		select {
		case got := <-lines:
			if got != want {
				t.Fatalf("line %q, want %q", got, want)
			}
		case <-time.After(time.Second):
			// Well under the 2 s safety tick: the watch woke the reader.
			t.Fatalf("no line %q within 1s", want)
		}
	}
	now := time.Now()
	// The file does not exist when the read begins.
	stamped(t, p, now, "first")
	next("first")
	f, _ := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(now.Format(time.RFC3339Nano) + " half")
	f.Sync()
	select {
	case l := <-lines:
		t.Fatalf("a line without its newline was sent: %q", l)
	case <-time.After(100 * time.Millisecond):
	}
	f.WriteString(" and the rest\n")
	f.Close()
	next("half and the rest")
	stamped(t, p, now, "old")
	if err := os.Rename(p, p+".1"); err != nil {
		t.Fatal(err)
	}
	stamped(t, p, now, "new")
	next("old")
	next("new")
	stamped(t, p, now, "before stop")
	close(stop)
	next("before stop")
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the read did not end at stop")
	}
}
