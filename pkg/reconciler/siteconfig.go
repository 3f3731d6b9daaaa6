package reconciler

import (
	"context"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sless-dev/sless/pkg/limits"
)

// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch,namespace=sless-system

// SiteConfig is where a running controller reads the site's resource
// maximums again, as Knative's config store reads its ConfigMaps: a
// changed SLESS_MAX_RESOURCES rewrites the admission policy at once.
type SiteConfig struct {
	// ConfigMap holds SLESS_DEFAULT_REQUESTS, SLESS_DEFAULT_LIMITS and
	// SLESS_MAX_RESOURCES; no name: not watched.
	ConfigMap types.NamespacedName
	// The values the controller started with, for keys the ConfigMap lacks.
	DefaultRequests, DefaultLimits, MaxResources string
}

// cacheByObject narrows the cache of ConfigMaps to the one watched.
func (s SiteConfig) cacheByObject() map[client.Object]cache.ByObject {
	if s.ConfigMap.Name == "" {
		return nil
	}
	return map[client.Object]cache.ByObject{&corev1.ConfigMap{}: {
		Namespaces: map[string]cache.Config{s.ConfigMap.Namespace: {}},
		Field:      fields.OneTermEqualSelector("metadata.name", s.ConfigMap.Name),
	}}
}

// siteWatcher rewrites the admission policy when the ConfigMap changes.
type siteWatcher struct {
	client client.Client
	cfg    SiteConfig
	log    *slog.Logger
}

func setupSiteWatcher(mgr ctrl.Manager, cfg SiteConfig, log *slog.Logger) error {
	if cfg.ConfigMap.Name == "" {
		return nil
	}
	w := &siteWatcher{client: mgr.GetClient(), cfg: cfg, log: log}
	return ctrl.NewControllerManagedBy(mgr).
		Named("siteconfig").
		For(&corev1.ConfigMap{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == cfg.ConfigMap.Namespace && o.GetName() == cfg.ConfigMap.Name
		}))).
		Complete(w)
}

// Reconcile reads the settings (the start's values for keys the ConfigMap
// lacks) and writes the policy. Settings that do not parse leave the
// policy in force and are logged with the key and value at fault.
func (w *siteWatcher) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	cm := &corev1.ConfigMap{}
	if err := w.client.Get(ctx, w.cfg.ConfigMap, cm); err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	setting := func(key, started string) limits.Setting {
		v, ok := cm.Data[key]
		if !ok {
			v = started
		}
		return limits.Setting{Name: fmt.Sprintf("%s in ConfigMap %s", key, w.cfg.ConfigMap), Value: v}
	}
	site, err := limits.ParseSite(setting("SLESS_DEFAULT_REQUESTS", w.cfg.DefaultRequests),
		setting("SLESS_DEFAULT_LIMITS", w.cfg.DefaultLimits), setting("SLESS_MAX_RESOURCES", w.cfg.MaxResources))
	if err != nil {
		w.log.Error("site resource settings refused; the admission policy keeps the maximums it had", "err", err.Error())
		return reconcile.Result{}, nil
	}
	if err := ensurePolicy(ctx, w.client, site); err != nil {
		return reconcile.Result{}, err
	}
	w.log.Info("resource maximums applied", "configmap", w.cfg.ConfigMap.String(), "maximums", w.cfg.summary(site))
	return reconcile.Result{}, nil
}

func (SiteConfig) summary(site limits.Site) string {
	out := ""
	for i, e := range site.Max {
		if i > 0 {
			out += ","
		}
		out += string(e.Name) + "=" + e.Value
	}
	return out
}
