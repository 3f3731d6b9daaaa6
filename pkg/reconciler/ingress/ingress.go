// Package ingress reconciles the Knative Ingresses of sless's networking
// class. sless-api routes them itself, from its own informer (package
// invoke/routing); this reconciler reports them ready once Knative's
// prober finds every sless-api replica serving the Ingress's generation.
package ingress

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"knative.dev/networking/pkg/apis/networking"
	"knative.dev/networking/pkg/apis/networking/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sless-dev/sless/pkg/invoke/routing"
	"github.com/sless-dev/sless/pkg/reconciler/ingress/resources"
)

// ReasonInvalid is the LoadBalancerReady reason of an Ingress sless-api
// cannot route; the message says why.
const ReasonInvalid = "InvalidIngress"

// Prober tells whether every replica serves an Ingress's generation;
// Knative's status.Prober is one.
type Prober interface {
	IsReady(ctx context.Context, ing *v1alpha1.Ingress) (bool, error)
	CancelIngressProbingByKey(key types.NamespacedName)
}

// Reconciler reports the Ingresses of Config.Class.
type Reconciler struct {
	Client client.Client
	Prober Prober
	Config Config
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ing := &v1alpha1.Ingress{}
	if err := r.Client.Get(ctx, req.NamespacedName, ing); err != nil {
		if apierrors.IsNotFound(err) {
			r.Prober.CancelIngressProbingByKey(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !r.Config.owns(ing) || !ing.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	st := ing.Status.DeepCopy()
	st.InitializeConditions()
	st.ObservedGeneration = ing.Generation
	// sless-api loads the Ingress itself; what it cannot route is refused
	// here, where Knative's Route shows the reason.
	if _, err := routing.Compile(ing); err != nil {
		st.MarkLoadBalancerFailed(ReasonInvalid, err.Error())
		return reconcile.Result{}, r.updateStatus(ctx, ing, st)
	}
	// Ready only once every replica answers the probe with this
	// generation's hash; the prober enqueues the Ingress again then.
	ready, err := r.Prober.IsReady(ctx, ing)
	if err != nil {
		st.MarkLoadBalancerNotReady()
		if uerr := r.updateStatus(ctx, ing, st); uerr != nil {
			return reconcile.Result{}, uerr
		}
		return reconcile.Result{}, fmt.Errorf("probe Ingress %s: %w", req.NamespacedName, err)
	}
	if ready {
		pub, priv := resources.LoadBalancers(r.Config.PublicLoadBalancer, r.Config.PrivateLoadBalancer)
		st.MarkNetworkConfigured()
		st.MarkLoadBalancerReady(pub, priv)
	} else {
		st.MarkLoadBalancerNotReady()
	}
	return reconcile.Result{}, r.updateStatus(ctx, ing, st)
}

func (r *Reconciler) updateStatus(ctx context.Context, ing *v1alpha1.Ingress, st *v1alpha1.IngressStatus) error {
	if equality.Semantic.DeepEqual(st, &ing.Status) {
		return nil
	}
	upd := ing.DeepCopy()
	upd.Status = *st
	if err := r.Client.Status().Update(ctx, upd); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("status of Ingress %s/%s: %w", ing.Namespace, ing.Name, err)
	}
	return nil
}

// owns reports whether ing is of the class this reconciler serves.
func (c Config) owns(ing *v1alpha1.Ingress) bool {
	return ing.Annotations[networking.IngressClassAnnotationKey] == c.Class
}
