package testbed_test

import (
	"archive/tar"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/sless-dev/sless/test/testbed"
)

// TestProgramImagesLayout checks the layout and config of the images built
// from static programs, as their consumers need them: any static binary
// shows the layout (busybox here); TestNodeImages builds them from the real
// programs.
func TestProgramImagesLayout(t *testing.T) {
	bin := testbed.BusyboxPath
	dir := t.TempDir()
	for _, name := range append(append([]string{}, testbed.TektonStepPrograms...), testbed.KnativePrograms...) {
		if err := copyFile(bin, dir+"/"+name); err != nil {
			t.Fatal(err)
		}
	}
	type built struct {
		name string
		img  v1.Image
	}
	build := func() []built {
		var out []built
		add := func(name string, img v1.Image, err error) {
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			out = append(out, built{name, img})
		}
		for _, name := range append(append([]string{}, testbed.TektonStepPrograms...), testbed.KnativePrograms...) {
			img, err := testbed.ProgramImage(dir, name)
			add(name, img, err)
		}
		img, err := testbed.KanikoImage(bin)
		add("kaniko", img, err)
		img, err = testbed.SlessImage(bin)
		add("sless", img, err)
		return out
	}
	t.Setenv("SLESS_ASSETS_DIR", t.TempDir())
	first := build()
	t.Setenv("SLESS_ASSETS_DIR", t.TempDir())
	second := build()
	for i := range first {
		if a, b := digestOf(t, first[i].img), digestOf(t, second[i].img); a != b {
			t.Errorf("%s rebuilt from an empty cache as %s, was %s", first[i].name, b, a)
		}
	}

	host, auth := testRegistry(t)
	nonroot := fmt.Sprintf("%d:%d", testbed.NonrootUID, testbed.NonrootUID)
	for _, b := range first {
		ref, err := testbed.PushImage(context.Background(), host, "node/"+b.name, "test", b.img, auth)
		if err != nil {
			t.Fatal(err)
		}
		img := pulled(t, ref, auth)
		cfg := configOf(t, img)
		files := imageFiles(t, img)
		switch b.name {
		case "kaniko":
			// kaniko runs as root: it unpacks the base image over its own root.
			wantConfig(t, b.name, cfg, v1.Config{Entrypoint: []string{"/kaniko/executor"}, WorkingDir: "/workspace",
				Env: []string{"HOME=/root", "USER=root", "PATH=/usr/local/bin:/kaniko", "SSL_CERT_DIR=/kaniko/ssl/certs", "DOCKER_CONFIG=/kaniko/.docker/"}})
			wantFile(t, b.name, files, "/kaniko/executor", imageFile{Type: tar.TypeReg, Mode: 0o755})
			wantFile(t, b.name, files, "/kaniko/ssl/certs/ca-certificates.crt", imageFile{Type: tar.TypeReg, Mode: 0o644})
			wantFile(t, b.name, files, "/kaniko/.docker", imageFile{Type: tar.TypeDir, Mode: 0o755})
			wantFile(t, b.name, files, "/workspace", imageFile{Type: tar.TypeDir, Mode: 0o755})
		case "sless":
			wantConfig(t, b.name, cfg, v1.Config{Entrypoint: []string{"/sless"}, User: nonroot,
				Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}})
			wantFile(t, b.name, files, "/sless", imageFile{Type: tar.TypeReg, Mode: 0o755})
			wantStaticBase(t, b.name, files)
		default:
			// ko's layout: Tekton's controller runs /ko-app/entrypoint by path
			// in its init container, and Knative's queue sets runAsNonRoot,
			// which the kubelet checks against a numeric user.
			wantConfig(t, b.name, cfg, v1.Config{Entrypoint: []string{"/ko-app/" + b.name}, User: nonroot,
				Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/ko-app",
					"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt", "KO_DATA_PATH=/var/run/ko"}})
			wantFile(t, b.name, files, "/ko-app/"+b.name, imageFile{Type: tar.TypeReg, Mode: 0o755})
			wantStaticBase(t, b.name, files)
		}
	}
}

// wantStaticBase checks the distroless-like base: the nonroot user and its
// home, CA certificates, a sticky /tmp.
func wantStaticBase(t *testing.T, what string, files map[string]imageFile) {
	t.Helper()
	wantFile(t, what, files, "/etc/ssl/certs/ca-certificates.crt", imageFile{Type: tar.TypeReg, Mode: 0o644})
	wantFile(t, what, files, "/tmp", imageFile{Type: tar.TypeDir, Mode: 0o1777})
	wantFile(t, what, files, "/home/nonroot", imageFile{Type: tar.TypeDir, Mode: 0o700, Uid: testbed.NonrootUID, Gid: testbed.NonrootUID})
	wantFile(t, what, files, "/etc/passwd", imageFile{Type: tar.TypeReg, Mode: 0o644})
	if _, ok := files["/bin/sh"]; ok {
		t.Errorf("%s: the static base has a shell", what)
	}
}

// TestReleaseRewrite checks that the release manifests' ko:// references
// to programs the node runs become the pushed images, and that one to a
// program it has no image for is refused.
func TestReleaseRewrite(t *testing.T) {
	n := &testbed.NodeImages{Registry: "10.201.0.1:5000", Shell: "10.201.0.1:5000/shell@sha256:" + strings.Repeat("1", 64), Programs: map[string]string{}}
	for _, name := range append(append([]string{}, testbed.TektonStepPrograms...), testbed.KnativePrograms...) {
		n.Programs[name] = "10.201.0.1:5000/" + name + "@sha256:" + strings.Repeat("2", 64)
	}
	doc := []byte("image: ko://knative.dev/serving/cmd/activator\nargs: [\"-nop-image\", \"ko://github.com/tektoncd/pipeline/cmd/nop\"]\n")
	got, err := n.RewriteRelease(doc)
	if err != nil {
		t.Fatal(err)
	}
	want := "image: " + n.Programs["activator"] + "\nargs: [\"-nop-image\", \"" + n.Programs["nop"] + "\"]\n"
	if string(got) != want {
		t.Errorf("rewritten:\n%s\nwant:\n%s", got, want)
	}
	if _, err := n.RewriteRelease([]byte("image: ko://knative.dev/serving/cmd/controller\n")); err == nil || !strings.Contains(err.Error(), "cmd/controller") {
		t.Errorf("a reference with no image: %v", err)
	}
	if got := n.KnativeDeploymentConfig()["queue-sidecar-image"]; got != n.Programs["queue"] {
		t.Errorf("queue-sidecar-image %q", got)
	}
	args := strings.Join(n.TektonControllerArgs(), " ")
	for _, name := range testbed.TektonStepPrograms {
		if !strings.Contains(args, "-"+name+"-image "+n.Programs[name]) {
			t.Errorf("Tekton's flags %q lack -%s-image", args, name)
		}
	}
	if !strings.Contains(args, "-shell-image-win ") {
		t.Errorf("Tekton's flags %q lack -shell-image-win: its controller refuses to start without", args)
	}
	kaniko := strings.Join(n.KanikoArgs(), " ")
	for _, want := range []string{"--registry-mirror=" + n.Registry + " ", "--insecure-registry=" + n.Registry + " ", "--skip-default-registry-fallback"} {
		if !strings.Contains(kaniko+" ", want) {
			t.Errorf("kaniko's flags %q lack %q", kaniko, want)
		}
	}
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}
