package kube

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/limits"
)

// Maximums reads a namespace's resource maximums (api.Maximums on a
// cluster): the site's, and its own from its annotation, as the admission
// policy does.
type Maximums struct {
	// Reader reads Namespaces live: a maximum just changed applies at once.
	Reader client.Reader
	Site   limits.Site
}

// Maximums is namespace ns's maximums. A namespace not made yet (the API
// provisions it on the first write) has the site's.
func (m *Maximums) Maximums(ctx context.Context, ns string) (limits.Maximums, error) {
	var o corev1.Namespace
	err := m.Reader.Get(ctx, client.ObjectKey{Name: ns}, &o)
	if err != nil && !apierrors.IsNotFound(err) {
		return limits.Maximums{}, fmt.Errorf("read namespace %s for its resource maximums: %w", ns, err)
	}
	return m.Site.For(ns, o.Annotations[limits.AnnotationMax])
}
