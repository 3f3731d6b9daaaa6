// Package kube drives what sless makes of a Kubernetes cluster's own
// objects: the REST API's tenant namespaces (Tenants), pods' logs (Logs),
// FunctionJob runs as batch Jobs (JobRunner) and triggers' CronJobs,
// consumer Deployments and credentials (Carrier), each with the pure
// builder of what it writes.
package kube

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/auth"
)

// Labels and annotations of a tenant namespace.
const (
	TenantLabel       = "sless.dev/tenant"
	ManagedByLabel    = "app.kubernetes.io/managed-by"
	SubjectAnnotation = "sless.dev/subject"
)

// Tenants creates tenant namespaces (api.TenantProvisioner on a cluster) and
// tells a tenant's namespace from any other (api.TenantNamespaces).
type Tenants struct {
	Client client.Client
	// Prefixes name the namespaces that are tenants' by their name alone
	// (the prefix of namespaces derived from subjects, and any configured);
	// any other namespace is a tenant's only when it carries TenantLabel.
	Prefixes []string

	mu       sync.Mutex
	labelled map[string]time.Time // namespaces seen with TenantLabel, and when
}

// labelTTL is how long a namespace seen with TenantLabel is taken as a
// tenant's without reading it again; removing the label takes effect within
// it. It keeps the invoke path from reading the namespace on every call.
const labelTTL = 30 * time.Second

// IsTenant tells whether ns is a tenant's namespace: its name starts with one
// of Prefixes, or sless made it (TenantLabel). A namespace that does not
// exist is not, unless a prefix says so.
func (t *Tenants) IsTenant(ctx context.Context, ns string) (bool, error) {
	for _, p := range t.Prefixes {
		if p != "" && strings.HasPrefix(ns, p) {
			return true, nil
		}
	}
	t.mu.Lock()
	seen, ok := t.labelled[ns]
	t.mu.Unlock()
	if ok && time.Since(seen) < labelTTL {
		return true, nil
	}
	obj := &corev1.Namespace{}
	err := t.Client.Get(ctx, client.ObjectKey{Name: ns}, obj)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read namespace %s: %w", ns, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if obj.Labels[TenantLabel] != "true" {
		delete(t.labelled, ns)
		return false, nil
	}
	if t.labelled == nil {
		t.labelled = map[string]time.Time{}
	}
	t.labelled[ns] = time.Now()
	return true, nil
}

// EnsureTenant creates the identity's namespace, labelled as a tenant's and
// annotated with the subject that first used it, unless it exists. An
// existing namespace is left as it is: an admin may have prepared it (with
// quotas, network policies) before the tenant's first call.
func (t *Tenants) EnsureTenant(ctx context.Context, id *auth.Identity) error {
	ns := &corev1.Namespace{}
	err := t.Client.Get(ctx, client.ObjectKey{Name: id.Namespace}, ns)
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("read namespace %s: %w", id.Namespace, err)
	}
	ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:        id.Namespace,
		Labels:      map[string]string{TenantLabel: "true", ManagedByLabel: "sless"},
		Annotations: map[string]string{SubjectAnnotation: id.Subject},
	}}
	if err := t.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", id.Namespace, err)
	}
	return nil
}
