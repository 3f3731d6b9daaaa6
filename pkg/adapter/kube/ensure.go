package kube

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Ensure creates want, or gives the object of its name want's spec when
// it differs; have is an empty object of want's type to read into.
func Ensure[T client.Object, S any](ctx context.Context, c client.Client, want, have T, spec func(T) *S) error {
	err := c.Get(ctx, client.ObjectKeyFromObject(want), have)
	switch {
	case apierrors.IsNotFound(err):
		return c.Create(ctx, want)
	case err != nil:
		return err
	case equality.Semantic.DeepEqual(spec(have), spec(want)):
		return nil
	}
	*spec(have) = *spec(want)
	return c.Update(ctx, have)
}
