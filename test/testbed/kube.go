package testbed

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// Kube is a running kube-apiserver and etcd with sless's CRDs and the
// upstream ones of Knative Serving and Tekton installed, and their
// defaulting and validation in force (webhook.go), as on a cluster.
type Kube struct {
	Config *rest.Config
	Client client.Client
	Scheme *runtime.Scheme
	// Kubeconfig is a file for kubectl and other clients, with admin rights.
	Kubeconfig string

	env         *envtest.Environment
	webhook     *admissionServer
	stopConfigs func()
	dir         string
}

// NewScheme knows the Kubernetes built-in types, sless's, Knative Serving's
// and Tekton's.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, slessv1alpha1.AddToScheme, servingv1.AddToScheme, tektonv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

// StartKube starts the control plane. Call Stop when done; most packages use
// Main instead.
func StartKube(scheme *runtime.Scheme) (*Kube, error) {
	return startKube(scheme, nil)
}

// startKube is StartKube with configure changing the environment (the
// apiserver's address and flags) before it starts.
func startKube(scheme *runtime.Scheme, configure func(*envtest.Environment) error) (*Kube, error) {
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	if scheme == nil {
		scheme = NewScheme()
	}
	upstream, err := UpstreamCRDs()
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd")},
		CRDs:                  upstream,
		// Tekton's CRDs are large: establishing them takes seconds on 2 cores.
		CRDInstallOptions:     envtest.CRDInstallOptions{MaxTime: time.Minute},
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
	}
	if configure != nil {
		if err := configure(env); err != nil {
			return nil, err
		}
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("start envtest with assets in %s: %w", assets, err)
	}
	// Tests create many objects at once; the client-side limiter would
	// otherwise measure itself rather than the apiserver.
	cfg.QPS, cfg.Burst = 1000, 2000
	k := &Kube{Config: cfg, Scheme: scheme, env: env}
	stop := func(err error) (*Kube, error) { _ = env.Stop(); return nil, err }
	if k.Client, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return stop(err)
	}
	// The webhooks read their config maps through an informer, as
	// upstream's config stores do, not with a list per admission.
	configs, stopConfigs, err := configMapCache(cfg, scheme)
	if err != nil {
		return stop(err)
	}
	k.stopConfigs = stopConfigs
	if k.webhook, err = startAdmission(configs); err != nil {
		stopConfigs()
		return stop(err)
	}
	stop = func(err error) (*Kube, error) { _ = env.Stop(); _ = k.webhook.Close(); stopConfigs(); return nil, err }
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := k.webhook.register(ctx, k.Client, upstream); err != nil {
		return stop(fmt.Errorf("Knative's and Tekton's admission: %w", err))
	}
	if k.dir, err = os.MkdirTemp("", "sless-kube-"); err != nil {
		return stop(err)
	}
	user, err := env.AddUser(envtest.User{Name: "sless-test-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return stop(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return stop(err)
	}
	k.Kubeconfig = filepath.Join(k.dir, "kubeconfig")
	if err := os.WriteFile(k.Kubeconfig, kc, 0o600); err != nil {
		return stop(err)
	}
	return k, nil
}

// Stop stops the control plane, then the webhook it calls, and removes its files.
func (k *Kube) Stop() error {
	// An open watch keeps kube-apiserver's graceful shutdown waiting (20 s,
	// then envtest kills it): the bed's own informer goes first.
	k.stopConfigs()
	err := k.env.Stop()
	err = errors.Join(err, k.webhook.Close())
	_ = os.RemoveAll(k.dir)
	return err
}

// Namespace creates a namespace with a fresh name for one test and deletes it
// when the test ends.
func (k *Kube) Namespace(t testing.TB) string {
	t.Helper()
	name := "t-" + randomSuffix(5)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"sless.dev/test": "true"}}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := k.Client.Create(ctx, ns); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		// envtest runs no namespace controller, so the namespace stays
		// Terminating; deleting it still tells apart leftovers of different tests.
		if err := k.Client.Delete(context.Background(), ns); err != nil && !apierrors.IsNotFound(err) {
			t.Logf("delete namespace %s: %v", name, err)
		}
	})
	return name
}

func randomSuffix(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)[:n*2-1]
}
