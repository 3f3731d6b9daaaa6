package node_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"sigs.k8s.io/yaml"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/test/testbed"
	"github.com/sless-dev/sless/test/testbed/functionctl"
	"github.com/sless-dev/sless/test/testbed/nodeapi"
)

// nodeBuilds is the function namespace of a Serving, where sless's
// builds run kaniko in Tekton's TaskRun pods, fetch their contexts from the
// node's S3 and push to the node's registry with the namespace's push
// Secret.
type nodeBuilds struct {
	t      testing.TB
	s      *nodeapi.Serving
	node   *testbed.Node
	images *testbed.NodeImages
	ns     string
	kctl   string
	dir    string
}

func newNodeBuilds(t testing.TB, s *nodeapi.Serving) *nodeBuilds {
	t.Helper()
	return &nodeBuilds{t: t, s: s, node: s.Node, images: s.Images, ns: s.NS, kctl: testbed.Kubectl(t), dir: t.TempDir()}
}

// apply applies fn as a manifest with kubectl.
func (b *nodeBuilds) apply(fn *slessv1alpha1.Function) {
	b.t.Helper()
	manifest, err := yaml.Marshal(fn)
	if err != nil {
		b.t.Fatal(err)
	}
	file := filepath.Join(b.dir, fn.Name+".yaml")
	if err := os.WriteFile(file, manifest, 0o600); err != nil {
		b.t.Fatal(err)
	}
	cmd := exec.Command(b.kctl, "--kubeconfig", b.node.Kube.Kubeconfig, "-n", b.ns, "apply", "-f", file)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.t.Fatalf("kubectl apply %s: %v\n%s\n%s", fn.Name, err, manifest, out)
	}
}

// checkPushed asserts what the build of fn did on the node: kaniko (the
// node's image) ran and exited 0 in the TaskRun pod, with the push Secret
// mounted, and the registry holds under the build's tag the digest of
// status.image. It returns when kaniko's step finished.
func (b *nodeBuilds) checkPushed(t *testing.T, fn *slessv1alpha1.Function) time.Time {
	t.Helper()
	pod := functionctl.BuildPod(t, b.node.Kube, fn)
	kaniko := functionctl.BuilderStatus(pod)
	if kaniko == nil || kaniko.State.Terminated == nil || kaniko.State.Terminated.ExitCode != 0 {
		t.Fatalf("build pod %s: kaniko's step %+v", pod.Name, kaniko)
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == kaniko.Name && (c.Image != b.images.Kaniko || kaniko.ImageID == "") {
			t.Errorf("kaniko's step runs %s (pulled as %q), want %s", c.Image, kaniko.ImageID, b.images.Kaniko)
		}
	}
	mounted := false
	for _, v := range pod.Spec.Volumes {
		mounted = mounted || (v.Secret != nil && v.Secret.SecretName == "sless-registry")
	}
	if !mounted {
		t.Errorf("build pod %s does not mount the push Secret sless-registry", pod.Name)
	}

	repo := b.node.Registry + "/sless/" + b.ns + "/" + fn.Name
	if !strings.HasPrefix(fn.Status.Image, repo+"@sha256:") {
		t.Fatalf("status.image %s is not in %s", fn.Status.Image, repo)
	}
	tag, err := name.NewTag(repo+":src-"+strings.TrimPrefix(fn.Status.SourceDigest, "sha256:")[:32], name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Head(tag, remote.WithAuth(b.node.RegistryAuth()))
	if err != nil {
		t.Fatalf("the build's tag in the registry: %v", err)
	}
	if want := repo + "@" + desc.Digest.String(); fn.Status.Image != want {
		t.Errorf("status.image %s, the registry's %s is %s", fn.Status.Image, tag, want)
	}
	img, err := remote.Image(tag, remote.WithAuth(b.node.RegistryAuth()))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != "65532:65532" {
		t.Errorf("image user %q, want 65532:65532", cfg.Config.User)
	}
	done := kaniko.State.Terminated
	t.Logf("%s: %s (kaniko's step %s)", fn.Spec.Runtime, fn.Status.Image, done.FinishedAt.Sub(done.StartedAt.Time))
	return done.FinishedAt.Time
}

// buildLog is the log of fn's last build, for a failure's message.
func (b *nodeBuilds) buildLog(fn *slessv1alpha1.Function) string {
	out, err := b.cli("logs", fn.Name, "--build", "latest")
	if err != nil {
		return fmt.Sprintf("(sless logs: %v)\n%s", err, out)
	}
	return out
}

// cli runs the sless CLI (the static build of this checkout, which the
// node's sless image holds) against sless-api on the node.
func (b *nodeBuilds) cli(args ...string) (string, error) {
	bin, err := testbed.SlessStatic()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "SLESS_SERVER="+b.s.API.URL, "SLESS_TOKEN="+nodeapi.Token(b.t, b.ns), "SLESS_NAMESPACE="+b.ns,
		"SLESS_CONFIG="+filepath.Join(b.dir, "no-login"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return out.String(), err
}

func (b *nodeBuilds) slessCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, err := b.cli(args...)
	if err != nil {
		t.Fatalf("sless %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}
