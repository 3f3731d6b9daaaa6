package testbed

import (
	"archive/tar"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// imageRecipe is bumped when the way images are assembled changes, so
// cached images made the old way are not reused.
const imageRecipe = "1"

// layerEpoch is every entry's modification time: a layer's digest must
// depend on its content only.
var layerEpoch = time.Unix(0, 0).UTC()

// layerFile is one entry of a layer. Exactly one of src, data, link or dir
// says what it is; the owner is root unless uid/gid say otherwise.
type layerFile struct {
	path     string // in the image, absolute
	mode     int64  // permission bits (and sticky); 0 means 0644, 0755 for dirs and src files that are executable
	uid, gid int
	src      string // a host file copied in
	data     []byte
	link     string // symlink target
	dir      bool
}

// writeLayer writes files as an uncompressed tar to dst: sorted by path,
// with every parent directory, fixed times and numeric owners only.
func writeLayer(dst string, files []layerFile) error {
	byPath := map[string]layerFile{}
	for _, f := range files {
		p := strings.TrimPrefix(path.Clean(f.path), "/")
		if p == "" || p == "." {
			return fmt.Errorf("layer entry %q: not a path below /", f.path)
		}
		if _, dup := byPath[p]; dup {
			return fmt.Errorf("layer entry %q twice", f.path)
		}
		byPath[p] = f
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if _, ok := byPath[d]; !ok {
				byPath[d] = layerFile{path: "/" + d, dir: true}
			}
		}
	}
	names := make([]string, 0, len(byPath))
	for p := range byPath {
		names = append(names, p)
	}
	sort.Strings(names)

	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(out)
	for _, name := range names {
		if err := writeEntry(tw, name, byPath[name]); err != nil {
			out.Close()
			return fmt.Errorf("layer entry /%s: %w", name, err)
		}
	}
	if err := tw.Close(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func writeEntry(tw *tar.Writer, name string, f layerFile) error {
	h := &tar.Header{Name: name, ModTime: layerEpoch, Uid: f.uid, Gid: f.gid, Mode: f.mode, Format: tar.FormatPAX}
	switch {
	case f.dir:
		h.Typeflag, h.Name = tar.TypeDir, name+"/"
		if h.Mode == 0 {
			h.Mode = 0o755
		}
		return tw.WriteHeader(h)
	case f.link != "":
		h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, f.link, 0o777
		return tw.WriteHeader(h)
	case f.src != "":
		in, err := os.Open(f.src)
		if err != nil {
			return err
		}
		defer in.Close()
		st, err := in.Stat()
		if err != nil {
			return err
		}
		if !st.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file", f.src)
		}
		if h.Mode == 0 {
			h.Mode = 0o644
			if st.Mode()&0o111 != 0 {
				h.Mode = 0o755
			}
		}
		h.Typeflag, h.Size = tar.TypeReg, st.Size()
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err = io.Copy(tw, in)
		return err
	default:
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := tw.Write(f.data)
		return err
	}
}

// imageConfig is the part of an image's config the bed sets.
type imageConfig struct {
	Entrypoint []string
	Cmd        []string
	Env        []string
	User       string
	WorkingDir string
}

// assemble makes a linux/amd64 image of the uncompressed layer tars, in
// order, with cfg.
func assemble(layerTars []string, cfg imageConfig) (v1.Image, error) {
	var layers []v1.Layer
	for _, t := range layerTars {
		l, err := tarball.LayerFromFile(t)
		if err != nil {
			return nil, fmt.Errorf("layer %s: %w", t, err)
		}
		layers = append(layers, l)
	}
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = "amd64", "linux"
	cf.Config.Entrypoint = cfg.Entrypoint
	cf.Config.Cmd = cfg.Cmd
	cf.Config.Env = cfg.Env
	cf.Config.User = cfg.User
	cf.Config.WorkingDir = cfg.WorkingDir
	return mutate.ConfigFile(img, cf)
}

// cachedImage returns the image cached under name and the inputs in key,
// building it first when there is none. build gets a scratch directory for
// its layer tars; the image it returns is written to an OCI layout in the
// asset cache and read back from there, so layers are compressed once.
func cachedImage(name string, key []string, build func(scratch string) (v1.Image, error)) (v1.Image, error) {
	root, err := imageCacheDir()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(strings.Join(append([]string{imageRecipe, name}, key...), "\x00")))
	dir := filepath.Join(root, name+"-"+hex.EncodeToString(sum[:8]))
	if img, err := readLayoutImage(dir); err == nil {
		return img, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("cached image %s: %w", dir, err)
	}

	tmp, err := os.MkdirTemp(root, name+".tmp-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	img, err := build(filepath.Join(tmp, "scratch"))
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", name, err)
	}
	lp, err := layout.Write(filepath.Join(tmp, "oci"), empty.Index)
	if err != nil {
		return nil, err
	}
	if err := lp.AppendImage(img); err != nil {
		return nil, fmt.Errorf("image %s: write layout: %w", name, err)
	}
	// Another test process may have cached the same image meanwhile; its
	// copy is as good as this one.
	if err := os.Rename(filepath.Join(tmp, "oci"), dir); err != nil && !errors.Is(err, os.ErrExist) && !isNotEmpty(err) {
		return nil, err
	}
	return readLayoutImage(dir)
}

func isNotEmpty(err error) bool {
	var le *os.LinkError
	return errors.As(err, &le) && strings.Contains(le.Err.Error(), "not empty")
}

// readLayoutImage opens the one image of the OCI layout in dir.
func readLayoutImage(dir string) (v1.Image, error) {
	if _, err := os.Stat(filepath.Join(dir, "index.json")); err != nil {
		return nil, err
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(im.Manifests) != 1 {
		return nil, fmt.Errorf("%s holds %d images, want 1", dir, len(im.Manifests))
	}
	return idx.Image(im.Manifests[0].Digest)
}

// imageCacheDir is where built images are kept: beside the binaries
// hack/test-assets.sh caches.
func imageCacheDir() (string, error) {
	dir := os.Getenv("SLESS_ASSETS_DIR")
	if dir == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("no asset cache: %w", err)
			}
			base = filepath.Join(home, ".cache")
		}
		dir = filepath.Join(base, "sless", "assets")
	}
	dir = filepath.Join(dir, "images")
	return dir, os.MkdirAll(dir, 0o755)
}

// fileKey identifies a host file's content for a cache key.
func fileKey(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read %s: %w", p, err)
	}
	return p + "@" + hex.EncodeToString(h.Sum(nil)), nil
}

// staticBinary checks that p is an executable that needs no libraries: the
// images built from one have no libc.
func staticBinary(p string) error {
	f, err := elf.Open(p)
	if err != nil {
		return fmt.Errorf("%s: not an executable: %w", p, err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; the image has no libc (build it with CGO_ENABLED=0 or -static)", p)
		}
	}
	return nil
}

// binaryImage builds (or reads from the cache) an image of static binaries
// and extra files, with cfg.
func binaryImage(name string, files []layerFile, cfg imageConfig) (v1.Image, error) {
	key := []string{fmt.Sprintf("%+v", cfg)}
	for _, f := range files {
		k := fmt.Sprintf("%s %o %d:%d %q %q %t", f.path, f.mode, f.uid, f.gid, f.data, f.link, f.dir)
		if f.src != "" {
			fk, err := fileKey(f.src)
			if err != nil {
				return nil, fmt.Errorf("image %s: %w", name, err)
			}
			k += " " + fk
		}
		key = append(key, k)
	}
	return cachedImage(name, key, func(scratch string) (v1.Image, error) {
		if err := os.MkdirAll(scratch, 0o755); err != nil {
			return nil, err
		}
		tarPath := filepath.Join(scratch, "layer.tar")
		if err := writeLayer(tarPath, files); err != nil {
			return nil, err
		}
		return assemble([]string{tarPath}, cfg)
	})
}

// uidString is a numeric user:group for an image's config.
func uidString(uid, gid int) string {
	return strconv.Itoa(uid) + ":" + strconv.Itoa(gid)
}
