package tfprovider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/client"
)

const defaultJobWait = 15 * time.Minute

var (
	_ resource.ResourceWithConfigure      = (*jobResource)(nil)
	_ resource.ResourceWithValidateConfig = (*jobResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*jobResource)(nil)
	_ resource.ResourceWithImportState    = (*jobResource)(nil)
)

func newJobResource() resource.Resource { return &jobResource{} }

type jobResource struct{ api *apiData }

type jobModel struct {
	ID          types.String `tfsdk:"id"`
	Name        types.String `tfsdk:"name"`
	Namespace   types.String `tfsdk:"namespace"`
	Function    types.String `tfsdk:"function"`
	RunID       types.Int64  `tfsdk:"run_id"`
	Payload     types.String `tfsdk:"payload"`
	TimeoutSec  types.Int64  `tfsdk:"timeout_sec"`
	WaitTimeout types.String `tfsdk:"wait_timeout"`
	Phase       types.String `tfsdk:"phase"`
	Output      types.String `tfsdk:"output"`
	ExitCode    types.Int64  `tfsdk:"exit_code"`
}

var jobMapper = fieldMapper{prefixes: map[string]path.Path{
	"metadata.name":       path.Root("name"),
	"metadata.namespace":  path.Root("namespace"),
	"spec.function":       path.Root("function"),
	"spec.runID":          path.Root("run_id"),
	"spec.payload":        path.Root("payload"),
	"spec.timeoutSeconds": path.Root("timeout_sec"),
}}

func (r *jobResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_job"
}

func (r *jobResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.api = configureResource(req.ProviderData, &resp.Diagnostics)
}

func (r *jobResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A one-shot run of a function on a payload. A new run_id runs it again; run_id 0 runs nothing. " +
			"Apply waits for the run to finish; a failed run fails the apply with its message. A run still going at " +
			"wait_timeout is not run again: the next apply waits for the same run and reports how it ended.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, Description: "namespace/name.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"name": schema.StringAttribute{Required: true, PlanModifiers: replaceString(),
				Description: "Name: a DNS-1123 label of at most 40 characters.", Validators: []validator.String{dnsLabel{max: 40}}},
			"namespace": schema.StringAttribute{Optional: true, Computed: true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplaceIfConfigured(), stringplanmodifier.UseStateForUnknown()},
				Description:   "Namespace; the provider's when unset.", Validators: []validator.String{dnsLabel{max: 63}}},
			"function": schema.StringAttribute{Required: true, PlanModifiers: replaceString(),
				Description: "Name of the function in the same namespace whose code runs.",
				Validators:  []validator.String{dnsLabel{max: slessv1alpha1.MaxNameLength}}},
			"run_id": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(1),
				Description: "Identifies a run: a new value runs the job again, 0 runs nothing.",
				Validators:  []validator.Int64{between{0, 1<<63 - 1}}},
			"payload": schema.StringAttribute{Optional: true, Validators: []validator.String{jsonString{}},
				Description: "JSON event body of the run; use jsonencode(...)."},
			"timeout_sec": schema.Int64Attribute{Optional: true, Validators: []validator.Int64{between{1, slessv1alpha1.MaxJobTimeoutSeconds}},
				Description: "Bound of one run in seconds; the function's timeout when unset."},
			"wait_timeout": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(defaultJobWait.String()),
				Description: "How long an apply waits for the run to finish.", Validators: []validator.String{durationString{}}},
			"phase":     schema.StringAttribute{Computed: true, Description: "Idle, Pending, Running, Succeeded or Failed."},
			"output":    schema.StringAttribute{Computed: true, Description: "The run's result as JSON."},
			"exit_code": schema.Int64Attribute{Computed: true, Description: "Exit code of the run."},
		},
	}
}

func (m *jobModel) object(ns string) *slessv1alpha1.FunctionJob {
	return &slessv1alpha1.FunctionJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: m.Name.ValueString()},
		Spec: slessv1alpha1.FunctionJobSpec{
			Function:       m.Function.ValueString(),
			RunID:          m.RunID.ValueInt64(),
			Payload:        jsonValue(m.Payload),
			TimeoutSeconds: int32Ptr(m.TimeoutSec),
		},
	}
}

func jobState(j *slessv1alpha1.FunctionJob, prior *jobModel) jobModel {
	m := jobModel{
		ID:          types.StringValue(j.Namespace + "/" + j.Name),
		Name:        types.StringValue(j.Name),
		Namespace:   types.StringValue(j.Namespace),
		Function:    types.StringValue(j.Spec.Function),
		RunID:       types.Int64Value(j.Spec.RunID),
		Payload:     jsonState(prior.Payload, j.Spec.Payload),
		TimeoutSec:  optInt32(j.Spec.TimeoutSeconds),
		WaitTimeout: prior.WaitTimeout,
		Phase:       optString(string(j.Status.Phase)),
		Output:      optString(j.Status.Output),
		ExitCode:    optInt32(j.Status.ExitCode),
	}
	if m.WaitTimeout.IsNull() || m.WaitTimeout.IsUnknown() {
		m.WaitTimeout = types.StringValue(defaultJobWait.String())
	}
	return m
}

func (r *jobResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m jobModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	var errs field.ErrorList
	for _, e := range slessv1alpha1.ValidateFunctionJob(m.object("")) {
		if (e.Field == "metadata.name" && m.Name.IsUnknown()) || (e.Field == "spec.function" && m.Function.IsUnknown()) {
			continue
		}
		errs = append(errs, e)
	}
	jobMapper.addFieldErrors(&resp.Diagnostics, errs, skippedAttributes(ctx, resourceAttributes(ctx, r), req.Config))
}

func (r *jobResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	var plan, config jobModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.Config.Get(ctx, &config)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if req.State.Raw.IsNull() {
		if !planNewObject(ctx, r.api, config.Namespace, plan.Name, &plan.Namespace, &plan.ID, &resp.Diagnostics) {
			return
		}
		plan.Phase, plan.Output, plan.ExitCode = types.StringUnknown(), types.StringUnknown(), types.Int64Unknown()
	} else {
		var state jobModel
		resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
		planExistingNamespace(ctx, r.api, config.Namespace, &plan.Namespace, resp)
		// Only a new run changes what a run produced, or the end of one
		// whose end no apply has seen yet, which this apply waits for.
		plan.Phase, plan.Output, plan.ExitCode = state.Phase, state.Output, state.ExitCode
		if !plan.RunID.Equal(state.RunID) || awaiting(ctx, req.Private, state.RunID) {
			plan.Phase, plan.Output, plan.ExitCode = types.StringUnknown(), types.StringUnknown(), types.Int64Unknown()
		}
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

func (r *jobResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan jobModel
	if !applyModel(ctx, r.api, req.Plan, &plan, &resp.Diagnostics) {
		return
	}
	j := plan.object(plan.Namespace.ValueString())
	progress(ctx, "job", j.Namespace, j.Name, "creating", "run_id", j.Spec.RunID)
	got, err := r.api.client.CreateJob(ctx, j)
	if err != nil {
		if nameTaken(ctx, r.api.client, (*client.Client).GetJob, j.Namespace, j.Name, err) {
			addExistsError(&resp.Diagnostics, "job", j.Namespace, j.Name)
			return
		}
		jobMapper.addAPIError(&resp.Diagnostics, "Creating the job failed", err)
		return
	}
	r.finish(ctx, &plan, got, true, &resp.Diagnostics, &resp.State, resp.Private)
}

// awaitedRunKey is the private state key holding the run_id of a run whose
// end no apply has seen: its wait ended first (wait_timeout, an interrupt,
// the API not answering). The next plan then plans an update that waits for
// that same run and reports how it ended, rather than running it again.
const awaitedRunKey = "awaited_run"

// privateState is the resource's private state in a request or response.
type privateState interface {
	GetKey(ctx context.Context, key string) ([]byte, diag.Diagnostics)
	SetKey(ctx context.Context, key string, value []byte) diag.Diagnostics
}

// awaitedRun is the run whose end no apply has seen, 0 if none.
func awaitedRun(ctx context.Context, p privateState) int64 {
	if p == nil {
		return 0
	}
	b, _ := p.GetKey(ctx, awaitedRunKey)
	var run int64
	if json.Unmarshal(b, &run) != nil {
		return 0
	}
	return run
}

// awaiting says whether run is a run whose end no apply has seen.
func awaiting(ctx context.Context, p privateState, run types.Int64) bool {
	return run.ValueInt64() != 0 && awaitedRun(ctx, p) == run.ValueInt64()
}

func setAwaitedRun(ctx context.Context, p privateState, run int64) diag.Diagnostics {
	if run == 0 {
		return p.SetKey(ctx, awaitedRunKey, nil)
	}
	return p.SetKey(ctx, awaitedRunKey, []byte(strconv.FormatInt(run, 10)))
}

// runFailed is a run that ended in failure, as against a wait that ended
// before the run did.
type runFailed struct{ msg string }

func (e *runFailed) Error() string { return e.msg }

// finish waits for the run the job asks for and saves its state. A failed
// run is an error. A wait that ends before the run does leaves the run
// going and marks it awaited: the next apply waits for it again. At create
// that is a warning, since Terraform taints an object whose create reports
// an error, and the next apply would replace the job, running it a second
// time; at update it is an error.
func (r *jobResource) finish(ctx context.Context, plan *jobModel, j *slessv1alpha1.FunctionJob, created bool, diags *diag.Diagnostics, state interface {
	Set(context.Context, any) diag.Diagnostics
}, private privateState) {
	j, err := r.waitRun(ctx, j, waitTimeout(plan.WaitTimeout, defaultJobWait))
	st := jobState(j, plan)
	diags.Append(state.Set(ctx, &st)...)
	diags.Append(waitOutcome(err, created, j.Spec.RunID)...)
	awaited := int64(0)
	var failed *runFailed
	if err != nil && !errors.As(err, &failed) {
		awaited = j.Spec.RunID
	}
	diags.Append(setAwaitedRun(ctx, private, awaited)...)
}

// waitOutcome words how the wait for a run ended.
func waitOutcome(err error, created bool, run int64) diag.Diagnostics {
	var diags diag.Diagnostics
	var failed *runFailed
	switch {
	case err == nil:
	case errors.As(err, &failed):
		diags.AddError("Job run failed", err.Error())
	case created:
		diags.AddWarning("Job run not finished", fmt.Sprintf("%s. The run goes on and the job is kept in state; "+
			"the next apply waits for run %d again and reports how it ended, without running it again.", err, run))
	default:
		diags.AddError("Job run not finished", fmt.Sprintf("%s. The run goes on; "+
			"the next apply waits for run %d again and reports how it ended, without running it again.", err, run))
	}
	return diags
}

func (r *jobResource) waitRun(ctx context.Context, j *slessv1alpha1.FunctionJob, timeout time.Duration) (*slessv1alpha1.FunctionJob, error) {
	if j.Spec.RunID == 0 {
		return j, nil
	}
	ns, name, run := j.Namespace, j.Name, j.Spec.RunID
	p := newPoller(timeout)
	started := false
	waitingFor := ""
	for {
		// Why the run has not started (its function does not exist or is
		// not built yet): logged as it changes, and told if the wait ends.
		blocked := condition(j.Status.Conditions, slessv1alpha1.JobConditionReady)
		if blocked != nil && blocked.Status != metav1.ConditionFalse {
			blocked = nil
		}
		if blocked != nil && blocked.Reason != waitingFor {
			waitingFor = blocked.Reason
			progress(ctx, "job", ns, name, "waiting: "+blocked.Reason+": "+blocked.Message, "run_id", run)
		}
		if j.Status.RunID == run {
			switch j.Status.Phase {
			case slessv1alpha1.JobPhaseSucceeded:
				progress(ctx, "job", ns, name, "run succeeded", "run_id", run)
				return j, nil
			case slessv1alpha1.JobPhaseFailed:
				msg := j.Status.Message
				if msg == "" {
					msg = "no message"
				}
				return j, &runFailed{fmt.Sprintf("run %d of job %s/%s failed: %s", run, ns, name, msg)}
			case slessv1alpha1.JobPhaseRunning:
				if !started {
					started = true
					progress(ctx, "job", ns, name, "run started", "run_id", run)
				}
			}
		}
		if err := p.wait(ctx); err != nil {
			if errors.Is(err, errTimeout) {
				why := ""
				if blocked != nil {
					why = fmt.Sprintf(" (%s: %s)", blocked.Reason, blocked.Message)
				}
				return j, fmt.Errorf("run %d of job %s/%s did not finish within %s (wait_timeout); it is %q%s", run, ns, name, timeout, j.Status.Phase, why)
			}
			return j, err
		}
		next, err := r.api.client.GetJob(ctx, ns, name)
		if err != nil {
			return j, err
		}
		j = next
	}
}

func (r *jobResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var prior jobModel
	resp.Diagnostics.Append(req.State.Get(ctx, &prior)...)
	if resp.Diagnostics.HasError() {
		return
	}
	j, ok := readObject(ctx, r.api, "job", prior.ID, prior.Namespace, prior.Name, (*client.Client).GetJob, resp)
	if !ok {
		return
	}
	st := jobState(j, &prior)
	resp.Diagnostics.Append(resp.State.Set(ctx, &st)...)
	if run := awaitedRun(ctx, req.Private); run != 0 && (j.Spec.RunID != run ||
		(j.Status.RunID == run && j.Status.Phase == slessv1alpha1.JobPhaseSucceeded)) {
		// It succeeded after the apply stopped waiting (the refreshed
		// state shows its output), or the job no longer asks for it: nothing
		// is left to report. A failed one stays awaited, so that the next
		// apply reports the failure.
		resp.Diagnostics.Append(setAwaitedRun(ctx, resp.Private, 0)...)
	}
}

func (r *jobResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	if !requireAPI(r.api, &resp.Diagnostics) {
		return
	}
	var plan, state jobModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	j := plan.object(state.Namespace.ValueString())
	progress(ctx, "job", j.Namespace, j.Name, "updating", "run_id", j.Spec.RunID)
	got, err := replaceSpec(ctx, j.Namespace, j.Name, r.api.client.GetJob,
		func(cur *slessv1alpha1.FunctionJob) { cur.Spec, cur.Status = j.Spec, slessv1alpha1.FunctionJobStatus{} },
		r.api.client.ReplaceJob)
	if err != nil {
		jobMapper.addAPIError(&resp.Diagnostics, "Updating the job failed", err)
		return
	}
	if plan.RunID.Equal(state.RunID) && !awaiting(ctx, req.Private, state.RunID) {
		// No new run, and the last one's end was seen: what it produced stays.
		st := jobState(got, &plan)
		st.Phase, st.Output, st.ExitCode = state.Phase, state.Output, state.ExitCode
		resp.Diagnostics.Append(resp.State.Set(ctx, &st)...)
		return
	}
	r.finish(ctx, &plan, got, false, &resp.Diagnostics, &resp.State, resp.Private)
}

func (r *jobResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state jobModel
	if !applyModel(ctx, r.api, req.State, &state, &resp.Diagnostics) {
		return
	}
	deleteObject(ctx, r.api.client, "job", state.Namespace, state.Name, waitTimeout(state.WaitTimeout, defaultJobWait),
		(*client.Client).DeleteJob, (*client.Client).GetJob, &resp.Diagnostics)
}

func (r *jobResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importInto(ctx, r.api, req, resp)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("wait_timeout"), defaultJobWait.String())...)
}
