// Package build is what local mode has in place of Tekton's builds: a
// build context unpacked into a directory named by its digest, the
// runtime's dependency steps run there.
package build

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sless-dev/sless/pkg/adapter"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/local/proc"
	"github.com/sless-dev/sless/pkg/logs"
	"github.com/sless-dev/sless/runtimes"
)

// Builder is adapter.Builder for one machine: it unpacks the build context
// pkg/source made into a directory named by its digest and runs the runtime's
// dependency and build steps there (runtimes.LocalSetup). That directory is
// the "image": Image() names it local/<ns>/<fn>@sha256:<digest>, and Dir maps
// such a name back onto the directory.
//
// Builds are keyed by digest exactly as PipelineRuns are on a cluster: a
// second EnsureBuild of a digest reports on the first build, and functions
// with equal source share one directory. A finished build's outcome is kept in
// <digest>.json beside its directory, so it survives restarts; a build cut
// short by a restart starts again.
type Builder struct {
	root string
	opts runtimes.LocalOptions
	// onDone is called (in its own goroutine) with each function that asked
	// for a build when that build ends, so its reconcile runs again.
	onDone func(namespace, name string)
	// Logger, when set, is told when a build starts and ends (sless dev's
	// terminal lines); set it before the first EnsureBuild.
	Logger *slog.Logger
	// Procs starts the build steps (contained, no limits); set it before
	// the first EnsureBuild. nil: started without a Supervisor.
	Procs *proc.Supervisor

	mu      sync.Mutex
	running map[string]*build
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

var _ adapter.Builder = (*Builder)(nil)

// Root is the directory the builds live in.
func (b *Builder) Root() string { return b.root }

type build struct {
	name    string
	started time.Time
	// waiters are the objects that asked, by namespace, name and log kind
	// (logKind): a build context says its mode, so all are of one kind.
	waiters map[[3]string]bool
	// rebuilds are the spec.rebuild values the outcome answers: those of
	// the failed build this one retries, and the one that asked for it.
	rebuilds []string
	timeout  time.Duration
	// done is closed when the build ends (logs follow it until then).
	done chan struct{}
}

// buildResult is <digest>.json.
type buildResult struct {
	Name           string    `json:"name"`
	Succeeded      bool      `json:"succeeded"`
	Reason         string    `json:"reason,omitempty"`
	Message        string    `json:"message,omitempty"`
	StartTime      time.Time `json:"startTime"`
	CompletionTime time.Time `json:"completionTime"`
	// Rebuilds are the spec.rebuild values that asked for this outcome,
	// and TimeoutSeconds the build timeout it had: a failed build is kept
	// for its digest until a Function asks again with another (askedAgain).
	Rebuilds       []string `json:"rebuilds,omitempty"`
	TimeoutSeconds int64    `json:"timeoutSeconds,omitempty"`
	// Steps are the build's steps with their times, for its trace.
	Steps []adapter.BuildStep `json:"steps,omitempty"`
}

// askedAgain tells whether fn asks for the digest whose outcome is res to
// be built again: res failed, and fn names a spec.rebuild res does not
// answer, or a build timeout above the one res timed out at. Functions
// sharing the digest without asking keep seeing res until the new build
// ends.
func askedAgain(res buildResult, fn slessv1alpha1.Workload) bool {
	if res.Succeeded {
		return false
	}
	if r := fn.BuildSpec().Rebuild; r != "" && !slices.Contains(res.Rebuilds, r) {
		return true
	}
	return res.Reason == ReasonBuildTimeout && res.TimeoutSeconds > 0 && int64(fn.BuildTimeout()) > res.TimeoutSeconds
}

// logKind is the key that names w in log lines: function or service.
func logKind(w slessv1alpha1.Workload) string {
	if w.WorkloadKind() == slessv1alpha1.KindSlessService {
		return "service"
	}
	return "function"
}

// Reasons a local build reports.
const (
	ReasonBuilding       = "Building"
	ReasonBuildFailed    = "BuildFailed"
	ReasonBuildTimeout   = "BuildTimeout"
	ReasonBadContext     = "BadBuildContext"
	ReasonToolMissing    = "ToolMissing"
	ReasonBuildCancelled = "BuildCancelled"
)

// New keeps builds under root. opts names the tools (python3, node,
// go); onDone may be nil.
func New(root string, opts runtimes.LocalOptions, onDone func(namespace, name string)) (*Builder, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("build directory: %w", err)
	}
	// Leftovers of builds a previous run did not finish.
	entries, _ := os.ReadDir(abs)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			os.RemoveAll(filepath.Join(abs, e.Name()))
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	if onDone == nil {
		onDone = func(string, string) {}
	}
	return &Builder{root: abs, opts: opts, onDone: onDone, running: map[string]*build{}, ctx: ctx, cancel: cancel}, nil
}

// Close stops running builds and waits for them.
func (b *Builder) Close() {
	b.cancel()
	b.wg.Wait()
}

var digestRE = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)

// Image is the name of a function's build of digest.
func Image(namespace, name, digest string) string {
	return "local/" + namespace + "/" + name + "@" + digest
}

// Name is the build's name (status.buildRef), from the function and
// the digest as a PipelineRun's is.
func Name(fnName, digest string) string {
	return fnName + "-build-" + strings.TrimPrefix(digest, "sha256:")[:10]
}

// Dir is the directory a local image names, once its build succeeded.
func (b *Builder) Dir(image string) (string, error) {
	i := strings.LastIndex(image, "@")
	if !strings.HasPrefix(image, "local/") || i < 0 || !digestRE.MatchString(image[i+1:]) {
		return "", fmt.Errorf("%q is not an image local mode built: sless dev runs functions built from source, not prebuilt images", image)
	}
	hexd := strings.TrimPrefix(image[i+1:], "sha256:")
	res, ok := b.result(hexd)
	if !ok || !res.Succeeded {
		return "", fmt.Errorf("image %s has not been built", image)
	}
	dir := filepath.Join(b.root, hexd)
	if _, err := os.Stat(filepath.Join(dir, runtimes.ManifestFile)); err != nil {
		return "", fmt.Errorf("image %s: %w", image, err)
	}
	return dir, nil
}

func (b *Builder) result(hexd string) (buildResult, bool) {
	var res buildResult
	raw, err := os.ReadFile(filepath.Join(b.root, hexd+".json"))
	if err != nil || json.Unmarshal(raw, &res) != nil {
		return res, false
	}
	if res.Succeeded {
		if _, err := os.Stat(filepath.Join(b.root, hexd, runtimes.ManifestFile)); err != nil {
			return res, false // the directory went away: build again
		}
	}
	return res, true
}

// EnsureBuild reports on the build of in.Digest, starting it if none ran.
func (b *Builder) EnsureBuild(_ context.Context, fn slessv1alpha1.Workload, in adapter.BuildInput) (adapter.BuildState, error) {
	if !digestRE.MatchString(in.Digest) {
		return adapter.BuildState{}, fmt.Errorf("build digest %q is not sha256:<64 hex>", in.Digest)
	}
	hexd := strings.TrimPrefix(in.Digest, "sha256:")
	name := Name(fn.GetName(), in.Digest)
	if res, ok := b.result(hexd); ok && !askedAgain(res, fn) {
		return finished(fn, name, in.Digest, res), nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.ctx.Err(); err != nil {
		return adapter.BuildState{}, errors.New("the builder is shut down")
	}
	bl, ok := b.running[hexd]
	if !ok {
		// The result may have landed between the check above and the lock.
		res, found := b.result(hexd)
		if found && !askedAgain(res, fn) {
			return finished(fn, name, in.Digest, res), nil
		}
		bl = &build{name: name, started: time.Now().UTC(), waiters: map[[3]string]bool{}, timeout: time.Duration(fn.BuildTimeout()) * time.Second,
			done: make(chan struct{})}
		if found { // a failed build fn asks to run again
			bl.rebuilds = res.Rebuilds
		}
		if r := fn.BuildSpec().Rebuild; r != "" && !slices.Contains(bl.rebuilds, r) {
			bl.rebuilds = append(slices.Clone(bl.rebuilds), r)
		}
		b.running[hexd] = bl
		b.wg.Add(1)
		go b.run(hexd, in.Location, bl)
		b.logf(slog.LevelInfo, "build started", logKind(fn), fn.GetNamespace()+"/"+fn.GetName(), "build", name)
	}
	bl.waiters[[3]string{fn.GetNamespace(), fn.GetName(), logKind(fn)}] = true
	start := bl.started
	return adapter.BuildState{Name: bl.name, Started: true, Created: !ok, Reason: ReasonBuilding,
		Message: "installing dependencies", StartTime: &start}, nil
}

// finished reports the outcome res of fn's build of digest.
func finished(fn slessv1alpha1.Workload, name, digest string, res buildResult) adapter.BuildState {
	st := adapter.BuildState{Name: name, Started: true, Done: true, Succeeded: res.Succeeded,
		Reason: res.Reason, Message: res.Message, StartTime: &res.StartTime, CompletionTime: &res.CompletionTime, Steps: res.Steps}
	if res.Succeeded {
		st.Image = Image(fn.GetNamespace(), fn.GetName(), digest)
	}
	return st
}

func (b *Builder) run(hexd, location string, bl *build) {
	defer b.wg.Done()
	timeout := bl.timeout
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	res := b.build(ctx, hexd, location)
	res.Name = bl.name
	res.StartTime = bl.started
	res.Rebuilds, res.TimeoutSeconds = bl.rebuilds, int64(timeout/time.Second)
	res.CompletionTime = time.Now().UTC()
	if ctx.Err() != nil && !res.Succeeded {
		if b.ctx.Err() != nil {
			res.Reason, res.Message = ReasonBuildCancelled, "sless dev stopped during the build"
		} else if res.Reason == ReasonBuildFailed {
			res.Reason = ReasonBuildTimeout
			res.Message = fmt.Sprintf("the build did not finish within %s: %s", timeout, res.Message)
		}
	}
	// A build cut short by shutdown is not a result: the next run builds again.
	if res.Reason != ReasonBuildCancelled {
		raw, _ := json.MarshalIndent(res, "", "  ")
		if err := writeFileAtomic(filepath.Join(b.root, hexd+".json"), raw); err != nil {
			res = buildResult{Name: bl.name, Reason: ReasonBuildFailed, Message: err.Error()}
		}
	}
	b.mu.Lock()
	delete(b.running, hexd)
	waiters := bl.waiters
	close(bl.done)
	b.mu.Unlock()
	var fns []string
	kind := "function"
	for w := range waiters {
		fns = append(fns, w[0]+"/"+w[1])
		kind = w[2]
	}
	slices.Sort(fns)
	took := res.CompletionTime.Sub(res.StartTime).Round(100 * time.Millisecond)
	switch {
	case res.Succeeded:
		b.logf(slog.LevelInfo, "build succeeded", kind, strings.Join(fns, ","), "build", bl.name, "took", took)
	case res.Reason == ReasonBuildCancelled:
		b.logf(slog.LevelInfo, "build cancelled", kind, strings.Join(fns, ","), "build", bl.name)
	default:
		b.logf(slog.LevelWarn, "build failed", kind, strings.Join(fns, ","), "build", bl.name, "took", took,
			"reason", res.Reason, "error", res.Message)
	}
	for w := range waiters {
		b.onDone(w[0], w[1])
	}
}

// build unpacks and sets up the context in a temporary directory and renames
// it into place, so a directory named by a digest is always complete.
func (b *Builder) build(ctx context.Context, hexd, location string) buildResult {
	var steps []adapter.BuildStep
	res := b.buildSteps(ctx, hexd, location, &steps)
	res.Steps = steps
	return res
}

// buildSteps builds, noting each step's times in steps: unpacking the
// context, then each command the runtime's setup runs.
func (b *Builder) buildSteps(ctx context.Context, hexd, location string, steps *[]adapter.BuildStep) buildResult {
	step := func(name string, began time.Time, err error) {
		*steps = append(*steps, adapter.BuildStep{Name: name, Start: began, End: time.Now().UTC(), Failed: err != nil})
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(b.root, ".tmp-"+hexd[:12]+"-"+hex.EncodeToString(rnd[:]))
	defer os.RemoveAll(tmp)
	began := time.Now().UTC()
	err := unpackContext(location, "sha256:"+hexd, tmp)
	step("unpack", began, err)
	if err != nil {
		return buildResult{Reason: ReasonBadContext, Message: err.Error()}
	}
	cmds, err := runtimes.LocalSetup(tmp, b.opts)
	if err != nil {
		reason := ReasonBadContext
		if strings.Contains(err.Error(), "is needed to run") {
			reason = ReasonToolMissing
		}
		return buildResult{Reason: reason, Message: err.Error()}
	}
	logPath := b.logPath(hexd)
	logf, err := os.Create(logPath)
	if err != nil {
		return buildResult{Reason: ReasonBuildFailed, Message: err.Error()}
	}
	defer logf.Close()
	// Stamped lines, as a function's log: `sless logs --build` reads them.
	stamped := &logs.Stamper{W: logf}
	for _, cmd := range cmds {
		tail := &proc.Tail{Max: 2048}
		fmt.Fprintf(stamped, "$ %s\n", strings.Join(cmd.Args, " "))
		cmd.Stdout = io.MultiWriter(stamped, tail)
		cmd.Stderr = cmd.Stdout
		began := time.Now().UTC()
		_, err := b.Procs.Run(ctx, cmd, proc.Spec{Name: "build." + hexd[:12]})
		step(strings.TrimSpace(path.Base(cmd.Args[0])+" "+strings.Join(cmd.Args[1:min(len(cmd.Args), 2)], " ")), began, err)
		stamped.Flush()
		if err != nil {
			msg := strings.TrimSpace(tail.String())
			if msg == "" {
				msg = err.Error()
			}
			return buildResult{Reason: ReasonBuildFailed,
				Message: fmt.Sprintf("%s: %v: %s", path.Base(cmd.Args[0])+" "+strings.Join(cmd.Args[1:min(len(cmd.Args), 3)], " "), err, msg)}
		}
	}
	dir := filepath.Join(b.root, hexd)
	os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return buildResult{Reason: ReasonBuildFailed, Message: err.Error()}
	}
	return buildResult{Succeeded: true}
}

func (b *Builder) logf(level slog.Level, msg string, args ...any) {
	if b.Logger != nil {
		b.Logger.Log(context.Background(), level, msg, args...)
	}
}

// unpackContext checks the build context at location against digest and
// unpacks it into dir. The archives come from pkg/source, but the file may
// have been changed on disk: only plain files and directories with clean
// relative names are taken.
func unpackContext(location, digest, dir string) error {
	u, err := url.Parse(location)
	if err != nil || (u.Scheme != "file" && u.Scheme != "") {
		return fmt.Errorf("build context %q: local mode reads contexts from files", location)
	}
	p := filepath.FromSlash(u.Path)
	if u.Scheme == "" {
		p = location
	}
	raw, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("build context: %w", err)
	}
	sum := sha256.Sum256(raw)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != digest {
		return fmt.Errorf("build context %s has digest %s, want %s", location, got, digest)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("build context: %w", err)
	}
	tr := tar.NewReader(zr)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("build context: %w", err)
		}
		name := strings.TrimSuffix(h.Name, "/")
		if name == "" || path.IsAbs(name) || path.Clean(name) != name || name == ".." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("build context: bad entry name %q", h.Name)
		}
		target := filepath.Join(dir, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			mode := os.FileMode(0o644)
			if h.Mode&0o111 != 0 {
				mode = 0o755
			}
			f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
			if err != nil {
				return fmt.Errorf("build context: %w", err)
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("build context: %w", err)
			}
		default:
			return fmt.Errorf("build context: entry %q is not a file or directory", h.Name)
		}
	}
}

func writeFileAtomic(p string, data []byte) error {
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// LogOf finds the build whose digest starts with short: its log file, and
// while it runs a channel closed when it ends (nil once it has).
func (b *Builder) LogOf(short string) (string, <-chan struct{}, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for hexd, bl := range b.running {
		if strings.HasPrefix(hexd, short) {
			return b.logPath(hexd), bl.done, nil
		}
	}
	matches, _ := filepath.Glob(filepath.Join(b.root, short+"*.log"))
	for _, m := range matches {
		hexd := strings.TrimSuffix(filepath.Base(m), ".log")
		if digestRE.MatchString("sha256:" + hexd) {
			if _, err := os.Stat(m); err == nil {
				return m, nil, nil
			}
		}
	}
	return "", nil, fmt.Errorf("%w: no log of build %s", logs.ErrNotFound, short)
}

func (b *Builder) logPath(hexd string) string { return filepath.Join(b.root, hexd+".log") }
