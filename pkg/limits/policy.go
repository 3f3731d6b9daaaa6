package limits

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// PolicyName names the ValidatingAdmissionPolicy and its binding.
const PolicyName = "sless-resource-maximums"

// The policy's CEL, read top to bottom as Maximums.Check reads. Variables
// build on each other: the namespace's entries, well-formed ones as
// [name, value], then the site's for names the namespace leaves, then what
// the spec asks of each in Check's order, then what is over.
const (
	celRaw = `has(namespaceObject.metadata.annotations) && '` + AnnotationMax + `' in namespaceObject.metadata.annotations ? ` +
		`namespaceObject.metadata.annotations['` + AnnotationMax + `'].split(',').map(e, e.trim()).filter(e, e != '') : []`
	celWellFormed = `variables.raw.all(e, e.split('=').size() == 2 && e.split('=')[0].trim() != '' && isQuantity(e.split('=')[1].trim())) && ` +
		`variables.raw.all(e, variables.raw.filter(f, f.split('=')[0].trim() == e.split('=')[0].trim()).size() == 1)`
	celOwn = `variables.wellFormed ? variables.raw.map(e, [e.split('=')[0].trim(), e.split('=')[1].trim()]) : []`
	// celMax is completed with the site's entries as a list literal.
	celMaxFormat = `variables.own + %s.filter(e, !variables.own.exists(o, o[0] == e[0]))`
	celLimits    = `has(object.spec.resources) && has(object.spec.resources.limits) ? object.spec.resources.limits : {}`
	celRequests  = `has(object.spec.resources) && has(object.spec.resources.requests) ? object.spec.resources.requests : {}`
	celAsked     = `variables.max.filter(m, m[0] in variables.limits).map(m, ['spec.resources.limits.' + m[0], string(variables.limits[m[0]]), m[1]]) + ` +
		`variables.max.filter(m, m[0] in variables.requests).map(m, ['spec.resources.requests.' + m[0], string(variables.requests[m[0]]), m[1]]) + ` +
		`(has(object.spec.memoryMB) ? variables.max.filter(m, m[0] == 'memory').map(m, ['spec.memoryMB', string(object.spec.memoryMB) + 'Mi', m[1]]) : []) + ` +
		`(has(object.spec.cpu) ? variables.max.filter(m, m[0] == 'cpu').map(m, ['spec.cpu', string(object.spec.cpu), m[1]]) : [])`
	celOver = `variables.asked.filter(a, quantity(a[1]).isGreaterThan(quantity(a[2])))`
)

// Policy is the ValidatingAdmissionPolicy that refuses, at the apiserver,
// a Function or SlessService over its namespace's maximums (site's max
// baked in, a namespace's annotation read at admission), and the binding
// that applies it everywhere. It refuses what Check refuses, in its words.
func Policy(site Site) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	fail := admissionregistrationv1.Fail
	equivalent := admissionregistrationv1.Equivalent
	// Invalid, as the CRD's own refusals: 422, which clients read as bad input.
	invalid := metav1.StatusReasonInvalid
	labels := map[string]string{"app.kubernetes.io/managed-by": "sless"}
	p := &admissionregistrationv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: PolicyName, Labels: labels},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{
				MatchPolicy: &equivalent,
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
						Rule: admissionregistrationv1.Rule{
							APIGroups:   []string{slessv1alpha1.SchemeGroupVersion.Group},
							APIVersions: []string{slessv1alpha1.SchemeGroupVersion.Version},
							Resources:   []string{"functions", "slessservices"},
						},
					},
				}},
			},
			// As Applies: an object over a maximum lowered since keeps its
			// metadata writable, so its finalizer can go.
			MatchConditions: []admissionregistrationv1.MatchCondition{{
				Name:       "spec-written",
				Expression: `request.operation == 'CREATE' || object.spec != oldObject.spec`,
			}},
			Variables: []admissionregistrationv1.Variable{
				{Name: "raw", Expression: celRaw},
				{Name: "wellFormed", Expression: celWellFormed},
				{Name: "own", Expression: celOwn},
				{Name: "max", Expression: fmt.Sprintf(celMaxFormat, siteLiteral(site.Max))},
				{Name: "limits", Expression: celLimits},
				{Name: "requests", Expression: celRequests},
				{Name: "asked", Expression: celAsked},
				{Name: "over", Expression: celOver},
			},
			Validations: []admissionregistrationv1.Validation{
				{
					Reason:            &invalid,
					Expression:        "variables.wellFormed",
					MessageExpression: `"namespace " + namespaceObject.metadata.name + "'s annotation ` + AnnotationMax + ` is malformed: want name=quantity pairs separated by commas"`,
				},
				{
					Reason:            &invalid,
					Expression:        "size(variables.over) == 0",
					MessageExpression: `variables.over[0][0] + ' ' + variables.over[0][1] + ' is over namespace ' + namespaceObject.metadata.name + "'s maximum " + variables.over[0][2]`,
				},
			},
		},
	}
	b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: PolicyName, Labels: labels},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        PolicyName,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	return p, b
}

// siteLiteral is entries as a CEL list of [name, value]; Parse admitted
// only names and quantities, which hold no quote.
func siteLiteral(entries []Entry) string {
	items := make([]string, len(entries))
	for i, e := range entries {
		items[i] = fmt.Sprintf("['%s', '%s']", e.Name, e.Value)
	}
	return "[" + strings.Join(items, ", ") + "]"
}
