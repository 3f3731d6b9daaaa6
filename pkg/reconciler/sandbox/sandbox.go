// Package sandbox keeps each namespace of sless's workloads fenced: a
// default-deny ingress NetworkPolicy that admits only the data plane, an
// egress policy for build pods and one per workload whose spec.network
// limits its egress, and Pod Security Admission labels on tenant
// namespaces. It reconciles Namespaces and reports on their status.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sless-dev/sless/pkg/adapter/kube"
	adapterresources "github.com/sless-dev/sless/pkg/adapter/resources"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/names"
	"github.com/sless-dev/sless/pkg/reconciler/sandbox/resources"
)

// Config is the site's sandbox settings.
type Config struct {
	resources.Config
	// APIService is sless api's Service; its selector names the pods the
	// ingress policy admits.
	APIService types.NamespacedName
	// NetworkPolicies and PodSecurity turn each half on.
	NetworkPolicies, PodSecurity bool
}

// Reconciler keeps one namespace's sandbox.
type Reconciler struct {
	Client client.Client
	// APIReader reads sless api's Service, which the cache does not hold.
	APIReader client.Reader
	Config    Config
}

var _ reconcile.Reconciler = (*Reconciler)(nil)

// Reconcile implements reconcile.Reconciler; the request names a Namespace.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ns := &corev1.Namespace{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: req.Name}, ns); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !ns.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	workloads, err := r.workloads(ctx, ns.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	tenant := ns.Labels[kube.TenantLabel] == "true"
	if !tenant && len(workloads) == 0 {
		// Nothing of sless's runs here: leave the namespace as it is, but
		// take away what an earlier workload needed.
		return reconcile.Result{}, r.removeAll(ctx, ns.Name)
	}

	before := ns.Status.DeepCopy()
	status := Status{&ns.Status}
	var errs []error
	if r.Config.NetworkPolicies {
		errs = append(errs, r.reconcilePolicies(ctx, ns.Name, workloads, status))
	} else {
		// Turned off, sless keeps none: what it made before goes.
		errs = append(errs, r.removeAll(ctx, ns.Name))
		status.MarkPoliciesTurnedOff()
	}
	if tenant {
		if r.Config.PodSecurity {
			errs = append(errs, r.reconcileLabels(ctx, ns, status))
		} else {
			status.MarkPodSecurityTurnedOff()
		}
	}
	if !equality.Semantic.DeepEqual(before, &ns.Status) {
		if err := r.Client.Status().Update(ctx, ns); err != nil {
			errs = append(errs, fmt.Errorf("write namespace %s's status: %w", ns.Name, err))
		}
	}
	return reconcile.Result{}, errors.Join(errs...)
}

// workloads are the Functions and SlessServices of ns.
func (r *Reconciler) workloads(ctx context.Context, ns string) ([]slessv1alpha1.Workload, error) {
	var fns slessv1alpha1.FunctionList
	if err := r.Client.List(ctx, &fns, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("list functions in %s: %w", ns, err)
	}
	var svcs slessv1alpha1.SlessServiceList
	if err := r.Client.List(ctx, &svcs, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("list services in %s: %w", ns, err)
	}
	var out []slessv1alpha1.Workload
	for i := range fns.Items {
		out = append(out, &fns.Items[i])
	}
	for i := range svcs.Items {
		out = append(out, &svcs.Items[i])
	}
	return out, nil
}

// reconcilePolicies writes the namespace's policies and each workload's
// egress policy, and removes egress policies no workload needs.
func (r *Reconciler) reconcilePolicies(ctx context.Context, ns string, workloads []slessv1alpha1.Workload, status Status) error {
	api := &corev1.Service{}
	if err := r.APIReader.Get(ctx, r.Config.APIService, api); err != nil || len(api.Spec.Selector) == 0 {
		msg := fmt.Sprintf("sless api's Service %s, whose pods the ingress policy admits, has no selector", r.Config.APIService)
		if err != nil {
			msg = fmt.Sprintf("read sless api's Service %s, whose pods the ingress policy admits: %v", r.Config.APIService, err)
		}
		status.MarkAPIServiceMissing(msg)
		return errors.New(msg)
	}
	cfg := r.Config.Config
	cfg.API = resources.Peer{Namespace: api.Namespace, Selector: api.Spec.Selector}

	want := []*networkingv1.NetworkPolicy{resources.MakeIngressPolicy(ns, cfg), resources.MakeBuildPolicy(ns, cfg)}
	keep := map[string]bool{names.IngressPolicy: true, names.BuildPolicy: true}
	limited := 0
	for _, w := range workloads {
		if !w.GetDeletionTimestamp().IsZero() {
			continue
		}
		if p := resources.MakeEgressPolicy(w, cfg.DefaultEgress); p != nil {
			want = append(want, p)
			keep[p.Name] = true
			limited++
		}
	}
	for _, p := range want {
		if err := kube.Ensure(ctx, r.Client, p, &networkingv1.NetworkPolicy{}, policySpec); err != nil {
			status.MarkPolicyWriteFailed(fmt.Sprintf("NetworkPolicy %s: %v", p.Name, err))
			return fmt.Errorf("write NetworkPolicy %s/%s: %w", ns, p.Name, err)
		}
	}
	if err := r.remove(ctx, ns, func(name string) bool { return !keep[name] }); err != nil {
		status.MarkPolicyWriteFailed(err.Error())
		return err
	}
	status.MarkPoliciesKept(fmt.Sprintf("%s admits only Knative's activator and autoscaler and sless api; %s limits builds' egress; %d workload(s) with limited egress",
		names.IngressPolicy, names.BuildPolicy, limited))
	return nil
}

// removeAll takes away every policy sless keeps in ns.
func (r *Reconciler) removeAll(ctx context.Context, ns string) error {
	return r.remove(ctx, ns, func(string) bool { return true })
}

// remove deletes the policies sless made in ns whose names drop says.
func (r *Reconciler) remove(ctx context.Context, ns string, drop func(string) bool) error {
	var have networkingv1.NetworkPolicyList
	if err := r.Client.List(ctx, &have, client.InNamespace(ns), client.MatchingLabels{adapterresources.LabelManagedBy: adapterresources.ManagedBy}); err != nil {
		return fmt.Errorf("list NetworkPolicies in %s: %w", ns, err)
	}
	for i := range have.Items {
		p := &have.Items[i]
		if !ours(p.Name) || !drop(p.Name) {
			continue
		}
		if err := r.Client.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete NetworkPolicy %s/%s: %w", ns, p.Name, err)
		}
	}
	return nil
}

// ours tells the names this reconciler gives its policies.
func ours(name string) bool {
	return name == names.IngressPolicy || name == names.BuildPolicy || strings.HasPrefix(name, "sless-egress-")
}

// reconcileLabels adds the Pod Security Admission labels the tenant
// namespace lacks.
func (r *Reconciler) reconcileLabels(ctx context.Context, ns *corev1.Namespace, status Status) error {
	missing := resources.MissingPodSecurityLabels(ns.Labels)
	if len(missing) > 0 {
		// The patch is of a copy: its answer would replace the status
		// this reconcile is writing.
		labelled := ns.DeepCopy()
		patch := client.MergeFrom(ns.DeepCopy())
		if labelled.Labels == nil {
			labelled.Labels = map[string]string{}
		}
		maps.Copy(labelled.Labels, missing)
		if err := r.Client.Patch(ctx, labelled, patch); err != nil {
			status.MarkLabelWriteFailed(err.Error())
			return fmt.Errorf("label namespace %s for Pod Security Admission: %w", ns.Name, err)
		}
		ns.Labels, ns.ResourceVersion = labelled.Labels, labelled.ResourceVersion
	}
	status.MarkLabelled(fmt.Sprintf("enforce %s, audit %s, warn %s", ns.Labels[resources.LabelEnforce], ns.Labels[resources.LabelAudit], ns.Labels[resources.LabelWarn]))
	return nil
}

func policySpec(p *networkingv1.NetworkPolicy) *networkingv1.NetworkPolicySpec { return &p.Spec }
