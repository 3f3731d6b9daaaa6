package kube

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/invoke/callback"
)

// CallbackKeySecret names the Secret of a namespace that keeps the key its
// asynchronous calls' results are signed with; CallbackKeyField is its
// data key.
const (
	CallbackKeySecret = "sless-callback-signing-key"
	CallbackKeyField  = "key"
)

// CallbackKeys keeps each namespace's callback signing key in a Secret of
// that namespace, so every replica of sless api signs with the same key.
type CallbackKeys struct {
	Client client.Client
}

// SigningKey is ns's key, made on first use. Replicas making it at once
// agree: the first create wins and the others read it.
func (k *CallbackKeys) SigningKey(ctx context.Context, ns string) (string, error) {
	name := client.ObjectKey{Namespace: ns, Name: CallbackKeySecret}
	for try := 0; try < 2; try++ {
		s := &corev1.Secret{}
		err := k.Client.Get(ctx, name, s)
		if err == nil {
			if key := string(s.Data[CallbackKeyField]); key != "" {
				return key, nil
			}
			return "", fmt.Errorf("secret %s/%s has no %q", ns, CallbackKeySecret, CallbackKeyField)
		}
		if !apierrors.IsNotFound(err) {
			return "", fmt.Errorf("read the callback signing key of %s: %w", ns, err)
		}
		fresh, err := callback.NewKey()
		if err != nil {
			return "", err
		}
		s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: CallbackKeySecret,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "sless"}},
			Data: map[string][]byte{CallbackKeyField: []byte(fresh)}}
		err = k.Client.Create(ctx, s)
		if err == nil {
			return fresh, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("keep the callback signing key of %s: %w", ns, err)
		}
	}
	return "", fmt.Errorf("the callback signing key of %s changed while it was made", ns)
}
