package invoke_bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sless-dev/sless/runtimes"
	"github.com/sless-dev/sless/test/testbed"
)

// The proxy benchmark runs every part as a process of its own, as they are
// in a cluster: the function server, the load generator and each hop (the
// relay, sless's proxy, a plain ReverseProxy; Knative's queue-proxy is its
// own binary). Each has its own Go runtime, and each hop's CPU is read from
// its own process. The test binary plays those parts when roleEnv names one.
const roleEnv = "SLESS_BENCH_ROLE"

// runRole serves the part roleEnv names and reports whether it did.
func runRole() bool {
	switch os.Getenv(roleEnv) {
	case "function":
		serveFunction()
	case "load":
		generateLoad()
	case "relay":
		serveHop(relayHandler)
	case "reverseproxy":
		serveHop(reverseProxyHandler)
	case "sless":
		serveSless()
	case "otlpsink":
		serveOTLPSink()
	default:
		return false
	}
	return true
}

var functionBody = []byte(`{"message":"hello from the function"}`)

// serveFunction answers every request with a small JSON body after
// SLESS_BENCH_DELAY (a function that waits on something, as most do), and
// prints its address on stdout.
func serveFunction() {
	delay, _ := time.ParseDuration(os.Getenv("SLESS_BENCH_DELAY"))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr().String())
	err = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if delay > 0 {
			time.Sleep(delay)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(functionBody)
	}))
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

// loadResult is what the load process reports for one run.
type loadResult struct {
	Done, Failed int64
	Elapsed      time.Duration
	P50, P99     time.Duration
	FirstError   string
	// Latencies are those of every call, for a run with one worker.
	Latencies []time.Duration `json:",omitempty"`
}

func (r loadResult) perSecond() float64 { return float64(r.Done) / r.Elapsed.Seconds() }

// generateLoad reads runs from stdin, one per line ("url workers
// duration"), sends GETs from that many keep-alive connections for that
// long, and writes a loadResult per run as a JSON line.
func generateLoad() {
	in := bufio.NewScanner(os.Stdin)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) != 3 {
			fmt.Fprintln(os.Stderr, "want: url workers duration")
			os.Exit(2)
		}
		workers, _ := strconv.Atoi(f[1])
		d, _ := time.ParseDuration(f[2])
		if err := out.Encode(load(f[0], workers, d)); err != nil {
			os.Exit(1)
		}
	}
}

// load runs workers callers, each with a keep-alive connection of its own,
// for d. Like wrk, a caller writes a request prepared once and reads the
// answer on its own goroutine, so that the load generator takes as little
// of the machine's CPU as it can from what is measured; net/http's Client
// passes each call between three goroutines and costs about as much CPU
// per call as a small function server.
func load(u string, workers int, d time.Duration) loadResult {
	var done, failed atomic.Int64
	var firstErr sync.Once
	var res loadResult
	fail := func(err error) {
		failed.Add(1)
		firstErr.Do(func() { res.FirstError = err.Error() })
	}
	target, err := url.Parse(u)
	if err != nil {
		fail(err)
		return res
	}
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		fail(err)
		return res
	}
	var wire bytes.Buffer
	if err := req.Write(&wire); err != nil {
		fail(err)
		return res
	}
	lat := make([][]time.Duration, workers)
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var c net.Conn
			var br *bufio.Reader
			for time.Now().Before(stop) {
				if c == nil {
					var err error // each caller's own: the function's err is shared
					if c, err = net.Dial("tcp", target.Host); err != nil {
						fail(err)
						return
					}
					br = bufio.NewReader(c)
				}
				t0 := time.Now()
				err := call(c, br, wire.Bytes(), req)
				if err != nil {
					fail(err)
					_ = c.Close()
					c = nil
					continue
				}
				lat[w] = append(lat[w], time.Since(t0))
				done.Add(1)
			}
			if c != nil {
				_ = c.Close()
			}
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	res.Done, res.Failed = done.Load(), failed.Load()
	all := slices.Concat(lat...)
	slices.Sort(all)
	res.P50, res.P99 = pct(all, .5), pct(all, .99)
	if workers == 1 {
		res.Latencies = all
	}
	return res
}

// call sends wire (req written out) on c and reads the whole answer, which
// must be 200 on a connection that stays open.
func call(c net.Conn, br *bufio.Reader, wire []byte, req *http.Request) error {
	if _, err := c.Write(wire); err != nil {
		return err
	}
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	switch {
	case err != nil:
		return err
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("status %d", resp.StatusCode)
	case resp.Close:
		return errors.New("the server closed the connection")
	}
	return nil
}

// child is a process of the test binary playing a role.
type child struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startChild(b testing.TB, role string, env ...string) *child {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(append(os.Environ(), roleEnv+"="+role), env...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = in.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return &child{cmd: cmd, in: in, out: bufio.NewReader(out)}
}

func (c *child) line(b testing.TB) string {
	b.Helper()
	s, err := c.out.ReadString('\n')
	if err != nil {
		b.Fatalf("child %s: %v", c.cmd.Env[len(c.cmd.Env)-1], err)
	}
	return strings.TrimSpace(s)
}

// run asks the load process for one run and waits for its result.
func (c *child) run(b testing.TB, url string, workers int, d time.Duration) loadResult {
	b.Helper()
	if _, err := fmt.Fprintf(c.in, "%s %d %s\n", url, workers, d); err != nil {
		b.Fatal(err)
	}
	var r loadResult
	if err := json.Unmarshal([]byte(c.line(b)), &r); err != nil {
		b.Fatal(err)
	}
	if r.Failed > 0 {
		b.Fatalf("%s: %d of %d requests failed, first: %s", url, r.Failed, r.Failed+r.Done, r.FirstError)
	}
	return r
}

// wrapper starts a runtime wrapper of this repository (runtimes/<script>)
// serving one file of code, as local mode runs it, and returns its address
// once it answers its health check.
func wrapper(interpreter, script, entrypoint, file, code string) func(testing.TB) string {
	return func(b testing.TB) string {
		b.Helper()
		bin, err := exec.LookPath(interpreter)
		if err != nil {
			b.Fatalf("%s is needed to serve the wrapper: %v", interpreter, err)
		}
		dir := b.TempDir()
		if err := os.WriteFile(filepath.Join(dir, file), []byte(code), 0o644); err != nil {
			b.Fatal(err)
		}
		port, err := testbed.FreePort()
		if err != nil {
			b.Fatal(err)
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		path, err := filepath.Abs(filepath.Join("..", "..", "runtimes", filepath.FromSlash(script)))
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(bin, path)
		cmd.Dir = dir
		cmd.Stderr = os.Stderr // its log of each request goes to stdout, unread
		cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port), "SLESS_LISTEN_HOST=127.0.0.1",
			"SLESS_ENTRYPOINT="+entrypoint, "SLESS_FUNCTION_DIR="+dir)
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			res, err := http.Get("http://" + addr + runtimes.HealthPath)
			if err == nil {
				res.Body.Close()
				if res.StatusCode == http.StatusOK {
					return addr
				}
			}
			if time.Now().After(deadline) {
				b.Fatalf("%s wrapper not healthy after 30 s: %v", interpreter, err)
			}
		}
	}
}
