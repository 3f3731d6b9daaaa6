// Package device reconciles IoTDevices: it issues each device's first
// password into its credentials Secret, and closes the device's live
// connections on the broker when it is disabled, deleted or given a new
// password (the broker's auth checks, served by sless api through
// pkg/devices, refuse its next connect).
package device

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/devices"
	"github.com/sless-dev/sless/pkg/names"
)

// Finalizer holds a device until its live connections are closed.
const Finalizer = "sless.dev/device-disconnect"

// retryDisconnect is how soon a failed disconnect is tried again.
const retryDisconnect = 2 * time.Second

// Reconciler reconciles IoTDevices.
type Reconciler struct {
	Client client.Client
	// Broker closes connections; nil closes none (a disabled device is
	// then only refused on its next connect).
	Broker devices.Broker
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	d := &slessv1alpha1.IoTDevice{}
	if err := r.Client.Get(ctx, req.NamespacedName, d); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	username := devices.Username(d.Namespace, d.Name)
	if d.DeletionTimestamp != nil {
		return reconcile.Result{}, r.finalize(ctx, d, username)
	}
	if r.Broker != nil && controllerutil.AddFinalizer(d, Finalizer) {
		if err := r.Client.Update(ctx, d); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
	}
	d.SetDefaults()
	before := d.Status.DeepCopy()
	d.Status.ObservedGeneration = d.Generation
	d.Status.Username = username
	after, err := r.reconcile(ctx, d, username)
	if !equality.Semantic.DeepEqual(before, &d.Status) {
		uerr := r.Client.Status().Update(ctx, d)
		// A conflict or a device gone: the newer version is queued already.
		if uerr != nil && err == nil && !apierrors.IsConflict(uerr) && !apierrors.IsNotFound(uerr) {
			return reconcile.Result{}, uerr
		}
	}
	return reconcile.Result{RequeueAfter: after}, err
}

func (r *Reconciler) reconcile(ctx context.Context, d *slessv1alpha1.IoTDevice, username string) (time.Duration, error) {
	hash, ok, err := r.credentials(ctx, d)
	if err != nil || !ok {
		return 0, err
	}
	id := devices.CredentialsID(hash)
	rotated := d.Status.CredentialsID != "" && d.Status.CredentialsID != id
	switch {
	case !d.IsEnabled():
		if err := r.disconnect(ctx, username); err != nil {
			d.Status.MarkDisconnectFailed(err.Error())
			return retryDisconnect, nil
		}
		d.Status.MarkDisabled()
	case rotated:
		// Connections made with the old password go; the device comes
		// back with the new one.
		if err := r.disconnect(ctx, username); err != nil {
			d.Status.MarkDisconnectFailed(err.Error())
			return retryDisconnect, nil
		}
		d.Status.MarkConnectable()
	default:
		d.Status.MarkConnectable()
	}
	d.Status.CredentialsID = id
	return 0, nil
}

// credentials makes sure d's Secret exists, issuing its first password
// when it does not, and returns the hash it holds; ok is false when d
// cannot connect for want of them (marked).
func (r *Reconciler) credentials(ctx context.Context, d *slessv1alpha1.IoTDevice) (hash string, ok bool, err error) {
	name := names.DeviceSecret(d.Name)
	s := &corev1.Secret{}
	err = r.Client.Get(ctx, types.NamespacedName{Namespace: d.Namespace, Name: name}, s)
	switch {
	case apierrors.IsNotFound(err):
		password, err := devices.NewPassword()
		if err != nil {
			return "", false, fmt.Errorf("device %s/%s: password: %w", d.Namespace, d.Name, err)
		}
		// Made with kubectl, the device's first password is left in its
		// Secret for its owner; made through the API, the API has written
		// the Secret already and shown the password once.
		s = devices.MakeSecret(d, password, true)
		if err := r.Client.Create(ctx, s); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return "", false, fmt.Errorf("device %s/%s: Secret %s was made meanwhile; looking again", d.Namespace, d.Name, name)
			}
			return "", false, fmt.Errorf("device %s/%s: create Secret %s: %w", d.Namespace, d.Name, name, err)
		}
	case err != nil:
		return "", false, fmt.Errorf("device %s/%s: get Secret %s: %w", d.Namespace, d.Name, name, err)
	case !devices.OwnedBy(s, d):
		d.Status.MarkSecretConflict(name)
		return "", false, nil
	}
	hash = devices.PasswordHash(s)
	if hash == "" {
		d.Status.MarkNoCredentials(name)
		return "", false, nil
	}
	d.Status.MarkCredentialsIssued(name)
	return hash, true, nil
}

func (r *Reconciler) disconnect(ctx context.Context, username string) error {
	if r.Broker == nil {
		return nil
	}
	return r.Broker.Disconnect(ctx, username)
}

// finalize closes a deleted device's connections, then lets it go; its
// Secret goes with it (owner reference).
func (r *Reconciler) finalize(ctx context.Context, d *slessv1alpha1.IoTDevice, username string) error {
	if !controllerutil.ContainsFinalizer(d, Finalizer) {
		return nil
	}
	if err := r.disconnect(ctx, username); err != nil {
		return fmt.Errorf("device %s: close its connections before it goes: %w", username, err)
	}
	controllerutil.RemoveFinalizer(d, Finalizer)
	return client.IgnoreNotFound(r.Client.Update(ctx, d))
}
