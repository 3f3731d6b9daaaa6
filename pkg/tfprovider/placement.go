package tfprovider

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	dschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// resources and the placement attributes of sless_function and
// sless_service: spec.resources, nodeSelector, tolerations,
// affinity.nodeAffinity, priorityClassName and runtimeClassName.

var resourcesAttrTypes = map[string]attr.Type{
	"requests": types.MapType{ElemType: types.StringType},
	"limits":   types.MapType{ElemType: types.StringType},
}

var tolerationAttrTypes = map[string]attr.Type{
	"key": types.StringType, "operator": types.StringType, "value": types.StringType,
	"effect": types.StringType, "toleration_seconds": types.Int64Type,
}

type resourcesModel struct {
	Requests types.Map `tfsdk:"requests"`
	Limits   types.Map `tfsdk:"limits"`
}

type tolerationModel struct {
	Key               types.String `tfsdk:"key"`
	Operator          types.String `tfsdk:"operator"`
	Value             types.String `tfsdk:"value"`
	Effect            types.String `tfsdk:"effect"`
	TolerationSeconds types.Int64  `tfsdk:"toleration_seconds"`
}

// placementAttributes are the schema of the attributes of this file.
func placementAttributes(what string) map[string]schema.Attribute {
	quantities := func(which string) schema.MapAttribute {
		return schema.MapAttribute{
			Optional: true, ElementType: types.StringType,
			Description: which + " of each " + what + " instance by resource name (cpu, memory, ephemeral-storage, " +
				"nvidia.com/gpu, ...), as quantities: \"500m\", \"256Mi\", \"1\".",
			Validators: []validator.Map{quantityValues{}},
		}
	}
	return map[string]schema.Attribute{
		"resources": schema.SingleNestedAttribute{
			Optional: true,
			Description: "Requests and limits of each instance, as a container's. Memory here and memory_mb are one " +
				"setting: set one. Extended resources are set in limits.",
			Attributes: map[string]schema.Attribute{
				"requests": quantities("Requests"),
				"limits":   quantities("Limits"),
			},
		},
		"node_selector": schema.MapAttribute{
			Optional: true, ElementType: types.StringType,
			Description: "Node labels the instances' nodes must have (Knative's kubernetes.podspec-nodeselector feature).",
		},
		"tolerations": schema.ListNestedAttribute{
			Optional:    true,
			Description: "Taints the instances tolerate, as a pod's tolerations (Knative's kubernetes.podspec-tolerations feature).",
			NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
				"key":                schema.StringAttribute{Optional: true, Description: "Taint key; empty with operator Exists matches every taint."},
				"operator":           schema.StringAttribute{Optional: true, Description: "Exists or Equal (the default)."},
				"value":              schema.StringAttribute{Optional: true, Description: "Taint value, for Equal."},
				"effect":             schema.StringAttribute{Optional: true, Description: "NoSchedule, PreferNoSchedule or NoExecute; empty matches all."},
				"toleration_seconds": schema.Int64Attribute{Optional: true, Description: "How long a NoExecute taint is tolerated."},
			}},
		},
		"node_affinity_json": schema.StringAttribute{
			Optional: true,
			Description: "Node affinity as JSON, a pod's affinity.nodeAffinity (Knative's kubernetes.podspec-affinity " +
				"feature), e.g. jsonencode({requiredDuringSchedulingIgnoredDuringExecution = {nodeSelectorTerms = [...]}}).",
			Validators: []validator.String{jsonString{}},
		},
		"priority_class_name": schema.StringAttribute{
			Optional:    true,
			Description: "PriorityClass of the instances (Knative's kubernetes.podspec-priorityclassname feature).",
			Validators:  []validator.String{notEmpty{}},
		},
		"volumes": volumesAttribute(what),
		"runtime_class_name": schema.StringAttribute{
			Optional:    true,
			Description: "RuntimeClass of the instances, e.g. gVisor's runsc or Kata (Knative's kubernetes.podspec-runtimeclassname feature).",
			Validators:  []validator.String{notEmpty{}},
		},
	}
}

// placementDataAttributes are the data sources' schema of the same
// attributes, every one computed.
func placementDataAttributes() map[string]dschema.Attribute {
	computed := func(desc string) dschema.StringAttribute {
		return dschema.StringAttribute{Computed: true, Description: desc}
	}
	quantities := func(which string) dschema.MapAttribute {
		return dschema.MapAttribute{Computed: true, ElementType: types.StringType, Description: which + " by resource name, as quantities."}
	}
	return map[string]dschema.Attribute{
		"resources": dschema.SingleNestedAttribute{Computed: true, Description: "Requests and limits of each instance; null when none are set.",
			Attributes: map[string]dschema.Attribute{"requests": quantities("Requests"), "limits": quantities("Limits")}},
		"node_selector": dschema.MapAttribute{Computed: true, ElementType: types.StringType, Description: "Node labels the instances' nodes must have."},
		"tolerations": dschema.ListNestedAttribute{Computed: true, Description: "Taints the instances tolerate.",
			NestedObject: dschema.NestedAttributeObject{Attributes: map[string]dschema.Attribute{
				"key": computed("Taint key."), "operator": computed("Exists or Equal."), "value": computed("Taint value."),
				"effect":             computed("Taint effect."),
				"toleration_seconds": dschema.Int64Attribute{Computed: true, Description: "How long a NoExecute taint is tolerated."},
			}}},
		"node_affinity_json":  computed("Node affinity as JSON."),
		"priority_class_name": computed("PriorityClass of the instances."),
		"runtime_class_name":  computed("RuntimeClass of the instances."),
	}
}

// placementPaths name the attribute of each API field of this file.
var placementPaths = map[string]path.Path{
	"spec.resources":          path.Root("resources"),
	"spec.resources.requests": path.Root("resources").AtName("requests"),
	"spec.resources.limits":   path.Root("resources").AtName("limits"),
	"spec.nodeSelector":       path.Root("node_selector"),
	"spec.tolerations":        path.Root("tolerations"),
	"spec.affinity":           path.Root("node_affinity_json"),
	"spec.priorityClassName":  path.Root("priority_class_name"),
	"spec.runtimeClassName":   path.Root("runtime_class_name"),
	"spec.volumes":            path.Root("volumes"),
}

// placementSpec sets what m asks of this file's fields on s. Unknown
// values are left out, as buildSpec does.
func placementSpec(ctx context.Context, m *buildModel, s *slessv1alpha1.WorkloadSpec, diags *diag.Diagnostics) {
	if !m.Resources.IsNull() && !m.Resources.IsUnknown() {
		var r resourcesModel
		diags.Append(m.Resources.As(ctx, &r, basetypes.ObjectAsOptions{UnhandledUnknownAsEmpty: true})...)
		s.Resources = &slessv1alpha1.ResourceSpec{
			Requests: quantityList(r.Requests),
			Limits:   quantityList(r.Limits),
		}
	}
	if !m.NodeSelector.IsNull() && !m.NodeSelector.IsUnknown() {
		s.NodeSelector = map[string]string{}
		diags.Append(m.NodeSelector.ElementsAs(ctx, &s.NodeSelector, false)...)
	}
	if !m.Tolerations.IsNull() && !m.Tolerations.IsUnknown() {
		var ts []tolerationModel
		diags.Append(m.Tolerations.ElementsAs(ctx, &ts, true)...)
		for _, t := range ts {
			s.Tolerations = append(s.Tolerations, corev1.Toleration{
				Key: t.Key.ValueString(), Operator: corev1.TolerationOperator(t.Operator.ValueString()),
				Value: t.Value.ValueString(), Effect: corev1.TaintEffect(t.Effect.ValueString()),
				TolerationSeconds: int64Ptr(t.TolerationSeconds),
			})
		}
	}
	if !m.NodeAffinity.IsNull() && !m.NodeAffinity.IsUnknown() {
		var na corev1.NodeAffinity
		if err := json.Unmarshal([]byte(m.NodeAffinity.ValueString()), &na); err != nil {
			diags.AddAttributeError(path.Root("node_affinity_json"), "Invalid node affinity", "not a node affinity: "+err.Error())
		} else {
			s.Affinity = &slessv1alpha1.Affinity{NodeAffinity: &na}
		}
	}
	if !m.PriorityClassName.IsUnknown() {
		s.PriorityClassName = m.PriorityClassName.ValueString()
	}
	if !m.RuntimeClassName.IsNull() && !m.RuntimeClassName.IsUnknown() {
		v := m.RuntimeClassName.ValueString()
		s.RuntimeClassName = &v
	}
	s.Volumes = volumesSpec(ctx, m.Volumes, diags)
}

// quantityList reads a map of quantities; what does not parse is the
// attribute validator's to report, and left out here.
func quantityList(m types.Map) corev1.ResourceList {
	if m.IsNull() || m.IsUnknown() {
		return nil
	}
	l := corev1.ResourceList{}
	for k, v := range m.Elements() {
		sv, ok := v.(types.String)
		if !ok || sv.IsUnknown() || sv.IsNull() {
			continue
		}
		q, err := apiresource.ParseQuantity(sv.ValueString())
		if err != nil {
			continue
		}
		l[corev1.ResourceName(k)] = q
	}
	return l
}

// placementPatch puts this file's fields in a merge patch of spec, each
// named (null when unset). Map keys the server holds and s does not are
// sent as null, since a merge patch keeps the keys it does not name.
func placementPatch(spec map[string]any, s *slessv1alpha1.WorkloadSpec, server *slessv1alpha1.WorkloadSpec) {
	spec["resources"] = nil
	if r := s.Resources; r != nil {
		var had slessv1alpha1.ResourceSpec
		if server.Resources != nil {
			had = *server.Resources
		}
		spec["resources"] = map[string]any{
			"requests": listPatch(r.Requests, had.Requests),
			"limits":   listPatch(r.Limits, had.Limits),
		}
	}
	spec["nodeSelector"] = nil
	if s.NodeSelector != nil {
		ns := map[string]any{}
		for k := range server.NodeSelector {
			ns[k] = nil
		}
		for k, v := range s.NodeSelector {
			ns[k] = v
		}
		spec["nodeSelector"] = ns
	}
	spec["tolerations"] = nil
	if s.Tolerations != nil {
		spec["tolerations"] = s.Tolerations
	}
	spec["affinity"] = nil
	if s.Affinity != nil && s.Affinity.NodeAffinity != nil {
		na := s.Affinity.NodeAffinity
		spec["affinity"] = map[string]any{"nodeAffinity": map[string]any{
			"requiredDuringSchedulingIgnoredDuringExecution":  nullable(na.RequiredDuringSchedulingIgnoredDuringExecution),
			"preferredDuringSchedulingIgnoredDuringExecution": na.PreferredDuringSchedulingIgnoredDuringExecution,
		}}
	}
	spec["priorityClassName"] = nullableString(s.PriorityClassName)
	spec["runtimeClassName"] = nullable(s.RuntimeClassName)
	spec["volumes"] = nil
	if len(s.Volumes) > 0 {
		spec["volumes"] = s.Volumes
	}
}

func listPatch(want, had corev1.ResourceList) any {
	if want == nil && had == nil {
		return nil
	}
	out := map[string]any{}
	for k := range had {
		out[string(k)] = nil
	}
	for k, v := range want {
		out[string(k)] = v.String()
	}
	return out
}

// placementState maps what the API holds of this file's fields onto m,
// keeping the prior state's spelling of a quantity that means the same,
// its JSON formatting, and an empty map or block it had for none.
func placementState(s *slessv1alpha1.WorkloadSpec, prior, m *buildModel, diags *diag.Diagnostics) {
	var priorR resourcesModel
	if !prior.Resources.IsNull() && !prior.Resources.IsUnknown() {
		diags.Append(prior.Resources.As(context.Background(), &priorR, basetypes.ObjectAsOptions{UnhandledUnknownAsEmpty: true})...)
	}
	switch r := s.Resources; {
	case r != nil && (len(r.Requests) > 0 || len(r.Limits) > 0 || !prior.Resources.IsNull()):
		obj, d := types.ObjectValue(resourcesAttrTypes, map[string]attr.Value{
			"requests": quantityState(r.Requests, priorR.Requests, diags),
			"limits":   quantityState(r.Limits, priorR.Limits, diags),
		})
		diags.Append(d...)
		m.Resources = obj
	case r == nil && !prior.Resources.IsNull() && !prior.Resources.IsUnknown() && allNull(prior.Resources):
		m.Resources = prior.Resources
	default:
		m.Resources = types.ObjectNull(resourcesAttrTypes)
	}
	sel := map[string]attr.Value{}
	for k, v := range s.NodeSelector {
		sel[k] = types.StringValue(v)
	}
	m.NodeSelector = mapState(prior.NodeSelector, types.StringType, sel, diags)

	elem := types.ObjectType{AttrTypes: tolerationAttrTypes}
	if len(s.Tolerations) == 0 {
		m.Tolerations = types.ListNull(elem)
		if !prior.Tolerations.IsNull() && !prior.Tolerations.IsUnknown() && len(prior.Tolerations.Elements()) == 0 {
			m.Tolerations = prior.Tolerations
		}
	} else {
		var items []attr.Value
		for _, t := range s.Tolerations {
			obj, d := types.ObjectValue(tolerationAttrTypes, map[string]attr.Value{
				"key": optString(t.Key), "operator": optString(string(t.Operator)), "value": optString(t.Value),
				"effect": optString(string(t.Effect)), "toleration_seconds": optInt64(t.TolerationSeconds),
			})
			diags.Append(d...)
			items = append(items, obj)
		}
		l, d := types.ListValue(elem, items)
		diags.Append(d...)
		m.Tolerations = l
	}

	m.NodeAffinity = types.StringNull()
	if a := s.Affinity; a != nil && a.NodeAffinity != nil {
		if b, err := json.Marshal(a.NodeAffinity); err == nil {
			m.NodeAffinity = jsonState(prior.NodeAffinity, &apiextensionsv1.JSON{Raw: b})
		}
	}
	m.PriorityClassName = optString(s.PriorityClassName)
	m.RuntimeClassName = types.StringNull()
	if s.RuntimeClassName != nil {
		m.RuntimeClassName = types.StringValue(*s.RuntimeClassName)
	}
	m.Volumes = volumesState(context.Background(), s.Volumes, prior.Volumes, diags)
}

// quantityState is a map of quantities' state, each in the prior spelling
// when it means the same quantity ("0.5" for 500m).
func quantityState(l corev1.ResourceList, prior types.Map, diags *diag.Diagnostics) types.Map {
	got := map[string]attr.Value{}
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	var priorEl map[string]attr.Value
	if !prior.IsNull() && !prior.IsUnknown() {
		priorEl = prior.Elements()
	}
	for _, k := range keys {
		q := l[corev1.ResourceName(k)]
		v := types.StringValue(q.String())
		if p, ok := priorEl[k].(types.String); ok && sameQuantity(p, v) {
			v = p
		}
		got[k] = v
	}
	return mapState(prior, types.StringType, got, diags)
}

// placementChanged says whether the plan changes any of this file's fields.
func placementChanged(plan, state *buildModel) bool {
	if !plan.NodeSelector.Equal(state.NodeSelector) || !plan.Tolerations.Equal(state.Tolerations) ||
		!plan.PriorityClassName.Equal(state.PriorityClassName) || !plan.RuntimeClassName.Equal(state.RuntimeClassName) {
		return true
	}
	if !plan.NodeAffinity.Equal(state.NodeAffinity) && (plan.NodeAffinity.IsNull() || state.NodeAffinity.IsNull() ||
		plan.NodeAffinity.IsUnknown() || !sameJSON([]byte(plan.NodeAffinity.ValueString()), []byte(state.NodeAffinity.ValueString()))) {
		return true
	}
	return !plan.Resources.Equal(state.Resources) || !plan.Volumes.Equal(state.Volumes)
}

// quantityValues checks that each value of a map is a quantity.
type quantityValues struct{}

func (quantityValues) Description(context.Context) string {
	return "each value a quantity, such as 500m, 2 or 256Mi"
}
func (v quantityValues) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (v quantityValues) ValidateMap(ctx context.Context, req validator.MapRequest, resp *validator.MapResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	for k, e := range req.ConfigValue.Elements() {
		s, ok := e.(types.String)
		if !ok || s.IsNull() || s.IsUnknown() {
			continue
		}
		if _, err := apiresource.ParseQuantity(s.ValueString()); err != nil {
			attrError(&resp.Diagnostics, req.Path.AtMapKey(k), "Invalid quantity",
				fmt.Sprintf("%q must be %s", s.ValueString(), v.Description(ctx)))
		}
	}
}
