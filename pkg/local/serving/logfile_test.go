package serving

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Writing far past the limit keeps at most maxFiles files, none larger
// than maxBytes, whole lines in each, and the newest output in the
// current file, the rest in order in .1, .2, …
func TestLogFileRotatesBySize(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxBytes int64
		maxFiles int
		lines    int
		lineLen  int
		chunk    int // bytes a write, as a pipe hands them over
		before   string
	}{
		{name: "lines in odd chunks", maxBytes: 1000, maxFiles: 3, lines: 500, lineLen: 40, chunk: 7},
		{name: "big writes", maxBytes: 1000, maxFiles: 3, lines: 500, lineLen: 40, chunk: 4096},
		{name: "one file", maxBytes: 1000, maxFiles: 1, lines: 500, lineLen: 40, chunk: 100},
		{name: "lines longer than a file", maxBytes: 100, maxFiles: 4, lines: 30, lineLen: 250, chunk: 64},
		{name: "a full file from before", maxBytes: 1000, maxFiles: 2, lines: 10, lineLen: 40, chunk: 40,
			before: strings.Repeat("old\n", 250)},
		{name: "a file from before past a lower limit", maxBytes: 1000, maxFiles: 3, lines: 60, lineLen: 40, chunk: 40,
			before: strings.Repeat("old\n", 1000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "fn.log")
			if tc.before != "" {
				if err := os.WriteFile(p, []byte(tc.before), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			// all is what the file holds and is written: the newest of it
			// must be kept.
			var all bytes.Buffer
			all.WriteString(tc.before)
			for i := range tc.lines {
				line := fmt.Sprintf("line %06d ", i)
				all.WriteString(line + strings.Repeat("x", tc.lineLen-len(line)-1) + "\n")
			}
			lf := newLogFile(p, tc.maxBytes, tc.maxFiles)
			for b := all.Bytes()[len(tc.before):]; len(b) > 0; {
				n := min(tc.chunk, len(b))
				if m, err := lf.Write(b[:n]); m != n || err != nil {
					t.Fatalf("Write = %d, %v", m, err)
				}
				b = b[n:]
			}
			if err := lf.Close(); err != nil {
				t.Fatal(err)
			}

			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			var want []string
			for i := range tc.maxFiles {
				if i == 0 {
					want = append(want, "fn.log")
				} else {
					want = append(want, fmt.Sprintf("fn.log.%d", i))
				}
			}
			slices.Sort(want)
			if !slices.Equal(names, want) {
				t.Fatalf("files %v, want %v", names, want)
			}
			// Oldest first: .N-1 … .1, then the current file.
			var kept []byte
			for i := tc.maxFiles - 1; i >= 0; i-- {
				name := "fn.log"
				if i > 0 {
					name += fmt.Sprintf(".%d", i)
				}
				b, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				if int64(len(b)) > tc.maxBytes {
					t.Errorf("%s has %d bytes, more than %d", name, len(b), tc.maxBytes)
				}
				if int64(tc.lineLen) <= tc.maxBytes && len(b) > 0 && b[len(b)-1] != '\n' {
					t.Errorf("%s does not end with a whole line: …%q", name, b[max(len(b)-20, 0):])
				}
				last := all.Bytes()[all.Len()-tc.lineLen:]
				if int64(tc.lineLen) > tc.maxBytes {
					last = last[len(last)-min(len(b), len(last)):] // its tail
				}
				if i == 0 && (len(b) == 0 || !bytes.HasSuffix(b, last)) {
					t.Errorf("the current file does not end with the last line written: …%q", b[max(len(b)-tc.lineLen, 0):])
				}
				kept = append(kept, b...)
			}
			if !bytes.HasSuffix(all.Bytes(), kept) {
				t.Errorf("the %d bytes kept are not the newest output in order", len(kept))
			}
			if min := int64(tc.maxFiles-1) * (tc.maxBytes - int64(min(tc.lineLen, int(tc.maxBytes)))); int64(len(kept)) < min {
				t.Errorf("kept %d bytes, want at least %d: files rotated before they were full", len(kept), min)
			}
		})
	}
}
