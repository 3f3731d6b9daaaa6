package testbed

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Push pushes img to the node's registry as repo:tag and returns its
// digest-pinned reference, which the node can pull.
func (n *Node) Push(ctx context.Context, repo, tag string, img v1.Image) (string, error) {
	return PushImage(ctx, n.Registry, repo, tag, img, n.reg.Auth())
}

// Namespace creates a namespace with a fresh name for t, deleted (with
// its pods, by the controller-manager's namespace controller) when t
// ends. It returns once the namespace's default ServiceAccount exists:
// the controller-manager makes it, and until then the ServiceAccount
// admission plugin refuses the namespace's pods.
func (n *Node) Namespace(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "node-", Labels: map[string]string{"sless.dev/test": "true"}}}
	ns, err := n.Clientset.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("testbed: namespace: %v", err)
	}
	t.Cleanup(func() {
		err := n.Clientset.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Logf("testbed: delete namespace %s: %v", ns.Name, err)
		}
	})
	if err := n.awaitServiceAccount(ctx, ns.Name, "default"); err != nil {
		t.Fatalf("testbed: %v", err)
	}
	return ns.Name
}

// awaitServiceAccount waits for the ServiceAccount ns/name.
func (n *Node) awaitServiceAccount(ctx context.Context, ns, name string) error {
	for {
		_, err := n.Clientset.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ServiceAccount %s/%s: %w (last %v)", ns, name, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// StaticProgramImage is the static program bin as ko lays it out
// (/ko-app/<name> on a distroless-like base, run as 65532): for test
// programs that run as pods on the node.
func StaticProgramImage(name, bin string) (v1.Image, error) {
	return koImage(name, bin)
}

// BuildStatic builds the main package pkg (an import path or a path
// relative to the repository's root) with CGO_ENABLED=0 into dir, and
// returns the binary's path.
func BuildStatic(pkg, dir string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return out, nil
}
