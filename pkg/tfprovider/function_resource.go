package tfprovider

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/client"
	"github.com/sless-dev/sless/pkg/source"
)

const defaultFunctionWait = 10 * time.Minute

var (
	_ resource.ResourceWithConfigure      = (*functionResource)(nil)
	_ resource.ResourceWithValidateConfig = (*functionResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*functionResource)(nil)
	_ resource.ResourceWithImportState    = (*functionResource)(nil)
)

func newFunctionResource() resource.Resource { return &functionResource{} }

type functionResource struct{ api *apiData }

func (r *functionResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_function"
}

func (r *functionResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.api = configureResource(req.ProviderData, &resp.Diagnostics)
}

func replaceString() []planmodifier.String {
	return []planmodifier.String{stringplanmodifier.RequiresReplace()}
}

func (r *functionResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A sless function: code built into an image and served at an HTTPS URL that scales to zero. " +
			"Apply waits until the function is Ready; a failed build fails the apply with the build's message.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed: true, Description: "namespace/name.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": schema.StringAttribute{
				Required: true, PlanModifiers: replaceString(),
				Description: "Name: a DNS-1035 label of at most 52 characters.",
				Validators:  []validator.String{dnsLabel{max: slessv1alpha1.MaxNameLength}},
			},
			"namespace": schema.StringAttribute{
				Optional: true, Computed: true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplaceIfConfigured(), stringplanmodifier.UseStateForUnknown()},
				Description:   "Namespace; the provider's when unset.",
				Validators:    []validator.String{dnsLabel{max: 63}},
			},
			"runtime": schema.StringAttribute{
				Required:    true,
				Description: "Runtime: python3.12, nodejs22 or go1.24 (python3.11 and nodejs20 are aliases).",
				Validators:  []validator.String{oneOf(slessv1alpha1.SupportedRuntimes())},
			},
			"entrypoint": schema.StringAttribute{
				Optional:    true,
				Description: "Handler as module.function (e.g. main.handler); required unless image is set.",
				Validators:  []validator.String{notEmpty{}},
			},
			"source_dir": schema.StringAttribute{
				Optional: true,
				Description: "Directory whose files are the function's code. The provider zips it deterministically " +
					"(.git, .terraform, __pycache__, node_modules and *.pyc left out) and uploads it; source_sha256 tracks it. " +
					"Exactly one of source_dir, source_zip and image.",
				Validators: []validator.String{notEmpty{}},
			},
			"source_zip": schema.StringAttribute{
				Optional:    true,
				Description: "Path of a zip archive holding the function's code, uploaded as it is. Exactly one of source_dir, source_zip and image.",
				Validators:  []validator.String{notEmpty{}},
			},
			"image": schema.StringAttribute{
				Optional:    true,
				Description: "A prebuilt image to serve instead of building code. Exactly one of source_dir, source_zip and image.",
				Validators:  []validator.String{notEmpty{}},
			},
			"source_sha256": schema.StringAttribute{
				Computed:    true,
				Description: "sha256 of the uploaded zip; changes when the code changes.",
			},
			"env": schema.MapAttribute{
				Optional: true, ElementType: types.StringType,
				Description: "Environment variables.",
			},
			"secret_env": schema.MapNestedAttribute{
				Optional:    true,
				Description: "Environment variables taken from Kubernetes Secrets in the function's namespace.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"secret": schema.StringAttribute{Required: true, Description: "Secret name.", Validators: []validator.String{objectName{}}},
					"key":    schema.StringAttribute{Required: true, Description: "Key in the Secret.", Validators: []validator.String{notEmpty{required: true}}},
				}},
			},
			"memory_mb": schema.Int64Attribute{
				Optional: true, Computed: true, Default: int64default.StaticInt64(slessv1alpha1.DefaultMemoryMB),
				Description: fmt.Sprintf("Memory limit of each instance in MiB, %d to %d.", slessv1alpha1.MinMemoryMB, slessv1alpha1.MaxMemoryMB),
				Validators:  []validator.Int64{between{slessv1alpha1.MinMemoryMB, slessv1alpha1.MaxMemoryMB}},
			},
			"cpu": schema.StringAttribute{
				Optional:    true,
				Description: `CPU request of each instance, e.g. "250m".`,
				Validators:  []validator.String{quantity{}},
			},
			"timeout_sec": schema.Int64Attribute{
				Optional: true, Computed: true, Default: int64default.StaticInt64(slessv1alpha1.DefaultTimeoutSeconds),
				Description: fmt.Sprintf("Timeout of one invocation in seconds, %d to %d.", slessv1alpha1.MinTimeoutSeconds, slessv1alpha1.MaxTimeoutSeconds),
				Validators:  []validator.Int64{between{slessv1alpha1.MinTimeoutSeconds, slessv1alpha1.MaxTimeoutSeconds}},
			},
			"build_timeout_sec": schema.Int64Attribute{
				Optional: true, Computed: true, Default: int64default.StaticInt64(slessv1alpha1.DefaultBuildTimeoutSeconds),
				Description: fmt.Sprintf("Timeout of one build in seconds, %d to %d.", slessv1alpha1.MinBuildTimeoutSeconds, slessv1alpha1.MaxBuildTimeoutSeconds),
				Validators:  []validator.Int64{between{slessv1alpha1.MinBuildTimeoutSeconds, slessv1alpha1.MaxBuildTimeoutSeconds}},
			},
			"scale": schema.SingleNestedAttribute{
				Optional:    true,
				Description: "Autoscaling bounds and target.",
				Attributes: map[string]schema.Attribute{
					"min": schema.Int64Attribute{Optional: true, Description: "Minimum instances, 0 (scale to zero) to 1000.",
						Validators: []validator.Int64{between{0, 1000}}},
					"max": schema.Int64Attribute{Optional: true, Description: "Maximum instances, 1 to 1000; at least min.",
						Validators: []validator.Int64{between{1, 1000}}},
					"target": schema.Int64Attribute{Optional: true, Description: "Concurrent requests per instance the autoscaler aims for, 1 to 1000.",
						Validators: []validator.Int64{between{1, 1000}}},
					"container_concurrency": schema.Int64Attribute{Optional: true, Description: "Hard limit of concurrent requests per instance, 0 (none) to 1000.",
						Validators: []validator.Int64{between{0, slessv1alpha1.MaxContainerConcurrency}}},
				},
			},
			"wait_timeout": schema.StringAttribute{
				Optional: true, Computed: true, Default: stringdefault.StaticString(defaultFunctionWait.String()),
				Description: "How long an apply waits for the function to be Ready, e.g. \"5m\".",
				Validators:  []validator.String{durationString{}},
			},
			"url": schema.StringAttribute{
				Computed: true, Description: "Where the function is invoked.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"resolved_image": schema.StringAttribute{
				Computed: true, Description: "The image serving the function, pinned by digest.",
			},
			"revision": schema.StringAttribute{
				Computed: true, Description: "The revision serving traffic.",
			},
			"phase": schema.StringAttribute{
				Computed: true, Description: "Pending, Building, Deploying, Ready or Failed.",
			},
		},
	}
}

// ValidateConfig runs the API's validation over the configuration, so what
// the API would refuse fails at plan with the attribute named.
func (r *functionResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m functionModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	validateFunctionConfig(ctx, &m, skippedAttributes(ctx, resourceAttributes(ctx, r), req.Config), &resp.Diagnostics)
}

// validateFunctionConfig reports what the API would refuse in m, but not on
// the attributes in skip (see skippedAttributes).
func validateFunctionConfig(ctx context.Context, m *functionModel, skip map[string]bool, diags *diag.Diagnostics) {
	var set []string
	unknown := false
	for _, s := range []struct {
		name string
		v    types.String
	}{{"source_dir", m.SourceDir}, {"source_zip", m.SourceZip}, {"image", m.Image}} {
		if s.v.IsUnknown() {
			unknown = true
		} else if !s.v.IsNull() {
			set = append(set, s.name)
		}
	}
	switch {
	case len(set) > 1:
		for _, n := range set {
			diags.AddAttributeError(path.Root(n), "Conflicting sources",
				fmt.Sprintf("exactly one of source_dir, source_zip and image may be set; this configuration sets %d: %v", len(set), set))
		}
	case len(set) == 0 && !unknown:
		diags.AddAttributeError(path.Root("source_dir"), "Missing source",
			"exactly one of source_dir, source_zip and image must be set")
	}

	spec, envPaths, d := specFromModel(ctx, m)
	diags.Append(d...)
	fn := functionObject("", m.Name.ValueString(), spec)
	// The source is checked above; give the spec a stand-in of the right kind
	// so the shared validation judges the rest (entrypoint required unless image).
	if fn.Spec.Source.Image == "" {
		fn.Spec.Source.Archive = &slessv1alpha1.ArchiveSource{Bucket: "plan", Key: "plan", SHA256: "0000000000000000000000000000000000000000000000000000000000000000"}
		if unknown && m.Entrypoint.IsNull() {
			// The source may turn out to be an image: entrypoint optional.
			fn.Spec.Source = slessv1alpha1.FunctionSource{Image: "plan"}
		}
	}
	var errs field.ErrorList
	for _, e := range slessv1alpha1.ValidateFunction(fn) {
		// Unknown attributes are absent from the spec: do not call them missing.
		if (e.Field == "metadata.name" && m.Name.IsUnknown()) || (e.Field == "spec.runtime" && m.Runtime.IsUnknown()) ||
			(e.Field == "spec.entrypoint" && m.Entrypoint.IsUnknown()) {
			continue
		}
		errs = append(errs, e)
	}
	functionMapper(envPaths).addFieldErrors(diags, errs, skip)
}

func (r *functionResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return // destroy
	}
	var plan, config functionModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.Config.Get(ctx, &config)...)
	if resp.Diagnostics.HasError() {
		return
	}
	var state *functionModel
	if !req.State.Raw.IsNull() {
		state = &functionModel{}
		resp.Diagnostics.Append(req.State.Get(ctx, state)...)
	}

	if state == nil {
		ns, err := planNamespace(ctx, r.api, config.Namespace)
		if err != nil {
			addNamespaceError(&resp.Diagnostics, err)
			return
		}
		plan.Namespace = ns
		if ns.IsUnknown() || plan.Name.IsUnknown() {
			plan.ID = types.StringUnknown()
		} else {
			plan.ID = types.StringValue(ns.ValueString() + "/" + plan.Name.ValueString())
		}
	} else {
		planExistingNamespace(ctx, r.api, config.Namespace, &plan.Namespace, resp)
	}

	// The code's digest, known at plan: an unchanged directory plans no change.
	a, err := planArchive(&plan)
	switch {
	case err != nil:
		attrName := "source_dir"
		if !plan.SourceZip.IsNull() {
			attrName = "source_zip"
		}
		resp.Diagnostics.AddAttributeError(path.Root(attrName), "Unusable source", err.Error())
		return
	case a != nil:
		plan.SourceSHA256 = types.StringValue(a.SHA256)
		if !plan.Runtime.IsUnknown() && !plan.Entrypoint.IsUnknown() && !plan.Entrypoint.IsNull() {
			if err := source.CheckEntrypoint(plan.Runtime.ValueString(), plan.Entrypoint.ValueString(), a.Files); err != nil {
				resp.Diagnostics.AddAttributeError(path.Root("entrypoint"), "Entrypoint not found in the source", err.Error())
				return
			}
		}
	case !plan.Image.IsNull() && !plan.Image.IsUnknown():
		plan.SourceSHA256 = types.StringNull()
	default:
		plan.SourceSHA256 = types.StringUnknown()
	}

	// Computed attributes are unknown only where the apply changes them.
	switch {
	case state == nil:
		// The phase too: a create that stops waiting at wait_timeout
		// succeeds with the phase it saw (see Create).
		plan.URL, plan.ResolvedImage, plan.Revision = types.StringUnknown(), types.StringUnknown(), types.StringUnknown()
		plan.Phase = types.StringUnknown()
	default:
		rebuild := codeChanged(&plan, state)
		redeploy := specChanged(&plan, state)
		// A function that is not Ready (its build failed, or the last apply
		// stopped waiting for it) is not what the configuration asks for:
		// the plan says so, and the apply waits for Ready again and reports
		// what stands in the way, rather than "No changes".
		settle := !state.Phase.Equal(types.StringValue(string(slessv1alpha1.FunctionPhaseReady)))
		plan.URL = state.URL
		plan.ResolvedImage, plan.Revision = state.ResolvedImage, state.Revision
		plan.Phase = types.StringValue(string(slessv1alpha1.FunctionPhaseReady))
		if rebuild || settle {
			plan.ResolvedImage = types.StringUnknown()
		}
		if redeploy || settle {
			plan.Revision = types.StringUnknown()
		}
		if plan.URL.IsNull() || plan.URL.IsUnknown() {
			plan.URL = types.StringUnknown()
		}
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

// codeChanged says whether the apply builds new code: the code, or what
// it is built and started with, differs from the state.
func codeChanged(plan, state *functionModel) bool {
	return !plan.Runtime.Equal(state.Runtime) || !plan.Entrypoint.Equal(state.Entrypoint) ||
		!plan.Image.Equal(state.Image) || !plan.SourceSHA256.Equal(state.SourceSHA256)
}

// specChanged says whether anything the API holds differs between plan and
// state. When nothing does, the attributes that changed live only in the
// configuration (source_dir or source_zip with the same digest,
// wait_timeout, or all of them on the first apply after an import).
func specChanged(plan, state *functionModel) bool {
	return codeChanged(plan, state) || !plan.Env.Equal(state.Env) || !plan.SecretEnv.Equal(state.SecretEnv) ||
		!plan.MemoryMB.Equal(state.MemoryMB) || !sameQuantity(plan.CPU, state.CPU) || !plan.TimeoutSec.Equal(state.TimeoutSec) ||
		!plan.BuildTimeoutSec.Equal(state.BuildTimeoutSec) || !plan.Scale.Equal(state.Scale)
}

// sameQuantity says whether two CPU attributes mean the same quantity
// ("0.25" and "250m"): the API stores one canonical form, so a change of
// spelling alone changes nothing there.
func sameQuantity(a, b types.String) bool {
	if a.Equal(b) {
		return true
	}
	if a.IsNull() || a.IsUnknown() || b.IsNull() || b.IsUnknown() {
		return false
	}
	qa, errA := apiresource.ParseQuantity(a.ValueString())
	qb, errB := apiresource.ParseQuantity(b.ValueString())
	return errA == nil && errB == nil && qa.Cmp(qb) == 0
}

// planArchive zips the configured source (nil when it is an image or not
// known yet).
func planArchive(m *functionModel) (*archive, error) {
	switch {
	case !m.SourceDir.IsNull() && !m.SourceDir.IsUnknown():
		return zipDir(m.SourceDir.ValueString())
	case !m.SourceZip.IsNull() && !m.SourceZip.IsUnknown():
		return readZipFile(m.SourceZip.ValueString())
	}
	return nil, nil
}

func (r *functionResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	if !requireAPI(r.api, &resp.Diagnostics) {
		return
	}
	var plan functionModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ns, name := plan.Namespace.ValueString(), plan.Name.ValueString()
	spec, envPaths, d := specFromModel(ctx, &plan)
	resp.Diagnostics.Append(d...)
	mapper := functionMapper(envPaths)
	a, ok := applyArchive(&plan, &resp.Diagnostics)
	if !ok {
		return
	}
	if a != nil {
		// Uploading for a Function that does not exist yet stores the zip
		// and names the archive to create the Function with: one create,
		// one build.
		progress(ctx, "function", ns, name, "uploading source", "sha256", a.SHA256, "bytes", len(a.Zip))
		up, err := r.api.client.PutSource(ctx, ns, name, a.Zip)
		if err != nil {
			mapper.addAPIError(&resp.Diagnostics, "Uploading the source failed", err)
			return
		}
		archive := up.Archive
		spec.Source = slessv1alpha1.FunctionSource{Archive: &archive}
	}
	progress(ctx, "function", ns, name, "creating")
	fn, err := r.api.client.CreateFunction(ctx, functionObject(ns, name, spec))
	if err != nil {
		r.createError(ctx, ns, name, err, mapper, &resp.Diagnostics)
		return
	}
	// From here on the function exists: state is saved even if the wait
	// fails, so the next plan knows of it.
	fn, err = r.waitReady(ctx, fn, waitTimeout(plan.WaitTimeout, defaultFunctionWait))
	st, d := functionState(ctx, fn, &plan)
	resp.Diagnostics.Append(d...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &st)...)
	switch _, _, failed := fn.Failure(); {
	case err == nil:
	case failed || buildFailed(fn):
		// Tainted: the next apply replaces it.
		resp.Diagnostics.AddError("Function not ready", err.Error())
	default:
		// Still on its way (a slow build): an error would taint it, and the
		// next apply would delete it and start its build over. Kept, the
		// next plan sees it is not Ready and that apply waits again.
		resp.Diagnostics.AddWarning("Function not ready yet", err.Error()+
			". The function is kept in state; the next apply waits for it to be Ready, without creating it again.")
	}
}

func (r *functionResource) createError(ctx context.Context, ns, name string, err error, mapper fieldMapper, diags *diag.Diagnostics) {
	if client.IsConflict(err) {
		existing, gerr := r.api.client.GetFunction(ctx, ns, name)
		if gerr == nil && existing.DeletionTimestamp == nil {
			diags.AddError("Function already exists",
				fmt.Sprintf("function %s/%s already exists; bring it under Terraform with: terraform import <address> %s/%s", ns, name, ns, name))
			return
		}
	}
	mapper.addAPIError(diags, "Creating the function failed", err)
}

func sourceAttr(m *functionModel) path.Path {
	if !m.SourceZip.IsNull() {
		return path.Root("source_zip")
	}
	return path.Root("source_dir")
}

// applyArchive zips the source again at apply and holds it to the plan: a
// directory edited between plan and apply must be planned again.
func applyArchive(plan *functionModel, diags *diag.Diagnostics) (*archive, bool) {
	a, err := planArchive(plan)
	if err != nil {
		diags.AddAttributeError(sourceAttr(plan), "Unusable source", err.Error())
		return nil, false
	}
	if a != nil && !plan.SourceSHA256.IsUnknown() && plan.SourceSHA256.ValueString() != a.SHA256 {
		diags.AddAttributeError(sourceAttr(plan), "Source changed after plan",
			fmt.Sprintf("the source's sha256 was %s at plan and is %s now; run plan again", plan.SourceSHA256.ValueString(), a.SHA256))
		return nil, false
	}
	if a != nil {
		plan.SourceSHA256 = types.StringValue(a.SHA256)
	}
	return a, true
}

func (r *functionResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var prior functionModel
	resp.Diagnostics.Append(req.State.Get(ctx, &prior)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if r.api == nil {
		unrefreshed(&resp.Diagnostics, "function", prior.ID)
		return
	}
	fn, err := r.api.client.GetFunction(ctx, prior.Namespace.ValueString(), prior.Name.ValueString())
	if client.IsNotFound(err) {
		// Deleted outside Terraform: the next plan creates it again.
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Reading the function failed", err.Error())
		return
	}
	st, d := functionState(ctx, fn, &prior)
	resp.Diagnostics.Append(d...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &st)...)
}

func (r *functionResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	if !requireAPI(r.api, &resp.Diagnostics) {
		return
	}
	var plan, state functionModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ns, name := state.Namespace.ValueString(), state.Name.ValueString()
	spec, envPaths, d := specFromModel(ctx, &plan)
	resp.Diagnostics.Append(d...)
	mapper := functionMapper(envPaths)
	a, ok := applyArchive(&plan, &resp.Diagnostics)
	if !ok {
		return
	}
	if !specChanged(&plan, &state) {
		// Nothing to write: a patch would at best change nothing, and on a
		// server that leaves defaults unset it would write them out and
		// make a new generation the plan did not show.
		fn, err := r.api.client.GetFunction(ctx, ns, name)
		if err != nil {
			resp.Diagnostics.AddError("Reading the function failed", err.Error())
			return
		}
		if !state.Phase.Equal(plan.Phase) {
			r.settle(ctx, fn, &plan, &resp.Diagnostics, &resp.State)
			return
		}
		st, d := functionState(ctx, fn, &plan)
		resp.Diagnostics.Append(d...)
		// What the plan promised of the computed attributes (the state's
		// own) stands; a later refresh reads anything that moved since.
		for _, kept := range []struct {
			to   *types.String
			from types.String
		}{
			{&st.URL, plan.URL}, {&st.ResolvedImage, plan.ResolvedImage}, {&st.Revision, plan.Revision}, {&st.Phase, plan.Phase},
		} {
			if !kept.from.IsUnknown() {
				*kept.to = kept.from
			}
		}
		resp.Diagnostics.Append(resp.State.Set(ctx, &st)...)
		return
	}
	sourceChanged := !plan.SourceSHA256.Equal(state.SourceSHA256) || !plan.Image.Equal(state.Image)
	var fn *slessv1alpha1.Function
	var err error
	if a != nil && sourceChanged {
		progress(ctx, "function", ns, name, "uploading source", "sha256", a.SHA256, "bytes", len(a.Zip))
		// The code goes with the runtime and entrypoint it is written for:
		// the API checks each against the other, so new code whose handler
		// moved needs both in the same write.
		var with []client.UploadOption
		if spec.Runtime != "" {
			with = append(with, client.WithRuntime(spec.Runtime))
		}
		if spec.Entrypoint != "" {
			with = append(with, client.WithEntrypoint(spec.Entrypoint))
		}
		if _, err = r.api.client.PutSource(ctx, ns, name, a.Zip, with...); err != nil {
			mapper.addAPIError(&resp.Diagnostics, "Uploading the source failed", err)
			return
		}
	}
	progress(ctx, "function", ns, name, "updating")
	// The spec is replaced field by field; the source only when it is an
	// image (an uploaded archive is the upload API's to set).
	patch := specPatch(&spec, a == nil && sourceChanged)
	if !state.Phase.Equal(types.StringValue(string(slessv1alpha1.FunctionPhaseReady))) && spec.Source.Image == "" && !(a == nil && sourceChanged) {
		// The apply asks for Ready: a build that failed is run again.
		patch["spec"].(map[string]any)["rebuild"] = rebuildToken()
	}
	if fn, err = r.api.client.PatchFunction(ctx, ns, name, patch); err != nil {
		mapper.addAPIError(&resp.Diagnostics, "Updating the function failed", err)
		return
	}
	fn, err = r.waitReady(ctx, fn, waitTimeout(plan.WaitTimeout, defaultFunctionWait))
	st, d := functionState(ctx, fn, &plan)
	resp.Diagnostics.Append(d...)
	if err != nil {
		resp.Diagnostics.Append(resp.State.Set(ctx, &st)...)
		resp.Diagnostics.AddError("Function not ready", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &st)...)
}

// settle waits for a function whose spec the apply leaves as it is to be
// Ready: one the last apply stopped waiting for, or whose build failed.
func (r *functionResource) settle(ctx context.Context, fn *slessv1alpha1.Function, plan *functionModel, diags *diag.Diagnostics, state interface {
	Set(context.Context, any) diag.Diagnostics
}) {
	retried := ""
	if buildFailed(fn) {
		// sless keeps a failed build for its code until spec.rebuild asks
		// again; the apply asks, as a failure may pass (a registry or
		// package index that was down).
		retried = rebuildToken()
		progress(ctx, "function", fn.Namespace, fn.Name, "running the failed build again", "rebuild", retried)
		again, err := r.api.client.PatchFunction(ctx, fn.Namespace, fn.Name, map[string]any{"spec": map[string]any{"rebuild": retried}})
		if err != nil {
			diags.AddError("Asking for the build again failed", err.Error())
			return
		}
		fn = again
	}
	fn, err := r.waitReady(ctx, fn, waitTimeout(plan.WaitTimeout, defaultFunctionWait))
	st, d := functionState(ctx, fn, plan)
	diags.Append(d...)
	diags.Append(state.Set(ctx, &st)...)
	if err == nil {
		return
	}
	msg := err.Error()
	if retried != "" && buildFailed(fn) {
		msg += ". The failed build was run again (spec.rebuild " + retried + ") and failed again: fix the code, or apply again to retry"
	}
	diags.AddError("Function not ready", msg)
}

// rebuildToken is a spec.rebuild value no earlier apply used.
func rebuildToken() string {
	return time.Now().UTC().Format(time.RFC3339Nano)
}

// buildFailed says whether the build of fn's current code failed.
func buildFailed(fn *slessv1alpha1.Function) bool {
	c := condition(fn.Status.Conditions, slessv1alpha1.FunctionConditionBuildSucceeded)
	return fn.Status.ObservedGeneration == fn.Generation && c != nil && c.Status == "False"
}

func (r *functionResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	if !requireAPI(r.api, &resp.Diagnostics) {
		return
	}
	var state functionModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ns, name := state.Namespace.ValueString(), state.Name.ValueString()
	err := waitGone(ctx, "function", ns, name, waitTimeout(state.WaitTimeout, defaultFunctionWait),
		func(ctx context.Context) error { return r.api.client.DeleteFunction(ctx, ns, name) },
		func(ctx context.Context) error { _, err := r.api.client.GetFunction(ctx, ns, name); return err })
	if err != nil {
		resp.Diagnostics.AddError("Deleting the function failed", err.Error())
	}
}

func (r *functionResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importInto(ctx, r.api, req, resp)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("wait_timeout"), defaultFunctionWait.String())...)
}

// waitReady polls the function until the generation it has is Ready, and
// logs the build and rollout as they happen. A failed build or rollout of
// that generation ends the wait with the condition's message.
func (r *functionResource) waitReady(ctx context.Context, fn *slessv1alpha1.Function, timeout time.Duration) (*slessv1alpha1.Function, error) {
	ns, name := fn.Namespace, fn.Name
	p := newPoller(timeout)
	seen := map[string]bool{}
	once := func(key, msg string, kv ...any) {
		if !seen[key] {
			seen[key] = true
			progress(ctx, "function", ns, name, msg, kv...)
		}
	}
	for {
		current := fn.Status.ObservedGeneration == fn.Generation
		build := condition(fn.Status.Conditions, slessv1alpha1.FunctionConditionBuildSucceeded)
		ready := condition(fn.Status.Conditions, slessv1alpha1.FunctionConditionReady)
		if current && build != nil {
			switch build.Status {
			case "Unknown":
				once("build-started:"+fn.Status.BuildRef, "build started", "build", fn.Status.BuildRef)
			case "True":
				once("build-done:"+fn.Status.Image, "build done", "image", fn.Status.Image)
			case "False":
				return fn, fmt.Errorf("the build of function %s/%s failed (%s): %s", ns, name, build.Reason, build.Message)
			}
		}
		if current && ready != nil && ready.Status == "True" {
			once("ready:"+fn.Status.LatestReadyRevision, "revision ready", "revision", fn.Status.LatestReadyRevision, "url", fn.Status.URL)
			return fn, nil
		}
		if current && fn.Status.Phase == slessv1alpha1.FunctionPhaseFailed {
			msg := "no reason given"
			if ready != nil && ready.Message != "" {
				msg = ready.Reason + ": " + ready.Message
			}
			return fn, fmt.Errorf("function %s/%s failed: %s", ns, name, msg)
		}
		if err := p.wait(ctx); err != nil {
			state := string(fn.Status.Phase)
			if ready != nil && ready.Message != "" {
				state += " (" + ready.Reason + ": " + ready.Message + ")"
			}
			if errors.Is(err, errTimeout) {
				return fn, fmt.Errorf("function %s/%s was not Ready within %s (wait_timeout); it is %s", ns, name, timeout, state)
			}
			return fn, err
		}
		next, err := r.api.client.GetFunction(ctx, ns, name)
		if err != nil {
			return fn, err
		}
		fn = next
	}
}

// waitGone deletes an object and waits until the API no longer has it (a
// finalizer may hold it for a while).
func waitGone(ctx context.Context, kind, ns, name string, timeout time.Duration, del, get func(context.Context) error) error {
	progress(ctx, kind, ns, name, "deleting")
	if err := del(ctx); err != nil && !client.IsNotFound(err) {
		return err
	}
	p := newPoller(timeout)
	for {
		err := get(ctx)
		if client.IsNotFound(err) {
			progress(ctx, kind, ns, name, "deleted")
			return nil
		}
		if err != nil {
			return err
		}
		if werr := p.wait(ctx); werr != nil {
			if errors.Is(werr, errTimeout) {
				return fmt.Errorf("%s %s/%s still exists %s after it was deleted", kind, ns, name, timeout)
			}
			return werr
		}
	}
}
