package devices

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/names"
	"github.com/sless-dev/sless/pkg/secrets"
)

// MakeSecret builds device d's credentials Secret, owned by d, holding
// password's hash and, when keepPassword, the password itself (see
// KeyPassword).
func MakeSecret(d *slessv1alpha1.IoTDevice, password string, keepPassword bool) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      names.DeviceSecret(d.Name),
			Namespace: d.Namespace,
			Labels:    map[string]string{secrets.LabelManagedBy: secrets.ManagedBy, LabelDevice: d.Name},
		},
		Type: corev1.SecretTypeOpaque,
	}
	if d.UID != "" {
		s.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(d, slessv1alpha1.SchemeGroupVersion.WithKind("IoTDevice"))}
	}
	SetPassword(s, d.Namespace, d.Name, password)
	if keepPassword {
		s.Data[KeyPassword] = []byte(password)
	}
	return s
}

// SetPassword makes s hold the username of device ns/name and password's
// hash only.
func SetPassword(s *corev1.Secret, ns, name, password string) {
	s.StringData = nil
	s.Data = map[string][]byte{
		KeyUsername:     []byte(Username(ns, name)),
		KeyPasswordHash: []byte(HashPassword(password)),
	}
}

// PasswordHash is the hash s keeps, "" when none.
func PasswordHash(s *corev1.Secret) string { return string(s.Data[KeyPasswordHash]) }

// OwnedBy says whether s is d's credentials Secret and not another's
// that happens to bear its name.
func OwnedBy(s *corev1.Secret, d *slessv1alpha1.IoTDevice) bool {
	return metav1.IsControlledBy(s, d)
}
