package testbed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/registry"
)

// startRegistry serves a registry on the host side of the veth, where
// containerd pulls from, and pushes the pause and shell images to it.
func (n *Node) startRegistry(ctx context.Context) error {
	ln, err := net.Listen("tcp", NodeHostIP+":0")
	if err != nil {
		return err
	}
	n.Registry = ln.Addr().String()
	n.registry = &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	go func() { _ = n.registry.Serve(ln) }()

	pauseBin, err := buildPause(n.dir)
	if err != nil {
		return err
	}
	pause, err := PauseImage(pauseBin)
	if err != nil {
		return err
	}
	if n.PauseImage, err = PushImage(ctx, n.Registry, "pause", "3.10", pause, nil); err != nil {
		return err
	}
	shell, err := ShellImage(BusyboxPath)
	if err != nil {
		return err
	}
	n.ShellImage, err = PushImage(ctx, n.Registry, "shell", "1", shell, nil)
	return err
}

// buildPause compiles Kubernetes' pause.c (from the module cache of the
// release the node runs) statically into dir.
func buildPause(dir string) (string, error) {
	// Outside any module: the release need not be one of sless's dependencies.
	src, err := run("sh", "-c", "cd / && go mod download -json k8s.io/kubernetes@v1.36.3")
	if err != nil {
		return "", err
	}
	i := strings.Index(src, `"Dir": "`)
	if i < 0 {
		return "", errors.New("go mod download printed no Dir for k8s.io/kubernetes")
	}
	modDir := strings.SplitN(src[i+len(`"Dir": "`):], `"`, 2)[0]
	out := filepath.Join(dir, "pause")
	if _, err := run("gcc", "-Os", "-Wall", "-Werror", "-static", "-o", out, filepath.Join(modDir, "build/pause/linux/pause.c")); err != nil {
		return "", fmt.Errorf("build pause: %w", err)
	}
	return out, nil
}

func (n *Node) stopRegistry() {
	if n.registry != nil {
		_ = n.registry.Close()
	}
	_ = os.Remove(filepath.Join(n.dir, "pause"))
}
