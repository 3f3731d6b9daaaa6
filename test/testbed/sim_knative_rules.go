package testbed

import (
	"context"
	"fmt"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// KnativeNameChangeMessage is how a Service update is refused that changes
// a named revision template but keeps its name: Knative's webhook refuses
// it so, since a revision is immutable and the name says which one serves.
const KnativeNameChangeMessage = "Saw the following changes without a name change (-old +new)"

const knativeRulesName = "sless-testbed-knative-revision-names"

// installKnativeRules puts Knative's webhook rule on revision names in
// force on k's apiserver, as a ValidatingAdmissionPolicy for every
// namespace, and waits until it refuses. The simulator plays Knative's
// controller, which alone cannot refuse a write.
func installKnativeRules(k *Kube) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	policy, binding := denyPolicy(knativeRulesName, []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
		admissionregistrationv1.Rule{APIGroups: []string{"serving.knative.dev"}, APIVersions: []string{"v1"}, Resources: []string{"services"}},
		"!has(object.spec.template.metadata) || !has(object.spec.template.metadata.name) || object.spec.template.metadata.name == '' || "+
			"!has(oldObject.spec.template.metadata) || !has(oldObject.spec.template.metadata.name) || "+
			"object.spec.template.metadata.name != oldObject.spec.template.metadata.name || object.spec.template == oldObject.spec.template",
		KnativeNameChangeMessage, nil)
	for _, o := range []client.Object{policy, binding} {
		if err := k.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("Knative's revision name rule: create %T: %w", o, err)
		}
	}

	// A policy takes effect a moment after it is made: a Service changed
	// under its revision name must be refused before the simulator serves.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: knativeRulesName}}
	if err := k.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("Knative's revision name rule: %w", err)
	}
	probe := &servingv1.Service{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns.Name}}
	probe.Spec.Template.Name = "probe-00001"
	probe.Spec.Template.Spec.Containers = []corev1.Container{{Image: "registry.sim.local/probe@sha256:" + strings.Repeat("0", 64)}}
	if err := k.Client.Create(ctx, probe); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("Knative's revision name rule: %w", err)
	}
	for {
		svc := &servingv1.Service{}
		err := k.Client.Get(ctx, client.ObjectKeyFromObject(probe), svc)
		if err == nil {
			svc.Spec.Template.Spec.Containers[0].Image = "registry.sim.local/probe@sha256:" + strings.Repeat("1", 64)
			err = k.Client.Update(ctx, svc, client.DryRunAll)
			if apierrors.IsInvalid(err) && strings.Contains(err.Error(), KnativeNameChangeMessage) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("Knative's revision name rule not in force after 60 s: the last update of a probe gave %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
