package testbed

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"knative.dev/pkg/webhook/resourcesemantics"
	"knative.dev/serving/pkg/apis/serving"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// webhookConfigName names the test bed's Mutating- and
// ValidatingWebhookConfiguration.
const webhookConfigName = "sless-testbed-upstream-admission"

// register puts the admission server's webhooks in force on the apiserver
// for the projects' kinds (their plurals read from crds) and returns once
// the apiserver calls both.
func (a *admissionServer) register(ctx context.Context, c client.Client, crds []*apiextensionsv1.CustomResourceDefinition) error {
	plurals := map[schema.GroupKind]string{}
	for _, crd := range crds {
		plurals[schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}] = crd.Spec.Names.Plural
	}
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhookConfigName}}
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhookConfigName}}
	// As knative.dev/pkg configures both projects' webhooks: namespaces
	// labelled webhooks.knative.dev/exclude are left alone.
	exclude := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: "webhooks.knative.dev/exclude", Operator: metav1.LabelSelectorOpDoesNotExist,
	}}}
	for _, p := range []*project{servingProject, tektonProject} {
		defaultRules, validateRules, err := p.rules(plurals)
		if err != nil {
			return err
		}
		mutating.Webhooks = append(mutating.Webhooks, admissionregistrationv1.MutatingWebhook{
			Name:                    p.name,
			ClientConfig:            a.clientConfig(p.path + "/defaulting"),
			Rules:                   defaultRules,
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](5),
			NamespaceSelector:       exclude,
			ReinvocationPolicy:      ptr.To(admissionregistrationv1.IfNeededReinvocationPolicy),
		})
		validating.Webhooks = append(validating.Webhooks, admissionregistrationv1.ValidatingWebhook{
			Name:                    "validation." + p.name,
			ClientConfig:            a.clientConfig(p.path + "/resource-validation"),
			Rules:                   validateRules,
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](5),
			NamespaceSelector:       exclude,
		})
	}
	for _, o := range []client.Object{mutating, validating} {
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("create %T %s: %w", o, webhookConfigName, err)
		}
	}
	return awaitWebhooks(ctx, c)
}

func (a *admissionServer) clientConfig(path string) admissionregistrationv1.WebhookClientConfig {
	return admissionregistrationv1.WebhookClientConfig{URL: ptr.To(a.url + path), CABundle: a.caPEM}
}

// rules are what knative.dev/pkg registers for p's kinds: defaulting on
// create and update of each resource and its status; validation likewise,
// limited to a kind's SupportedVerbs. Upstream's validation also takes
// deletes of kinds without SupportedVerbs, and admits them all.
func (p *project) rules(plurals map[schema.GroupKind]string) (defaulting, validation []admissionregistrationv1.RuleWithOperations, err error) {
	createUpdate := []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}
	// In a fixed order, so that the configurations read the same each run.
	gvks := make([]schema.GroupVersionKind, 0, len(p.types))
	for gvk := range p.types {
		gvks = append(gvks, gvk)
	}
	sort.Slice(gvks, func(i, j int) bool { return gvks[i].String() < gvks[j].String() })
	for _, gvk := range gvks {
		plural, ok := plurals[gvk.GroupKind()]
		if !ok {
			return nil, nil, fmt.Errorf("webhook %s: no CRD installed for %s", p.name, gvk.GroupKind())
		}
		rule := admissionregistrationv1.Rule{APIGroups: []string{gvk.Group}, APIVersions: []string{gvk.Version},
			Resources: []string{plural, plural + "/status"}}
		defaulting = append(defaulting, admissionregistrationv1.RuleWithOperations{Operations: createUpdate, Rule: rule})
		verbs := createUpdate
		if vl, ok := p.types[gvk].(resourcesemantics.VerbLimited); ok {
			verbs = nil
			for _, v := range vl.SupportedVerbs() {
				if v == admissionregistrationv1.Create || v == admissionregistrationv1.Update {
					verbs = append(verbs, v)
				}
			}
		}
		validation = append(validation, admissionregistrationv1.RuleWithOperations{Operations: verbs, Rule: rule})
	}
	return defaulting, validation, nil
}

// awaitWebhooks returns once the apiserver calls all four webhooks, which
// it does a moment after their configurations are made: dry-run creates in
// namespace default of a Service and a PipelineRun come back defaulted, and
// of invalid ones are refused.
func awaitWebhooks(ctx context.Context, c client.Client) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		last = probeWebhooks(ctx, c)
		return last == "", nil
	})
	if err != nil {
		return fmt.Errorf("webhooks not in force after 30 s (%v): %s", err, last)
	}
	return nil
}

// probeWebhooks is "" when all four webhooks answer, else what is amiss.
func probeWebhooks(ctx context.Context, c client.Client) string {
	svc := probeService()
	if err := c.Create(ctx, svc, client.DryRunAll); err != nil {
		return fmt.Sprintf("probe Service: %v", err)
	}
	if svc.Annotations[serving.CreatorAnnotation] == "" {
		return "probe Service not defaulted"
	}
	bad := probeService()
	bad.Spec.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "probe", ContainerPort: 8080}}
	if err := c.Create(ctx, bad, client.DryRunAll); err == nil || !strings.Contains(err.Error(), `"validation.`+servingProject.name+`"`) {
		return fmt.Sprintf("invalid probe Service: %v", err)
	}
	pr := probePipelineRun()
	if err := c.Create(ctx, pr, client.DryRunAll); err != nil {
		return fmt.Sprintf("probe PipelineRun: %v", err)
	}
	if pr.Spec.TaskRunTemplate.ServiceAccountName == "" {
		return "probe PipelineRun not defaulted"
	}
	badRun := probePipelineRun()
	badRun.Spec.PipelineSpec = nil
	if err := c.Create(ctx, badRun, client.DryRunAll); err == nil || !strings.Contains(err.Error(), `"validation.`+tektonProject.name+`"`) {
		return fmt.Sprintf("invalid probe PipelineRun: %v", err)
	}
	return ""
}

func probeService() *servingv1.Service {
	svc := &servingv1.Service{ObjectMeta: metav1.ObjectMeta{Name: "sless-testbed-probe", Namespace: metav1.NamespaceDefault}}
	svc.Spec.Template.Spec.Containers = []corev1.Container{{Image: "registry.invalid/probe@sha256:" + strings.Repeat("0", 64)}}
	return svc
}

func probePipelineRun() *tektonv1.PipelineRun {
	return &tektonv1.PipelineRun{
		ObjectMeta: metav1.ObjectMeta{Name: "sless-testbed-probe", Namespace: metav1.NamespaceDefault},
		Spec: tektonv1.PipelineRunSpec{PipelineSpec: &tektonv1.PipelineSpec{Tasks: []tektonv1.PipelineTask{{
			Name: "probe",
			TaskSpec: &tektonv1.EmbeddedTask{TaskSpec: tektonv1.TaskSpec{Steps: []tektonv1.Step{{
				Name: "probe", Image: "registry.invalid/probe@sha256:" + strings.Repeat("0", 64), Command: []string{"true"},
			}}}},
		}}}},
	}
}
