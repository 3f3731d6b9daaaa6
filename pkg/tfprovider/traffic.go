package tfprovider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// trafficModel is one entry of a traffic list: spec.traffic's TrafficTarget.
type trafficModel struct {
	Revision types.String `tfsdk:"revision"`
	Latest   types.Bool   `tfsdk:"latest"`
	Percent  types.Int64  `tfsdk:"percent"`
	Tag      types.String `tfsdk:"tag"`
}

var trafficAttrTypes = map[string]attr.Type{
	"revision": types.StringType, "latest": types.BoolType, "percent": types.Int64Type, "tag": types.StringType,
}

var trafficElemType = types.ObjectType{AttrTypes: trafficAttrTypes}

// trafficAttribute is the traffic list of sless_function and sless_service
// (at most slessv1alpha1.MaxTrafficTargets entries, which the API's
// validation checks at plan).
// latest and percent are computed when left out, to what the API takes
// them to mean (latest: no revision named; percent: 0), so a plan never
// shows a change between a field left out and its meaning spelt out.
func trafficAttribute(kind string) schema.Attribute {
	return schema.ListNestedAttribute{
		Optional: true,
		Description: "How calls are split among the " + kind + "'s revisions, as a Knative Service's traffic block: " +
			"the percents sum to 100, at most one entry follows the latest revision, tags are unique. " +
			"Unset, every call goes to the latest ready revision. A change of traffic alone builds nothing and makes no revision.",
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"revision": schema.StringAttribute{Optional: true, Validators: []validator.String{notEmpty{}},
				Description: "A revision of the " + kind + " (sless revisions NAME lists them); unset means the latest ready one."},
			"latest": schema.BoolAttribute{Optional: true, Computed: true,
				Description: "Follow the latest ready revision; true exactly when revision is unset, which is what it is when left out."},
			"percent": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(0),
				Description: "Percent of the calls, 0 to 100; 0 (the default) gives a tag a URL and no share.",
				Validators:  []validator.Int64{between{0, 100}}},
			"tag": schema.StringAttribute{Optional: true, Validators: []validator.String{notEmpty{}},
				Description: "Names the entry: it answers at /fn/{namespace}/{name}@{tag} and {tag}-{name}.{namespace}.<domain>. A DNS-1035 label."},
		}},
	}
}

// trafficSpec is the spec.traffic list m asks for. An unknown list, or an
// entry's unknown field, is left out (validation at plan skips it).
func trafficSpec(ctx context.Context, l types.List, diags *diag.Diagnostics) []slessv1alpha1.TrafficTarget {
	if l.IsNull() || l.IsUnknown() {
		return nil
	}
	var entries []trafficModel
	diags.Append(l.ElementsAs(ctx, &entries, true)...)
	out := make([]slessv1alpha1.TrafficTarget, 0, len(entries))
	for _, e := range entries {
		t := slessv1alpha1.TrafficTarget{Tag: e.Tag.ValueString(), RevisionName: e.Revision.ValueString()}
		if !e.Latest.IsNull() && !e.Latest.IsUnknown() {
			t.LatestRevision = e.Latest.ValueBoolPointer()
		}
		if !e.Percent.IsNull() && !e.Percent.IsUnknown() {
			t.Percent = e.Percent.ValueInt64Pointer()
		}
		out = append(out, t)
	}
	return out
}

// trafficState is the traffic list as the API holds it, each latest and
// percent spelt out as the plan spells them.
func trafficState(traffic []slessv1alpha1.TrafficTarget, diags *diag.Diagnostics) types.List {
	if len(traffic) == 0 {
		return types.ListNull(trafficElemType)
	}
	elems := make([]attr.Value, len(traffic))
	for i, t := range traffic {
		obj, d := types.ObjectValue(trafficAttrTypes, map[string]attr.Value{
			"revision": optString(t.RevisionName), "latest": types.BoolValue(t.IsLatest()),
			"percent": types.Int64Value(t.PercentOf()), "tag": optString(t.Tag),
		})
		diags.Append(d...)
		elems[i] = obj
	}
	l, d := types.ListValue(trafficElemType, elems)
	diags.Append(d...)
	return l
}

// planTraffic fills in each entry's latest left out of the configuration,
// once its revision is known: what the API takes it to mean.
func planTraffic(ctx context.Context, l types.List, diags *diag.Diagnostics) types.List {
	if l.IsNull() || l.IsUnknown() {
		return l
	}
	elems := l.Elements()
	out := make([]attr.Value, len(elems))
	for i, v := range elems {
		out[i] = v
		obj, ok := v.(basetypes.ObjectValue)
		if !ok || obj.IsNull() || obj.IsUnknown() {
			continue
		}
		attrs := obj.Attributes()
		rev, _ := attrs["revision"].(types.String)
		latest, _ := attrs["latest"].(types.Bool)
		if !latest.IsUnknown() || rev.IsUnknown() {
			continue
		}
		attrs["latest"] = types.BoolValue(rev.IsNull())
		filled, d := types.ObjectValue(trafficAttrTypes, attrs)
		diags.Append(d...)
		out[i] = filled
	}
	filled, d := types.ListValue(trafficElemType, out)
	diags.Append(d...)
	_ = ctx
	return filled
}

// trafficPatch is spec.traffic in a merge patch: a list replaces the
// server's whole, and null removes it.
func trafficPatch(traffic []slessv1alpha1.TrafficTarget) any {
	if len(traffic) == 0 {
		return nil
	}
	return traffic
}
