package testbed_test

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/sless-dev/sless/test/testbed"
)

// testRegistry is go-containerregistry's registry on loopback, behind basic
// auth so pushes must carry the authenticator.
func testRegistry(t *testing.T) (host string, auth authn.Authenticator) {
	t.Helper()
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "bed" || p != "secret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="bed"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), &authn.Basic{Username: "bed", Password: "secret"}
}

// pulled reads ref back from the registry.
func pulled(t *testing.T, ref string, auth authn.Authenticator) v1.Image {
	t.Helper()
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(r, remote.WithAuth(auth))
	if err != nil {
		t.Fatalf("pull %s: %v", ref, err)
	}
	return img
}

// imageFile is one entry of an image's flattened file system.
type imageFile struct {
	Type     byte
	Mode     int64
	Uid, Gid int
	Link     string
	Size     int64
}

func imageFiles(t *testing.T, img v1.Image) map[string]imageFile {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]imageFile{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		files["/"+strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")] = imageFile{
			Type: h.Typeflag, Mode: h.Mode & 0o7777, Uid: h.Uid, Gid: h.Gid, Link: h.Linkname, Size: h.Size,
		}
	}
}

// unpack writes img's file system under dir, owners and modes kept, so it
// can be chrooted into.
func unpack(t *testing.T, img v1.Image, dir string) {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, p)
		case tar.TypeLink:
			err = os.Link(filepath.Join(dir, filepath.Clean("/"+h.Linkname)), p)
		case tar.TypeReg:
			var f *os.File
			if f, err = os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600); err == nil {
				_, err = io.Copy(f, tr)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
		default:
			continue // devices and fifos are not needed to run a program
		}
		if err == nil && h.Typeflag != tar.TypeSymlink && h.Typeflag != tar.TypeLink {
			if err = os.Lchown(p, h.Uid, h.Gid); err == nil {
				err = os.Chmod(p, os.FileMode(h.Mode&0o777)|tarModeBits(h.Mode))
			}
		}
		if err != nil {
			t.Fatalf("unpack %s: %v", h.Name, err)
		}
	}
}

func tarModeBits(m int64) os.FileMode {
	var out os.FileMode
	if m&0o1000 != 0 {
		out |= os.ModeSticky
	}
	if m&0o2000 != 0 {
		out |= os.ModeSetgid
	}
	if m&0o4000 != 0 {
		out |= os.ModeSetuid
	}
	return out
}

// inImage runs argv chrooted into img's unpacked file system, as root, with
// env, and returns its combined output.
func inImage(t *testing.T, img v1.Image, env []string, argv ...string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("running an image's program needs chroot, which needs root")
	}
	dir := t.TempDir()
	unpack(t, img, dir)
	cmd := exec.Command("chroot", append([]string{dir}, argv...)...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v in the image: %v\n%s", argv, err, out)
	}
	return string(out)
}

func configOf(t *testing.T, img v1.Image) v1.Config {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Errorf("platform %s/%s, want linux/amd64", cf.OS, cf.Architecture)
	}
	return cf.Config
}

func wantConfig(t *testing.T, what string, got, want v1.Config) {
	t.Helper()
	if !reflect.DeepEqual(got.Entrypoint, want.Entrypoint) || !reflect.DeepEqual(got.Cmd, want.Cmd) ||
		!reflect.DeepEqual(got.Env, want.Env) || got.User != want.User || got.WorkingDir != want.WorkingDir {
		t.Errorf("%s config:\n got entrypoint %q cmd %q env %q user %q workdir %q\nwant entrypoint %q cmd %q env %q user %q workdir %q",
			what, got.Entrypoint, got.Cmd, got.Env, got.User, got.WorkingDir,
			want.Entrypoint, want.Cmd, want.Env, want.User, want.WorkingDir)
	}
}

func wantFile(t *testing.T, what string, files map[string]imageFile, p string, want imageFile) {
	t.Helper()
	got, ok := files[p]
	if !ok {
		t.Errorf("%s: no %s", what, p)
		return
	}
	if want.Size == 0 {
		want.Size = got.Size
	}
	if got != want {
		t.Errorf("%s: %s is %+v, want %+v", what, p, got, want)
	}
}

func digestOf(t *testing.T, img v1.Image) string {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

func TestPauseAndShellImages(t *testing.T) {
	// Any static binary shows the layout; the bed passes the real pause.
	pauseBin := testbed.BusyboxPath
	build := func() (pause, shell v1.Image) {
		var err error
		if pause, err = testbed.PauseImage(pauseBin); err != nil {
			t.Fatal(err)
		}
		if shell, err = testbed.ShellImage(testbed.BusyboxPath); err != nil {
			t.Fatal(err)
		}
		return pause, shell
	}
	t.Setenv("SLESS_ASSETS_DIR", t.TempDir())
	pause, shell := build()
	// A second build from an empty cache must give the same bytes.
	t.Setenv("SLESS_ASSETS_DIR", t.TempDir())
	pause2, shell2 := build()
	if digestOf(t, pause) != digestOf(t, pause2) || digestOf(t, shell) != digestOf(t, shell2) {
		t.Errorf("rebuilt images differ: pause %s vs %s, shell %s vs %s",
			digestOf(t, pause), digestOf(t, pause2), digestOf(t, shell), digestOf(t, shell2))
	}

	host, auth := testRegistry(t)
	ctx := context.Background()
	pauseRef, err := testbed.PushImage(ctx, host, "pause", "3.10", pause, auth)
	if err != nil {
		t.Fatal(err)
	}
	if want := host + "/pause@" + digestOf(t, pause); pauseRef != want {
		t.Errorf("pause reference %s, want %s", pauseRef, want)
	}
	if _, err := testbed.PushImage(ctx, host, "pause", "3.10", pause, authn.Anonymous); err == nil {
		t.Error("push without credentials succeeded")
	}
	shellRef, err := testbed.PushImage(ctx, host, "shell", "latest", shell, auth)
	if err != nil {
		t.Fatal(err)
	}

	p := pulled(t, pauseRef, auth)
	wantConfig(t, "pause", configOf(t, p), v1.Config{Entrypoint: []string{"/pause"}})
	files := imageFiles(t, p)
	wantFile(t, "pause", files, "/pause", imageFile{Type: tar.TypeReg, Mode: 0o755})
	if len(files) != 1 {
		t.Errorf("pause image holds %d entries, want only /pause: %v", len(files), files)
	}

	s := pulled(t, shellRef, auth)
	wantConfig(t, "shell", configOf(t, s), v1.Config{Entrypoint: []string{"/bin/sh"}, Env: []string{"PATH=/bin"}})
	files = imageFiles(t, s)
	wantFile(t, "shell", files, "/bin/busybox", imageFile{Type: tar.TypeReg, Mode: 0o755})
	wantFile(t, "shell", files, "/bin/sh", imageFile{Type: tar.TypeSymlink, Mode: 0o777, Link: "busybox"})
	wantFile(t, "shell", files, "/tmp", imageFile{Type: tar.TypeDir, Mode: 0o1777})
	if out := inImage(t, s, []string{"PATH=/bin"}, "/bin/sh", "-c", "echo $((6*7)) > /tmp/x && cat /tmp/x && ls /bin | grep -c ."); !strings.HasPrefix(out, "42\n") {
		t.Errorf("shell in the image printed %q", out)
	}
}

func TestImageNeedsStaticBinary(t *testing.T) {
	t.Setenv("SLESS_ASSETS_DIR", t.TempDir())
	for name, bin := range map[string]string{"dynamic": "/bin/ls", "missing": filepath.Join(t.TempDir(), "pause"), "not a program": "/etc/passwd"} {
		if _, err := testbed.PauseImage(bin); err == nil {
			t.Errorf("%s: pause image from %s built", name, bin)
		}
	}
}
