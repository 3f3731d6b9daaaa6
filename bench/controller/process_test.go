package controller

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sless-dev/sless/test/testbed"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// slessBinary builds ./cmd/sless once per test binary.
func slessBinary() (string, error) {
	binOnce.Do(func() {
		root, err := testbed.RepoRoot()
		if err != nil {
			binErr = err
			return
		}
		dir, err := os.MkdirTemp("", "sless-bench-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "sless")
		build := exec.Command("go", "build", "-o", binPath, "./cmd/sless")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build ./cmd/sless: %w\n%s", err, out)
		}
	})
	return binPath, binErr
}

// controllerSetup is how every controller process of a run is started.
type controllerSetup struct {
	kubeconfig string
	s3         *testbed.S3Server
	bucket     string
	// args are extra flags (SLESS_BENCH_CONTROLLER_ARGS), e.g. to try
	// another --concurrency or --kube-api-qps than the defaults.
	args []string
	// pprofDir, when set, receives CPU profiles of the controller.
	pprofDir string
	logDir   string
}

// controller is one running `sless controller`.
type controller struct {
	cmd     *exec.Cmd
	metrics string
	pprof   string
	log     string
	done    chan struct{}
	err     error

	profMu   sync.Mutex
	profStop chan struct{}
	profDone chan struct{}
}

// start runs the controller with its defaults but for the addresses and
// leader election, and returns once its informers are synced (readyz).
func (s controllerSetup) start(tb testing.TB, name string) *controller {
	tb.Helper()
	bin, err := slessBinary()
	if err != nil {
		tb.Fatal(err)
	}
	var ports [3]int
	for i := range ports {
		if ports[i], err = testbed.FreePort(); err != nil {
			tb.Fatal(err)
		}
	}
	c := &controller{
		metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[0]),
		pprof:   fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/", ports[2]),
		log:     filepath.Join(s.logDir, name+".log"),
		done:    make(chan struct{}),
	}
	logf, err := os.Create(c.log)
	if err != nil {
		tb.Fatal(err)
	}
	args := []string{"controller",
		"-metrics-bind-address", "127.0.0.1:" + strconv.Itoa(ports[0]),
		"-health-probe-bind-address", "127.0.0.1:" + strconv.Itoa(ports[1]),
		"-pprof-bind-address", "127.0.0.1:" + strconv.Itoa(ports[2]),
		"-leader-elect=false", "-source-gc-interval", "0",
		"-s3-endpoint", "http://" + s.s3.Endpoint, "-s3-bucket", s.bucket,
		"-registry", "registry.bench.local/sless", "-public-base-url", "https://fn.bench.local"}
	c.cmd = exec.Command(bin, append(args, s.args...)...)
	c.cmd.Env = append(os.Environ(), "KUBECONFIG="+s.kubeconfig,
		"SLESS_S3_ACCESS_KEY="+s.s3.AccessKey, "SLESS_S3_SECRET_KEY="+s.s3.SecretKey)
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		logf.Close()
		tb.Fatal(err)
	}
	go func() {
		c.err = c.cmd.Wait()
		logf.Close()
		close(c.done)
	}()
	tb.Cleanup(c.stop)
	ready := fmt.Sprintf("http://127.0.0.1:%d/readyz", ports[1])
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case <-c.done:
			tb.Fatalf("controller exited (%v) before it was ready:\n%s", c.err, c.tail())
		default:
		}
		if resp, err := http.Get(ready); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("controller not ready after 2 minutes:\n%s", c.tail())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if s.pprofDir != "" {
		c.profile(tb, filepath.Join(s.pprofDir, name))
	}
	return c
}

// profile takes consecutive 5 s CPU profiles until stop, into prefix-N.pprof;
// `go tool pprof` merges them.
func (c *controller) profile(tb testing.TB, prefix string) {
	c.profStop, c.profDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(c.profDone)
		for i := 0; ; i++ {
			select {
			case <-c.profStop:
				return
			default:
			}
			resp, err := http.Get(c.pprof + "profile?seconds=5")
			if err != nil {
				return
			}
			f, err := os.Create(fmt.Sprintf("%s-%02d.pprof", prefix, i))
			if err == nil {
				_, _ = io.Copy(f, resp.Body)
				f.Close()
			}
			resp.Body.Close()
		}
	}()
}

// pause stops the controller where it stands (SIGSTOP) until resume, so
// that upstream's work is timed without it and its caches and memory
// survive, as they do in a controller that keeps running.
func (c *controller) pause()  { _ = c.cmd.Process.Signal(syscall.SIGSTOP) }
func (c *controller) resume() { _ = c.cmd.Process.Signal(syscall.SIGCONT) }

func (c *controller) scrape(ctx context.Context) (samples, error) {
	return scrape(ctx, http.DefaultClient, c.metrics)
}

// stop ends the controller as a rollout would (SIGTERM), a kill after 30 s.
func (c *controller) stop() {
	if c.profStop != nil {
		c.profMu.Lock()
		select {
		case <-c.profStop:
		default:
			close(c.profStop)
		}
		c.profMu.Unlock()
	}
	select {
	case <-c.done:
		return
	default:
	}
	c.resume()
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
	if c.profDone != nil {
		<-c.profDone
	}
}

func (c *controller) tail() string {
	b, _ := os.ReadFile(c.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
}

// usage is what one or more controller processes did, from their /metrics.
type usage struct {
	cpu, heap          float64
	reconciles, errors float64
	requeues           float64
	reconcileSeconds   float64
	queueWaitSeconds   float64
	queueAdds          float64
	retries            float64
	requestsByMethod   map[string]float64
	conflicts          float64
}

func (u *usage) add(s samples) {
	fn := map[string]string{"controller": "function"}
	u.cpu += s.sum("process_cpu_seconds_total", nil)
	u.heap = max(u.heap, s.sum("go_memstats_heap_inuse_bytes", nil))
	u.reconciles += s.sum("controller_runtime_reconcile_total", fn)
	u.errors += s.sum("controller_runtime_reconcile_errors_total", fn)
	u.requeues += s.sum("controller_runtime_reconcile_total", map[string]string{"controller": "function", "result": "requeue"})
	u.reconcileSeconds += s.sum("controller_runtime_reconcile_time_seconds_sum", fn)
	u.queueWaitSeconds += s.sum("workqueue_queue_duration_seconds_sum", map[string]string{"name": "function"})
	u.queueAdds += s.sum("workqueue_adds_total", map[string]string{"name": "function"})
	if u.requestsByMethod == nil {
		u.requestsByMethod = map[string]float64{}
	}
	for k, v := range by(samples{}, s, "rest_client_requests_total", "method", "code") {
		u.requestsByMethod[k] += v
		if strings.HasSuffix(k, " 409") {
			u.conflicts += v
		}
	}
	u.retries += s.sum("workqueue_retries_total", map[string]string{"name": "function"})
}
