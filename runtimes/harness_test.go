package runtimes_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/source"
	"github.com/sless-dev/sless/runtimes"
)

// requireTools fails (never skips) when a tool the runtimes need is missing:
// a conformance suite that silently ran nothing would prove nothing.
func requireTools(t testing.TB, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is required by the runtime conformance suite and is not on PATH: %v", tool, err)
		}
	}
}

// testdataFiles reads runtimes/testdata/<runtime> as source.Files.
func testdataFiles(t testing.TB, runtime string) source.Files {
	t.Helper()
	root := filepath.Join("testdata", runtime)
	files := source.Files{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		files[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// tinyWheel builds a pure-Python wheel of a package "tinydep" with
// shout(s) -> s.upper() + "!", so pip can install a requirement with no index.
func tinyWheel(t testing.TB) []byte {
	t.Helper()
	files := []struct{ name, body string }{
		{"tinydep/__init__.py", "def shout(s):\n    return s.upper() + \"!\"\n"},
		{"tinydep-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: tinydep\nVersion: 1.0\n"},
		{"tinydep-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: sless-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	for _, f := range files {
		w, err := zw.Create(f.name)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, f.body)
		sum := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.name, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.body))
	}
	record.WriteString("tinydep-1.0.dist-info/RECORD,,\n")
	w, _ := zw.Create("tinydep-1.0.dist-info/RECORD")
	io.WriteString(w, record.String())
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// unpack writes a build context's tar.gz into dir, as local mode does.
func unpack(t testing.TB, tgz []byte, dir string) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, os.FileMode(h.Mode)); err != nil {
			t.Fatal(err)
		}
	}
}

// prepared is a function's build context unpacked and set up in a directory.
type prepared struct {
	runtime string
	dir     string
}

// prepare builds the context with pkg/source, unpacks it and runs the
// dependency steps with runtimes.LocalSetup: the path local mode takes.
func prepare(t testing.TB, runtime, entrypoint string, files source.Files) prepared {
	t.Helper()
	bc, err := source.BuildContext(source.Input{Runtime: runtime, Entrypoint: entrypoint, Files: files})
	if err != nil {
		t.Fatalf("build context: %v", err)
	}
	dir := t.TempDir()
	unpack(t, bc.TarGz, dir)
	cmds, err := runtimes.LocalSetup(dir, runtimes.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range cmds {
		start := time.Now()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
		}
		t.Logf("%s: %s (%v)", runtime, strings.Join(cmd.Args, " "), time.Since(start).Round(time.Millisecond))
	}
	return prepared{runtime: runtime, dir: dir}
}

// syncBuffer collects a process's output for concurrent reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// instance is a running wrapper process.
type instance struct {
	cmd    *exec.Cmd
	base   string
	stdout *syncBuffer
	stderr *syncBuffer
	exited chan struct{}
	err    error
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// start serves the prepared function as local mode does and waits until its
// health path answers 200.
func (p prepared) start(t testing.TB, opts runtimes.LocalOptions) *instance {
	t.Helper()
	for attempt := 1; ; attempt++ {
		opts.Port = freePort(t)
		in := p.launch(t, opts)
		err := in.waitHealthy(30 * time.Second)
		if err == nil {
			return in
		}
		// freePort's port is free only when asked: a parallel test's
		// connection may take it before the process binds it.
		if attempt < 3 && in.portTaken() {
			continue
		}
		t.Fatalf("%s did not become healthy: %v\nstdout:\n%s\nstderr:\n%s", p.runtime, err, in.stdout, in.stderr)
	}
}

// launch starts the prepared function's process, stopped at t's end.
func (p prepared) launch(t testing.TB, opts runtimes.LocalOptions) *instance {
	t.Helper()
	cmd, err := runtimes.LocalCommand(p.dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	in := &instance{cmd: cmd, base: fmt.Sprintf("http://127.0.0.1:%d", opts.Port),
		stdout: &syncBuffer{}, stderr: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = in.stdout, in.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { in.err = cmd.Wait(); close(in.exited) }()
	t.Cleanup(func() {
		select {
		case <-in.exited:
		default:
			cmd.Process.Kill()
			<-in.exited
		}
		if t.Failed() {
			t.Logf("%s stdout:\n%s\nstderr:\n%s", p.runtime, in.stdout, in.stderr)
		}
	})
	return in
}

// portTaken reports whether the process exited because its port was in use.
func (in *instance) portTaken() bool {
	select {
	case <-in.exited:
	default:
		return false
	}
	out := in.stdout.String() + in.stderr.String()
	return strings.Contains(out, "address already in use") || strings.Contains(out, "EADDRINUSE")
}

// waitHealthy polls the health path until it answers 200, the process exits
// or the time is up.
func (in *instance) waitHealthy(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	client := &http.Client{Timeout: time.Second}
	for delay := 5 * time.Millisecond; ; delay = min(delay*2, 100*time.Millisecond) {
		select {
		case <-in.exited:
			return fmt.Errorf("process exited: %v", in.err)
		default:
		}
		resp, err := client.Get(in.base + runtimes.HealthPath)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no 200 from %s within %v (last error %v)", runtimes.HealthPath, limit, err)
		}
		time.Sleep(delay)
	}
}

// stop sends SIGTERM and waits for the exit code.
func (in *instance) stop(t testing.TB, limit time.Duration) int {
	t.Helper()
	if err := in.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-in.exited:
	case <-time.After(limit):
		t.Fatalf("process did not exit within %v of SIGTERM", limit)
	}
	return in.cmd.ProcessState.ExitCode()
}

// waitFor polls cond until it holds or the time is up.
func waitFor(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runJob runs the prepared function once in job mode.
func (p prepared) runJob(t testing.TB, payload string) (exitCode int, termination []byte, output string) {
	t.Helper()
	term := filepath.Join(t.TempDir(), "termination-log")
	cmd, err := runtimes.LocalJobCommand(p.dir, runtimes.LocalOptions{FunctionName: "job-fn"}, []byte(payload), term)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	job := exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
	job.Dir, job.Env = cmd.Dir, cmd.Env
	out, err := job.CombinedOutput()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("job: %v\n%s", err, out)
		}
		code = ee.ExitCode()
	}
	b, err := os.ReadFile(term)
	if err != nil {
		t.Fatalf("job wrote no termination message: %v\n%s", err, out)
	}
	return code, b, string(out)
}
