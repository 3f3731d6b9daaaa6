package runtimes_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sless-dev/sless/runtimes"
)

// The benchmarks compare each wrapper with the smallest stdlib HTTP server of
// the same language, measured in the same run, and report the ratio as
// "x-baseline": start time (process start to a 200 from the health path) and
// warm request latency (sequential keep-alive requests).
//
//	go test -run '^$' -bench . -benchtime 20x ./runtimes/

const pythonBaseline = `
import json, os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    def log_message(self, *a): pass
    def do_GET(self):
        b = json.dumps({"ok": True}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()
`

const nodeBaseline = `
require('node:http').createServer((req, res) => {
  const b = JSON.stringify({ ok: true });
  res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(b) });
  res.end(b);
}).listen(Number(process.env.PORT), '127.0.0.1');
`

const goBaseline = `package main

import (
	"net/http"
	"os"
)

func main() {
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(` + "`" + `{"ok":true}` + "`" + `))
	})
	http.ListenAndServe("127.0.0.1:"+os.Getenv("PORT"), nil)
}
`

// server is something the benchmark can start on a port.
type server struct {
	name  string
	start func(b *testing.B) *instance
}

func baselineServer(b *testing.B, runtime string) server {
	dir := b.TempDir()
	var args []string
	switch runtime {
	case runtimes.Python312:
		p := filepath.Join(dir, "baseline.py")
		os.WriteFile(p, []byte(pythonBaseline), 0o644)
		py, err := exec.Command("python3", "-c", "import sys; print(sys.executable, end='')").Output()
		if err != nil {
			b.Fatal(err)
		}
		args = []string{string(py), p}
	case runtimes.NodeJS22:
		p := filepath.Join(dir, "baseline.js")
		os.WriteFile(p, []byte(nodeBaseline), 0o644)
		args = []string{"node", p}
	case runtimes.Go124:
		os.WriteFile(filepath.Join(dir, "main.go"), []byte(goBaseline), 0o644)
		os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module baseline\n\ngo 1.24\n"), 0o644)
		cmd := exec.Command("go", "build", "-trimpath", "-o", "baseline", ".")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("go build baseline: %v\n%s", err, out)
		}
		args = []string{filepath.Join(dir, "baseline")}
	}
	return server{name: "baseline", start: func(b *testing.B) *instance {
		port := freePort(b)
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
		return startProcess(b, cmd, port)
	}}
}

func wrapperServer(b *testing.B, tc conformanceCase) server {
	fn := prepare(b, tc.runtime, tc.entrypoint, conformanceFiles(b, tc.runtime))
	return server{name: "wrapper", start: func(b *testing.B) *instance {
		port := freePort(b)
		cmd, err := runtimes.LocalCommand(fn.dir, runtimes.LocalOptions{Port: port})
		if err != nil {
			b.Fatal(err)
		}
		return startProcess(b, cmd, port)
	}}
}

func startProcess(b *testing.B, cmd *exec.Cmd, port int) *instance {
	in := &instance{cmd: cmd, base: fmt.Sprintf("http://127.0.0.1:%d", port),
		stdout: &syncBuffer{}, stderr: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = in.stdout, in.stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() { in.err = cmd.Wait(); close(in.exited) }()
	return in
}

func (in *instance) kill() {
	in.cmd.Process.Kill()
	<-in.exited
}

// timeStart measures process start to health OK.
func timeStart(b *testing.B, s server) time.Duration {
	t0 := time.Now()
	in := s.start(b)
	defer in.kill()
	if err := in.waitHealthyFast(30 * time.Second); err != nil {
		b.Fatalf("%s: %v\n%s%s", s.name, err, in.stdout, in.stderr)
	}
	return time.Since(t0)
}

// waitHealthyFast polls every millisecond: start time is what is measured.
func (in *instance) waitHealthyFast(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	client := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-in.exited:
			return fmt.Errorf("process exited: %v", in.err)
		default:
		}
		if resp, err := client.Get(in.base + runtimes.HealthPath); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not healthy within %v", limit)
		}
		time.Sleep(time.Millisecond)
	}
}

func BenchmarkStart(b *testing.B) {
	requireTools(b, "python3", "node", "npm", "go")
	for _, tc := range conformanceCases {
		b.Run(tc.runtime, func(b *testing.B) {
			wrapper, baseline := wrapperServer(b, tc), baselineServer(b, tc.runtime)
			var tw, tb time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				tw += timeStart(b, wrapper)
				tb += timeStart(b, baseline)
			}
			b.StopTimer()
			b.ReportMetric(float64(tw.Microseconds())/float64(b.N)/1000, "ms-start")
			b.ReportMetric(float64(tb.Microseconds())/float64(b.N)/1000, "ms-baseline")
			b.ReportMetric(float64(tw)/float64(tb), "x-baseline")
		})
	}
}

func BenchmarkWarmRequest(b *testing.B) {
	requireTools(b, "python3", "node", "npm", "go")
	for _, tc := range conformanceCases {
		b.Run(tc.runtime, func(b *testing.B) {
			wrapper, baseline := wrapperServer(b, tc), baselineServer(b, tc.runtime)
			w, base := wrapper.start(b), baseline.start(b)
			defer w.kill()
			defer base.kill()
			for _, in := range []*instance{w, base} {
				if err := in.waitHealthyFast(30 * time.Second); err != nil {
					b.Fatal(err)
				}
			}
			// One keep-alive connection per server, each with its own client.
			clients := map[string]*http.Client{
				w.base:    {Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}},
				base.base: {Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}},
			}
			get := func(base string) {
				url := base + "/status"
				resp, err := clients[base].Get(url)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 201 && resp.StatusCode != 200 {
					b.Fatalf("%s: status %d", url, resp.StatusCode)
				}
			}
			for i := 0; i < 50; i++ { // warm up both
				get(w.base)
				get(base.base)
			}
			var tw, tb time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				get(w.base)
				t1 := time.Now()
				get(base.base)
				tw += t1.Sub(t0)
				tb += time.Since(t1)
			}
			b.StopTimer()
			b.ReportMetric(float64(tw.Nanoseconds())/float64(b.N)/1000, "us-req")
			b.ReportMetric(float64(tb.Nanoseconds())/float64(b.N)/1000, "us-baseline")
			b.ReportMetric(float64(tw)/float64(tb), "x-baseline")
		})
	}
}
