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

// workload is what the API answers for a Function or a SlessService.
type workload interface {
	slessv1alpha1.Workload
	Failure() (reason, message string, failed bool)
}

// workloadKind is what sets sless_function and sless_service apart; the
// resource's flows (plan the code's digest, upload, create, wait for Ready,
// update, settle, import, delete) are written once, in workloadResource.
type workloadKind struct {
	// name is the kind in messages ("function"), title in summaries
	// ("Function"), suffix the resource type's ("_function").
	name, title, suffix string
	description         string
	// entrypoint describes the attribute; timeout is timeout_sec's default.
	entrypoint string
	timeout    int64
	// attrs are the kind's own attributes (its scale).
	attrs map[string]schema.Attribute

	newModel func() model
	// spec is the spec the model asks for in a Function's shape (a
	// service's scale as spec.scale); the source is left to the caller.
	spec func(ctx context.Context, m model) (slessv1alpha1.FunctionSpec, []path.Path, diag.Diagnostics)
	// validate reports what the API would refuse in a configuration.
	validate func(ctx context.Context, m model, skip map[string]bool, diags *diag.Diagnostics)
	mapper   func(env []path.Path) fieldMapper
	state    func(ctx context.Context, w workload, prior model) (model, diag.Diagnostics)
	// ownChanged says whether the kind's own attributes differ.
	ownChanged func(plan, state model) bool
	// patch is the merge patch that makes the server's spec what s says.
	patch func(s *slessv1alpha1.FunctionSpec, withSource bool) map[string]any

	get    func(ctx context.Context, c *client.Client, ns, name string) (workload, error)
	create func(ctx context.Context, c *client.Client, ns, name string, spec slessv1alpha1.FunctionSpec) (workload, error)
	update func(ctx context.Context, c *client.Client, ns, name string, patch any) (workload, error)
	remove func(ctx context.Context, c *client.Client, ns, name string) error
	upload func(ctx context.Context, c *client.Client, ns, name string, zip []byte, opts ...client.UploadOption) (*client.Upload, error)
}

var (
	_ resource.ResourceWithConfigure      = (*workloadResource)(nil)
	_ resource.ResourceWithValidateConfig = (*workloadResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*workloadResource)(nil)
	_ resource.ResourceWithImportState    = (*workloadResource)(nil)
)

type workloadResource struct {
	api  *apiData
	kind *workloadKind
}

func (r *workloadResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + r.kind.suffix
}

func (r *workloadResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.api = configureResource(req.ProviderData, &resp.Diagnostics)
}

func replaceString() []planmodifier.String {
	return []planmodifier.String{stringplanmodifier.RequiresReplace()}
}

func (r *workloadResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	k := r.kind
	attrs := map[string]schema.Attribute{
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
			Description: k.entrypoint,
			Validators:  []validator.String{notEmpty{}},
		},
		"source_dir": schema.StringAttribute{
			Optional: true,
			Description: "Directory whose files are the " + k.name + "'s code. The provider zips it deterministically " +
				"as sless deploy does (.git, .terraform, __pycache__, node_modules, .venv, venv, *.pyc, sless.yaml and the " +
				"patterns of its .slessignore left out) and uploads it; source_sha256 tracks it. " +
				"Exactly one of source_dir, source_zip and image.",
			Validators: []validator.String{notEmpty{}},
		},
		"source_zip": schema.StringAttribute{
			Optional:    true,
			Description: "Path of a zip archive holding the " + k.name + "'s code, uploaded as it is. Exactly one of source_dir, source_zip and image.",
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
			Description: "Environment variables taken from Kubernetes Secrets (sless_secret) in the " + k.name + "'s namespace.",
			NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
				"secret": schema.StringAttribute{Required: true, Description: "Secret name.", Validators: []validator.String{objectName{}}},
				"key":    schema.StringAttribute{Required: true, Description: "Key in the Secret.", Validators: []validator.String{notEmpty{required: true}}},
			}},
		},
		"memory_mb": schema.Int64Attribute{
			// No default: memory may be set in resources instead, and the
			// API refuses both. Unset in both, the site's default applies.
			Optional: true,
			Description: fmt.Sprintf("Memory limit and request of each instance in MiB, %d to %d: a shorthand for memory in resources "+
				"(set one of the two). Unset in both, the site's default (128 unless configured).", slessv1alpha1.MinMemoryMB, slessv1alpha1.MaxMemoryMB),
			Validators: []validator.Int64{between{slessv1alpha1.MinMemoryMB, slessv1alpha1.MaxMemoryMB}},
		},
		"cpu": schema.StringAttribute{
			Optional:    true,
			Description: `CPU request of each instance, e.g. "250m".`,
			Validators:  []validator.String{quantity{}},
		},
		"timeout_sec": schema.Int64Attribute{
			Optional: true, Computed: true, Default: int64default.StaticInt64(k.timeout),
			Description: fmt.Sprintf("Timeout of one request in seconds, %d to %d.", slessv1alpha1.MinTimeoutSeconds, slessv1alpha1.MaxTimeoutSeconds),
			Validators:  []validator.Int64{between{slessv1alpha1.MinTimeoutSeconds, slessv1alpha1.MaxTimeoutSeconds}},
		},
		"build_timeout_sec": schema.Int64Attribute{
			Optional: true, Computed: true, Default: int64default.StaticInt64(slessv1alpha1.DefaultBuildTimeoutSeconds),
			Description: fmt.Sprintf("Timeout of one build in seconds, %d to %d.", slessv1alpha1.MinBuildTimeoutSeconds, slessv1alpha1.MaxBuildTimeoutSeconds),
			Validators:  []validator.Int64{between{slessv1alpha1.MinBuildTimeoutSeconds, slessv1alpha1.MaxBuildTimeoutSeconds}},
		},
		"wait_timeout": schema.StringAttribute{
			Optional: true, Computed: true, Default: stringdefault.StaticString(defaultFunctionWait.String()),
			Description: "How long an apply waits for the " + k.name + " to be Ready, e.g. \"5m\".",
			Validators:  []validator.String{durationString{}},
		},
		"url": schema.StringAttribute{
			Computed: true, Description: "Where the " + k.name + " is called.",
			PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
		},
		"resolved_image": schema.StringAttribute{
			Computed: true, Description: "The image serving the " + k.name + ", pinned by digest.",
		},
		"revision": schema.StringAttribute{
			Computed: true, Description: "The revision serving traffic.",
		},
		"phase": schema.StringAttribute{
			Computed: true, Description: "Pending, Building, Deploying, Ready or Failed.",
		},
		"traffic": trafficAttribute(k.name),
	}
	for n, a := range placementAttributes(k.name) {
		attrs[n] = a
	}
	for n, a := range k.attrs {
		attrs[n] = a
	}
	resp.Schema = schema.Schema{Description: k.description, Attributes: attrs}
}

// ValidateConfig runs the API's validation over the configuration, so what
// the API would refuse fails at plan with the attribute named.
func (r *workloadResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	m := r.kind.newModel()
	resp.Diagnostics.Append(req.Config.Get(ctx, m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	r.kind.validate(ctx, m, skippedAttributes(ctx, resourceAttributes(ctx, r), req.Config), &resp.Diagnostics)
}

// checkSources reports a configuration with other than exactly one source
// and says whether one of them is not known yet.
func checkSources(m *buildModel, diags *diag.Diagnostics) (unknown bool) {
	var set []string
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
	return unknown
}

// planSource gives a spec whose source was left out (see checkSources) a
// stand-in of the right kind, so the shared validation judges the rest
// (entrypoint required unless image).
func planSource(m *buildModel, unknown bool, spec *slessv1alpha1.FunctionSpec) {
	if spec.Source.Image != "" {
		return
	}
	spec.Source.Archive = &slessv1alpha1.ArchiveSource{Bucket: "plan", Key: "plan", SHA256: "0000000000000000000000000000000000000000000000000000000000000000"}
	if unknown && m.Entrypoint.IsNull() {
		// The source may turn out to be an image: entrypoint optional.
		spec.Source = slessv1alpha1.FunctionSource{Image: "plan"}
	}
}

// knownErrors drops the errors about attributes not known yet: they are
// absent from the spec, not missing.
func knownErrors(m *buildModel, errs field.ErrorList) field.ErrorList {
	var out field.ErrorList
	for _, e := range errs {
		if (e.Field == "metadata.name" && m.Name.IsUnknown()) || (e.Field == "spec.runtime" && m.Runtime.IsUnknown()) ||
			(e.Field == "spec.entrypoint" && m.Entrypoint.IsUnknown()) {
			continue
		}
		out = append(out, e)
	}
	return out
}

func (r *workloadResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return // destroy
	}
	planM, configM := r.kind.newModel(), r.kind.newModel()
	resp.Diagnostics.Append(req.Plan.Get(ctx, planM)...)
	resp.Diagnostics.Append(req.Config.Get(ctx, configM)...)
	if resp.Diagnostics.HasError() {
		return
	}
	plan, config := planM.build(), configM.build()
	var stateM model
	var state *buildModel
	if !req.State.Raw.IsNull() {
		stateM = r.kind.newModel()
		resp.Diagnostics.Append(req.State.Get(ctx, stateM)...)
		state = stateM.build()
	}

	if state == nil {
		if !planNewObject(ctx, r.api, config.Namespace, plan.Name, &plan.Namespace, &plan.ID, &resp.Diagnostics) {
			return
		}
	} else {
		planExistingNamespace(ctx, r.api, config.Namespace, &plan.Namespace, resp)
	}

	// The code's digest, known at plan: an unchanged directory plans no change.
	a, err := planArchive(plan)
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

	plan.Traffic = planTraffic(ctx, plan.Traffic, &resp.Diagnostics)

	// Computed attributes are unknown only where the apply changes them.
	// A change of traffic alone keeps them: it makes no build and no
	// revision, and the latest ready revision stays the one named.
	switch {
	case state == nil:
		// The phase too: a create that stops waiting at wait_timeout
		// succeeds with the phase it saw (see Create).
		plan.URL, plan.ResolvedImage, plan.Revision = types.StringUnknown(), types.StringUnknown(), types.StringUnknown()
		plan.Phase = types.StringUnknown()
	default:
		rebuild := codeChanged(plan, state)
		redeploy := specChanged(plan, state) || r.kind.ownChanged(planM, stateM)
		// One that is not Ready (its build failed, or the last apply
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
	resp.Diagnostics.Append(resp.Plan.Set(ctx, planM)...)
}

// codeChanged says whether the apply builds new code: the code, or what
// it is built and started with, differs from the state.
func codeChanged(plan, state *buildModel) bool {
	return !plan.Runtime.Equal(state.Runtime) || !plan.Entrypoint.Equal(state.Entrypoint) ||
		!plan.Image.Equal(state.Image) || !plan.SourceSHA256.Equal(state.SourceSHA256)
}

// specChanged says whether anything the API holds of the shared attributes
// differs between plan and state (the kind's scale aside). When nothing
// does, the attributes that changed live only in the configuration
// (source_dir or source_zip with the same digest, wait_timeout, or all of
// them on the first apply after an import).
func specChanged(plan, state *buildModel) bool {
	return codeChanged(plan, state) || !plan.Env.Equal(state.Env) || !plan.SecretEnv.Equal(state.SecretEnv) ||
		!plan.MemoryMB.Equal(state.MemoryMB) || !sameQuantity(plan.CPU, state.CPU) || !plan.TimeoutSec.Equal(state.TimeoutSec) ||
		!plan.BuildTimeoutSec.Equal(state.BuildTimeoutSec) || placementChanged(plan, state)
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
func planArchive(m *buildModel) (*archive, error) {
	switch {
	case !m.SourceDir.IsNull() && !m.SourceDir.IsUnknown():
		return zipDir(m.SourceDir.ValueString())
	case !m.SourceZip.IsNull() && !m.SourceZip.IsUnknown():
		return readZipFile(m.SourceZip.ValueString())
	}
	return nil, nil
}

func (r *workloadResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	k := r.kind
	planM := k.newModel()
	if !applyModel(ctx, r.api, req.Plan, planM, &resp.Diagnostics) {
		return
	}
	plan := planM.build()
	ns, name := plan.Namespace.ValueString(), plan.Name.ValueString()
	spec, envPaths, d := k.spec(ctx, planM)
	resp.Diagnostics.Append(d...)
	mapper := k.mapper(envPaths)
	a, ok := applyArchive(plan, &resp.Diagnostics)
	if !ok {
		return
	}
	if a != nil {
		// Uploading for an object that does not exist yet stores the zip
		// and names the archive to create it with: one create, one build.
		progress(ctx, k.name, ns, name, "uploading source", "sha256", a.SHA256, "bytes", len(a.Zip))
		up, err := k.upload(ctx, r.api.client, ns, name, a.Zip)
		if err != nil {
			mapper.addAPIError(&resp.Diagnostics, "Uploading the source failed", err)
			return
		}
		archive := up.Archive
		spec.Source = slessv1alpha1.FunctionSource{Archive: &archive}
	}
	progress(ctx, k.name, ns, name, "creating")
	w, err := k.create(ctx, r.api.client, ns, name, spec)
	if err != nil {
		r.createError(ctx, ns, name, err, mapper, &resp.Diagnostics)
		return
	}
	// From here on the object exists: state is saved even if the wait
	// fails, so the next plan knows of it.
	w, err = r.waitReady(ctx, w, waitTimeout(plan.WaitTimeout, defaultFunctionWait))
	st, d := k.state(ctx, w, planM)
	resp.Diagnostics.Append(d...)
	resp.Diagnostics.Append(resp.State.Set(ctx, st)...)
	switch _, _, failed := w.Failure(); {
	case err == nil:
	case failed || buildFailed(w):
		// Tainted: the next apply replaces it.
		resp.Diagnostics.AddError(k.title+" not ready", err.Error())
	default:
		// Still on its way (a slow build): an error would taint it, and the
		// next apply would delete it and start its build over. Kept, the
		// next plan sees it is not Ready and that apply waits again.
		resp.Diagnostics.AddWarning(k.title+" not ready yet", err.Error()+
			". The "+k.name+" is kept in state; the next apply waits for it to be Ready, without creating it again.")
	}
}

func (r *workloadResource) createError(ctx context.Context, ns, name string, err error, mapper fieldMapper, diags *diag.Diagnostics) {
	k := r.kind
	if nameTaken(ctx, r.api.client, k.clientGet, ns, name, err) {
		addExistsError(diags, k.name, ns, name)
		return
	}
	mapper.addAPIError(diags, "Creating the "+k.name+" failed", err)
}

// clientGet and clientRemove are get and remove in the form the shared
// steps take (see getFunc).
func (k *workloadKind) clientGet(c *client.Client, ctx context.Context, ns, name string) (workload, error) {
	return k.get(ctx, c, ns, name)
}

func (k *workloadKind) clientRemove(c *client.Client, ctx context.Context, ns, name string) error {
	return k.remove(ctx, c, ns, name)
}

func sourceAttr(m *buildModel) path.Path {
	if !m.SourceZip.IsNull() {
		return path.Root("source_zip")
	}
	return path.Root("source_dir")
}

// applyArchive zips the source again at apply and holds it to the plan: a
// directory edited between plan and apply must be planned again.
func applyArchive(plan *buildModel, diags *diag.Diagnostics) (*archive, bool) {
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

func (r *workloadResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	k := r.kind
	priorM := k.newModel()
	resp.Diagnostics.Append(req.State.Get(ctx, priorM)...)
	if resp.Diagnostics.HasError() {
		return
	}
	prior := priorM.build()
	w, ok := readObject(ctx, r.api, k.name, prior.ID, prior.Namespace, prior.Name, k.clientGet, resp)
	if !ok {
		return
	}
	st, d := k.state(ctx, w, priorM)
	resp.Diagnostics.Append(d...)
	resp.Diagnostics.Append(resp.State.Set(ctx, st)...)
}

func (r *workloadResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	if !requireAPI(r.api, &resp.Diagnostics) {
		return
	}
	k := r.kind
	planM, stateM := k.newModel(), k.newModel()
	resp.Diagnostics.Append(req.Plan.Get(ctx, planM)...)
	resp.Diagnostics.Append(req.State.Get(ctx, stateM)...)
	if resp.Diagnostics.HasError() {
		return
	}
	plan, state := planM.build(), stateM.build()
	ns, name := state.Namespace.ValueString(), state.Name.ValueString()
	spec, envPaths, d := k.spec(ctx, planM)
	resp.Diagnostics.Append(d...)
	mapper := k.mapper(envPaths)
	a, ok := applyArchive(plan, &resp.Diagnostics)
	if !ok {
		return
	}
	if !specChanged(plan, state) && !k.ownChanged(planM, stateM) && plan.Traffic.Equal(state.Traffic) {
		// Nothing to write: a patch would at best change nothing, and on a
		// server that leaves defaults unset it would write them out and
		// make a new generation the plan did not show.
		w, err := k.get(ctx, r.api.client, ns, name)
		if err != nil {
			resp.Diagnostics.AddError("Reading the "+k.name+" failed", err.Error())
			return
		}
		if !state.Phase.Equal(plan.Phase) {
			r.settle(ctx, w, planM, &resp.Diagnostics, &resp.State)
			return
		}
		stM, d := k.state(ctx, w, planM)
		resp.Diagnostics.Append(d...)
		st := stM.build()
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
		resp.Diagnostics.Append(resp.State.Set(ctx, stM)...)
		return
	}
	sourceChanged := !plan.SourceSHA256.Equal(state.SourceSHA256) || !plan.Image.Equal(state.Image)
	if a != nil && sourceChanged {
		progress(ctx, k.name, ns, name, "uploading source", "sha256", a.SHA256, "bytes", len(a.Zip))
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
		if _, err := k.upload(ctx, r.api.client, ns, name, a.Zip, with...); err != nil {
			mapper.addAPIError(&resp.Diagnostics, "Uploading the source failed", err)
			return
		}
	}
	progress(ctx, k.name, ns, name, "updating")
	// The spec is replaced field by field; the source only when it is an
	// image (an uploaded archive is the upload API's to set).
	patch := k.patch(&spec, a == nil && sourceChanged)
	// The map keys the server holds are the state's: those gone from the
	// plan are sent as null.
	var held slessv1alpha1.WorkloadSpec
	placementSpec(ctx, state, &held, &resp.Diagnostics)
	placementPatch(patch["spec"].(map[string]any), &spec.WorkloadSpec, &held)
	if !state.Phase.Equal(types.StringValue(string(slessv1alpha1.FunctionPhaseReady))) && spec.Source.Image == "" && !(a == nil && sourceChanged) {
		// The apply asks for Ready: a build that failed is run again.
		patch["spec"].(map[string]any)["rebuild"] = rebuildToken()
	}
	w, err := k.update(ctx, r.api.client, ns, name, patch)
	if err != nil {
		mapper.addAPIError(&resp.Diagnostics, "Updating the "+k.name+" failed", err)
		return
	}
	w, err = r.waitReady(ctx, w, waitTimeout(plan.WaitTimeout, defaultFunctionWait))
	st, d := k.state(ctx, w, planM)
	resp.Diagnostics.Append(d...)
	resp.Diagnostics.Append(resp.State.Set(ctx, st)...)
	if err != nil {
		resp.Diagnostics.AddError(k.title+" not ready", err.Error())
	}
}

// settle waits for an object whose spec the apply leaves as it is to be
// Ready: one the last apply stopped waiting for, or whose build failed.
func (r *workloadResource) settle(ctx context.Context, w workload, plan model, diags *diag.Diagnostics, state interface {
	Set(context.Context, any) diag.Diagnostics
}) {
	k := r.kind
	retried := ""
	if buildFailed(w) {
		// sless keeps a failed build for its code until spec.rebuild asks
		// again; the apply asks, as a failure may pass (a registry or
		// package index that was down).
		retried = rebuildToken()
		progress(ctx, k.name, w.GetNamespace(), w.GetName(), "running the failed build again", "rebuild", retried)
		again, err := k.update(ctx, r.api.client, w.GetNamespace(), w.GetName(), map[string]any{"spec": map[string]any{"rebuild": retried}})
		if err != nil {
			diags.AddError("Asking for the build again failed", err.Error())
			return
		}
		w = again
	}
	w, err := r.waitReady(ctx, w, waitTimeout(plan.build().WaitTimeout, defaultFunctionWait))
	st, d := k.state(ctx, w, plan)
	diags.Append(d...)
	diags.Append(state.Set(ctx, st)...)
	if err == nil {
		return
	}
	msg := err.Error()
	if retried != "" && buildFailed(w) {
		msg += ". The failed build was run again (spec.rebuild " + retried + ") and failed again: fix the code, or apply again to retry"
	}
	diags.AddError(k.title+" not ready", msg)
}

// rebuildToken is a spec.rebuild value no earlier apply used.
func rebuildToken() string {
	return time.Now().UTC().Format(time.RFC3339Nano)
}

// buildFailed says whether the build of w's current code failed.
func buildFailed(w slessv1alpha1.Workload) bool {
	st := w.WorkloadStatus()
	c := condition(st.Conditions, slessv1alpha1.FunctionConditionBuildSucceeded)
	return st.ObservedGeneration == w.GetGeneration() && c != nil && c.Status == "False"
}

func (r *workloadResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	k := r.kind
	stateM := k.newModel()
	if !applyModel(ctx, r.api, req.State, stateM, &resp.Diagnostics) {
		return
	}
	state := stateM.build()
	deleteObject(ctx, r.api.client, k.name, state.Namespace, state.Name, waitTimeout(state.WaitTimeout, defaultFunctionWait),
		k.clientRemove, k.clientGet, &resp.Diagnostics)
}

func (r *workloadResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importInto(ctx, r.api, req, resp)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("wait_timeout"), defaultFunctionWait.String())...)
}

// waitReady polls the object until the generation it has is Ready, and
// logs the build and rollout as they happen. A failed build or rollout of
// that generation ends the wait with the condition's message.
func (r *workloadResource) waitReady(ctx context.Context, w workload, timeout time.Duration) (workload, error) {
	k := r.kind
	ns, name := w.GetNamespace(), w.GetName()
	p := newPoller(timeout)
	seen := map[string]bool{}
	once := func(key, msg string, kv ...any) {
		if !seen[key] {
			seen[key] = true
			progress(ctx, k.name, ns, name, msg, kv...)
		}
	}
	for {
		st := w.WorkloadStatus()
		current := st.ObservedGeneration == w.GetGeneration()
		build := condition(st.Conditions, slessv1alpha1.FunctionConditionBuildSucceeded)
		ready := condition(st.Conditions, slessv1alpha1.FunctionConditionReady)
		if current && build != nil {
			switch build.Status {
			case "Unknown":
				once("build-started:"+st.BuildRef, "build started", "build", st.BuildRef)
			case "True":
				once("build-done:"+st.Image, "build done", "image", st.Image)
			case "False":
				return w, fmt.Errorf("the build of %s %s/%s failed (%s): %s", k.name, ns, name, build.Reason, build.Message)
			}
		}
		if current && ready != nil && ready.Status == "True" {
			once("ready:"+st.LatestReadyRevision, "revision ready", "revision", st.LatestReadyRevision, "url", st.URL)
			return w, nil
		}
		if current && st.Phase == slessv1alpha1.FunctionPhaseFailed {
			msg := "no reason given"
			if ready != nil && ready.Message != "" {
				msg = ready.Reason + ": " + ready.Message
			}
			return w, fmt.Errorf("%s %s/%s failed: %s", k.name, ns, name, msg)
		}
		if err := p.wait(ctx); err != nil {
			state := string(st.Phase)
			if ready != nil && ready.Message != "" {
				state += " (" + ready.Reason + ": " + ready.Message + ")"
			}
			if errors.Is(err, errTimeout) {
				return w, fmt.Errorf("%s %s/%s was not Ready within %s (wait_timeout); it is %s", k.name, ns, name, timeout, state)
			}
			return w, err
		}
		next, err := k.get(ctx, r.api.client, ns, name)
		if err != nil {
			return w, err
		}
		w = next
	}
}
