// Package localdev_test runs `sless dev` as a user does — the built binary,
// reached only over HTTP — and walks each runtime through a function's life:
// upload, create, Ready, invoke, scale to zero, cold start, a code update
// under load, records, delete.
package localdev_test

import (
	"archive/zip"
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sless-dev/sless/test/testbed"
)

var slessBin string

func TestMain(m *testing.M) {
	// One place per user, rebuilt on every run: the binary outlives the run
	// (testbed.Main exits the process) but does not pile up.
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("sless-e2e-localdev-%d", os.Getuid()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		panic(err)
	}
	slessBin = filepath.Join(dir, "sless")
	build := exec.Command("go", "build", "-o", slessBin, "github.com/sless-dev/sless/cmd/sless")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building sless:", err)
		os.Exit(1)
	}
	// testbed stops the PostgreSQL it may start for the restart test.
	testbed.Main(m)
}

// dev is one running `sless dev`.
type dev struct {
	t      *testing.T
	cmd    *exec.Cmd
	base   string
	token  string
	data   string
	exited chan struct{}
}

// stop sends SIGTERM and waits for sless dev to exit.
func (d *dev) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		_ = d.cmd.Process.Kill()
		d.t.Error("sless dev did not stop within 30 s of SIGTERM")
	}
}

// startDev runs sless dev on a free port with its own data directory.
func startDev(t *testing.T, idle time.Duration) *dev {
	return startDevIn(t, t.TempDir(), idle)
}

// startDevIn runs sless dev on a free port with data in data.
func startDevIn(t *testing.T, data string, idle time.Duration, extra ...string) *dev {
	t.Helper()
	return startDevEnv(t, data, idle, nil, extra...)
}

// startDevEnv is startDevIn with env (KEY=VALUE) added to sless dev's environment.
func startDevEnv(t *testing.T, data string, idle time.Duration, env []string, extra ...string) *dev {
	t.Helper()
	token := "e2e-token-0123456789abcdef"
	cmd := exec.Command(slessBin, append([]string{"dev", "--addr", "127.0.0.1:0", "--data-dir", data,
		"--idle-timeout", idle.String(), "--dev-token", token}, extra...)...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	// Its stdout is kept in the data directory too, for the tests that
	// look for what it must never print.
	stdout, err := os.OpenFile(filepath.Join(data, "e2e-dev.out"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdout.Close() })
	cmd.Stdout = stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &dev{t: t, cmd: cmd, token: token, data: data, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(d.exited) }()
	t.Cleanup(d.stop)
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		logf, _ := os.OpenFile(filepath.Join(data, "e2e-dev.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		defer logf.Close()
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			if _, url, ok := strings.Cut(line, "sless dev: serving on "); ok {
				found <- url
			}
		}
	}()
	select {
	case d.base = <-found:
	case <-time.After(60 * time.Second):
		t.Fatal("sless dev did not report serving within 60 s")
	}
	return d
}

func (d *dev) do(method, path, contentType string, body []byte) (int, []byte) {
	d.t.Helper()
	req, err := http.NewRequest(method, d.base+path, bytes.NewReader(body))
	if err != nil {
		d.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+d.token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// children lists the processes sless dev started (the function wrappers).
func (d *dev) children() []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 && fields[0] != "Z" && fields[1] == strconv.Itoa(d.cmd.Process.Pid) {
			out = append(out, pid)
		}
	}
	return out
}

type fnStatus struct {
	Metadata struct {
		Generation int64 `json:"generation"`
	} `json:"metadata"`
	Status struct {
		ObservedGeneration  int64  `json:"observedGeneration"`
		Phase               string `json:"phase"`
		URL                 string `json:"url"`
		LatestReadyRevision string `json:"latestReadyRevision"`
		Conditions          []struct {
			Type, Status, Reason, Message string
		} `json:"conditions"`
	} `json:"status"`
}

func (d *dev) awaitReady(ns, name string, within time.Duration) fnStatus {
	d.t.Helper()
	deadline := time.Now().Add(within)
	var fn fnStatus
	for {
		code, b := d.do("GET", "/v1/namespaces/"+ns+"/functions/"+name, "", nil)
		if code != 200 {
			d.t.Fatalf("GET function: %d %s", code, b)
		}
		fn = fnStatus{}
		_ = json.Unmarshal(b, &fn)
		if fn.Status.ObservedGeneration == fn.Metadata.Generation {
			switch fn.Status.Phase {
			case "Ready":
				return fn
			case "Failed":
				d.t.Fatalf("function failed: %s", b)
			}
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("function not Ready within %s: %s", within, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func zipOf(t *testing.T, files map[string]string) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, body)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type runtimeCase struct {
	runtime, entrypoint string
	code                func(version string) map[string]string
}

var runtimeCases = []runtimeCase{
	{"python3.12", "main.handler", func(v string) map[string]string {
		return map[string]string{"main.py": "def handler(event, context):\n    return {'version': '" + v + "', 'name': event['query'].get('name', '')}\n"}
	}},
	{"nodejs22", "index.handler", func(v string) map[string]string {
		return map[string]string{"index.js": "exports.handler = async (event) => ({version: '" + v + "', name: event.query.name || ''});\n"}
	}},
	{"go1.24", "hello.Handle", func(v string) map[string]string {
		return map[string]string{
			"go.mod": "module example.com/hello\n\ngo 1.24\n",
			"hello.go": "package hello\n\nimport \"context\"\n\ntype Event struct {\n\tQuery map[string]string `json:\"query\"`\n}\n\n" +
				"func Handle(ctx context.Context, ev Event) (map[string]string, error) {\n\treturn map[string]string{\"version\": \"" + v + "\", \"name\": ev.Query[\"name\"]}, nil\n}\n",
		}
	}},
}

func TestFunctionLifecycleThroughHTTP(t *testing.T) {
	const idle = 2 * time.Second
	d := startDev(t, idle)
	calls := 0
	for _, rc := range runtimeCases {
		t.Run(rc.runtime, func(t *testing.T) {
			d.t = t
			calls += lifecycle(t, d, rc, idle)
		})
	}
	d.t = t
	if t.Failed() {
		return
	}
	// /metrics counts what the records show: every call answered by its
	// function, one cold start per runtime, every record written.
	code, b := d.do("GET", "/metrics", "", nil)
	if code != 200 {
		t.Fatalf("metrics: %d %s", code, b)
	}
	for series, atLeast := range map[string]int{
		`sless_invoke_requests_total{class="2xx",source="function"}`: calls,
		`sless_invoke_cold_starts_total`:                             len(runtimeCases),
		`sless_invocation_records_written_total`:                     calls,
	} {
		if got := metricValue(string(b), series); got < float64(atLeast) {
			t.Errorf("%s = %v, want at least %d", series, got, atLeast)
		}
	}
}

// metricValue is the value of one series in a Prometheus text exposition
// (-1 when it is missing).
func metricValue(exposition, series string) float64 {
	for _, line := range strings.Split(exposition, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

type answer struct {
	Version string `json:"version"`
	Name    string `json:"name"`
}

// lifecycle runs one runtime's function through its life and returns the
// calls it made that its function answered.
func lifecycle(t *testing.T, d *dev, rc runtimeCase, idle time.Duration) int {
	ns := "e2e"
	name := "fn-" + strings.NewReplacer(".", "", "python", "py", "nodejs", "node").Replace(rc.runtime)
	item := "/v1/namespaces/" + ns + "/functions/" + name
	invokePath := "/fn/" + ns + "/" + name + "?name=ada"
	calls := 0
	invoke := func() answer {
		t.Helper()
		code, b := d.do("GET", invokePath, "", nil)
		calls++
		var a answer
		if code != 200 || json.Unmarshal(b, &a) != nil {
			t.Fatalf("invoke: %d %s", code, b)
		}
		return a
	}

	// Upload the zip first: for a function not created yet the answer names
	// the archive to create it with.
	code, b := d.do("PUT", item+"/source", "application/zip", zipOf(t, rc.code("v1")))
	if code != 200 && code != 201 {
		t.Fatalf("upload: %d %s", code, b)
	}
	var up struct {
		Archive map[string]string `json:"archive"`
	}
	if err := json.Unmarshal(b, &up); err != nil || up.Archive["sha256"] == "" {
		t.Fatalf("upload answer: %s", b)
	}
	body, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{"runtime": rc.runtime, "entrypoint": rc.entrypoint,
			"source": map[string]any{"archive": up.Archive}},
	})
	if code, b := d.do("POST", "/v1/namespaces/"+ns+"/functions", "application/json", body); code != 201 {
		t.Fatalf("create: %d %s", code, b)
	}
	fn := d.awaitReady(ns, name, 5*time.Minute)
	// sless dev serves each function at its own host under fn.localhost.
	if want := "http://" + name + "." + ns + ".fn.localhost:" + d.base[strings.LastIndexByte(d.base, ':')+1:]; fn.Status.URL != want {
		t.Fatalf("status.url = %q, want %q", fn.Status.URL, want)
	}
	if a := invoke(); a.Version != "v1" || a.Name != "ada" {
		t.Fatalf("first answer: %+v", a)
	}

	// Idle past the timeout: the process is gone.
	if len(d.children()) == 0 {
		t.Fatal("no function process runs after a call")
	}
	deadline := time.Now().Add(idle + 10*time.Second)
	for len(d.children()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("function processes %v still run %s after the last call", d.children(), idle+10*time.Second)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The next call starts it again and is answered correctly.
	start := time.Now()
	if a := invoke(); a.Version != "v1" {
		t.Fatalf("cold answer: %+v", a)
	}
	t.Logf("%s: cold start through sless dev took %s", rc.runtime, time.Since(start).Round(time.Millisecond))

	// Update the code while a load loop runs: the new code answers and no
	// call fails across the switch.
	var loopCalls, failures atomic.Int64
	var sawV2 atomic.Bool
	var firstFailure atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := &http.Client{Timeout: 60 * time.Second}
			for {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest("GET", d.base+invokePath, nil)
				req.Header.Set("Authorization", "Bearer "+d.token)
				resp, err := client.Do(req)
				loopCalls.Add(1)
				if err != nil {
					failures.Add(1)
					firstFailure.CompareAndSwap(nil, err.Error())
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				var a answer
				if resp.StatusCode != 200 || json.Unmarshal(b, &a) != nil {
					failures.Add(1)
					firstFailure.CompareAndSwap(nil, fmt.Sprintf("%d %s", resp.StatusCode, b))
					continue
				}
				if a.Version == "v2" {
					sawV2.Store(true)
				}
			}
		}()
	}
	if code, b := d.do("PUT", item+"/source", "application/zip", zipOf(t, rc.code("v2"))); code != 200 {
		close(stop)
		wg.Wait()
		t.Fatalf("upload v2: %d %s", code, b)
	}
	d.awaitReady(ns, name, 5*time.Minute)
	deadline = time.Now().Add(30 * time.Second)
	for !sawV2.Load() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	calls += int(loopCalls.Load())
	if n := failures.Load(); n > 0 {
		t.Fatalf("%d of %d calls failed across the code update; first: %v", n, loopCalls.Load(), firstFailure.Load())
	}
	if !sawV2.Load() {
		t.Fatal("the new code never answered")
	}
	if a := invoke(); a.Version != "v2" {
		t.Fatalf("after the update: %+v", a)
	}
	t.Logf("%s: %d calls across the code update, none failed", rc.runtime, loopCalls.Load())

	// Every call is listed through the invocations API (the recorder writes
	// in the background, so wait for the count), the cold one marked.
	var records []struct {
		Status    int  `json:"status"`
		ColdStart bool `json:"coldStart"`
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		records = records[:0]
		cursor := ""
		for {
			path := item + "/invocations?limit=1000"
			if cursor != "" {
				path += "&cursor=" + cursor
			}
			code, b := d.do("GET", path, "", nil)
			if code != 200 {
				t.Fatalf("invocations: %d %s", code, b)
			}
			var page struct {
				Items []struct {
					Status    int  `json:"status"`
					ColdStart bool `json:"coldStart"`
				} `json:"items"`
				Next string `json:"next"`
			}
			_ = json.Unmarshal(b, &page)
			records = append(records, page.Items...)
			if cursor = page.Next; cursor == "" {
				break
			}
		}
		if len(records) >= calls || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(records) != calls {
		t.Fatalf("%d invocation records, want %d", len(records), calls)
	}
	colds := 0
	for _, r := range records {
		if r.Status != 200 {
			t.Fatalf("a record has status %d", r.Status)
		}
		if r.ColdStart {
			colds++
		}
	}
	// The first call found the instance the rollout started to prove the
	// revision; the call after idling had to wait for a start.
	if colds != 1 {
		t.Fatalf("%d cold-start records, want 1 (the call after idling)", colds)
	}

	// Delete: the function and its route are gone, and so are its processes.
	// 202 while the finalizer still holds it, 204 when the controller had
	// already cleaned up by the time the API looked again (docs/api.md).
	if code, b := d.do("DELETE", item, "", nil); code != 202 && code != 204 {
		t.Fatalf("delete: %d %s", code, b)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		code, _ := d.do("GET", item, "", nil)
		if code == 404 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("function still there 30 s after delete (GET %d)", code)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, b := d.do("GET", invokePath, "", nil); code != 404 {
		t.Fatalf("invoke after delete: %d %s", code, b)
	}
	deadline = time.Now().Add(15 * time.Second)
	for len(d.children()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("processes %v survive their deleted function", d.children())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return calls
}
