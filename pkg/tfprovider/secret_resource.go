package tfprovider

import (
	"context"
	"fmt"
	"net/http"
	"sort"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sless-dev/sless/pkg/client"
	"github.com/sless-dev/sless/pkg/secrets"
)

var (
	_ resource.ResourceWithConfigure      = (*secretResource)(nil)
	_ resource.ResourceWithValidateConfig = (*secretResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*secretResource)(nil)
	_ resource.ResourceWithImportState    = (*secretResource)(nil)
)

func newSecretResource() resource.Resource { return &secretResource{} }

type secretResource struct{ api *apiData }

type secretModel struct {
	ID            types.String `tfsdk:"id"`
	Name          types.String `tfsdk:"name"`
	Namespace     types.String `tfsdk:"namespace"`
	Data          types.Map    `tfsdk:"data"`
	DataWO        types.Map    `tfsdk:"data_wo"`
	DataWOVersion types.Int64  `tfsdk:"data_wo_version"`
	Keys          types.List   `tfsdk:"keys"`
	Version       types.String `tfsdk:"version"`
	UpdatedAt     types.String `tfsdk:"updated_at"`
}

func (r *secretResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_secret"
}

func (r *secretResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.api = configureResource(req.ProviderData, &resp.Diagnostics)
}

func (r *secretResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A secret functions read with env value_from.secret_key_ref. The API never gives values back: " +
			"set them with data (sensitive, kept in state) or data_wo (write-only, never in state or plan; " +
			"bump data_wo_version to send them again). A change of values rolls a new revision of the functions that refer to it.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, Description: "namespace/name.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"name": schema.StringAttribute{Required: true, PlanModifiers: replaceString(),
				Description: "Name: a DNS-1123 subdomain, as a Kubernetes Secret's.", Validators: []validator.String{objectName{}}},
			"namespace": schema.StringAttribute{Optional: true, Computed: true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplaceIfConfigured(), stringplanmodifier.UseStateForUnknown()},
				Description:   "Namespace; the provider's when unset.", Validators: []validator.String{dnsLabel{max: 63}}},
			"data": schema.MapAttribute{ElementType: types.StringType, Optional: true, Sensitive: true,
				Description: "The values by key. Sensitive, and kept in state: a change is planned as a rotation. " +
					"After an import, or a rotation made outside Terraform, the values are not known, and the next plan rotates them to these."},
			"data_wo": schema.MapAttribute{ElementType: types.StringType, Optional: true, Sensitive: true, WriteOnly: true,
				Description: "The values by key, write-only (Terraform 1.11 or later): never in state or plan. " +
					"Sent on create and whenever data_wo_version changes; a change of values alone plans nothing."},
			"data_wo_version": schema.Int64Attribute{Optional: true,
				Description: "Change it to send data_wo again (a rotation)."},
			"keys": schema.ListAttribute{ElementType: types.StringType, Computed: true, Description: "The keys the secret holds, sorted."},
			"version": schema.StringAttribute{Computed: true,
				Description: "The secret's version (resourceVersion): it changes at every rotation, whoever makes it."},
			"updated_at": schema.StringAttribute{Computed: true, Description: "When the values were last set (RFC 3339)."},
		},
	}
}

func (r *secretResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m secretModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	data, wo := !m.Data.IsNull(), !m.DataWO.IsNull()
	switch {
	case data && wo:
		resp.Diagnostics.AddAttributeError(path.Root("data_wo"), "Conflicting values", "set data or data_wo, not both")
	case !data && !wo:
		resp.Diagnostics.AddAttributeError(path.Root("data"), "Missing values", "set data (kept in state, sensitive) or data_wo (write-only)")
	case data && !m.DataWOVersion.IsNull():
		resp.Diagnostics.AddAttributeError(path.Root("data_wo_version"), "Unused version", "data_wo_version goes with data_wo; a change of data is planned by itself")
	}
	for _, at := range []struct {
		p path.Path
		v types.Map
	}{{path.Root("data"), m.Data}, {path.Root("data_wo"), m.DataWO}} {
		values, known := mapValues(at.v)
		if !known || at.v.IsNull() {
			continue
		}
		for _, e := range secrets.ValidateData(values, field.NewPath("data")) {
			resp.Diagnostics.AddAttributeError(at.p, "Invalid secret", fmt.Sprintf("%s: %s", e.Field, e.ErrorBody()))
		}
	}
}

// mapValues is a map of strings as a secret's data; known is false when the
// map or any value is unknown.
func mapValues(m types.Map) (map[string][]byte, bool) {
	if m.IsUnknown() {
		return nil, false
	}
	out := map[string][]byte{}
	for k, v := range m.Elements() {
		s, ok := v.(types.String)
		if !ok || s.IsUnknown() {
			return nil, false
		}
		out[k] = []byte(s.ValueString())
	}
	return out, true
}

func keysOf(m types.Map) []string {
	keys := make([]string, 0, len(m.Elements()))
	for k := range m.Elements() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func stringList(items []string) types.List {
	vals := make([]attr.Value, len(items))
	for i, s := range items {
		vals[i] = types.StringValue(s)
	}
	return types.ListValueMust(types.StringType, vals)
}

// rotates says whether the plan sends values: on create, when data changed
// (or is not known to match, after an import or an outside rotation), or
// when data_wo_version changed.
func (m *secretModel) rotates(state *secretModel) bool {
	if state == nil {
		return true
	}
	if !m.Data.IsNull() {
		return !m.Data.Equal(state.Data)
	}
	return !m.DataWOVersion.Equal(state.DataWOVersion)
}

func (r *secretResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	var plan, config secretModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.Config.Get(ctx, &config)...)
	if resp.Diagnostics.HasError() {
		return
	}
	var state *secretModel
	if req.State.Raw.IsNull() {
		if !planNewObject(ctx, r.api, config.Namespace, plan.Name, &plan.Namespace, &plan.ID, &resp.Diagnostics) {
			return
		}
	} else {
		state = &secretModel{}
		resp.Diagnostics.Append(req.State.Get(ctx, state)...)
		planExistingNamespace(ctx, r.api, config.Namespace, &plan.Namespace, resp)
	}
	if plan.rotates(state) {
		// The keys are the configured ones (write-only values are in the
		// configuration only); version and time are the API's to give.
		src := config.Data
		if src.IsNull() {
			src = config.DataWO
		}
		plan.Keys = types.ListUnknown(types.StringType)
		if _, known := mapValues(src); known && !src.IsNull() {
			plan.Keys = stringList(keysOf(src))
		}
		plan.Version, plan.UpdatedAt = types.StringUnknown(), types.StringUnknown()
	} else {
		plan.Keys, plan.Version, plan.UpdatedAt = state.Keys, state.Version, state.UpdatedAt
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

// values are what create and rotate send: data from the plan, or data_wo,
// which only the configuration holds.
func secretValues(ctx context.Context, plan *secretModel, config interface {
	GetAttribute(context.Context, path.Path, any) diag.Diagnostics
}, diags *diag.Diagnostics) map[string][]byte {
	src := plan.Data
	if src.IsNull() {
		diags.Append(config.GetAttribute(ctx, path.Root("data_wo"), &src)...)
	}
	values, known := mapValues(src)
	if !known {
		diags.AddError("Secret values not known", "the values are not known at apply time; this is a bug in the provider")
	}
	return values
}

func secretState(in *secrets.Info, prior *secretModel) secretModel {
	return secretModel{
		ID:            types.StringValue(in.Metadata.Namespace + "/" + in.Metadata.Name),
		Name:          types.StringValue(in.Metadata.Name),
		Namespace:     types.StringValue(in.Metadata.Namespace),
		Data:          prior.Data,
		DataWO:        types.MapNull(types.StringType),
		DataWOVersion: prior.DataWOVersion,
		Keys:          stringList(in.Keys),
		Version:       types.StringValue(in.Metadata.ResourceVersion),
		UpdatedAt:     types.StringValue(in.UpdatedAt.UTC().Format("2006-01-02T15:04:05Z07:00")),
	}
}

func (r *secretResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan secretModel
	if !applyModel(ctx, r.api, req.Plan, &plan, &resp.Diagnostics) {
		return
	}
	values := secretValues(ctx, &plan, req.Config, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	ns, name := plan.Namespace.ValueString(), plan.Name.ValueString()
	progress(ctx, "secret", ns, name, "creating")
	in, err := r.api.client.CreateSecret(ctx, ns, name, values)
	if err != nil {
		if client.IsConflict(err) {
			addExistsError(&resp.Diagnostics, "secret", ns, name)
			return
		}
		resp.Diagnostics.AddError("Creating the secret failed", err.Error())
		return
	}
	st := secretState(in, &plan)
	resp.Diagnostics.Append(resp.State.Set(ctx, &st)...)
}

func (r *secretResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var prior secretModel
	resp.Diagnostics.Append(req.State.Get(ctx, &prior)...)
	if resp.Diagnostics.HasError() {
		return
	}
	in, ok := readObject(ctx, r.api, "secret", prior.ID, prior.Namespace, prior.Name, (*client.Client).GetSecret, resp)
	if !ok {
		return
	}
	st := secretState(in, &prior)
	if prior.Version.ValueString() != in.Metadata.ResourceVersion {
		// Rotated outside Terraform, or just imported: the values the
		// state holds are not known to be the secret's, so the next plan
		// sends the configured ones again.
		st.Data = types.MapNull(types.StringType)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &st)...)
}

func (r *secretResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	if !requireAPI(r.api, &resp.Diagnostics) {
		return
	}
	var plan, state secretModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ns, name := state.Namespace.ValueString(), state.Name.ValueString()
	if !plan.rotates(&state) {
		st := plan
		st.DataWO = types.MapNull(types.StringType)
		resp.Diagnostics.Append(resp.State.Set(ctx, &st)...)
		return
	}
	values := secretValues(ctx, &plan, req.Config, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	progress(ctx, "secret", ns, name, "rotating")
	// If-Match the version refreshed last: a rotation made since is not
	// overwritten unseen.
	in, err := r.api.client.RotateSecret(ctx, ns, name, values, state.Version.ValueString())
	if client.StatusOf(err) == http.StatusPreconditionFailed {
		resp.Diagnostics.AddError("Secret changed since the plan",
			fmt.Sprintf("secret %s/%s was rotated after this plan was made (it is no longer version %s); plan again", ns, name, state.Version.ValueString()))
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Rotating the secret failed", err.Error())
		return
	}
	st := secretState(in, &plan)
	resp.Diagnostics.Append(resp.State.Set(ctx, &st)...)
}

func (r *secretResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state secretModel
	if !applyModel(ctx, r.api, req.State, &state, &resp.Diagnostics) {
		return
	}
	err := r.api.client.DeleteSecret(ctx, state.Namespace.ValueString(), state.Name.ValueString())
	if err != nil && !client.IsNotFound(err) {
		resp.Diagnostics.AddError("Deleting the secret failed", err.Error())
	}
}

func (r *secretResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importInto(ctx, r.api, req, resp)
}
