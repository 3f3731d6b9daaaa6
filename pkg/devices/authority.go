package devices

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/names"

	corev1 "k8s.io/api/core/v1"
)

// Directory is where Authority looks devices and their credentials up.
type Directory interface {
	// Device is device ns/name; an error for which apierrors.IsNotFound
	// holds when there is none.
	Device(ctx context.Context, ns, name string) (*slessv1alpha1.IoTDevice, error)
	// PasswordHash is the stored hash of the device's password, "" when
	// it has none.
	PasswordHash(ctx context.Context, ns, name string) (string, error)
}

// ReaderDirectory reads devices from Devices and their Secrets from
// Secrets (the API's object store and its uncached Secret store).
type ReaderDirectory struct {
	Devices, Secrets client.Reader
}

// Device implements Directory.
func (r ReaderDirectory) Device(ctx context.Context, ns, name string) (*slessv1alpha1.IoTDevice, error) {
	d := &slessv1alpha1.IoTDevice{}
	if err := r.Devices.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, d); err != nil {
		return nil, err
	}
	return d, nil
}

// PasswordHash implements Directory: the hash of the device's own Secret
// (one another object owns is ignored).
func (r ReaderDirectory) PasswordHash(ctx context.Context, ns, name string) (string, error) {
	s := &corev1.Secret{}
	if err := r.Secrets.Get(ctx, types.NamespacedName{Namespace: ns, Name: names.DeviceSecret(name)}, s); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	if s.Labels[LabelDevice] != name {
		return "", nil
	}
	return PasswordHash(s), nil
}

// Decision is an answer to a broker: allowed or not, and why not (for the
// log and the refusals metric, never for the device).
type Decision struct {
	Allow  bool
	Reason string
}

// Reasons of refusals, the label of the refusals metric.
const (
	RefusedNotADevice   = "not-a-device"
	RefusedUnknown      = "unknown-device"
	RefusedDisabled     = "disabled"
	RefusedPassword     = "wrong-password"
	RefusedTopic        = "topic"
	RefusedResource     = "resource"
	RefusedLookupFailed = "lookup-failed"
)

var allow = Decision{Allow: true}

func refuse(reason string) Decision { return Decision{Reason: reason} }

// Authority decides what a device may do on the broker: connect only as
// an enabled device with its current password, publish only under its
// events topic, subscribe only under its commands topic.
type Authority struct {
	Dir Directory
	// Refused, when set, is told each refusal of a device of namespace ns
	// ("" when the username names none).
	Refused func(ns, reason string)
	// Connected, when set, is told each device let in.
	Connected func(ns, name string)
}

func (a *Authority) refused(ns, reason string) Decision {
	if a.Refused != nil {
		a.Refused(ns, reason)
	}
	return refuse(reason)
}

// enabled looks the device of username up and refuses it when it is not
// a device, is unknown or is disabled.
func (a *Authority) enabled(ctx context.Context, username string) (ns, name string, d Decision, err error) {
	ns, name, ok := ParseUsername(username)
	if !ok {
		return "", "", a.refused("", RefusedNotADevice), nil
	}
	dev, err := a.Dir.Device(ctx, ns, name)
	switch {
	case apierrors.IsNotFound(err):
		return ns, name, a.refused(ns, RefusedUnknown), nil
	case err != nil:
		return ns, name, a.refused(ns, RefusedLookupFailed), fmt.Errorf("device %s: %w", username, err)
	case dev.DeletionTimestamp != nil:
		return ns, name, a.refused(ns, RefusedUnknown), nil
	case !dev.IsEnabled():
		return ns, name, a.refused(ns, RefusedDisabled), nil
	}
	return ns, name, allow, nil
}

// Authenticate decides a connect: an enabled device with its current
// password. An error says the answer could not be looked up (the
// Decision then refuses).
func (a *Authority) Authenticate(ctx context.Context, username, password string) (Decision, error) {
	ns, name, d, err := a.enabled(ctx, username)
	if !d.Allow {
		return d, err
	}
	hash, err := a.Dir.PasswordHash(ctx, ns, name)
	if err != nil {
		return a.refused(ns, RefusedLookupFailed), fmt.Errorf("credentials of device %s: %w", username, err)
	}
	if !CheckPassword(hash, password) {
		return a.refused(ns, RefusedPassword), nil
	}
	if a.Connected != nil {
		a.Connected(ns, name)
	}
	return allow, nil
}

// MayConnect decides whether an authenticated device may still act: it
// exists and is enabled (brokers ask this after the connect, per vhost).
func (a *Authority) MayConnect(ctx context.Context, username string) (Decision, error) {
	_, _, d, err := a.enabled(ctx, username)
	return d, err
}

// MayPublish decides a publish to topic: the device's events topic or
// below it.
func (a *Authority) MayPublish(ctx context.Context, username, topic string) (Decision, error) {
	ns, name, d, err := a.enabled(ctx, username)
	if !d.Allow {
		return d, err
	}
	if !under(topic, EventsTopic(ns, name)) {
		return a.refused(ns, RefusedTopic), nil
	}
	return allow, nil
}

// MaySubscribe decides a subscription to filter: the device's commands
// topic or below it, wildcards only below it.
func (a *Authority) MaySubscribe(ctx context.Context, username, filter string) (Decision, error) {
	ns, name, d, err := a.enabled(ctx, username)
	if !d.Allow {
		return d, err
	}
	root := CommandsTopic(ns, name)
	if !under(filter, root) {
		return a.refused(ns, RefusedTopic), nil
	}
	return allow, nil
}

// Refuse records a refusal a broker adapter decided itself (a resource
// outside what devices use).
func (a *Authority) Refuse(username, reason string) Decision {
	ns, _, _ := ParseUsername(username)
	return a.refused(ns, reason)
}
