package testbed

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The images the real-node bed runs are assembled here from binaries built
// on this machine: nothing but the bed's own registry is reachable, so no
// image comes from Docker Hub, ghcr.io or gcr.io. docs/testing.md lists
// them and how each differs from the one a production cluster pulls.

// BusyboxPath is where Debian's busybox-static puts its binary.
const BusyboxPath = "/bin/busybox"

// PauseImage is the sandbox image containerd starts first in every pod:
// the static pause binary (Kubernetes' build/pause/linux/pause.c) as /pause.
func PauseImage(pauseBin string) (v1.Image, error) {
	if err := staticBinary(pauseBin); err != nil {
		return nil, fmt.Errorf("pause image: %w", err)
	}
	return binaryImage("pause", []layerFile{{path: "/pause", src: pauseBin, mode: 0o755}},
		imageConfig{Entrypoint: []string{"/pause"}})
}

// ShellImage is a small image with a POSIX shell and the usual tools:
// Debian's static busybox with a link per applet in /bin. Test pods and
// Tekton's -shell-image run it.
func ShellImage(busybox string) (v1.Image, error) {
	if err := staticBinary(busybox); err != nil {
		return nil, fmt.Errorf("shell image: %w", err)
	}
	files, err := busyboxFiles(busybox)
	if err != nil {
		return nil, fmt.Errorf("shell image: %w", err)
	}
	files = append(files, layerFile{path: "/tmp", dir: true, mode: 0o1777})
	return binaryImage("shell", files, imageConfig{Entrypoint: []string{"/bin/sh"}, Env: []string{"PATH=/bin"}})
}

// busyboxFiles are /bin/busybox and a symlink to it for every applet it
// lists.
func busyboxFiles(busybox string) ([]layerFile, error) {
	var out, errOut bytes.Buffer
	cmd := exec.Command(busybox, "--list")
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s --list: %w: %s", busybox, err, errOut.String())
	}
	files := []layerFile{{path: "/bin/busybox", src: busybox, mode: 0o755}}
	for _, applet := range strings.Fields(out.String()) {
		if applet == "busybox" || strings.Contains(applet, "/") {
			continue
		}
		files = append(files, layerFile{path: "/bin/" + applet, link: "busybox"})
	}
	return files, nil
}
