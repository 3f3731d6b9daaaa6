package tfprovider

import (
	"context"
	"sort"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/client"
)

func newFunctionDataSource() datasource.DataSource  { return &functionDataSource{} }
func newFunctionsDataSource() datasource.DataSource { return &functionsDataSource{} }

// dataNamespace is the namespace a data source reads: the configured one,
// else the provider's, which must be known (a data source is read now).
func dataNamespace(ctx context.Context, d *apiData, configured types.String, diags *diag.Diagnostics) (types.String, bool) {
	if !configured.IsNull() {
		return configured, true
	}
	ns, err := d.defaultNamespace(ctx)
	if err != nil {
		addNamespaceError(diags, err)
		return types.StringUnknown(), false
	}
	return types.StringValue(ns), true
}

func configureDataSource(req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) *apiData {
	return configureResource(req.ProviderData, &resp.Diagnostics)
}

// functionDataModel is what both data sources tell of one function.
type functionDataModel struct {
	ID              types.String `tfsdk:"id"`
	Name            types.String `tfsdk:"name"`
	Namespace       types.String `tfsdk:"namespace"`
	Runtime         types.String `tfsdk:"runtime"`
	Entrypoint      types.String `tfsdk:"entrypoint"`
	Image           types.String `tfsdk:"image"`
	SourceSHA256    types.String `tfsdk:"source_sha256"`
	Env             types.Map    `tfsdk:"env"`
	SecretEnv       types.Map    `tfsdk:"secret_env"`
	MemoryMB        types.Int64  `tfsdk:"memory_mb"`
	CPU             types.String `tfsdk:"cpu"`
	TimeoutSec      types.Int64  `tfsdk:"timeout_sec"`
	BuildTimeoutSec types.Int64  `tfsdk:"build_timeout_sec"`
	Scale           types.Object `tfsdk:"scale"`
	URL             types.String `tfsdk:"url"`
	ResolvedImage   types.String `tfsdk:"resolved_image"`
	Revision        types.String `tfsdk:"revision"`
	Phase           types.String `tfsdk:"phase"`
	Ready           types.Bool   `tfsdk:"ready"`
	Traffic         types.List   `tfsdk:"traffic"`
	// Resources and placement, as sless_function's (placement.go).
	Resources         types.Object `tfsdk:"resources"`
	NodeSelector      types.Map    `tfsdk:"node_selector"`
	Tolerations       types.List   `tfsdk:"tolerations"`
	NodeAffinity      types.String `tfsdk:"node_affinity_json"`
	PriorityClassName types.String `tfsdk:"priority_class_name"`
	RuntimeClassName  types.String `tfsdk:"runtime_class_name"`
}

var functionDataAttrTypes = map[string]attr.Type{
	"id": types.StringType, "name": types.StringType, "namespace": types.StringType, "runtime": types.StringType,
	"entrypoint": types.StringType, "image": types.StringType, "source_sha256": types.StringType,
	"env": types.MapType{ElemType: types.StringType}, "secret_env": types.MapType{ElemType: types.ObjectType{AttrTypes: secretRefAttrTypes}},
	"memory_mb": types.Int64Type, "cpu": types.StringType, "timeout_sec": types.Int64Type,
	"build_timeout_sec": types.Int64Type, "scale": types.ObjectType{AttrTypes: scaleAttrTypes},
	"url": types.StringType, "resolved_image": types.StringType,
	"revision": types.StringType, "phase": types.StringType, "ready": types.BoolType,
	"traffic":   types.ListType{ElemType: trafficElemType},
	"resources": types.ObjectType{AttrTypes: resourcesAttrTypes}, "node_selector": types.MapType{ElemType: types.StringType},
	"tolerations": types.ListType{ElemType: types.ObjectType{AttrTypes: tolerationAttrTypes}}, "node_affinity_json": types.StringType,
	"priority_class_name": types.StringType, "runtime_class_name": types.StringType,
}

func functionDataAttributes(nameRequired bool) map[string]schema.Attribute {
	computed := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, Description: desc}
	}
	attrs := map[string]schema.Attribute{
		"id":            computed("namespace/name."),
		"name":          computed("Name."),
		"namespace":     computed("Namespace."),
		"runtime":       computed("Runtime."),
		"entrypoint":    computed("Handler as module.function."),
		"image":         computed("The prebuilt image it serves, when it is not built from code."),
		"source_sha256": computed("sha256 of the source zip."),
		"env":           schema.MapAttribute{Computed: true, ElementType: types.StringType, Description: "Plain environment variables."},
		"secret_env": schema.MapNestedAttribute{Computed: true, Description: "Environment variables from Kubernetes Secrets.",
			NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
				"secret": computed("Secret name."), "key": computed("Key in the Secret."),
			}}},
		"memory_mb":         schema.Int64Attribute{Computed: true, Description: "Memory limit in MiB."},
		"cpu":               computed("CPU request."),
		"timeout_sec":       schema.Int64Attribute{Computed: true, Description: "Invocation timeout in seconds."},
		"build_timeout_sec": schema.Int64Attribute{Computed: true, Description: "Build timeout in seconds."},
		"scale": schema.SingleNestedAttribute{Computed: true, Description: "Autoscaling bounds and target; null when none are set.",
			Attributes: map[string]schema.Attribute{
				"min":                   schema.Int64Attribute{Computed: true, Description: "Minimum instances."},
				"max":                   schema.Int64Attribute{Computed: true, Description: "Maximum instances."},
				"target":                schema.Int64Attribute{Computed: true, Description: "Concurrent requests per instance the autoscaler aims for."},
				"container_concurrency": schema.Int64Attribute{Computed: true, Description: "Hard limit of concurrent requests per instance."},
			}},
		"url":            computed("Where it is invoked."),
		"resolved_image": computed("The image serving it, pinned by digest."),
		"revision":       computed("The revision serving traffic."),
		"phase":          computed("Pending, Building, Deploying, Ready or Failed."),
		"ready":          schema.BoolAttribute{Computed: true, Description: "Whether its current generation is Ready."},
		"traffic": schema.ListNestedAttribute{Computed: true, Description: "How calls are split among its revisions (spec.traffic); null for all to the latest.",
			NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
				"revision": schema.StringAttribute{Computed: true, Description: "The revision; null for the latest ready one."},
				"latest":   schema.BoolAttribute{Computed: true, Description: "Whether the entry follows the latest ready revision."},
				"percent":  schema.Int64Attribute{Computed: true, Description: "Percent of the calls."},
				"tag":      schema.StringAttribute{Computed: true, Description: "The entry's tag."},
			}}},
	}
	for n, a := range placementDataAttributes() {
		attrs[n] = a
	}
	if nameRequired {
		attrs["name"] = schema.StringAttribute{Required: true, Description: "Name of the function.",
			Validators: []validator.String{dnsLabel{max: slessv1alpha1.MaxNameLength}}}
		attrs["namespace"] = schema.StringAttribute{Optional: true, Computed: true,
			Description: "Namespace; the provider's when unset.", Validators: []validator.String{dnsLabel{max: 63}}}
	}
	return attrs
}

func functionData(fn *slessv1alpha1.Function) (functionDataModel, error) {
	st, diags := functionState(context.Background(), fn, &functionModel{})
	if diags.HasError() {
		return functionDataModel{}, errorsOf(diags)
	}
	return functionDataModel{
		ID: st.ID, Name: st.Name, Namespace: st.Namespace, Runtime: st.Runtime, Entrypoint: st.Entrypoint,
		Image: st.Image, SourceSHA256: st.SourceSHA256, Env: st.Env, SecretEnv: st.SecretEnv, MemoryMB: st.MemoryMB, CPU: st.CPU,
		TimeoutSec: st.TimeoutSec, BuildTimeoutSec: st.BuildTimeoutSec, Scale: st.Scale, URL: st.URL, ResolvedImage: st.ResolvedImage, Revision: st.Revision,
		Phase: st.Phase, Ready: types.BoolValue(fn.IsReady()), Traffic: st.Traffic,
		Resources: st.Resources, NodeSelector: st.NodeSelector, Tolerations: st.Tolerations, NodeAffinity: st.NodeAffinity,
		PriorityClassName: st.PriorityClassName, RuntimeClassName: st.RuntimeClassName,
	}, nil
}

type functionDataSource struct{ api *apiData }

func (d *functionDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_function"
}

func (d *functionDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.api = configureDataSource(req, resp)
}

func (d *functionDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{Description: "Reads one function.", Attributes: functionDataAttributes(true)}
}

func (d *functionDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	if !requireAPI(d.api, &resp.Diagnostics) {
		return
	}
	var cfg functionDataModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ns, ok := dataNamespace(ctx, d.api, cfg.Namespace, &resp.Diagnostics)
	if !ok {
		return
	}
	fn, err := d.api.client.GetFunction(ctx, ns.ValueString(), cfg.Name.ValueString())
	if client.IsNotFound(err) {
		resp.Diagnostics.AddAttributeError(path.Root("name"), "No such function",
			"function "+ns.ValueString()+"/"+cfg.Name.ValueString()+" does not exist")
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Reading the function failed", err.Error())
		return
	}
	m, err := functionData(fn)
	if err != nil {
		resp.Diagnostics.AddError("Reading the function failed", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

type functionsDataSource struct{ api *apiData }

type functionsDataModel struct {
	Namespace types.String `tfsdk:"namespace"`
	Functions types.List   `tfsdk:"functions"`
}

func (d *functionsDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_functions"
}

func (d *functionsDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.api = configureDataSource(req, resp)
}

func (d *functionsDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Lists the functions of a namespace, sorted by name.",
		Attributes: map[string]schema.Attribute{
			"namespace": schema.StringAttribute{Optional: true, Computed: true,
				Description: "Namespace; the provider's when unset.", Validators: []validator.String{dnsLabel{max: 63}}},
			"functions": schema.ListNestedAttribute{Computed: true, Description: "The functions.",
				NestedObject: schema.NestedAttributeObject{Attributes: functionDataAttributes(false)}},
		},
	}
}

func (d *functionsDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	if !requireAPI(d.api, &resp.Diagnostics) {
		return
	}
	var cfg functionsDataModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ns, ok := dataNamespace(ctx, d.api, cfg.Namespace, &resp.Diagnostics)
	if !ok {
		return
	}
	fns, err := d.api.client.AllFunctions(ctx, ns.ValueString())
	if err != nil {
		resp.Diagnostics.AddError("Listing functions failed", err.Error())
		return
	}
	sort.Slice(fns, func(i, j int) bool { return fns[i].Name < fns[j].Name })
	items := make([]functionDataModel, 0, len(fns))
	for i := range fns {
		m, err := functionData(&fns[i])
		if err != nil {
			resp.Diagnostics.AddError("Reading a function failed", err.Error())
			return
		}
		items = append(items, m)
	}
	list, diags := types.ListValueFrom(ctx, types.ObjectType{AttrTypes: functionDataAttrTypes}, items)
	resp.Diagnostics.Append(diags...)
	out := functionsDataModel{Namespace: ns, Functions: list}
	resp.Diagnostics.Append(resp.State.Set(ctx, &out)...)
}
