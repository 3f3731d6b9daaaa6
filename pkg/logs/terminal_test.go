package logs

import (
	"bytes"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// The pretty handler writes one aligned line per event, the function in
// its own column, other fields as key=value (quoted when they hold
// spaces), and a multi-line error's further lines indented below.
func TestPrettyHandler(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(&prettyHandler{w: &out, mu: &sync.Mutex{}, level: slog.LevelInfo})
	log.Info("build succeeded", "function", "default/hello", "build", "hello-build-0a1b2c3d4e", "took", 2100*time.Millisecond)
	log.Warn("build failed", "function", "default/broken", "reason", "BuildFailed", "error", "pip install: exit status 1\nERROR: bad line\nmore")
	log.Debug("not shown")
	log.Info("source gc sweep", "deleted", 0)
	log.Warn("process crashed", "service", "default/web", "exitCode", 3, "restartIn", time.Second)
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	want := []*struct{ prefix, rest string }{
		{"  build succeeded   default/hello          ", "build=hello-build-0a1b2c3d4e took=2.1s"},
		{"  WARN build failed default/broken         ", `reason=BuildFailed error="pip install: exit status 1"`},
		{"", "          ERROR: bad line"},
		{"", "          more"},
		{"  source gc sweep", "                        deleted=0"},
		{"  WARN process crashed svc:default/web", "exitCode=3 restartIn=1s"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(got), len(want), out.String())
	}
	for i, w := range want {
		line := got[i]
		if w.prefix != "" {
			if len(line) < 8 || line[2] != ':' || !strings.HasPrefix(line[8:], w.prefix) {
				t.Errorf("line %d %q does not start with a time and %q", i, line, w.prefix)
			}
		}
		if !strings.HasSuffix(line, w.rest) {
			t.Errorf("line %d %q does not end with %q", i, line, w.rest)
		}
	}
}

// The functions' JSON lines show as their time, function, level, message
// and other fields, the request id last; other output as it is.
func TestPrettyLine(t *testing.T) {
	now := time.Date(2026, 12, 5, 14, 0, 0, 0, time.Local)
	for in, want := range map[string]string{
		`[default/hello] {"time":"2026-12-05T13:00:01.000Z","level":"info","msg":"request","requestId":"R1","status":200,"method":"GET"}`: time.Date(2026, 12, 5, 13, 0, 1, 0, time.UTC).Local().Format("15:04:05") +
			"  log info          default/hello          request method=GET status=200 requestId=R1",
		`[default/hello] {"time":"bad","level":"error","msg":"hi there","source":"function"}`: "14:00:00  log error         default/hello          hi there",
		`[default/hello] plain output`: "14:00:00  output            default/hello          plain output",
	} {
		if got := prettyLine(in, now); got != want {
			t.Errorf("prettyLine(%s)\n got %q\nwant %q", in, got, want)
		}
	}
}

func TestDevLoggerFormats(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for format, want := range map[string]string{"auto": "level=INFO", "text": "level=INFO", "json": `"level":"INFO"`, "pretty": "  hello\n"} {
		log, _, err := Terminal(format, f)
		if err != nil {
			t.Fatal(err)
		}
		off, _ := f.Seek(0, 2)
		log.Info("hello")
		b, _ := os.ReadFile(f.Name())
		if got := string(b[off:]); !strings.Contains(got, want) {
			t.Errorf("format %s wrote %q, want %q in it", format, got, want)
		}
	}
	if _, _, err := Terminal("xml", f); err == nil {
		t.Error("an unknown format is accepted")
	}
}
