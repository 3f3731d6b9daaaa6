package api

import (
	"context"
	"net/http"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/auth"
	"github.com/sless-dev/sless/pkg/limits"
)

// ObjectStore is where the API keeps Functions, Triggers and FunctionJobs.
// On a cluster it is a controller-runtime client.Client (a client.Client
// satisfies it as is); in local mode (`sless dev`) it is a store on disk. It is
// the subset of client.Client the handlers use, and a second implementation
// must keep these semantics, which are the apiserver's:
//
//   - Objects are the typed sless.dev/v1alpha1 objects (and their List
//     types); every object lives in a namespace.
//   - Get fills obj or returns an error for which apierrors.IsNotFound holds.
//   - List honours client.InNamespace, client.Limit, client.Continue and
//     client.MatchingLabelsSelector: at most Limit items in name order, only
//     those whose labels match the selector, and ListMeta.Continue set to an
//     opaque token when more remain ("" at the end). A token that cannot be
//     used is an error for which apierrors.IsBadRequest or
//     apierrors.IsResourceExpired holds.
//   - Create refuses an existing name (including one being deleted) with
//     apierrors.IsAlreadyExists, and sets uid, resourceVersion,
//     creationTimestamp and generation 1. Status is not stored on Create.
//   - Update requires metadata.resourceVersion and refuses a stale one with
//     apierrors.IsConflict; it stores metadata (labels, annotations,
//     finalizers) and spec, never status, assigns a new resourceVersion and
//     increments generation when spec changed. A missing object is
//     apierrors.IsNotFound.
//   - Delete honours client.Preconditions (UID, ResourceVersion) with
//     apierrors.IsConflict. An object with finalizers is not removed: its
//     metadata.deletionTimestamp is set and it stays readable ("deleting")
//     until the last finalizer is removed by an Update; one without is gone
//     at once. A missing object is apierrors.IsNotFound.
//   - Errors that mean the store could not be reached should satisfy
//     apierrors.IsServiceUnavailable, IsTimeout, IsServerTimeout or
//     IsTooManyRequests so the API answers 503 with Retry-After.
//
// Get and List may be served from a cache that lags behind writes; every
// decision that a stale read would get wrong (conflicts, create-after-delete,
// preconditions, read-modify-write) goes through Options.Live instead.
type ObjectStore interface {
	client.Reader
	Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error
	Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error
	Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error
}

// TenantProvisioner makes sure a tenant's namespace exists before the API
// writes the first object into it. On a cluster it creates a labelled
// Namespace (see pkg/adapter/kube); in local mode namespaces are only names
// and it does nothing. It is called for non-admin callers before writes and
// on /v1/whoami, must be idempotent and safe for concurrent use; the API
// remembers success per namespace, so it is called about once per tenant per
// process.
type TenantProvisioner interface {
	EnsureTenant(ctx context.Context, id *auth.Identity) error
}

// TenantNamespaces tells a tenant's namespace from any other: a non-admin
// caller acts only in its own namespace, and only when that namespace is a
// tenant's, so that a token naming default or sless-system reaches neither.
// On a cluster, pkg/adapter/kube's Tenants: a name with a tenant prefix, or
// the label sless puts on the namespaces it makes.
type TenantNamespaces interface {
	IsTenant(ctx context.Context, namespace string) (bool, error)
}

// Authenticator turns a request into an identity; *auth.Verifier is one.
// Its errors of type *auth.Error are answered 401; any other error is a 503.
type Authenticator interface {
	Authenticate(r *http.Request) (*auth.Identity, error)
}

// Maximums tells the resource maximums of a namespace's Functions and
// SlessServices (pkg/limits): pkg/adapter/kube's Maximums on a cluster,
// limits.Static in local mode. An error of type *limits.MalformedError
// is the namespace's setting at fault, answered 400.
type Maximums interface {
	Maximums(ctx context.Context, namespace string) (limits.Maximums, error)
}
