// Package runtimes holds the sless language runtimes: the wrapper of each
// (embedded from the folder of that name), the facts about it (base image,
// dependency steps, how to start it) and the layout every build context and
// every image share.
//
// A build context (see pkg/source) unpacked into a directory is the same tree
// an image holds under /sless:
//
//	sless.json   the Manifest: runtime and entrypoint
//	runtime/     the wrapper (for Go: the sless library and its go.mod)
//	function/    the user's code, and after the dependency step .deps/ or node_modules/
//	main/        Go only: the generated main package and its go.mod
//	bin/         Go only: the built server, after the build step
//
// So the same steps run in the Dockerfile (under /sless) and in local mode
// (under the unpacked directory), and LocalCommand serves a function from
// such a directory as a plain process.
package runtimes

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Canonical runtime names. The aliases map onto them (see Canonical).
const (
	Python312 = "python3.12"
	NodeJS22  = "nodejs22"
	Go124     = "go1.24"
)

// Layout of a build context and of /sless in an image.
const (
	ImageRoot    = "/sless"
	ManifestFile = "sless.json"
	RuntimeDir   = "runtime"
	FunctionDir  = "function"
	MainDir      = "main"
	BinDir       = "bin"
	// GoBinary is the built Go server, relative to the root.
	GoBinary = BinDir + "/function"
)

// HealthPath answers GET with 200 {"status":"ok"} once the handler is loaded.
const HealthPath = "/_sless/health"

// DefaultPort is where a wrapper listens when PORT is not set.
const DefaultPort = 8080

// GoLibraryModule is the module path of the Go runtime library: user code
// imports it as "github.com/sless-dev/sless/runtimes/go1.24" (package sless).
const GoLibraryModule = "github.com/sless-dev/sless/runtimes/go1.24"

// GoLibraryGoVersion is the go directive of the library's module.
const GoLibraryGoVersion = "1.24"

var aliases = map[string]string{
	Python312:    Python312,
	"python3.11": Python312,
	NodeJS22:     NodeJS22,
	"nodejs20":   NodeJS22,
	Go124:        Go124,
}

// Canonical maps a runtime name or alias onto the runtime that builds it.
func Canonical(name string) (string, bool) {
	c, ok := aliases[name]
	return c, ok
}

// Names lists every accepted runtime name, aliases included, sorted.
func Names() []string {
	out := make([]string, 0, len(aliases))
	for n := range aliases {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Language is the family a runtime belongs to.
type Language string

const (
	Python Language = "python"
	Node   Language = "node"
	Go     Language = "go"
)

// Runtime is what sless knows about one runtime.
type Runtime struct {
	// Name is the canonical name, which is also the wrapper's folder.
	Name     string
	Language Language
	// BaseImage is the official image a function's image starts from, pinned
	// by version. For Go it is the build stage.
	BaseImage string
	// RunImage is, for Go, the image the built server runs on.
	RunImage string
	// Interpreter is the program that runs the wrapper in the image (none
	// for Go, whose server is a binary).
	Interpreter string
	// wrapper lists the embedded files that go into a build context's runtime/.
	wrapper []string
}

var all = map[string]*Runtime{
	Python312: {
		Name:        Python312,
		Language:    Python,
		Interpreter: "python3",
		BaseImage:   "docker.io/library/python:3.12.8-slim-bookworm",
		wrapper:     []string{"server.py", "sless_asgi.py", "sless_trace.py"},
	},
	NodeJS22: {
		Name:        NodeJS22,
		Language:    Node,
		Interpreter: "node",
		BaseImage:   "docker.io/library/node:22.12.0-bookworm-slim",
		wrapper:     []string{"server.js", "trace.js"},
	},
	Go124: {
		Name:      Go124,
		Language:  Go,
		BaseImage: "docker.io/library/golang:1.24.4-bookworm",
		RunImage:  "docker.io/library/debian:12.8-slim",
		wrapper:   []string{"sless.go", "server.go", "service.go", "trace.go"},
	},
}

// The wrappers, without their tests (listed file by file: embed has no
// exclusion patterns).
//
//go:embed python3.12/server.py python3.12/sless_asgi.py python3.12/sless_trace.py python3.12/Dockerfile
//go:embed nodejs22/server.js nodejs22/trace.js nodejs22/Dockerfile
//go:embed go1.24/sless.go go1.24/server.go go1.24/service.go go1.24/trace.go go1.24/Dockerfile
var embedded embed.FS

// Lookup returns the runtime a name or alias stands for.
func Lookup(name string) (*Runtime, bool) {
	c, ok := Canonical(name)
	if !ok {
		return nil, false
	}
	return all[c], true
}

// All returns the canonical runtimes, sorted by name.
func All() []*Runtime {
	out := make([]*Runtime, 0, len(all))
	for _, r := range all {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Wrapper is the runtime's folder as embedded: the wrapper and the Dockerfile
// of its base image.
func (r *Runtime) Wrapper() fs.FS {
	sub, err := fs.Sub(embedded, r.Name)
	if err != nil {
		panic(err) // the folders are embedded at build time
	}
	return sub
}

// BaseDockerfile is the Dockerfile of the runtime's base image: the official
// image with the wrapper installed under /sless/runtime.
func (r *Runtime) BaseDockerfile() []byte {
	b, err := embedded.ReadFile(r.Name + "/Dockerfile")
	if err != nil {
		panic(err)
	}
	return b
}

// WrapperFiles are the files a build context holds under runtime/, by path
// relative to it. For Go this includes the library's go.mod, which cannot
// live in this repository (it would make the folder a separate module).
func (r *Runtime) WrapperFiles() map[string][]byte {
	out := make(map[string][]byte, len(r.wrapper)+1)
	for _, name := range r.wrapper {
		b, err := embedded.ReadFile(r.Name + "/" + name)
		if err != nil {
			panic(err)
		}
		out[name] = b
	}
	if r.Language == Go {
		out["go.mod"] = []byte("module " + GoLibraryModule + "\n\ngo " + GoLibraryGoVersion + "\n")
	}
	return out
}

// Step is one dependency or build step, run in Dir (relative to the root)
// with Env added to the environment.
type Step struct {
	Dir  string
	Args []string
	Env  []string
}

// Steps are the dependency and build steps for a function whose code has the
// files has reports (paths relative to function/). The Dockerfile runs them
// under /sless; local mode runs them in the unpacked context.
func (r *Runtime) Steps(has func(name string) bool) []Step {
	switch r.Language {
	case Python:
		if has("requirements.txt") {
			return []Step{{Dir: FunctionDir, Args: []string{"python3", "-m", "pip", "install",
				"--no-cache-dir", "--disable-pip-version-check", "--no-warn-script-location",
				"--target", ".deps", "-r", "requirements.txt"}}}
		}
	case Node:
		if has("package-lock.json") {
			return []Step{{Dir: FunctionDir, Args: []string{"npm", "ci", "--omit=dev", "--no-audit", "--no-fund"}}}
		}
		if has("package.json") {
			return []Step{{Dir: FunctionDir, Args: []string{"npm", "install", "--omit=dev", "--no-audit", "--no-fund"}}}
		}
	case Go:
		return []Step{{Dir: MainDir, Args: []string{"go", "build", "-trimpath", "-o", "../" + GoBinary, "."},
			Env: []string{"CGO_ENABLED=0", "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod -buildvcs=false"}}}
	}
	return nil
}

// ServeArgs is the command line that serves the function, given the root
// (ImageRoot in an image, the unpacked directory locally) and the
// interpreter to use.
func (r *Runtime) ServeArgs(root, interpreter string) []string {
	switch r.Language {
	case Python:
		return []string{interpreter, path.Join(root, RuntimeDir, "server.py")}
	case Node:
		return []string{interpreter, path.Join(root, RuntimeDir, "server.js")}
	default:
		return []string{path.Join(root, GoBinary)}
	}
}

// Manifest is sless.json at the root of a build context: what local mode
// needs to know to serve it.
type Manifest struct {
	Runtime    string `json:"runtime"`
	Entrypoint string `json:"entrypoint"`
	// Mode is "service" for a SlessService's web app, empty for a
	// function's handler (and left out, so functions' digests stay as they were).
	Mode string `json:"mode,omitempty"`
}

// ReadManifest reads sless.json from an unpacked build context.
func ReadManifest(dir string) (Manifest, *Runtime, error) {
	var m Manifest
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return m, nil, fmt.Errorf("not a sless build context: %w", err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, nil, fmt.Errorf("%s: %w", ManifestFile, err)
	}
	rt, ok := Lookup(m.Runtime)
	if !ok {
		return m, nil, fmt.Errorf("%s: unknown runtime %q", ManifestFile, m.Runtime)
	}
	return m, rt, nil
}

// LocalOptions say how to serve a function as a local process.
type LocalOptions struct {
	// Port to listen on; 0 means DefaultPort.
	Port int
	// Host is the address to listen on; empty means 127.0.0.1 (local mode
	// serves on loopback only).
	Host string
	// FunctionName, Namespace and Revision are handed to the handler.
	FunctionName, Namespace, Revision string
	// TimeoutSeconds is the deadline of one call; 0 means the wrapper's 30.
	TimeoutSeconds float64
	// Env is added last (the function's own variables; KEY=VALUE).
	Env []string
	// Python, Node and Go name the tools; empty means python3, node and go
	// from PATH.
	Python, Node, Go string
}

// LocalSetup returns the dependency and build steps of an unpacked build
// context as commands to run in order (none when there is nothing to do).
func LocalSetup(dir string, opts LocalOptions) ([]*exec.Cmd, error) {
	_, rt, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	has := func(name string) bool {
		_, err := os.Stat(filepath.Join(abs, FunctionDir, filepath.FromSlash(name)))
		return err == nil
	}
	var cmds []*exec.Cmd
	for _, st := range rt.Steps(has) {
		tool, err := opts.tool(st.Args[0])
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(tool, st.Args[1:]...)
		cmd.Dir = filepath.Join(abs, filepath.FromSlash(st.Dir))
		cmd.Env = append(os.Environ(), st.Env...)
		cmds = append(cmds, cmd)
	}
	return cmds, nil
}

// LocalCommand returns the command that serves the function in an unpacked
// (and set up, see LocalSetup) build context on opts.Port, with the
// environment of the contract. The caller starts it, waits for HealthPath and
// stops it with SIGTERM.
func LocalCommand(dir string, opts LocalOptions) (*exec.Cmd, error) {
	m, rt, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	interp := ""
	switch rt.Language {
	case Python:
		if interp, err = opts.tool("python3"); err != nil {
			return nil, err
		}
	case Node:
		if interp, err = opts.tool("node"); err != nil {
			return nil, err
		}
	case Go:
		if _, err := os.Stat(filepath.Join(abs, filepath.FromSlash(GoBinary))); err != nil {
			return nil, fmt.Errorf("the Go function is not built (run LocalSetup first): %w", err)
		}
	}
	args := rt.ServeArgs(filepath.ToSlash(abs), interp)
	cmd := exec.Command(filepath.FromSlash(args[0]), args[1:]...)
	cmd.Dir = filepath.Join(abs, FunctionDir)
	cmd.Env = append(inheritedEnv(), opts.env(m, filepath.Join(abs, FunctionDir))...)
	return cmd, nil
}

// inheritedEnv is the environment a function's process starts from: this
// process's, less its SLESS_* variables. Those are the platform's — the
// contract sets its own below, and a Function may not name one — so, as on
// a cluster, the function sees none it was not given: not sless dev's own
// settings (the dev token, database and broker URLs with their passwords),
// nor a stray SLESS_MODE or SLESS_TIMEOUT_SECONDS from the shell that would
// change how the wrapper runs.
func inheritedEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLESS_") {
			env = append(env, kv)
		}
	}
	return env
}

// LocalJobCommand is LocalCommand in job mode: one call on payload, its
// result written to terminationPath.
func LocalJobCommand(dir string, opts LocalOptions, payload []byte, terminationPath string) (*exec.Cmd, error) {
	cmd, err := LocalCommand(dir, opts)
	if err != nil {
		return nil, err
	}
	cmd.Env = append(cmd.Env, "SLESS_MODE=job", "SLESS_PAYLOAD="+string(payload),
		"SLESS_TERMINATION_MESSAGE_PATH="+terminationPath)
	return cmd, nil
}

func (o LocalOptions) env(m Manifest, functionDir string) []string {
	port := o.Port
	if port == 0 {
		port = DefaultPort
	}
	host := o.Host
	if host == "" {
		host = "127.0.0.1"
	}
	env := []string{
		"PORT=" + strconv.Itoa(port),
		"SLESS_LISTEN_HOST=" + host,
		"SLESS_ENTRYPOINT=" + m.Entrypoint,
		"SLESS_FUNCTION_DIR=" + functionDir,
		"SLESS_FUNCTION_NAME=" + o.FunctionName,
		"SLESS_NAMESPACE=" + o.Namespace,
		"SLESS_REVISION=" + o.Revision,
		"PYTHONUNBUFFERED=1",
		"PYTHONDONTWRITEBYTECODE=1",
	}
	if o.TimeoutSeconds > 0 {
		env = append(env, "SLESS_TIMEOUT_SECONDS="+strconv.FormatFloat(o.TimeoutSeconds, 'f', -1, 64))
	}
	if m.Mode != "" {
		// A job's SLESS_MODE, appended after, wins.
		env = append(env, "SLESS_MODE="+m.Mode)
	}
	if o.FunctionName != "" {
		// The OTLP settings pass from the caller's environment; its service
		// name (sless dev's own) is not the function's. o.Env may name another.
		env = append(env, "OTEL_SERVICE_NAME="+o.FunctionName)
	}
	return append(env, o.Env...)
}

func (o LocalOptions) tool(name string) (string, error) {
	switch name {
	case "python3":
		if o.Python != "" {
			return o.Python, nil
		}
		return pythonExecutable()
	case "node":
		if o.Node != "" {
			return o.Node, nil
		}
	case "go":
		if o.Go != "" {
			return o.Go, nil
		}
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s is needed to run this function locally: %w", name, err)
	}
	return p, nil
}

var python struct {
	once sync.Once
	path string
	err  error
}

// pythonExecutable finds the real interpreter behind python3 on PATH.
// Version managers put shell-script shims there; a signal sent to a shim
// does not reach the interpreter, so SIGTERM could not drain the wrapper.
func pythonExecutable() (string, error) {
	python.once.Do(func() {
		p, err := exec.LookPath("python3")
		if err != nil {
			python.err = fmt.Errorf("python3 is needed to run this function locally: %w", err)
			return
		}
		out, err := exec.Command(p, "-c", "import sys; print(sys.executable)").Output()
		if real := strings.TrimSpace(string(out)); err == nil && real != "" {
			p = real
		}
		python.path = p
	})
	return python.path, python.err
}
