package tfprovider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	corev1 "k8s.io/api/core/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// volumes on sless_function and sless_service: spec.volumes, one
// attribute per field, each source a nested object (docs/volumes.md).

type volumeModel struct {
	Name      types.String   `tfsdk:"name"`
	MountPath types.String   `tfsdk:"mount_path"`
	Secret    *filesModel    `tfsdk:"secret"`
	ConfigMap *filesModel    `tfsdk:"config_map"`
	EmptyDir  *emptyDirModel `tfsdk:"empty_dir"`
	Claim     *claimModel    `tfsdk:"persistent_volume_claim"`
}

// filesModel is a Secret's or ConfigMap's files; Name is secret_name or name.
type filesModel struct {
	Name        types.String `tfsdk:"name"`
	DefaultMode types.Int64  `tfsdk:"default_mode"`
	Items       []itemModel  `tfsdk:"items"`
}

type itemModel struct {
	Key  types.String `tfsdk:"key"`
	Path types.String `tfsdk:"path"`
	Mode types.Int64  `tfsdk:"mode"`
}

type emptyDirModel struct {
	Medium    types.String `tfsdk:"medium"`
	SizeLimit types.String `tfsdk:"size_limit"`
}

type claimModel struct {
	ClaimName types.String `tfsdk:"claim_name"`
	ReadOnly  types.Bool   `tfsdk:"read_only"`
}

var (
	itemAttrTypes  = map[string]attr.Type{"key": types.StringType, "path": types.StringType, "mode": types.Int64Type}
	filesAttrTypes = map[string]attr.Type{"name": types.StringType, "default_mode": types.Int64Type,
		"items": types.ListType{ElemType: types.ObjectType{AttrTypes: itemAttrTypes}}}
	volumeAttrTypes = map[string]attr.Type{
		"name": types.StringType, "mount_path": types.StringType,
		"secret": types.ObjectType{AttrTypes: filesAttrTypes}, "config_map": types.ObjectType{AttrTypes: filesAttrTypes},
		"empty_dir":               types.ObjectType{AttrTypes: map[string]attr.Type{"medium": types.StringType, "size_limit": types.StringType}},
		"persistent_volume_claim": types.ObjectType{AttrTypes: map[string]attr.Type{"claim_name": types.StringType, "read_only": types.BoolType}},
	}
)

func volumesAttribute(what string) schema.Attribute {
	files := func(kind string) schema.SingleNestedAttribute {
		return schema.SingleNestedAttribute{Optional: true,
			Description: "The keys of a " + kind + " of the namespace as files, read-only; a change of the " + kind + " reaches the files in place.",
			Attributes: map[string]schema.Attribute{
				"name":         schema.StringAttribute{Required: true, Description: "The " + kind + "."},
				"default_mode": schema.Int64Attribute{Optional: true, Description: "The files' mode, 0 to 511 (0777); unset 0644."},
				"items": schema.ListNestedAttribute{Optional: true, Description: "Only these keys, at these relative paths.",
					NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
						"key":  schema.StringAttribute{Required: true, Description: "The key."},
						"path": schema.StringAttribute{Required: true, Description: "Its file's path in the volume."},
						"mode": schema.Int64Attribute{Optional: true, Description: "Its file's mode; unset default_mode."},
					}}},
			}}
	}
	return schema.ListNestedAttribute{
		Optional: true,
		Description: "Directories each " + what + " instance sees at a path of its own (docs/volumes.md): exactly one of secret, " +
			"config_map, empty_dir or persistent_volume_claim each. Claims need Knative's persistent-volume flags and are not " +
			"available in local mode.",
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"name":       schema.StringAttribute{Required: true, Description: "The volume's name, a DNS label."},
			"mount_path": schema.StringAttribute{Required: true, Description: "Where the instance sees it: absolute, clear of the runtime's paths."},
			"secret":     files("Secret"),
			"config_map": files("ConfigMap"),
			"empty_dir": schema.SingleNestedAttribute{Optional: true, Description: "A scratch directory of each instance.",
				Attributes: map[string]schema.Attribute{
					"medium":     schema.StringAttribute{Optional: true, Description: `"" (disk) or Memory (a tmpfs).`},
					"size_limit": schema.StringAttribute{Optional: true, Description: "Its cap, a quantity such as 64Mi.", Validators: []validator.String{quantity{}}},
				}},
			"persistent_volume_claim": schema.SingleNestedAttribute{Optional: true, Description: "A claim of the namespace.",
				Attributes: map[string]schema.Attribute{
					"claim_name": schema.StringAttribute{Required: true, Description: "The claim."},
					"read_only":  schema.BoolAttribute{Optional: true, Description: "Mount it read-only."},
				}},
		}},
	}
}

// volumesSpec reads the configured volumes; unknown values are left out.
func volumesSpec(ctx context.Context, l types.List, diags *diag.Diagnostics) []slessv1alpha1.Volume {
	if l.IsNull() || l.IsUnknown() {
		return nil
	}
	var vs []volumeModel
	diags.Append(l.ElementsAs(ctx, &vs, true)...)
	out := []slessv1alpha1.Volume{}
	for _, v := range vs {
		vol := slessv1alpha1.Volume{Name: v.Name.ValueString(), MountPath: v.MountPath.ValueString()}
		if f := v.Secret; f != nil {
			vol.Secret = &slessv1alpha1.SecretVolume{SecretName: f.Name.ValueString(), DefaultMode: int32Ptr(f.DefaultMode), Items: itemsSpec(f.Items)}
		}
		if f := v.ConfigMap; f != nil {
			vol.ConfigMap = &slessv1alpha1.ConfigMapVolume{Name: f.Name.ValueString(), DefaultMode: int32Ptr(f.DefaultMode), Items: itemsSpec(f.Items)}
		}
		if e := v.EmptyDir; e != nil {
			vol.EmptyDir = &slessv1alpha1.EmptyDirVolume{Medium: corev1.StorageMedium(e.Medium.ValueString())}
			if !e.SizeLimit.IsNull() && !e.SizeLimit.IsUnknown() {
				if q, err := apiresource.ParseQuantity(e.SizeLimit.ValueString()); err == nil {
					vol.EmptyDir.SizeLimit = &q
				}
			}
		}
		if c := v.Claim; c != nil {
			vol.PersistentVolumeClaim = &slessv1alpha1.PVCVolume{ClaimName: c.ClaimName.ValueString(), ReadOnly: c.ReadOnly.ValueBool()}
		}
		out = append(out, vol)
	}
	return out
}

func itemsSpec(items []itemModel) []slessv1alpha1.KeyToPath {
	var out []slessv1alpha1.KeyToPath
	for _, it := range items {
		out = append(out, slessv1alpha1.KeyToPath{Key: it.Key.ValueString(), Path: it.Path.ValueString(), Mode: int32Ptr(it.Mode)})
	}
	return out
}

// volumesState is the server's volumes as state, keeping the prior's
// spelling of a size limit that means the same quantity and an empty
// list it had for none.
func volumesState(ctx context.Context, vols []slessv1alpha1.Volume, prior types.List, diags *diag.Diagnostics) types.List {
	elem := types.ObjectType{AttrTypes: volumeAttrTypes}
	if len(vols) == 0 {
		if !prior.IsNull() && !prior.IsUnknown() && len(prior.Elements()) == 0 {
			return prior
		}
		return types.ListNull(elem)
	}
	var priorVs []volumeModel
	if !prior.IsNull() && !prior.IsUnknown() {
		diags.Append(prior.ElementsAs(ctx, &priorVs, true)...)
	}
	out := make([]volumeModel, len(vols))
	for i, v := range vols {
		m := volumeModel{Name: types.StringValue(v.Name), MountPath: types.StringValue(v.MountPath)}
		if s := v.Secret; s != nil {
			m.Secret = &filesModel{Name: types.StringValue(s.SecretName), DefaultMode: optInt32(s.DefaultMode), Items: itemsState(s.Items)}
		}
		if c := v.ConfigMap; c != nil {
			m.ConfigMap = &filesModel{Name: types.StringValue(c.Name), DefaultMode: optInt32(c.DefaultMode), Items: itemsState(c.Items)}
		}
		if e := v.EmptyDir; e != nil {
			m.EmptyDir = &emptyDirModel{Medium: optString(string(e.Medium)), SizeLimit: types.StringNull()}
			if e.SizeLimit != nil {
				m.EmptyDir.SizeLimit = types.StringValue(e.SizeLimit.String())
				if i < len(priorVs) && priorVs[i].EmptyDir != nil && sameQuantity(priorVs[i].EmptyDir.SizeLimit, m.EmptyDir.SizeLimit) {
					m.EmptyDir.SizeLimit = priorVs[i].EmptyDir.SizeLimit
				}
			}
		}
		if c := v.PersistentVolumeClaim; c != nil {
			m.Claim = &claimModel{ClaimName: types.StringValue(c.ClaimName), ReadOnly: types.BoolNull()}
			if c.ReadOnly {
				m.Claim.ReadOnly = types.BoolValue(true)
			} else if i < len(priorVs) && priorVs[i].Claim != nil && !priorVs[i].Claim.ReadOnly.IsNull() {
				m.Claim.ReadOnly = types.BoolValue(false)
			}
		}
		out[i] = m
	}
	l, d := types.ListValueFrom(ctx, elem, out)
	diags.Append(d...)
	return l
}

func itemsState(items []slessv1alpha1.KeyToPath) []itemModel {
	var out []itemModel
	for _, it := range items {
		out = append(out, itemModel{Key: types.StringValue(it.Key), Path: types.StringValue(it.Path), Mode: optInt32(it.Mode)})
	}
	return out
}
