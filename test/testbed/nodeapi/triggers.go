package nodeapi

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"

	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/sless-dev/sless/pkg/reconciler"
)

// InvokeURL is sless-api's base URL as pods reach it: its Service's
// cluster-local name, the default of `sless controller --invoke-url`.
const InvokeURL = "http://" + Service + "." + Namespace + ".svc"

// RunTriggers runs sless's Trigger and FunctionJob reconcilers on s's
// namespace until the test ends, wired as `sless controller` wires them
// (reconciler.TriggerOptions): cron runs and queue consumers are pods of
// the node's sless image that call sless-api at InvokeURL with credentials
// signed with the secret its verifier holds; FunctionJob runs are batch
// Jobs of the function's image.
func (s *Serving) RunTriggers() {
	t := s.t
	t.Helper()
	secretFile := filepath.Join(t.TempDir(), "jwt-secret")
	if err := os.WriteFile(secretFile, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(s.Node.Kube.Config, ctrl.Options{
		Scheme: s.Node.Kube.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Cache:      cache.Options{DefaultNamespaces: map[string]cache.Config{s.NS: {}}, ByObject: reconciler.TriggerCaches()},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	opts := reconciler.TriggerOptions{Image: s.Images.Sless, InvokeURL: InvokeURL, JWTSecretFile: secretFile,
		Audience: "sless", JobTTLSeconds: 600, Concurrency: 2}
	if err := opts.SetupWithManager(ctx, mgr, "https://"+Domain, slog.Default()); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Trigger and FunctionJob reconcilers: %v", err)
		}
	})
}
