// Package nodeapi installs sless on a real node (testbed.Node) as an
// operator does (docs/install.md): the manifests of config/ through a
// kustomize overlay that names the node's sless image and sets the site's
// settings, and the Secrets sless-system and each function namespace
// hold. `sless api` and `sless controller` then run as pods of that image
// under their ServiceAccounts, with S3 and PostgreSQL on the host side of
// the node's veth, where pods reach them. Tests reach sless-api through its
// Service's cluster IP, which the host routes into the node.
package nodeapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/sless-dev/sless/pkg/auth"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/test/testbed"
)

// Where config/ installs sless-api's Services: the cluster-local door's
// and the public door's.
const (
	Namespace     = "sless-system"
	Service       = "sless-api"
	PublicService = "sless-api-public"
	// Domain is the domain function hosts are served under,
	// {name}.{namespace}.Domain (SLESS_FN_DOMAIN).
	Domain = "fn.testbed.local"
)

var secret = []byte("sless-node-api-secret-0123456789abcdef")

// API is sless as installed on the node.
type API struct {
	// URL is sless-api's Service as the test reaches it:
	// http://<its cluster IP>.
	URL string
	// S3 is the server sless stores sources and build contexts in, Bucket
	// its bucket.
	S3     *testbed.S3Server
	Bucket string
}

// Install installs sless on n, its pods running images.Sless, and returns
// once sless-api and sless-controller are available and sless-api answers
// through its Service. On failure, t's log gets their pods' logs.
func Install(t testing.TB, n *testbed.Node, images *testbed.NodeImages) *API {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	s3srv, err := n.S3()
	if err != nil {
		t.Fatal(err)
	}
	a := &API{S3: s3srv, Bucket: s3srv.Bucket(t)}
	pg, err := n.Postgres()
	if err != nil {
		t.Fatal(err)
	}
	database := testbed.CreateDatabase(t, pg.URL("postgres"))

	// The Secrets first: the pods start with them. config/ also holds a
	// Role in Knative's namespace (config-features), which a cluster with
	// Knative has; the ingress conformance bed runs no Knative.
	for _, ns := range []string{Namespace, testbed.KnativeNamespace} {
		if _, err := n.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("namespace %s: %v", ns, err)
		}
	}
	for name, data := range map[string]map[string]string{
		"sless-s3":       {"AWS_ACCESS_KEY_ID": s3srv.AccessKey, "AWS_SECRET_ACCESS_KEY": s3srv.SecretKey},
		"sless-jwt":      {"secret": string(secret)},
		"sless-database": {"url": database},
	} {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace}, StringData: data}
		if _, err := n.Clientset.CoreV1().Secrets(Namespace).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
			t.Fatalf("Secret %s/%s: %v", Namespace, name, err)
		}
	}
	overlay := writeOverlay(t, map[string]string{
		"SLESS_REGISTRY":          n.Registry + "/sless",
		"SLESS_S3_ENDPOINT":       "http://" + s3srv.Endpoint,
		"SLESS_BUILD_S3_ENDPOINT": "http://" + s3srv.Endpoint,
		"SLESS_S3_BUCKET":         a.Bucket,
		"SLESS_S3_REGION":         s3srv.Region,
		"SLESS_BUILDER_IMAGE":     images.Kaniko,
		"SLESS_BUILDER_ARGS":      strings.Join(images.KanikoArgs(), ","),
		"SLESS_HELPER_IMAGE":      images.Shell,
		"SLESS_PUBLIC_BASE_URL":   "http://sless.testbed.local",
		"SLESS_FN_DOMAIN":         Domain,
		"SLESS_IMAGE":             images.Sless,
		// The test namespaces (Node.Namespace) are tenants' by name.
		"SLESS_TENANT_NAMESPACE_PREFIXES": "node-",
	}, images.Sless)
	t.Cleanup(func() { podLogs(t, n) })
	cmd := exec.CommandContext(ctx, testbed.Kubectl(t), "--kubeconfig", n.Kube.Kubeconfig,
		"apply", "--server-side", "--force-conflicts", "-k", overlay)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply -k config/ (overlay %s): %v\n%s", overlay, err, out)
	}
	for _, name := range []string{"sless-api", "sless-controller"} {
		if err := n.AwaitDeployment(ctx, Namespace, name); err != nil {
			t.Fatal(err)
		}
	}
	svc, err := n.Clientset.CoreV1().Services(Namespace).Get(ctx, Service, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a.URL = "http://" + svc.Spec.ClusterIP
	// kube-proxy programs the Service a moment after its endpoints are
	// ready.
	c := &http.Client{Timeout: 5 * time.Second}
	for {
		resp, err := c.Get(a.URL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("sless-api not answering at %s: %v (last %v)", a.URL, ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	t.Logf("sless installed on the node in %v", time.Since(start).Round(time.Millisecond))
	return a
}

// writeOverlay writes a kustomization over config/ that sets sless's image
// to image (name@digest) and the data of the ConfigMap sless-config, and
// returns its directory.
func writeOverlay(t testing.TB, config map[string]string, image string) string {
	t.Helper()
	root, err := testbed.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// kustomize takes a base from anywhere, by a relative path.
	base, err := filepath.Rel(dir, filepath.Join(root, "config"))
	if err != nil {
		t.Fatal(err)
	}
	name, digest, ok := strings.Cut(image, "@")
	if !ok {
		t.Fatalf("sless image %s is not pinned by digest", image)
	}
	patch, err := yaml.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]string{"name": "sless-config", "namespace": Namespace},
		"data":     config,
	})
	if err != nil {
		t.Fatal(err)
	}
	// The public door a NodePort, as a cluster's behind a load balancer
	// has: a client outside the cluster (Knative's conformance suite, with
	// --ingressendpoint the node) dials it on the node's address.
	nodePort, err := yaml.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]string{"name": PublicService, "namespace": Namespace},
		"spec":     map[string]string{"type": "NodePort"},
	})
	if err != nil {
		t.Fatal(err)
	}
	k, err := yaml.Marshal(map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
		"resources": []string{base},
		"images":    []map[string]string{{"name": "ghcr.io/sless-dev/sless", "newName": name, "digest": digest}},
		"patches":   []map[string]string{{"patch": string(patch)}, {"patch": string(nodePort)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), k, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// podLogs writes the tail of each container's log of sless's pods to t's
// log when t has failed.
func podLogs(t testing.TB, n *testbed.Node) {
	if !t.Failed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pods, err := n.Clientset.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("pods of %s: %v", Namespace, err)
		return
	}
	t.Logf("sless's pods:\n%s", n.DescribePods(Namespace))
	tail := int64(60)
	for _, p := range pods.Items {
		for _, c := range p.Spec.Containers {
			b, err := n.Clientset.CoreV1().Pods(Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name, TailLines: &tail}).Do(ctx).Raw()
			if err != nil {
				t.Logf("log of %s/%s: %v", p.Name, c.Name, err)
				continue
			}
			t.Logf("log of %s/%s (last %d lines):\n%s", p.Name, c.Name, tail, b)
		}
	}
}

// FunctionNamespace gives namespace ns the Secrets a function namespace
// holds for builds (docs/install.md): S3 read access for kaniko's context,
// and the registry's push credentials.
func (a *API) FunctionNamespace(t testing.TB, n *testbed.Node, ns string) {
	t.Helper()
	ctx := context.Background()
	for _, sec := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "sless-s3", Namespace: ns},
			StringData: map[string]string{"AWS_ACCESS_KEY_ID": a.S3.AccessKey, "AWS_SECRET_ACCESS_KEY": a.S3.SecretKey}},
		n.PushSecret(ns, "sless-registry"),
	} {
		if _, err := n.Clientset.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
			t.Fatalf("Secret %s/%s: %v", ns, sec.Name, err)
		}
	}
}

// Token is a bearer token of namespace ns that the API accepts.
func Token(t testing.TB, ns string) string {
	t.Helper()
	tok, err := token(ns)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func token(ns string) (string, error) {
	return jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "node-test", "aud": "sless",
		"exp": time.Now().Add(time.Hour).Unix(), auth.DefaultNamespaceClaim: ns}).SignedString(secret)
}

// Calls lists the records of function ns/name's calls and runs, newest
// first, as sless-api's invocations endpoint shows them.
func (a *API) Calls(ctx context.Context, ns, name string) ([]invoke.Invocation, error) {
	return a.history(ctx, ns, "functions", name)
}

// ServiceCalls is Calls of SlessService ns/name.
func (a *API) ServiceCalls(ctx context.Context, ns, name string) ([]invoke.Invocation, error) {
	return a.history(ctx, ns, "services", name)
}

func (a *API) history(ctx context.Context, ns, kind, name string) ([]invoke.Invocation, error) {
	tok, err := token(ns)
	if err != nil {
		return nil, err
	}
	u := a.URL + "/v1/namespaces/" + url.PathEscape(ns) + "/" + kind + "/" + url.PathEscape(name) + "/invocations?limit=" + fmt.Sprint(invoke.MaxListLimit)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("records of %s/%s: %w", ns, name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("records of %s/%s: %w", ns, name, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("records of %s/%s: %s: %s", ns, name, resp.Status, b)
	}
	var page struct {
		Items []invoke.Invocation `json:"items"`
	}
	if err := json.Unmarshal(b, &page); err != nil {
		return nil, fmt.Errorf("records of %s/%s: %w", ns, name, err)
	}
	return page.Items, nil
}
