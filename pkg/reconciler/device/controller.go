package device

import (
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/devices"
)

// +kubebuilder:rbac:groups=sless.dev,resources=iotdevices,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=sless.dev,resources=iotdevices/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=sless.dev,resources=iotdevices/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch;delete

// SetupWithManager registers the IoTDevice controller with mgr; broker
// closes connections (nil: none are closed). The credentials Secrets are
// in the manager's cache of sless's own Secrets.
func SetupWithManager(mgr ctrl.Manager, broker devices.Broker) error {
	r := &Reconciler{Client: mgr.GetClient(), Broker: broker}
	return ctrl.NewControllerManagedBy(mgr).
		Named("iotdevice").
		// Spec changes and deletion only: its own status writes would
		// otherwise each cause another reconcile.
		For(&slessv1alpha1.IoTDevice{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A new password (sless device rotate) or a Secret deleted.
		Owns(&corev1.Secret{}).
		Complete(r)
}
