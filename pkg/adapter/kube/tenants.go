// Package kube holds what the REST API needs of a Kubernetes cluster beyond
// the controller-runtime client itself: creating tenant namespaces.
package kube

import (
	"context"
	"fmt"

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

// Tenants creates tenant namespaces (api.TenantProvisioner on a cluster).
type Tenants struct {
	Client client.Client
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
