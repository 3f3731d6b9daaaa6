package testbed

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
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
	files, err := readContext(contextTarGz)
	if err != nil {
		return nil, err
	}
	dockerfile, ok := files["Dockerfile"]
	if !ok {
		return nil, errors.New("build context has no Dockerfile")
	}
	cf, err := base.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	layer := map[string]contextFile{}
	stages := 0
	for i, line := range strings.Split(string(dockerfile.data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		instr, args, _ := strings.Cut(line, " ")
		args = strings.TrimSpace(args)
		switch strings.ToUpper(instr) {
		case "FROM":
			if stages++; stages > 1 {
				return nil, fmt.Errorf("Dockerfile line %d: a second stage needs a builder", i+1)
			}
		case "ENV":
			kvs, err := parseEnv(args)
			if err != nil {
				return nil, fmt.Errorf("Dockerfile line %d: %w", i+1, err)
			}
			for _, kv := range kvs {
				cf.Config.Env = setEnv(cf.Config.Env, kv)
			}
		case "COPY":
			fields := strings.Fields(args)
			if len(fields) != 2 || strings.HasPrefix(fields[0], "--") {
				return nil, fmt.Errorf("Dockerfile line %d: COPY %s: one source and one destination only", i+1, args)
			}
			if err := copyContext(files, fields[0], fields[1], layer); err != nil {
				return nil, fmt.Errorf("Dockerfile line %d: %w", i+1, err)
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
				return nil, fmt.Errorf("Dockerfile line %d: CMD in exec form only: %w", i+1, err)
			}
			cf.Config.Cmd = cmd
		default:
			return nil, fmt.Errorf("Dockerfile line %d: %s needs a builder", i+1, instr)
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
