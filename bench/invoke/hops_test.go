package invoke_bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/adapter/postgres"
	"github.com/sless-dev/sless/pkg/framing"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/tracing"
	"github.com/sless-dev/sless/test/testbed"
)

// Environment of the hop processes.
const (
	targetEnv  = "SLESS_BENCH_TARGET"   // host:port of the function server
	dbEnv      = "SLESS_BENCH_DB"       // PostgreSQL URL sless records into
	fnEnv      = "SLESS_BENCH_FUNCTION" // the function's name in namespace bench
	profileEnv = "SLESS_BENCH_PROFILE"  // a directory: sless writes CPU and alloc profiles there
)

// serveHop serves the handler mk makes for the target on a loopback port,
// prints the address and serves until killed.
func serveHop(mk func(target string) http.Handler) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	h := mk(os.Getenv(targetEnv))
	fmt.Println(ln.Addr().String())
	if s, ok := h.(*rawRelay); ok {
		s.serve(ln)
	} else {
		err = (&http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}).Serve(ln)
	}
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

// rawRelay is the cheapest hop a proxy can be, and so the floor under every
// proxy's cost on this machine: it copies bytes between the caller's
// connection and one it opens to the function, parsing nothing.
type rawRelay struct{ target string }

func (*rawRelay) ServeHTTP(http.ResponseWriter, *http.Request) {}

func relayHandler(target string) http.Handler { return &rawRelay{target} }

func (r *rawRelay) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			f, err := net.Dial("tcp", r.target)
			if err != nil {
				return
			}
			defer f.Close()
			go func() { _, _ = io.Copy(f, c); _ = f.(*net.TCPConn).CloseWrite() }()
			_, _ = io.Copy(c, f)
		}()
	}
}

// reverseProxyHandler is net/http's ReverseProxy as its documentation
// shows it, with only the idle pool widened to the 32 callers (the default
// two idle connections per host would make it dial for most calls).
func reverseProxyHandler(target string) http.Handler {
	u := &url.URL{Scheme: "http", Host: target}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 512
	return &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.SetXForwarded() },
		Transport: t,
	}
}

// serveSless serves sless's invoke proxy as `sless api` does (behind
// pkg/framing's listener, with its metrics), recording every call into
// PostgreSQL. After printing its address it takes commands on stdin:
// "drain" answers "ok" once every record is stored; "close" stops the
// recorder and answers its counts as JSON.
func serveSless() {
	fail := func(err error) { fmt.Fprintln(os.Stderr, "sless hop:", err); os.Exit(1) }
	if dir := os.Getenv(profileEnv); dir != "" {
		f, err := os.Create(filepath.Join(dir, "cpu.pprof"))
		if err != nil {
			fail(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fail(err)
		}
	}
	store, err := postgres.Open(os.Getenv(dbEnv))
	if err != nil {
		fail(err)
	}
	metrics, err := invoke.NewMetrics(nil)
	if err != nil {
		fail(err)
	}
	rec := invoke.NewRecorder(store, invoke.RecorderOptions{Metrics: metrics})
	// Tracing as sless api sets it up: from the OTEL_* variables, off
	// without an endpoint (BenchmarkProxyTracing sets them).
	tr, err := tracing.Setup(context.Background(), tracing.Options{Service: "sless-bench"})
	if err != nil {
		fail(err)
	}
	fn := os.Getenv(fnEnv)
	proxy, err := invoke.NewProxy(invoke.Options{Recorder: rec, Metrics: metrics, TracerProvider: tr.Provider(), Resolver: fixed{
		"bench/" + fn: {Address: &url.URL{Scheme: "http", Host: os.Getenv(targetEnv)}, Ready: true, Public: true,
			Revision: fn + "-00001", Timeout: 30 * time.Second},
	}})
	if err != nil {
		fail(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(err)
	}
	fmt.Println(ln.Addr().String())
	go func() {
		fail(framing.Serve(&http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 90 * time.Second}, ln))
	}()
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch in.Text() {
		case "drain":
			for rec.Depth() > 0 {
				time.Sleep(5 * time.Millisecond)
			}
			fmt.Println("ok")
		case "close":
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			err := rec.Close(ctx)
			if terr := tr.Shutdown(ctx); err == nil {
				err = terr
			}
			cancel()
			if dir := os.Getenv(profileEnv); dir != "" {
				pprof.StopCPUProfile()
				if f, err := os.Create(filepath.Join(dir, "allocs.pprof")); err == nil {
					_ = pprof.Lookup("allocs").WriteTo(f, 0)
					_ = f.Close()
				}
			}
			out, _ := json.Marshal(slessCounts{Written: rec.Written(), Dropped: rec.Dropped(), Err: errString(err)})
			fmt.Println(string(out))
		}
	}
	os.Exit(0)
}

type slessCounts struct {
	Written, Dropped int64
	Err              string
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// drain waits until the sless hop has stored every record it holds.
func (c *child) drain(tb testing.TB) {
	tb.Helper()
	if _, err := fmt.Fprintln(c.in, "drain"); err != nil {
		tb.Fatal(err)
	}
	if l := c.line(tb); l != "ok" {
		tb.Fatalf("sless hop answered %q to drain", l)
	}
}

// closeRecorder stops the sless hop's recorder and returns its counts.
func (c *child) closeRecorder(tb testing.TB) slessCounts {
	tb.Helper()
	var n slessCounts
	c.ask(tb, "close", &n)
	return n
}

// ask sends a child the command line and reads its JSON answer into v.
func (c *child) ask(tb testing.TB, line string, v any) {
	tb.Helper()
	if _, err := fmt.Fprintln(c.in, line); err != nil {
		tb.Fatal(err)
	}
	if err := json.Unmarshal([]byte(c.line(tb)), v); err != nil {
		tb.Fatal(err)
	}
}

// clockTick is the unit of /proc/*/stat's CPU times: USER_HZ, 100 on every
// Linux architecture Go runs on.
const clockTick = 10 * time.Millisecond

// processCPU is the CPU time, user and system, process pid has used.
func processCPU(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		tb.Fatalf("reading the CPU time of process %d: %v", pid, err)
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: state is the first, utime the 12th, stime the 13th.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		tb.Fatalf("/proc/%d/stat has %d fields after the name", pid, len(f))
	}
	user, err1 := strconv.ParseInt(f[11], 10, 64)
	sys, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		tb.Fatalf("/proc/%d/stat: utime %q, stime %q", pid, f[11], f[12])
	}
	return time.Duration(user+sys) * clockTick
}

// queueProxyLock serialises Knative's queue-proxy across the machine: it
// binds fixed ports on every interface besides the one it is given (8022
// for its admin API, 9090 for the autoscaler's metrics; nothing moves
// them), so two cannot run at once.
const queueProxyLock = "/tmp/sless-bench-knative-queue-proxy.lock"

// queueProxyBinary is Knative Serving's queue-proxy at the version go.mod
// pins, built by hack/test-assets.sh on first use.
func queueProxyBinary(tb testing.TB) string {
	tb.Helper()
	root, err := testbed.RepoRoot()
	if err != nil {
		tb.Fatal(err)
	}
	var out, errOut bytes.Buffer
	cmd := exec.Command("bash", filepath.Join(root, "hack", "test-assets.sh"), "queue-proxy")
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		tb.Fatalf("hack/test-assets.sh queue-proxy (builds Knative's queue-proxy from the module proxy): %v\n%s", err, errOut.String())
	}
	return strings.TrimSpace(out.String())
}

// startQueueProxy runs Knative's queue-proxy in front of the function at
// target (a loopback address), as the sidecar of a revision with
// containerConcurrency 0 (no limit) and the release's defaults otherwise
// (no request metrics or traces exported), and returns its process and the
// address it serves on once it forwards a call. Only one runs at a time on
// the machine (queueProxyLock); stop it before starting the next.
func startQueueProxy(tb testing.TB, bin, target, fn string) (*exec.Cmd, string, func()) {
	tb.Helper()
	lock, err := os.OpenFile(queueProxyLock, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		tb.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		tb.Fatalf("locking %s: %v", queueProxyLock, err)
	}
	_, userPort, err := net.SplitHostPort(target)
	if err != nil {
		tb.Fatal(err)
	}
	port, err := testbed.FreePort()
	if err != nil {
		tb.Fatal(err)
	}
	tlsPort, err := testbed.FreePort()
	if err != nil {
		tb.Fatal(err)
	}
	logPath := filepath.Join(tb.TempDir(), "queue-proxy.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		tb.Fatal(err)
	}
	defer logFile.Close() // the process holds its own descriptor
	log := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	cmd := exec.Command(bin)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// What the revision's pod spec gives the queue-proxy container
	// (knative.dev/serving/pkg/reconciler/revision/resources/queue.go).
	cmd.Env = append(os.Environ(),
		"SERVING_NAMESPACE=bench", "SERVING_SERVICE="+fn, "SERVING_CONFIGURATION="+fn,
		"SERVING_REVISION="+fn+"-00001", "SERVING_POD="+fn+"-00001-deployment-bench", "SERVING_POD_IP=127.0.0.1",
		"QUEUE_SERVING_PORT="+strconv.Itoa(port), "QUEUE_SERVING_TLS_PORT="+strconv.Itoa(tlsPort),
		"USER_PORT="+userPort, "CONTAINER_CONCURRENCY=0", "REVISION_TIMEOUT_SECONDS=30",
		"SERVING_LOGGING_CONFIG=", "SERVING_LOGGING_LEVEL=error",
		"POD_NAME="+fn+"-00001-deployment-bench",
	)
	if err := cmd.Start(); err != nil {
		tb.Fatalf("starting %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			<-exited
			_ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
			_ = lock.Close()
		})
	}
	tb.Cleanup(stop)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		select {
		case <-exited:
			stop()
			tb.Fatalf("Knative's queue-proxy exited (ports 8022 and 9090 must be free): %s", log())
		default:
		}
		res, err := http.Get("http://" + addr + "/")
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return cmd, addr, stop
			}
		}
		if time.Now().After(deadline) {
			stop()
			tb.Fatalf("Knative's queue-proxy does not forward to %s after 30 s (%v): %s", target, err, log())
		}
	}
}
