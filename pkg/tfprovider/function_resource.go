package tfprovider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/client"
)

const defaultFunctionWait = 10 * time.Minute

func newFunctionResource() resource.Resource { return &workloadResource{kind: functionKind} }

// functionKind is sless_function: a Function, scaled by its scale block.
var functionKind = &workloadKind{
	name: "function", title: "Function", suffix: "_function",
	description: "A sless function: code built into an image and served at an HTTPS URL that scales to zero. " +
		"Apply waits until the function is Ready; a failed build fails the apply with the build's message.",
	entrypoint: "Handler as module.function (e.g. main.handler); required unless image is set.",
	timeout:    slessv1alpha1.DefaultTimeoutSeconds,
	attrs: map[string]schema.Attribute{
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
		"async": schema.SingleNestedAttribute{
			Optional:    true,
			Description: "How calls made with Prefer: respond-async run; unset means the defaults below.",
			Attributes: map[string]schema.Attribute{
				"concurrency": schema.Int64Attribute{Optional: true, Computed: true,
					Default:     int64default.StaticInt64(slessv1alpha1.DefaultAsyncConcurrency),
					Description: "Asynchronous calls of the function run at once, 1 to 1000.",
					Validators:  []validator.Int64{between{1, slessv1alpha1.MaxAsyncConcurrency}}},
				"max_retries": schema.Int64Attribute{Optional: true, Computed: true,
					Default:     int64default.StaticInt64(slessv1alpha1.DefaultAsyncMaxRetries),
					Description: "Times a call answered 5xx or timed out is tried again before it is dead-lettered, 0 to 10.",
					Validators:  []validator.Int64{between{0, slessv1alpha1.MaxAsyncMaxRetries}}},
				"max_event_age_sec": schema.Int64Attribute{Optional: true, Computed: true,
					Default:     int64default.StaticInt64(slessv1alpha1.DefaultAsyncMaxEventAgeSeconds),
					Description: "Seconds after its acceptance a call may still be tried, 60 to 21600.",
					Validators:  []validator.Int64{between{slessv1alpha1.MinAsyncMaxEventAgeSeconds, slessv1alpha1.MaxAsyncMaxEventAgeSeconds}}},
				"on_success": schema.StringAttribute{Optional: true,
					Description: "http(s) URL that receives a signed POST with the result of each call that succeeded, unless the call named its own X-Callback-Url."},
				"on_failure": schema.StringAttribute{Optional: true,
					Description: "http(s) URL that receives a signed POST with the result of each call that failed or was dead-lettered, unless the call named its own X-Callback-Url."},
			},
		},
	},
	newModel: func() model { return &functionModel{} },
	spec: func(ctx context.Context, m model) (slessv1alpha1.FunctionSpec, []path.Path, diag.Diagnostics) {
		return specFromModel(ctx, m.(*functionModel))
	},
	validate: func(ctx context.Context, m model, skip map[string]bool, diags *diag.Diagnostics) {
		validateFunctionConfig(ctx, m.(*functionModel), skip, diags)
	},
	mapper: functionMapper,
	state: func(ctx context.Context, w workload, prior model) (model, diag.Diagnostics) {
		st, d := functionState(ctx, w.(*slessv1alpha1.Function), prior.(*functionModel))
		return &st, d
	},
	ownChanged: func(plan, state model) bool {
		p, s := plan.(*functionModel), state.(*functionModel)
		return !p.Scale.Equal(s.Scale) || !p.Async.Equal(s.Async)
	},
	patch: specPatch,
	get: func(ctx context.Context, c *client.Client, ns, name string) (workload, error) {
		return asWorkload(c.GetFunction(ctx, ns, name))
	},
	create: func(ctx context.Context, c *client.Client, ns, name string, spec slessv1alpha1.FunctionSpec) (workload, error) {
		return asWorkload(c.CreateFunction(ctx, functionObject(ns, name, spec)))
	},
	update: func(ctx context.Context, c *client.Client, ns, name string, p any) (workload, error) {
		return asWorkload(c.PatchFunction(ctx, ns, name, p))
	},
	remove: func(ctx context.Context, c *client.Client, ns, name string) error {
		return c.DeleteFunction(ctx, ns, name)
	},
	upload: func(ctx context.Context, c *client.Client, ns, name string, zip []byte, opts ...client.UploadOption) (*client.Upload, error) {
		return c.PutSource(ctx, ns, name, zip, opts...)
	},
}

// asWorkload passes on a client call's answer as a workload, a nil
// interface (never a nil pointer in one) with an error.
func asWorkload[T workload](obj T, err error) (workload, error) {
	if err != nil {
		return nil, err
	}
	return obj, nil
}

// validateFunctionConfig reports what the API would refuse in m, but not on
// the attributes in skip (see skippedAttributes).
func validateFunctionConfig(ctx context.Context, m *functionModel, skip map[string]bool, diags *diag.Diagnostics) {
	unknown := checkSources(&m.buildModel, diags)
	spec, envPaths, d := specFromModel(ctx, m)
	diags.Append(d...)
	fn := functionObject("", m.Name.ValueString(), spec)
	planSource(&m.buildModel, unknown, &fn.Spec)
	functionMapper(envPaths).addFieldErrors(diags, knownErrors(&m.buildModel, slessv1alpha1.ValidateFunction(fn)), skip)
}
