// Package functionctl runs sless's Function and SlessService controllers in a test process on
// a test bed. It is apart from testbed, which the adapters' own tests import
// and the controller imports those adapters.
package functionctl

import (
	"context"
	"testing"

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
// function namespace (build pods mount them); images go to Registry, never
// pushed to. configure, when given, changes the controllers'
// resources.Config (say, the ingress class). On the real node, sless runs
// as installed instead (nodeapi).
func Run(t testing.TB, k *testbed.Kube, ns string, configure ...func(*resources.Config)) {
	t.Helper()
	ctx := context.Background()
	s3srv := testbed.SharedS3(t)
	push := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "registry-push", Namespace: ns}, Type: corev1.SecretTypeDockerConfigJson,
		StringData: map[string]string{corev1.DockerConfigJsonKey: `{"auths":{"registry.testbed.local":{"auth":"dGVzdDp0ZXN0"}}}`}}
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
		Resources: resources.Config{Registry: Registry, RegistrySecret: push.Name,
			S3Endpoint: "http://" + s3srv.Endpoint, S3Secret: "sless-s3"},
		Store:                   blobs,
		MaxConcurrentReconciles: 4,
	}
	for _, c := range configure {
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
