package testbed

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Refusal is an admission rule that refuses creates and updates of one
// resource in one namespace, as a policy of the cluster's operator or a
// webhook the test bed does not run would (Knative's and Tekton's own
// validation always runs: webhook.go). It is a ValidatingAdmissionPolicy on the
// real apiserver, so the refusal reaches the client as the apiserver words
// it: 422 Invalid.
type Refusal struct {
	// Group, Version and Resource name what is refused, e.g.
	// serving.knative.dev, v1, services.
	Group, Version, Resource string
	// Expression is CEL over object (and oldObject); a write for which it
	// is false is refused.
	Expression string
	// Message is the refusal's message.
	Message string
	// Probe is an object, otherwise valid, that the rule refuses: Refuse
	// returns once a server-side dry-run create of it in the namespace is
	// refused with Message, since an admission policy takes effect a moment
	// after it is created.
	Probe client.Object
}

// Refuse puts r in force in namespace ns until the test ends.
func (k *Kube) Refuse(t testing.TB, ns string, r Refusal) {
	t.Helper()
	ctx := context.Background()
	name := "refuse-" + ns + "-" + randomSuffix(3)
	policy, binding := denyPolicy(name, []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		admissionregistrationv1.Rule{APIGroups: []string{r.Group}, APIVersions: []string{r.Version}, Resources: []string{r.Resource}},
		r.Expression, r.Message, &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}})
	for _, o := range []client.Object{policy, binding} {
		if err := k.Client.Create(ctx, o); err != nil {
			t.Fatalf("testbed: create %T %s: %v", o, name, err)
		}
	}
	t.Cleanup(func() {
		for _, o := range []client.Object{binding, policy} {
			if err := k.Client.Delete(context.Background(), o); client.IgnoreNotFound(err) != nil {
				t.Logf("testbed: delete %T %s: %v", o, name, err)
			}
		}
	})

	probe := r.Probe.DeepCopyObject().(client.Object)
	probe.SetNamespace(ns)
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := k.Client.Create(ctx, probe.DeepCopyObject().(client.Object), client.DryRunAll)
		if apierrors.IsInvalid(err) && strings.Contains(err.Error(), r.Message) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("testbed: admission policy %s not in force after 30 s: dry-run create of the probe gave %v", name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// denyPolicy is a ValidatingAdmissionPolicy named name that refuses, with
// message, the ops on rule's resources for which expression is false, and
// its binding (to the namespaces nsSelector picks; nil: every namespace).
func denyPolicy(name string, ops []admissionregistrationv1.OperationType, rule admissionregistrationv1.Rule, expression, message string,
	nsSelector *metav1.LabelSelector) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: ops, Rule: rule},
				}},
			},
			Validations: []admissionregistrationv1.Validation{{Expression: expression, Message: message, Reason: ptr.To(metav1.StatusReasonInvalid)}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	if nsSelector != nil {
		binding.Spec.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: nsSelector}
	}
	return policy, binding
}
