package testbed

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// FunctionImage is the image a builder makes of a build context (a
// gzipped tar as pkg/source writes it, its Dockerfile at the root) whose
// Dockerfile runs nothing: base, then one layer with the files its COPY
// lines copy, where they copy them (root-owned, with the context's
// modes), and the ENV, WORKDIR, USER, EXPOSE and CMD lines applied to the
// config. It serves functions on the node before a build runs there; a
// context that needs a builder (RUN lines, such as dependency steps, or
// more than one stage) is an error.
func FunctionImage(base v1.Image, contextTarGz []byte) (v1.Image, error) {
	files, stages, err := readDockerContext(contextTarGz)
	if err != nil {
		return nil, err
	}
	if len(stages) > 1 {
		return nil, fmt.Errorf("Dockerfile line %d: a second stage needs a builder", stages[1][0].n)
	}
	return stageImage(base, files, stages[0], nil)
}

// StandInImage is FunctionImage with the base each FROM line names taken
// from bases (the stand-ins, BaseImages), and a Go function's two stages
// handled too: the build stage's COPY and RUN lines run in a scratch
// directory on this machine with its Go toolchain (the one the golang
// stand-in holds, so the binary is the one kaniko would compile there),
// offline, and the run stage's COPY --from=build lines copy what that
// left, or a file of the build stage's base. A context whose build needs
// more (another tool, the network for modules) needs a builder.
func StandInImage(bases []BaseImage, contextTarGz []byte) (v1.Image, error) {
	files, stages, err := readDockerContext(contextTarGz)
	if err != nil {
		return nil, err
	}
	base := func(st []dockerLine) (v1.Image, error) {
		ref, _, _ := strings.Cut(st[0].args, " ")
		for _, b := range bases {
			if strings.TrimPrefix(ref, "docker.io/") == b.Repo+":"+b.Tag {
				return b.Image, nil
			}
		}
		return nil, fmt.Errorf("Dockerfile line %d: no stand-in for %s", st[0].n, ref)
	}
	run, err := base(stages[len(stages)-1])
	if err != nil {
		return nil, err
	}
	switch len(stages) {
	case 1:
		return stageImage(run, files, stages[0], nil)
	case 2:
		if !strings.HasSuffix(stages[0][0].args, " AS build") {
			return nil, fmt.Errorf("Dockerfile line %d: the first of two stages must be named build", stages[0][0].n)
		}
		build, err := base(stages[0])
		if err != nil {
			return nil, err
		}
		scratch, err := os.MkdirTemp("", "sless-build-stage-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(scratch)
		if err := runBuildStage(scratch, files, stages[0]); err != nil {
			return nil, err
		}
		return stageImage(run, files, stages[1], func(src string) (contextFile, error) {
			if b, err := os.ReadFile(filepath.Join(scratch, filepath.FromSlash(src))); err == nil {
				return contextFile{data: b, mode: 0o755}, nil
			}
			return imageFile(build, src)
		})
	}
	return nil, fmt.Errorf("Dockerfile line %d: a third stage needs a builder", stages[2][0].n)
}

// dockerLine is one instruction of a Dockerfile, at line n.
type dockerLine struct {
	n           int
	instr, args string
}

// readDockerContext reads a build context and splits its Dockerfile into
// stages, each starting at its FROM line.
func readDockerContext(contextTarGz []byte) (map[string]contextFile, [][]dockerLine, error) {
	files, err := readContext(contextTarGz)
	if err != nil {
		return nil, nil, err
	}
	dockerfile, ok := files["Dockerfile"]
	if !ok {
		return nil, nil, errors.New("build context has no Dockerfile")
	}
	var stages [][]dockerLine
	for i, line := range strings.Split(string(dockerfile.data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		instr, args, _ := strings.Cut(line, " ")
		l := dockerLine{n: i + 1, instr: strings.ToUpper(instr), args: strings.TrimSpace(args)}
		switch {
		case l.instr == "FROM":
			stages = append(stages, []dockerLine{l})
		case len(stages) == 0:
			return nil, nil, fmt.Errorf("Dockerfile line %d: %s before FROM", l.n, l.instr)
		default:
			stages[len(stages)-1] = append(stages[len(stages)-1], l)
		}
	}
	if len(stages) == 0 {
		return nil, nil, errors.New("Dockerfile has no FROM")
	}
	return files, stages, nil
}

// stageImage applies a stage's lines to base; from reads the files its
// COPY --from=build lines name (nil: such a line is an error).
func stageImage(base v1.Image, files map[string]contextFile, stage []dockerLine, from func(src string) (contextFile, error)) (v1.Image, error) {
	cf, err := base.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	layer := map[string]contextFile{}
	for _, l := range stage[1:] {
		args := l.args
		switch l.instr {
		case "ENV":
			kvs, err := parseEnv(args)
			if err != nil {
				return nil, fmt.Errorf("Dockerfile line %d: %w", l.n, err)
			}
			for _, kv := range kvs {
				cf.Config.Env = setEnv(cf.Config.Env, kv)
			}
		case "COPY":
			fields := strings.Fields(args)
			if len(fields) == 3 && fields[0] == "--from=build" && from != nil {
				f, err := from(fields[1])
				if err != nil {
					return nil, fmt.Errorf("Dockerfile line %d: %w", l.n, err)
				}
				layer[path.Clean(fields[2])] = f
				continue
			}
			if len(fields) != 2 || strings.HasPrefix(fields[0], "--") {
				return nil, fmt.Errorf("Dockerfile line %d: COPY %s: one source and one destination only", l.n, args)
			}
			if err := copyContext(files, fields[0], fields[1], layer); err != nil {
				return nil, fmt.Errorf("Dockerfile line %d: %w", l.n, err)
			}
		case "WORKDIR":
			cf.Config.WorkingDir = path.Join(cf.Config.WorkingDir, args)
			if _, ok := layer[cf.Config.WorkingDir]; !ok {
				layer[cf.Config.WorkingDir] = contextFile{dir: true, mode: 0o755}
			}
		case "USER":
			cf.Config.User = args
		case "EXPOSE":
			if cf.Config.ExposedPorts == nil {
				cf.Config.ExposedPorts = map[string]struct{}{}
			}
			for _, p := range strings.Fields(args) {
				if !strings.Contains(p, "/") {
					p += "/tcp"
				}
				cf.Config.ExposedPorts[p] = struct{}{}
			}
		case "CMD":
			var cmd []string
			if err := json.Unmarshal([]byte(args), &cmd); err != nil {
				return nil, fmt.Errorf("Dockerfile line %d: CMD in exec form only: %w", l.n, err)
			}
			cf.Config.Cmd = cmd
		default:
			return nil, fmt.Errorf("Dockerfile line %d: %s needs a builder", l.n, l.instr)
		}
	}
	tarBytes, err := layerTar(layer)
	if err != nil {
		return nil, err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(tarBytes)), nil })
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(base, l)
	if err != nil {
		return nil, err
	}
	// The config as the Dockerfile left it, over the one that names the
	// new layer's diff ID.
	out, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	out = out.DeepCopy()
	out.Config = cf.Config
	return mutate.ConfigFile(img, out)
}

// runBuildStage runs a build stage's COPY (from the context), WORKDIR, ENV
// and RUN lines under scratch, which stands for the stage's root. A RUN
// runs go only, this machine's, offline and with this machine's build
// cache.
func runBuildStage(scratch string, files map[string]contextFile, stage []dockerLine) error {
	dir := "/"
	env := []string{"GOPROXY=off", "GOTOOLCHAIN=local"}
	for _, l := range stage[1:] {
		switch l.instr {
		case "COPY":
			fields := strings.Fields(l.args)
			if len(fields) != 2 || strings.HasPrefix(fields[0], "--") {
				return fmt.Errorf("Dockerfile line %d: COPY %s: one source and one destination only", l.n, l.args)
			}
			layer := map[string]contextFile{}
			if err := copyContext(files, fields[0], fields[1], layer); err != nil {
				return fmt.Errorf("Dockerfile line %d: %w", l.n, err)
			}
			for p, f := range layer {
				dst := filepath.Join(scratch, filepath.FromSlash(p))
				var err error
				if f.dir {
					err = os.MkdirAll(dst, 0o755)
				} else if err = os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
					err = os.WriteFile(dst, f.data, os.FileMode(f.mode)|0o600)
				}
				if err != nil {
					return fmt.Errorf("Dockerfile line %d: %w", l.n, err)
				}
			}
		case "WORKDIR":
			dir = path.Join(dir, l.args)
			if err := os.MkdirAll(filepath.Join(scratch, filepath.FromSlash(dir)), 0o755); err != nil {
				return err
			}
		case "ENV":
			kvs, err := parseEnv(l.args)
			if err != nil {
				return fmt.Errorf("Dockerfile line %d: %w", l.n, err)
			}
			env = append(env, kvs...)
		case "RUN":
			var args []string
			if err := json.Unmarshal([]byte(l.args), &args); err != nil || len(args) == 0 || args[0] != "go" {
				return fmt.Errorf("Dockerfile line %d: RUN %s: only go, in exec form, runs without a builder", l.n, l.args)
			}
			cmd := exec.Command(filepath.Join(GoRoot, "bin", "go"), args[1:]...)
			cmd.Dir = filepath.Join(scratch, filepath.FromSlash(dir))
			cmd.Env = append(os.Environ(), env...)
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("Dockerfile line %d: %s: %w\n%s", l.n, strings.Join(args, " "), err, tail(string(out), 4000))
			}
		default:
			return fmt.Errorf("Dockerfile line %d: %s in a build stage needs a builder", l.n, l.instr)
		}
	}
	return nil
}

// imageFile is the regular file at p in img's file system.
func imageFile(img v1.Image, p string) (contextFile, error) {
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	want := strings.TrimPrefix(path.Clean(p), "/")
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return contextFile{}, fmt.Errorf("%s: not in the build stage", p)
		}
		if err != nil {
			return contextFile{}, fmt.Errorf("build stage's base: %w", err)
		}
		if strings.TrimPrefix(path.Clean(h.Name), "./") != want {
			continue
		}
		if h.Typeflag != tar.TypeReg {
			return contextFile{}, fmt.Errorf("%s: not a regular file in the build stage", p)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return contextFile{}, fmt.Errorf("%s: %w", p, err)
		}
		return contextFile{data: b, mode: h.Mode & 0o7777}, nil
	}
}

// contextFile is a file or directory of a build context, or of the layer
// made from it.
type contextFile struct {
	data []byte
	mode int64
	dir  bool
}

func readContext(tgz []byte) (map[string]contextFile, error) {
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		return nil, fmt.Errorf("build context: %w", err)
	}
	tr := tar.NewReader(zr)
	files := map[string]contextFile{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, fmt.Errorf("build context: %w", err)
		}
		name := strings.TrimSuffix(path.Clean(h.Name), "/")
		switch h.Typeflag {
		case tar.TypeDir:
			files[name] = contextFile{dir: true, mode: h.Mode & 0o7777}
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err != nil {
				return nil, fmt.Errorf("build context %s: %w", name, err)
			}
			files[name] = contextFile{data: b, mode: h.Mode & 0o7777}
		default:
			return nil, fmt.Errorf("build context %s: entry type %c not supported", name, h.Typeflag)
		}
	}
}

// copyContext adds what COPY src dst copies to layer: a file to dst (or
// into dst when it ends in /), a directory's contents under dst.
func copyContext(files map[string]contextFile, src, dst string, layer map[string]contextFile) error {
	src = strings.TrimSuffix(path.Clean(src), "/")
	f, ok := files[src]
	if !ok {
		return fmt.Errorf("COPY %s: not in the build context", src)
	}
	if !f.dir {
		if strings.HasSuffix(dst, "/") {
			dst = path.Join(dst, path.Base(src))
		}
		layer[path.Clean(dst)] = f
		return nil
	}
	for name, f := range files {
		if rel, ok := strings.CutPrefix(name, src+"/"); ok {
			layer[path.Join(dst, rel)] = f
		}
	}
	if _, ok := layer[path.Clean(dst)]; !ok {
		layer[path.Clean(dst)] = contextFile{dir: true, mode: f.mode}
	}
	return nil
}

// layerTar writes the layer's entries, sorted, with their parents,
// root-owned and with fixed times.
func layerTar(layer map[string]contextFile) ([]byte, error) {
	for p := range layer {
		for d := path.Dir(p); d != "/" && d != "."; d = path.Dir(d) {
			if _, ok := layer[d]; !ok {
				layer[d] = contextFile{dir: true, mode: 0o755}
			}
		}
	}
	names := make([]string, 0, len(layer))
	for p := range layer {
		names = append(names, p)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range names {
		f := layer[p]
		h := &tar.Header{Name: strings.TrimPrefix(p, "/"), Mode: f.mode, ModTime: layerEpoch, Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// parseEnv splits an ENV line's key=value pairs; a value may be a
// double-quoted Go string.
func parseEnv(s string) ([]string, error) {
	var out []string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		key, rest, ok := strings.Cut(s, "=")
		if !ok || key == "" || strings.ContainsAny(key, " \t") {
			return nil, fmt.Errorf("ENV %s: key=value pairs only", s)
		}
		var value string
		if strings.HasPrefix(rest, `"`) {
			quoted, err := strconv.QuotedPrefix(rest)
			if err != nil {
				return nil, fmt.Errorf("ENV %s: %w", key, err)
			}
			if value, err = strconv.Unquote(quoted); err != nil {
				return nil, fmt.Errorf("ENV %s: %w", key, err)
			}
			rest = rest[len(quoted):]
		} else {
			value, rest, _ = strings.Cut(rest, " ")
		}
		out = append(out, key+"="+value)
		s = rest
	}
	return out, nil
}

// setEnv sets kv in env, replacing the variable's earlier value.
func setEnv(env []string, kv string) []string {
	key, _, _ := strings.Cut(kv, "=")
	for i, e := range env {
		if strings.HasPrefix(e, key+"=") {
			env[i] = kv
			return env
		}
	}
	return append(env, kv)
}
