// Package functionctl runs sless's Function and SlessService controllers in a test process on
// a test bed. It is apart from testbed, which the adapters' own tests import
// and the controller imports those adapters.
package functionctl

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/sless-dev/sless/pkg/adapter/resources"
	"github.com/sless-dev/sless/pkg/adapter/s3"
	"github.com/sless-dev/sless/pkg/reconciler/function"
	"github.com/sless-dev/sless/pkg/reconciler/service"
	"github.com/sless-dev/sless/test/testbed"
)

// Registry is the repository prefix Run builds into.
const Registry = "registry.testbed.local/sless"

// Run runs sless's Function and SlessService controllers on namespace ns of
// k until the test ends, storing build contexts in a fresh bucket of the
// package's S3 server, with the credentials Secrets an operator puts in a
// function namespace (build pods mount them). configure, when given,
// changes the controllers' resources.Config (say, the ingress class).
func Run(t testing.TB, k *testbed.Kube, ns string, configure ...func(*resources.Config)) {
	t.Helper()
	RunWith(t, k, ns, Setup{Configure: configure})
}

// Setup is where RunWith's controllers store, build and push.
type Setup struct {
	// S3 stores the build contexts, in a fresh bucket; SharedS3 when nil.
	// Build pods reach it at its Endpoint.
	S3 *testbed.S3Server
	// Registry is the repository prefix images are pushed to; Registry
	// (never pushed to) when empty.
	Registry string
	// PushSecret is the kubernetes.io/dockerconfigjson Secret the build
	// pushes with, created in ns and named by SLESS_REGISTRY_SECRET
	// (resources.Config.RegistrySecret); one for Registry's host with
	// made-up credentials when nil.
	PushSecret *corev1.Secret
	Configure  []func(*resources.Config)
}

// RunWith is Run with the setup s.
func RunWith(t testing.TB, k *testbed.Kube, ns string, s Setup) {
	t.Helper()
	ctx := context.Background()
	s3srv := s.S3
	if s3srv == nil {
		s3srv = testbed.SharedS3(t)
	}
	registry := s.Registry
	if registry == "" {
		registry = Registry
	}
	push := s.PushSecret
	if push == nil {
		push = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "registry-push"}, Type: corev1.SecretTypeDockerConfigJson,
			StringData: map[string]string{corev1.DockerConfigJsonKey: `{"auths":{"registry.testbed.local":{"auth":"dGVzdDp0ZXN0"}}}`}}
	}
	push = push.DeepCopy()
	push.Namespace = ns
	for _, sec := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "sless-s3", Namespace: ns},
			StringData: map[string]string{"AWS_ACCESS_KEY_ID": s3srv.AccessKey, "AWS_SECRET_ACCESS_KEY": s3srv.SecretKey}},
		push,
	} {
		if err := k.Client.Create(ctx, sec); err != nil {
			t.Fatalf("testbed: Secret %s/%s: %v", ns, sec.Name, err)
		}
	}
	bucket := s3srv.Bucket(t)
	blobs, err := s3.New(s3.Config{Endpoint: "http://" + s3srv.Endpoint, Region: s3srv.Region, Bucket: bucket,
		AccessKey: s3srv.AccessKey, SecretKey: s3srv.SecretKey, PathStyle: true})
	if err != nil {
		t.Fatalf("testbed: %v", err)
	}
	mgr, err := ctrl.NewManager(k.Config, ctrl.Options{
		Scheme: k.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Cache:      cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}, ByObject: function.CacheByObject()},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatalf("testbed: %v", err)
	}
	opts := function.Options{
		Config: function.Config{PublicBaseURL: "https://fn.testbed.local"},
		Resources: resources.Config{Registry: registry, RegistrySecret: push.Name,
			S3Endpoint: "http://" + s3srv.Endpoint, S3Secret: "sless-s3"},
		Store:                   blobs,
		MaxConcurrentReconciles: 4,
	}
	for _, c := range s.Configure {
		c(&opts.Resources)
	}
	if err := function.SetupWithManager(mgr, opts); err != nil {
		t.Fatalf("testbed: %v", err)
	}
	if err := service.SetupWithManager(mgr, opts); err != nil {
		t.Fatalf("testbed: %v", err)
	}
	mctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("testbed: Function controller: %v", err)
		}
	})
}

// OnNode readies the real node n for sless's builds and returns a fresh
// namespace of it with sless's controllers on it: n's images pushed,
// Tekton's controller started with the real step images (stopped when t
// ends), and NodeSetup's controllers. Its builds run kaniko in TaskRun pods.
func OnNode(t testing.TB, n *testbed.Node) (ns string, images *testbed.NodeImages) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	images, err := n.Images(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node bed up in %v; its images pushed in %v", n.Started.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	StartTekton(t, n, images)
	ns = n.Namespace(t)
	RunWith(t, n.Kube, ns, NodeSetup(t, n, images))
	return ns, images
}

// StartTekton runs Tekton's controller on n with the real step images
// (images's) until t ends.
func StartTekton(t testing.TB, n *testbed.Node, images *testbed.NodeImages) {
	t.Helper()
	// Knative's config-deployment too: the release's ConfigMaps are made
	// once, by whichever controller starts first (StartNodeKnative).
	tekton, err := testbed.StartPrimitivesWith(n.Kube, testbed.PrimitivesOptions{Tekton: true, TektonImages: images.TektonControllerArgs(),
		Config: map[string]map[string]string{testbed.KnativeNamespace + "/config-deployment": images.KnativeDeploymentConfig()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tekton.Logs(t); tekton.Stop() })
}

// NodeSetup is the Setup of controllers whose builds run on the real node
// n: kaniko and the shell from n's registry, build contexts in n's S3
// (which pods reach), images pushed to n's registry with its push Secret.
func NodeSetup(t testing.TB, n *testbed.Node, images *testbed.NodeImages) Setup {
	t.Helper()
	s3srv, err := n.S3()
	if err != nil {
		t.Fatalf("testbed: %v", err)
	}
	return Setup{
		S3:         s3srv,
		Registry:   n.Registry + "/sless",
		PushSecret: n.PushSecret("", "sless-registry"),
		Configure: []func(*resources.Config){func(c *resources.Config) {
			c.BuilderImage = images.Kaniko
			c.HelperImage = images.Shell
			c.BuilderArgs = images.KanikoArgs()
		}},
	}
}
