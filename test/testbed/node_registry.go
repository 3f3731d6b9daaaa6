package testbed

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	corev1 "k8s.io/api/core/v1"
)

// startRegistry runs distribution's registry on the host side of the veth,
// where containerd pulls from, with its storage under the node's directory
// (so a killed run's registry is found and ended by the next start), and
// pushes the pause and shell images with the registry's credentials. The
// other images are pushed on demand (Images): most node tests need none.
func (n *Node) startRegistry(ctx context.Context) error {
	var err error
	if n.reg, err = StartRegistry(filepath.Join(n.dir, "registry"), NodeHostIP); err != nil {
		return err
	}
	n.Registry = n.reg.Host
	pauseBin, err := buildPause(n.dir)
	if err != nil {
		return err
	}
	pause, err := PauseImage(pauseBin)
	if err != nil {
		return err
	}
	if n.PauseImage, err = PushImage(ctx, n.Registry, "pause", "3.10", pause, n.reg.Auth()); err != nil {
		return err
	}
	shell, err := ShellImage(BusyboxPath)
	if err != nil {
		return err
	}
	n.ShellImage, err = PushImage(ctx, n.Registry, "shell", "latest", shell, n.reg.Auth())
	return err
}

// RegistryAuthorization is the Authorization header value of the
// registry's user: containerd sends it on every request to the registry
// (hosts.toml), as a node configured with a private registry's credentials
// does, so every pod pulls with credentials, the sandbox's pause included
// (containerd pulls that one itself, with no pod's pull secret).
func (r *Registry) RegistryAuthorization() string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(r.Username+":"+r.Password))
}

// PushSecret is the registry's kubernetes.io/dockerconfigjson Secret in
// namespace: what SLESS_REGISTRY_SECRET names for the build's push.
func (n *Node) PushSecret(namespace, name string) *corev1.Secret {
	return n.reg.PushSecret(namespace, name)
}

// Images builds (BuildNodeImages, under no deadline: cold, it takes many
// minutes) and pushes (within 5 minutes) every image the node runs the
// first time it is called, and returns their references after that.
func (n *Node) Images() (*NodeImages, error) {
	n.imagesMu.Lock()
	defer n.imagesMu.Unlock()
	if n.images != nil {
		return n.images, nil
	}
	programs, err := ImageProgramsDir()
	if err != nil {
		return nil, err
	}
	slessBin, err := SlessStatic()
	if err != nil {
		return nil, err
	}
	in := NodeImageInputs{Pause: filepath.Join(n.dir, "pause"), Busybox: BusyboxPath, Kaniko: n.assets.Kaniko,
		Programs: programs, Sless: slessBin}
	if err := BuildNodeImages(in); err != nil {
		return nil, fmt.Errorf("node images: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if n.images, err = PushNodeImages(ctx, in, n.Registry, n.reg.Auth()); err != nil {
		return nil, fmt.Errorf("node images: %w", err)
	}
	return n.images, nil
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
	if n.reg != nil {
		n.reg.Stop()
	}
	_ = os.Remove(filepath.Join(n.dir, "pause"))
}

// S3 is an S3 server (versitygw) on the host side of the veth, where build
// pods fetch their contexts from, started on first call and stopped with
// the node. Its data lives under the node's directory.
func (n *Node) S3() (*S3Server, error) {
	n.imagesMu.Lock()
	defer n.imagesMu.Unlock()
	if n.s3 != nil {
		return n.s3, nil
	}
	s, err := startS3(NodeHostIP, filepath.Join(n.dir, "s3"))
	if err != nil {
		return nil, fmt.Errorf("S3 for the node: %w", err)
	}
	n.s3 = s
	return s, nil
}

// Postgres is a PostgreSQL server on the host side of the veth, where
// pods reach it (their traffic leaves the node from NodeIP), started on
// first call and stopped with the node. Its data lives under the node's
// directory, so a killed run's server is ended by the next start.
func (n *Node) Postgres() (*PostgresServer, error) {
	n.imagesMu.Lock()
	defer n.imagesMu.Unlock()
	if n.pg != nil {
		return n.pg, nil
	}
	s, err := startPostgres(filepath.Join(n.dir, "postgres"), NodeHostIP, NodeIP+"/32", NodeHostIP+"/32")
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL for the node: %w", err)
	}
	n.pg = s
	return s, nil
}

// RegistryAuth is the registry user's credentials, for go-containerregistry.
func (n *Node) RegistryAuth() authn.Authenticator {
	return n.reg.Auth()
}
