// Package console_test drives the web console of a real `sless dev` in a
// real headless Chromium: sign in, find a Python function, read its
// source, call it, see the call and its log line; and every value a user
// wrote, source, log lines and answers included, stays text.
package console_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/client"
)

// The probes: each would set window.__xss, or open a dialog, if the page
// ran it.
const (
	scriptProbe = `<script>window.__xss="script"</script>`
	imgProbe    = `<img src=x onerror="window.__xss='img';alert(1)">`
)

// mainPy prints a tagged log line carrying both probes and answers with
// them too.
var mainPy = `# ` + scriptProbe + ` ` + imgProbe + `
import json


def handler(event, context):
    print("console-probe " + """<script>window.__xss="log"</script><img src=x onerror="window.__xss='log-img'">""", flush=True)
    return {"echo": "<img src=x onerror=alert(2)>", "got": event["body"]}
`

// browser finds a Chromium to drive. Only when there is none does the test
// skip, saying so; with SLESS_REQUIRE_BROWSER=1 (make test) it fails.
func browser(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SLESS_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome-stable", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no Chromium found (install Debian's chromium: bash hack/deps.sh chromium, or set SLESS_CHROMIUM)"
	if os.Getenv("SLESS_REQUIRE_BROWSER") == "1" {
		t.Fatal(msg + "; SLESS_REQUIRE_BROWSER=1 forbids skipping")
	}
	t.Skip(msg)
	return ""
}

var (
	buildOnce sync.Once
	slessBin  string
	buildErr  error
)

func builtSless(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sless-console-e2e-")
		if err != nil {
			buildErr = err
			return
		}
		slessBin = filepath.Join(dir, "sless")
		out, err := exec.Command("go", "build", "-o", slessBin, "github.com/sless-dev/sless/cmd/sless").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return slessBin
}

// startDev runs sless dev on a free port and returns its URL.
func startDev(t *testing.T, token string) string {
	t.Helper()
	data := t.TempDir()
	cmd := exec.Command(builtSless(t), "dev", "--addr", "127.0.0.1:0", "--data-dir", data, "--dev-token", token)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var log strings.Builder
	var logMu sync.Mutex
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logMu.Lock()
			log.WriteString(sc.Text() + "\n")
			logMu.Unlock()
			if _, url, ok := strings.Cut(sc.Text(), "sless dev: serving on "); ok {
				found <- url
			}
		}
	}()
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			logMu.Lock()
			t.Logf("sless dev's output:\n%s", log.String())
			logMu.Unlock()
		}
	})
	select {
	case url := <-found:
		return url
	case <-time.After(60 * time.Second):
		t.Fatal("sless dev did not report serving within 60 s")
	}
	return ""
}

// deploy creates the probe function from inline source and waits until
// it is Ready.
func deploy(t *testing.T, base, token string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl, err := client.New(base, token)
	if err != nil {
		t.Fatal(err)
	}
	fn := &slessv1alpha1.Function{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "default"},
		Spec: slessv1alpha1.FunctionSpec{
			WorkloadSpec: slessv1alpha1.WorkloadSpec{
				Runtime:    "python3.12",
				Entrypoint: "main.handler",
				Source:     slessv1alpha1.FunctionSource{Inline: &slessv1alpha1.InlineSource{Files: map[string]string{"main.py": mainPy}}},
			},
		},
	}
	if _, err := cl.CreateFunction(ctx, fn); err != nil {
		t.Fatal(err)
	}
	for {
		got, err := cl.GetFunction(ctx, "default", "probe")
		if err == nil && got.Status.Phase == slessv1alpha1.FunctionPhaseReady {
			return
		}
		if err == nil && got.Status.Phase == slessv1alpha1.FunctionPhaseFailed {
			t.Fatalf("the probe function failed: %.2000s", fmt.Sprint(got.Status.Conditions))
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the probe function is not Ready: %v, %+v", err, got)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// watchPage records what must never happen on a console page: a dialog
// (dismissed, and counted), a CSP violation (an inline script or style the
// page tried to use, kept in window.__csp), and the probes' global.
func watchPage(t *testing.T, ctx context.Context, dialogs *atomic.Int32) {
	t.Helper()
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start the browser: %v", err)
	}
	err := chromedp.Listen(ctx, func(ev any) {
		if _, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			dialogs.Add(1)
			// A listener may not run a command itself.
			go func() {
				_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
			}()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: `window.__csp = [];
document.addEventListener("securitypolicyviolation", e => window.__csp.push(e.violatedDirective + " " + e.blockedURI));`}); err != nil {
		t.Fatal(err)
	}
}

// eval evaluates expr in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return v
}

func do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

// checkInert fails the test if the current page ran a probe, or broke its
// own CSP.
func checkInert(t *testing.T, ctx context.Context, where string) {
	t.Helper()
	if xss := eval[any](t, ctx, `window.__xss === undefined ? null : window.__xss`); xss != nil {
		t.Errorf("%s: a probe ran: window.__xss = %v", where, xss)
	}
	if csp := eval[[]string](t, ctx, `window.__csp || []`); len(csp) > 0 {
		t.Errorf("%s: CSP violations: %v", where, csp)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('img').length`); n != 0 {
		t.Errorf("%s: %d <img> elements, want none (the probes' are text)", where, n)
	}
}

func TestConsoleInBrowser(t *testing.T) {
	chrome := browser(t)
	const token = "console-e2e-token-0123456789"
	base := startDev(t, token)
	deploy(t, base, token)

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1280, 1000))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	var dialogs atomic.Int32
	watchPage(t, bctx, &dialogs)
	// The browser lives as long as bctx; steps get a deadline of their own.
	ctx, cancel := context.WithTimeout(bctx, 90*time.Second)
	defer cancel()
	shots := os.Getenv("SLESS_CONSOLE_SCREENSHOTS")
	shot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			if shots == "" {
				return nil
			}
			png, err := chromedp.FullScreenshot(100)(ctx, tg)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644)
		})
	}

	// Signing in: the console sends a stranger to its form.
	do(t, ctx, chromedp.Navigate(base+"/console/"), chromedp.WaitVisible(chromedp.CSS(`textarea#token`)), shot("login"))
	if loc, err := chromedp.Run(ctx, chromedp.Location()); err != nil || loc != base+"/console/login" {
		t.Errorf("an unsigned visit went to %s (%v), want the sign-in form", loc, err)
	}
	do(t, ctx,
		chromedp.SendKeys(chromedp.CSS(`textarea#token`), token),
		chromedp.Submit(chromedp.CSS(`textarea#token`)),
		chromedp.WaitVisible(chromedp.CSS(`a.fn`)),
		shot("list"),
	)
	if names := eval[[]string](t, ctx, `[...document.querySelectorAll('a.fn')].map(a => a.textContent)`); len(names) != 1 || names[0] != "probe" {
		t.Errorf("the list shows %q, want [probe]", names)
	}
	if c := eval[string](t, ctx, `document.cookie`); strings.Contains(c, token) {
		t.Error("the session cookie is readable by the page's scripts; it must be HttpOnly")
	}
	if eval[bool](t, ctx, `typeof htmx === "undefined"`) {
		t.Error("htmx did not load under the page's CSP")
	}
	checkInert(t, ctx, "list")

	// Its source, highlighted, with the probes shown as text.
	do(t, ctx,
		chromedp.Click(chromedp.CSS(`a.fn`)),
		chromedp.WaitVisible(chromedp.CSS(`a.file`)),
		chromedp.Click(chromedp.CSS(`a.file`)),
		chromedp.WaitVisible(chromedp.CSS(`.code .chroma`)),
		shot("source"),
	)
	code := text(t, ctx, `.code .chroma`)
	for _, want := range []string{scriptProbe, imgProbe, "def handler(event, context):"} {
		if !strings.Contains(code, want) {
			t.Errorf("the source page's text lacks %q:\n%s", want, code)
		}
	}
	checkInert(t, ctx, "source")

	// A call from the invoke form, its answer shown as text.
	do(t, ctx,
		chromedp.Click(chromedp.CSS(`p.crumbs a[href$="/probe"]`)),
		chromedp.WaitVisible(chromedp.CSS(`form.invoke`)),
		chromedp.SetValue(chromedp.CSS(`form.invoke textarea[name=body]`), `{"name": "<b>Ada</b>"}`),
		chromedp.Submit(chromedp.CSS(`form.invoke textarea[name=body]`)),
		chromedp.WaitVisible(chromedp.CSS(`#result pre.answer`)),
	)
	answer := text(t, ctx, `#result pre.answer`)
	if !strings.Contains(answer, `"echo": "<img src=x onerror=alert(2)>"`) || !strings.Contains(answer, `<b>Ada</b>`) {
		t.Errorf("the answer shown is %q", answer)
	}
	reqID := text(t, ctx, `#result code.reqid`)
	if reqID == "" {
		t.Error("the result shows no request id")
	}

	// The call appears in the invocations panel, which refreshes itself.
	do(t, ctx, chromedp.WaitVisible(chromedp.CSS(`#invocations tr.inv`)), shot("invoked"))
	if rows := text(t, ctx, `#invocations tbody`); !strings.Contains(rows, reqID) || !strings.Contains(rows, "200") {
		t.Errorf("the invocations panel shows %q, want the call %s with 200", rows, reqID)
	}

	// Its log line streams into the logs panel, as text.
	probeLine := `console-probe <script>window.__xss="log"</script><img src=x onerror="window.__xss='log-img'">`
	waitLine := func() {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`[...document.querySelectorAll('#logs .line')].some(l => l.textContent.includes('console-probe'))`,
			chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			t.Fatalf("no probe line in the logs panel: %v", err)
		}
	}
	waitLine()
	do(t, ctx, shot("function"))
	if logs := text(t, ctx, `#logs`); !strings.Contains(logs, probeLine) {
		t.Errorf("the logs panel shows %q, want the probe line as text", logs)
	}
	checkInert(t, ctx, "function page")

	// The call's own lines: the row's logs link narrows the panel to them.
	do(t, ctx,
		chromedp.Click(chromedp.CSS(`#invocations tr.inv a[href*="invocation="]`)),
		chromedp.WaitVisible(chromedp.CSS(`#logs-card h2 code.reqid`)),
	)
	if id := text(t, ctx, `#logs-card h2 code.reqid`); id != reqID {
		t.Errorf("the logs link shows the lines of %q, want %q", id, reqID)
	}
	waitLine()
	checkInert(t, ctx, "one call's logs")

	// Filters: a status class no call has empties the panel.
	do(t, ctx,
		chromedp.SetValue(chromedp.CSS(`form.filters input[name=status]`), "5xx"),
		chromedp.Submit(chromedp.CSS(`form.filters input[name=status]`)),
		chromedp.WaitVisible(chromedp.CSS(`#invocations td.muted`)),
	)
	if empty := text(t, ctx, `#invocations td.muted`); !strings.Contains(empty, "No invocations match") {
		t.Errorf("with status=5xx the panel says %q", empty)
	}

	// The charts of a seeded history, and every other page.
	seedHistory(t, base, token, 5)
	visitPages(t, ctx, base, token, shots)

	// Signing out drops the session.
	do(t, ctx,
		chromedp.Click(chromedp.CSS(`header form button`)),
		chromedp.WaitVisible(chromedp.CSS(`textarea#token`)),
		chromedp.Navigate(base+"/console/namespaces/default/functions/"),
		chromedp.WaitVisible(chromedp.CSS(`textarea#token`)),
	)
	if n := dialogs.Load(); n != 0 {
		t.Errorf("%d dialogs opened: a probe ran", n)
	}
}
