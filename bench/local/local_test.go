// Package local_test benchmarks `sless dev` against the runtime wrappers on
// their own, measured in the same run:
//
//   - BenchmarkColdStart: a call to a function scaled to zero, through sless
//     dev, until its answer; as a ratio to starting the same wrapper as a
//     bare process and polling it until healthy.
//   - BenchmarkWarmInvoke: a call to a running function through sless dev
//     (REST API's invoke path, auth, proxy, recording); as a ratio to the
//     same call sent to the wrapper directly.
//
// Run: go test -run '^$' -bench . -benchtime 1x ./bench/local/
package local_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"

	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/adapter"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/local/blobs"
	"github.com/sless-dev/sless/pkg/local/build"
	"github.com/sless-dev/sless/pkg/source"
	"github.com/sless-dev/sless/runtimes"
)

const (
	coldRounds = 5
	warmCalls  = 400
	idle       = 400 * time.Millisecond
	token      = "bench-token-0123456789abcdef"
)

type fnCase struct {
	runtime, entrypoint string
	files               map[string]string
}

var cases = []fnCase{
	{"python3.12", "main.handler", map[string]string{"main.py": "def handler(event, context):\n    return {'ok': True}\n"}},
	{"nodejs22", "index.handler", map[string]string{"index.js": "exports.handler = async () => ({ok: true});\n"}},
	{"go1.24", "hello.Handle", map[string]string{
		"go.mod":   "module example.com/hello\n\ngo 1.24\n",
		"hello.go": "package hello\n\nimport \"context\"\n\nfunc Handle(ctx context.Context, ev map[string]any) (map[string]bool, error) {\n\treturn map[string]bool{\"ok\": true}, nil\n}\n",
	}},
}

// devServer is a running `sless dev` built from this tree.
type devServer struct {
	cmd      *exec.Cmd
	base     string
	deployed map[string]bool
}

func startDev(b testing.TB) *devServer {
	b.Helper()
	dir := b.TempDir()
	bin := filepath.Join(dir, "sless")
	build := exec.Command("go", "build", "-o", bin, "github.com/sless-dev/sless/cmd/sless")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		b.Fatalf("build sless: %v", err)
	}
	cmd := exec.Command(bin, "dev", "--addr", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"),
		"--idle-timeout", idle.String(), "--dev-token", token, "--quiet")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if _, u, ok := strings.Cut(sc.Text(), "sless dev: serving on "); ok {
				found <- u
			}
		}
	}()
	select {
	case u := <-found:
		return &devServer{cmd: cmd, base: u}
	case <-time.After(2 * time.Minute):
		b.Fatal("sless dev did not start")
	}
	return nil
}

func (d *devServer) do(b testing.TB, method, path string, body any) (int, []byte) {
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, d.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

// deploy creates a function with inline source and waits until it is Ready.
func (d *devServer) deploy(b testing.TB, name string, c fnCase) {
	code, raw := d.do(b, "POST", "/v1/namespaces/bench/functions", map[string]any{
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{"runtime": c.runtime, "entrypoint": c.entrypoint,
			"source": map[string]any{"inline": map[string]any{"files": c.files}}},
	})
	if code != 201 {
		b.Fatalf("create %s: %d %s", name, code, raw)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		_, raw := d.do(b, "GET", "/v1/namespaces/bench/functions/"+name, nil)
		var fn slessv1alpha1.Function
		_ = json.Unmarshal(raw, &fn)
		if fn.IsReady() {
			return
		}
		if fn.Status.Phase == slessv1alpha1.FunctionPhaseFailed {
			b.Fatalf("%s failed: %s", name, raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.Fatalf("%s not ready", name)
}

// deployOnce deploys c as name unless this dev server has it already:
// a benchmark's rounds share one deployment.
func (d *devServer) deployOnce(b testing.TB, name string, c fnCase) {
	if d.deployed == nil {
		d.deployed = map[string]bool{}
	}
	if !d.deployed[name] {
		d.deploy(b, name, c)
		d.deployed[name] = true
	}
}

// children counts the live processes sless dev started.
func (d *devServer) children() int {
	ents, _ := os.ReadDir("/proc")
	n := 0
	ppid := strconv.Itoa(d.cmd.Process.Pid)
	for _, e := range ents {
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(stat)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[0] != "Z" && f[1] == ppid {
			n++
		}
	}
	return n
}

// built unpacks and sets up a function's build context with the local
// builder, for the bare-wrapper baselines.
func built(b testing.TB, c fnCase) string {
	dir := b.TempDir()
	bc, err := source.BuildContext(source.Input{Runtime: c.runtime, Entrypoint: c.entrypoint, Files: source.Inline(c.files)})
	if err != nil {
		b.Fatal(err)
	}
	blobs, _ := blobs.New(filepath.Join(dir, "blobs"))
	key := "ctx.tar.gz"
	if err := blobs.Put(context.Background(), key, bytes.NewReader(bc.TarGz), int64(len(bc.TarGz)), ""); err != nil {
		b.Fatal(err)
	}
	bl, err := build.New(filepath.Join(dir, "builds"), runtimes.LocalOptions{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer bl.Close()
	fn := &slessv1alpha1.Function{}
	fn.Namespace, fn.Name = "bench", "bare"
	in := adapter.BuildInput{Digest: bc.Digest, Location: blobs.Location(key)}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		st, err := bl.EnsureBuild(context.Background(), fn, in)
		if err != nil {
			b.Fatal(err)
		}
		if st.Done {
			if !st.Succeeded {
				b.Fatalf("build: %+v", st)
			}
			d, err := bl.Dir(st.Image)
			if err != nil {
				b.Fatal(err)
			}
			return d
		}
		if time.Now().After(deadline) {
			b.Fatal("build timed out")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// bareStart starts the wrapper on a free port and returns once it is healthy.
func bareStart(b testing.TB, dir string) (*exec.Cmd, string, time.Duration) {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd, err := runtimes.LocalCommand(dir, runtimes.LocalOptions{Port: port, FunctionName: "bare", Namespace: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	u := "http://127.0.0.1:" + strconv.Itoa(port)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	for {
		resp, err := client.Get(u + runtimes.HealthPath)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return cmd, u, time.Since(start)
			}
		}
		if time.Since(start) > time.Minute {
			b.Fatal("bare wrapper not healthy within a minute")
		}
		time.Sleep(time.Millisecond)
	}
}

func stopBare(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func BenchmarkColdStart(b *testing.B) {
	d := startDev(b)
	for _, c := range cases {
		b.Run(c.runtime, func(b *testing.B) {
			var cold, bare []time.Duration
			for i := 0; i < b.N; i++ {
				cs, bs := coldStarts(b, d, c, coldRounds)
				cold, bare = append(cold, cs...), append(bare, bs...)
			}
			mc, mb := median(cold), median(bare)
			b.ReportMetric(ms(mc), "cold-ms")
			b.ReportMetric(ms(mb), "bare-start-ms")
			b.ReportMetric(float64(mc)/float64(mb), "cold/bare")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// coldStarts deploys c (once per dev server) and times rounds cold calls
// through sless dev, each after the function scaled to zero, and as many
// starts of the same wrapper as a bare process.
func coldStarts(tb testing.TB, d *devServer, c fnCase, rounds int) (cold, bare []time.Duration) {
	name := "cold-" + strings.NewReplacer(".", "", "python", "py", "nodejs", "node").Replace(c.runtime)
	d.deployOnce(tb, name, c)
	dir := built(tb, c)
	for r := 0; r < rounds; r++ {
		// Through sless dev: wait for scale to zero, then call.
		deadline := time.Now().Add(30 * time.Second)
		for d.children() > 0 {
			if time.Now().After(deadline) {
				tb.Fatal("the function did not scale to zero")
			}
			time.Sleep(20 * time.Millisecond)
		}
		start := time.Now()
		code, raw := d.do(tb, "GET", "/fn/bench/"+name, nil)
		if code != 200 {
			tb.Fatalf("cold call: %d %s", code, raw)
		}
		cold = append(cold, time.Since(start))
		// The same wrapper as a bare process, start to healthy.
		cmd, _, took := bareStart(tb, dir)
		bare = append(bare, took)
		stopBare(cmd)
	}
	return cold, bare
}

func BenchmarkWarmInvoke(b *testing.B) {
	d := startDev(b)
	for _, c := range cases {
		b.Run(c.runtime, func(b *testing.B) {
			var viaDev, viaDirect time.Duration
			for i := 0; i < b.N; i++ {
				dev, direct := warmInvokes(b, d, c, warmCalls)
				viaDev, viaDirect = viaDev+dev, viaDirect+direct
			}
			n := float64(b.N * warmCalls)
			b.ReportMetric(float64(viaDev.Microseconds())/n, "dev-us/call")
			b.ReportMetric(float64(viaDirect.Microseconds())/n, "direct-us/call")
			b.ReportMetric(float64(viaDev)/float64(viaDirect), "dev/direct")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// warmInvokes deploys c (once per dev server) and times calls calls to it
// through sless dev and as many to the same wrapper run bare, interleaved
// in blocks so that drift in the machine's load hits both.
func warmInvokes(tb testing.TB, d *devServer, c fnCase, calls int) (viaDev, viaDirect time.Duration) {
	name := "warm-" + strings.NewReplacer(".", "", "python", "py", "nodejs", "node").Replace(c.runtime)
	d.deployOnce(tb, name, c)
	dir := built(tb, c)
	cmd, direct, _ := bareStart(tb, dir)
	defer stopBare(cmd)
	client := &http.Client{}
	call := func(u string, auth bool) {
		req, _ := http.NewRequest("GET", u, nil)
		if auth {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			tb.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			tb.Fatalf("GET %s: %d", u, resp.StatusCode)
		}
	}
	devURL := d.base + "/fn/bench/" + name + "/"
	// Warm both up (and keep the function from idling: calls are
	// far closer together than the idle timeout).
	for i := 0; i < 20; i++ {
		call(devURL, true)
		call(direct+"/", false)
	}
	for blk := 0; blk < 4; blk++ {
		start := time.Now()
		for j := 0; j < calls/4; j++ {
			call(direct+"/", false)
		}
		viaDirect += time.Since(start)
		start = time.Now()
		for j := 0; j < calls/4; j++ {
			call(devURL, true)
		}
		viaDev += time.Since(start)
	}
	return viaDev, viaDirect
}

// TestBenchSmoke runs both benchmarks' code paths on the Python runtime
// with a few calls, so that they cannot rot; the numbers are for the
// README, not for a test.
func TestBenchSmoke(t *testing.T) {
	d := startDev(t)
	cold, bare := coldStarts(t, d, cases[0], 1)
	dev, direct := warmInvokes(t, d, cases[0], 20)
	t.Logf("%s: cold call %v, bare start %v; 20 warm calls through sless dev %v, direct %v", cases[0].runtime, cold, bare, dev, direct)
	if len(cold) != 1 || len(bare) != 1 || cold[0] <= 0 || bare[0] <= 0 || dev <= 0 || direct <= 0 {
		t.Errorf("not every number measured: cold %v, bare %v, dev %v, direct %v", cold, bare, dev, direct)
	}
}
