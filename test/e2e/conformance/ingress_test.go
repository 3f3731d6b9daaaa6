// Package conformance_test runs Knative's own ingress conformance suite
// against sless's networking class on the real node. It is a package of
// its own because the suite's packages register their flags (kubeconfig,
// namespace, tag, ...) on the command line at init.
package conformance_test

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	networkingtest "knative.dev/networking/test"
	"knative.dev/networking/test/conformance/ingress"
	pkgtest "knative.dev/pkg/test"

	ingressresources "github.com/sless-dev/sless/pkg/reconciler/ingress/resources"
	"github.com/sless-dev/sless/test/testbed"
	"github.com/sless-dev/sless/test/testbed/nodeapi"
)

// notApplicable are the suite's tests a single node with sless-api as its
// ingress cannot take, each with why; every test in neither it nor
// knownGaps must pass. docs/testing.md lists them all.
var notApplicable = map[string]string{
	"tls": "sless-api terminates no TLS from an Ingress's secrets: on a cluster TLS ends " +
		"at the load balancer in front of it, and the bed has no certificate class",
	"httpoption": "alpha; HTTPOption Redirected needs the TLS listener above",
}

// knownGaps are the suite's tests sless's ingress fails today, each with
// what it lacks: skipped so the rest stay asserted, listed as failing in
// docs/testing.md. Drop a name once its feature lands.
var knownGaps = map[string]string{}

func TestMain(m *testing.M) {
	flag.Parse()
	// The suite's tests all run in parallel and mostly wait for pods and
	// probes: more of them at once than the machine has cores.
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", "4")
	}
	os.Exit(m.Run())
}

// TestNodeIngressConformance runs knative.dev/networking's ingress
// conformance suite, stable, beta and alpha tests, at the version go.mod
// pins, against sless's class: sless controller's ingress reconciler and
// sless api's proxy installed from config/ as pods (nodeapi.Install), the
// suite's test images as pods on the node, its calls through the node
// port of sless-api's public door (Service sless-api-public, the public
// load balancer Ingresses report). Every test but those in notApplicable
// must pass.
func TestNodeIngressConformance(t *testing.T) {
	checkSuiteNames(t)
	n := testbed.StartNodeFor(t)
	images, err := n.Images()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	nodeapi.Install(t, n, images)
	start := time.Now()
	repo, err := n.PushConformanceImages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("conformance images built and pushed in %v", time.Since(start).Round(time.Second))
	servingNamespace(ctx, t, n)

	pkgtest.Flags.Kubeconfig = n.Kube.Kubeconfig
	// The suite dials the node port of the public load balancer's Service
	// here; cluster-local hosts it reaches through a proxy pod of its own,
	// which dials the private one.
	pkgtest.Flags.IngressEndpoint = testbed.NodeIP
	pkgtest.Flags.DockerRepo = repo
	pkgtest.Flags.Tag = testbed.ConformanceTag
	nf := networkingtest.NetworkingFlags
	nf.IngressClass = ingressresources.ClassName
	nf.EnableBetaFeatures, nf.EnableAlphaFeatures = true, true
	var skips []string
	for name, why := range notApplicable {
		t.Logf("skipping %s, not applicable: %s", name, why)
		skips = append(skips, name)
	}
	// SLESS_CONFORMANCE_GAPS=1 runs the known gaps too, to see them fail
	// or, once fixed, pass.
	runGaps := os.Getenv("SLESS_CONFORMANCE_GAPS") == "1"
	for name, why := range knownGaps {
		if runGaps {
			t.Logf("running %s, a known gap: %s", name, why)
			continue
		}
		t.Logf("skipping %s, a known gap: %s", name, why)
		skips = append(skips, name)
	}
	slices.Sort(skips)
	nf.SkipTests = strings.Join(skips, ",")
	// No log streaming of a Knative system namespace: the bed runs no
	// Knative here, and the ingress is sless's pods.
	os.Setenv("SYSTEM_NAMESPACE", "")

	start = time.Now()
	// A group, so that the suite's parallel tests end before it returns.
	t.Run("suite", ingress.RunConformance)
	t.Logf("the suite ran in %v", time.Since(start).Round(time.Second))
}

// servingNamespace makes the namespace the suite's objects go in, and
// waits for its default ServiceAccount, without which its pods are refused.
func servingNamespace(ctx context.Context, t *testing.T, n *testbed.Node) {
	t.Helper()
	ns := networkingtest.ServingNamespace
	cs := n.Clientset
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("default ServiceAccount of %s: %v", ns, err)
	}
}

// suiteTest is how run.go names a test of the suite: "name": TestFunc.
var suiteTest = regexp.MustCompile(`(?m)^\s*"([a-z0-9/_-]+)":\s*Test\w+,`)

// checkSuiteNames fails when notApplicable names a test the suite at the
// pinned version does not have, so a renamed test is not skipped unseen.
func checkSuiteNames(t *testing.T) {
	t.Helper()
	root, err := testbed.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "knative.dev/networking")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list knative.dev/networking: %v", err)
	}
	src, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "test", "conformance", "ingress", "run.go"))
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, m := range suiteTest.FindAllStringSubmatch(string(src), -1) {
		have[m[1]] = true
	}
	if len(have) < 20 {
		t.Fatalf("found %d tests in the suite's run.go; its layout changed", len(have))
	}
	for _, skip := range []map[string]string{notApplicable, knownGaps} {
		for name := range skip {
			if !have[name] {
				t.Errorf("the skip lists name %q, which the suite has no test of", name)
			}
		}
	}
}
