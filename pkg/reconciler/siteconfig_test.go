package reconciler

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/limits"
	"github.com/sless-dev/sless/test/testbed"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A changed SLESS_MAX_RESOURCES in the site's ConfigMap reaches the
// admission policy without a restart; a value that does not parse keeps
// the maximums in force and says why; a deleted ConfigMap brings back the
// values the controller started with.
func TestSiteConfigFollowsTheConfigMap(t *testing.T) {
	k := testbed.SharedKube(t)
	ctx := context.Background()
	ns := k.Namespace(t)
	cfg := SiteConfig{ConfigMap: types.NamespacedName{Namespace: ns, Name: "sless-config"}, MaxResources: "memory=8Gi"}
	t.Cleanup(func() {
		_ = k.Client.Delete(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: limits.PolicyName}})
		_ = k.Client.Delete(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: limits.PolicyName}})
	})
	started, err := limits.ParseSite(limits.Setting{}, limits.Setting{}, limits.Setting{Name: "max", Value: cfg.MaxResources})
	if err != nil {
		t.Fatal(err)
	}
	if err := ensurePolicy(ctx, k.Client, started); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "sless-config", Namespace: ns},
		Data: map[string]string{"SLESS_MAX_RESOURCES": "memory=1Gi", "SLESS_REGISTRY": "r"}}
	if err := k.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}

	mgr, err := ctrl.NewManager(k.Config, ctrl.Options{
		Scheme:     k.Scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Cache:      cache.Options{ByObject: cfg.cacheByObject()},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	if err := setupSiteWatcher(mgr, cfg, slog.New(slog.NewJSONHandler(logs, nil))); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})

	// try dry-runs a Function asking for memory; "" when admitted.
	try := func(memory string) string {
		fn := &slessv1alpha1.Function{ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: ns}}
		fn.Spec.Runtime, fn.Spec.Source.Image = "go1.24", "registry.example.com/a@sha256:"+strings.Repeat("0", 64)
		fn.Spec.Resources = &slessv1alpha1.ResourceSpec{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memory)}}
		if err := k.Client.Create(ctx, fn, client.DryRunAll); err != nil {
			return err.Error()
		}
		return ""
	}
	refused := func(memory, max string) func() (bool, string) {
		return func() (bool, string) {
			got := try(memory)
			return strings.Contains(got, fmt.Sprintf("spec.resources.limits.memory %s is over namespace %s's maximum %s", memory, ns, max)), got
		}
	}
	admitted := func(memory string) func() (bool, string) {
		return func() (bool, string) {
			got := try(memory)
			return got == "", got
		}
	}

	testbed.Eventually(t, "the ConfigMap's 1Gi in force", refused("2Gi", "1Gi"))
	cm.Data["SLESS_MAX_RESOURCES"] = "memory=4Gi"
	if err := k.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, "4Gi in force", admitted("2Gi"))
	if got := try("5Gi"); !strings.Contains(got, "maximum 4Gi") {
		t.Errorf("5Gi under a 4Gi maximum: %q", got)
	}

	cm.Data["SLESS_MAX_RESOURCES"] = "memory=lots"
	if err := k.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, "the refusal logged", func() (bool, string) {
		l := logs.String()
		return strings.Contains(l, `SLESS_MAX_RESOURCES in ConfigMap `+ns+`/sless-config: memory=lots: \"lots\" is not a quantity`), l
	})
	if got := try("5Gi"); !strings.Contains(got, "maximum 4Gi") {
		t.Errorf("after a malformed value, 5Gi: %q, want 4Gi still in force", got)
	}

	if err := k.Client.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, "the started 8Gi back", admitted("5Gi"))
	if got := try("9Gi"); !strings.Contains(got, "maximum 8Gi") {
		t.Errorf("9Gi under the started 8Gi: %q", got)
	}
}
