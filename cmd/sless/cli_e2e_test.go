package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/client"
	"github.com/sless-dev/sless/test/testbed"
)

var (
	slessBinOnce sync.Once
	slessBin     string
	slessBinErr  error
)

// builtSless builds the sless binary once per test run, stamped as
// `make build` stamps it.
func builtSless(t *testing.T) string {
	t.Helper()
	slessBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sless-cli-test-")
		if err != nil {
			slessBinErr = err
			return
		}
		slessBin = filepath.Join(dir, "sless")
		out, err := exec.Command("go", "build", "-ldflags", "-X main.version=v0.0.0-test -X main.commit=abc123", "-o", slessBin, ".").CombinedOutput()
		if err != nil {
			slessBinErr = errors.New("go build: " + err.Error() + "\n" + string(out))
		}
	})
	if slessBinErr != nil {
		t.Fatal(slessBinErr)
	}
	return slessBin
}

// cli runs the built binary with env, as a user's shell would.
type cli struct {
	t   *testing.T
	bin string
	dir string
	env []string
}

type result struct {
	stdout, stderr string
	code           int
}

func (c *cli) run(args ...string) result {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Dir, cmd.Env = c.dir, c.env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatalf("sless %q: %v", args, err)
	}
	return result{out.String(), errb.String(), code}
}

// ok runs args and wants exit 0.
func (c *cli) ok(args ...string) result {
	c.t.Helper()
	r := c.run(args...)
	if r.code != 0 {
		c.t.Fatalf("sless %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// Every subcommand answers -h and --help with its usage on stdout, exit 0.
func TestEverySubcommandHelps(t *testing.T) {
	c := &cli{t: t, bin: builtSless(t), dir: t.TempDir(), env: os.Environ()}
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, h := range []string{"-h", "--help"} {
			r := c.run(n, h)
			if r.code != 0 || !strings.HasPrefix(r.stdout, "usage: sless "+n) {
				t.Errorf("sless %s %s: exit %d, stdout %q, stderr %q; want usage on stdout and exit 0", n, h, r.code, r.stdout, r.stderr)
			}
		}
	}
	if r := c.run("help", "deploy"); r.code != 0 || !strings.HasPrefix(r.stdout, "usage: sless deploy") {
		t.Errorf("sless help deploy: exit %d, %q", r.code, r.stdout)
	}
	if r := c.run("--help"); r.code != 0 || !strings.Contains(r.stderr, "invoke") {
		t.Errorf("sless --help: exit %d, %q", r.code, r.stderr)
	}
	if r := c.run("bogus"); r.code != 2 || !strings.Contains(r.stderr, `unknown command "bogus"`) {
		t.Errorf("sless bogus: exit %d, %q", r.code, r.stderr)
	}
	if r := c.ok("version"); !strings.HasPrefix(r.stdout, "sless v0.0.0-test (commit abc123, go") {
		t.Errorf("sless version: %q", r.stdout)
	}
}

// awaitMatch waits for re to match what buf holds.
func awaitMatch(t *testing.T, buf *testbed.SyncBuffer, re *regexp.Regexp, within time.Duration) string {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(50 * time.Millisecond) {
		if m := re.FindString(buf.String()); m != "" {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("no line matching %s within %s", re, within)
		}
	}
}

// A new user's whole loop against a live `sless dev`, through the built
// binary only: login, new, deploy, list, describe, invoke, history, logs,
// delete; a build that fails says why; and sless dev's terminal shows a
// line per build, rollout, process start and stop, and cold start.
func TestCLIAgainstSlessDev(t *testing.T) {
	bin := builtSless(t)
	home := t.TempDir()
	data := filepath.Join(home, "data")
	port, err := testbed.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	server := "http://127.0.0.1:" + strconv.Itoa(port)
	// A short idle timeout, so the test sees a process stop and a cold start.
	dev := exec.Command(bin, "dev", "--addr", "127.0.0.1:"+strconv.Itoa(port), "--data-dir", data,
		"--log-format", "pretty", "--idle-timeout", "4s")
	var devLog testbed.SyncBuffer
	dev.Stdout, dev.Stderr = &devLog, &devLog
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	devDone := make(chan error, 1)
	go func() { devDone <- dev.Wait() }()
	t.Cleanup(func() {
		dev.Process.Signal(os.Interrupt)
		select {
		case <-devDone:
		case <-time.After(20 * time.Second):
			dev.Process.Kill()
			<-devDone
		}
		if t.Failed() {
			t.Logf("sless dev's log:\n%s", devLog.String())
		}
	})
	env := append(os.Environ(), client.EnvConfig+"="+filepath.Join(home, "config", "sless"))
	env = withoutVars(env, client.EnvServer, client.EnvToken, client.EnvNamespace)
	c := &cli{t: t, bin: bin, dir: home, env: env}

	// Not logged in yet: the commands say how.
	if r := c.run("list"); r.code != 1 || !strings.Contains(r.stderr, "run sless login") {
		t.Fatalf("list before login: exit %d, %q", r.code, r.stderr)
	}
	// The token file appears once sless dev is up.
	tokenFile := filepath.Join(data, "dev-token")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if r := c.run("login", "--server", server, "--token-file", tokenFile); r.code == 0 {
			if !strings.Contains(r.stdout, "Logged in to "+server) {
				t.Fatalf("login: %q", r.stdout)
			}
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("login: exit %d, %q", r.code, r.stderr)
		}
	}
	if st, err := os.Stat(filepath.Join(home, "config", "sless")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the login file: %v, %v", st, err)
	}
	if r := c.run("login", "--server", server, "--token", "wrong-token-0123456789"); r.code != 1 || !strings.Contains(r.stderr, "401 Unauthorized") {
		t.Fatalf("login with a wrong token: exit %d, %q", r.code, r.stderr)
	}
	c.ok("login", "--dev", "--data-dir", data, "--server", server)

	// IoT devices: the password is printed once, never shown again.
	dr := c.ok("device", "create", "thermo", "--attribute", "room=kitchen")
	pw := between(dr.stdout, "password: ", "\n")
	if !strings.Contains(dr.stdout, "username: default/thermo") || len(pw) != 43 {
		t.Fatalf("device create: %q", dr.stdout)
	}
	if r := c.ok("device", "list"); !strings.Contains(r.stdout, "thermo") || !strings.Contains(r.stdout, "ENABLED") {
		t.Errorf("device list: %q", r.stdout)
	}
	if r := c.ok("device", "describe", "thermo"); !strings.Contains(r.stdout, "room=kitchen") || strings.Contains(r.stdout, pw) {
		t.Errorf("device describe: %q", r.stdout)
	}
	if r := c.ok("device", "rotate", "thermo"); between(r.stdout, "password: ", "\n") == pw {
		t.Errorf("device rotate gave the same password: %q", r.stdout)
	}
	c.ok("device", "disable", "thermo")
	if r := c.ok("device", "describe", "thermo", "-o", "json"); !strings.Contains(r.stdout, `"enabled": false`) {
		t.Errorf("disabled device: %q", r.stdout)
	}
	c.ok("device", "delete", "thermo")
	if r := c.run("device", "describe", "thermo"); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("describe of a deleted device: exit %d, %q", r.code, r.stderr)
	}

	c.ok("new", "--lang", "python", "hello")
	r := c.ok("deploy", "hello")
	// sless dev gives each function a host under fn.localhost.
	url := strings.TrimSpace(r.stdout)
	if !strings.HasPrefix(url, "http://hello.default.") {
		t.Fatalf("deploy printed %q, want the function's URL", r.stdout)
	}
	for _, want := range []string{"Created function hello.", "Building", "Ready "} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("deploy's progress %q lacks %q", r.stderr, want)
		}
	}
	// Deploying the same code again changes nothing and is Ready at once.
	if r := c.ok("deploy", "hello"); !strings.Contains(r.stderr, "already has this code") || strings.TrimSpace(r.stdout) != url {
		t.Errorf("a second deploy: %q / %q", r.stdout, r.stderr)
	}

	r = c.ok("list")
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 2 ||
		!strings.HasPrefix(lines[0], "NAME ") || !strings.Contains(lines[0], "PHASE") ||
		!strings.HasPrefix(lines[1], "hello ") || !strings.Contains(lines[1], "Ready") || !strings.Contains(lines[1], url) {
		t.Errorf("list:\n%s", r.stdout)
	}
	var listed client.List[slessv1alpha1.Function]
	if err := json.Unmarshal([]byte(c.ok("list", "-o", "json").stdout), &listed); err != nil || len(listed.Items) != 1 || listed.Items[0].Status.URL != url {
		t.Errorf("list -o json: %+v, %v", listed, err)
	}
	if r := c.ok("describe", "hello", "-o", "yaml"); !strings.Contains(r.stdout, "entrypoint: main.handler") || !strings.Contains(r.stdout, "phase: Ready") {
		t.Errorf("describe -o yaml:\n%s", r.stdout)
	}

	if r := c.ok("invoke", "hello", "-d", `{"name": "Ada"}`); strings.TrimSpace(r.stdout) != `{"message": "Hello, Ada!"}` {
		t.Errorf("invoke: %q", r.stdout)
	}
	r = c.ok("invoke", "hello", "-i", "--path", "/?name=Bo")
	if !strings.HasPrefix(r.stdout, "HTTP 200 OK\n") || !strings.Contains(r.stdout, "X-Request-Id: ") || !strings.HasSuffix(r.stdout, "\n\n"+`{"message": "Hello, Bo!"}`+"\n") {
		t.Errorf("invoke -i:\n%s", r.stdout)
	}
	reqID := between(r.stdout, "X-Request-Id: ", "\n")
	// A call sless refuses exits 1 with the problem as one line.
	if r := c.run("invoke", "nope"); r.code != 1 || !strings.Contains(r.stderr, "404 Not Found") || strings.Contains(r.stderr, "{") {
		t.Errorf("invoke of a missing function: exit %d, stderr %q", r.code, r.stderr)
	}

	// The calls are in the history, newest first, once the recorder wrote them.
	var hist client.List[client.Invocation]
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		hist = client.List[client.Invocation]{}
		if err := json.Unmarshal([]byte(c.ok("history", "hello", "-o", "json").stdout), &hist); err != nil {
			t.Fatal(err)
		}
		if len(hist.Items) >= 2 || time.Now().After(deadline) {
			break
		}
	}
	if len(hist.Items) != 2 || hist.Items[0].RequestID != reqID || hist.Items[0].Status != 200 || hist.Items[0].Trigger != "http" {
		t.Fatalf("history -o json: %+v, want the two calls, newest (%s) first", hist.Items, reqID)
	}
	if r := c.ok("history", "hello"); !strings.HasPrefix(r.stdout, "STARTED ") || !strings.Contains(r.stdout, reqID) {
		t.Errorf("history:\n%s", r.stdout)
	}
	if r := c.ok("history", "hello", "--status", "5xx"); !strings.Contains(r.stdout, "No invocations") {
		t.Errorf("history --status 5xx:\n%s", r.stdout)
	}
	r = c.ok("describe", "hello")
	for _, want := range []string{"Runtime:      python3.12", "URL:          " + url, "Conditions:", "BuildSucceeded", "Last invocations:", reqID} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("describe lacks %q:\n%s", want, r.stdout)
		}
	}

	// The function's output: one call's lines by its request id, the last
	// line, the build's output, and a follow that shows a new call's line.
	r = c.ok("logs", "hello", "--invocation", reqID)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) == 0 || !strings.Contains(r.stdout, `"msg": "request"`) {
		t.Errorf("logs --invocation %s:\n%s", reqID, r.stdout)
	}
	for _, l := range lines {
		if !strings.Contains(l, `"requestId": "`+reqID+`"`) {
			t.Errorf("logs --invocation %s shows another call's line: %s", reqID, l)
		}
	}
	if r := c.ok("logs", "hello", "--tail", "1", "--timestamps"); strings.Count(r.stdout, "\n") != 1 || !regexp.MustCompile(`^20\d\d-\d\d-\d\dT\S+Z \{`).MatchString(r.stdout) {
		t.Errorf("logs --tail 1 --timestamps:\n%s", r.stdout)
	}
	if r := c.ok("logs", "hello", "--build", "latest"); !strings.Contains(r.stdout, "$ ") {
		t.Errorf("logs --build latest:\n%s", r.stdout)
	}
	if r := c.run("logs", "hello", "--tail", "x"); r.code != 1 && r.code != 2 {
		t.Errorf("logs --tail x: exit %d, %q", r.code, r.stderr)
	}
	if r := c.run("logs", "nope"); r.code != 1 || !strings.Contains(r.stderr, "404 Not Found") {
		t.Errorf("logs of a missing function: exit %d, %q", r.code, r.stderr)
	}
	follow := exec.Command(bin, "logs", "hello", "-f", "--tail", "0")
	follow.Dir, follow.Env = home, env
	var followed testbed.SyncBuffer
	follow.Stdout, follow.Stderr = &followed, &followed
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	followDone := make(chan error, 1)
	go func() { followDone <- follow.Wait() }()
	// The stream is open before the call; a line written before it would
	// not be shown (tail 0), so the call is made until its line shows.
	for attempt := 1; ; attempt++ {
		r = c.ok("invoke", "hello", "-i", "--path", "/?name=Followed")
		id := between(r.stdout, "X-Request-Id: ", "\n")
		seen := func() bool { return strings.Contains(followed.String(), `"requestId": "`+id+`"`) }
		for deadline := time.Now().Add(2 * time.Second); !seen() && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		}
		if seen() {
			break
		}
		if attempt == 10 {
			t.Fatalf("logs -f showed none of 10 calls' lines:\n%s", followed.String())
		}
	}
	follow.Process.Signal(os.Interrupt)
	select {
	case err := <-followDone:
		if err != nil {
			t.Errorf("logs -f ended with %v after Ctrl-C: %s", err, followed.String())
		}
	case <-time.After(10 * time.Second):
		follow.Process.Kill()
		t.Error("logs -f did not end on Ctrl-C")
	}

	// sless dev's terminal: short aligned lines, one per event.
	for _, re := range []string{
		`(?m)^\d\d:\d\d:\d\d  build started\s+default/hello\s+build=hello-build-[0-9a-f]{10}$`,
		`(?m)^\d\d:\d\d:\d\d  build succeeded\s+default/hello\s+build=hello-build-[0-9a-f]{10} took=\S+$`,
		`(?m)^\d\d:\d\d:\d\d  revision ready\s+default/hello\s+revision=hello-00001$`,
		`(?m)^\d\d:\d\d:\d\d  process started\s+default/hello\s+revision=hello-00001 pid=\d+ took=\S+$`,
		// The wrapper's JSON request line, as text.
		`(?m)^\d\d:\d\d:\d\d  log info\s+default/hello\s+request .*status=200 .*requestId=` + regexp.QuoteMeta(reqID) + `$`,
	} {
		awaitMatch(t, &devLog, regexp.MustCompile(re), 10*time.Second)
	}
	// Idle past --idle-timeout, the process stops; the next call starts it cold.
	awaitMatch(t, &devLog, regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d  process stopped\s+default/hello\s+revision=hello-00001 pid=\d+ reason="idle for 4s"$`), 30*time.Second)
	coldRE := regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d  cold start\s+default/hello\s+revision=hello-00001 took=\d+(\.\d+)?m?s$`)
	before := len(coldRE.FindAllString(devLog.String(), -1))
	c.ok("invoke", "hello")
	for deadline := time.Now().Add(10 * time.Second); len(coldRE.FindAllString(devLog.String(), -1)) != before+1; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no new cold start line after a call from zero (%d before):\n%s", before, devLog.String())
		}
	}

	// A build that fails prints the condition's message and exits 1.
	c.ok("new", "--lang", "python", "broken")
	os.WriteFile(filepath.Join(home, "broken", "requirements.txt"), []byte("not a requirement ==\n"), 0o644)
	if r := c.run("deploy", "broken"); r.code != 1 || !strings.Contains(r.stderr, "function broken failed (BuildFailed)") || !strings.Contains(r.stderr, "requirements.txt") {
		t.Errorf("deploy of a broken build: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := c.ok("logs", "broken", "--build", "latest"); !strings.Contains(r.stdout, "not a requirement") {
		t.Errorf("logs --build latest of the broken build:\n%s", r.stdout)
	}
	awaitMatch(t, &devLog, regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d  WARN build failed\s+default/broken\s+build=broken-build-[0-9a-f]{10} took=\S+ reason=BuildFailed error=.*$`), 10*time.Second)

	if r := c.ok("delete", "hello", "--wait"); !strings.Contains(r.stdout, "function hello deleted") {
		t.Errorf("delete --wait: %q", r.stdout)
	}
	if r := c.run("describe", "hello"); r.code != 1 || !strings.Contains(r.stderr, "404 Not Found") {
		t.Errorf("describe after delete: exit %d, %q", r.code, r.stderr)
	}
	if r := c.ok("list"); strings.Contains(r.stdout, "hello") {
		t.Errorf("list after delete:\n%s", r.stdout)
	}
}

// withoutVars is env without the named variables, so the caller's own login
// cannot leak into the test.
func withoutVars(env []string, names ...string) []string {
	var out []string
next:
	for _, kv := range env {
		for _, n := range names {
			if strings.HasPrefix(kv, n+"=") {
				continue next
			}
		}
		out = append(out, kv)
	}
	return out
}

func between(s, start, end string) string {
	_, after, _ := strings.Cut(s, start)
	v, _, _ := strings.Cut(after, end)
	return v
}
