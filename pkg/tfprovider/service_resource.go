package tfprovider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/client"
)

// serviceModel is sless_service's state and plan: a function's build
// attributes and a service's scale, flat as the SlessService spec has it.
type serviceModel struct {
	buildModel
	MinScale             types.Int64 `tfsdk:"min_scale"`
	MaxScale             types.Int64 `tfsdk:"max_scale"`
	ContainerConcurrency types.Int64 `tfsdk:"container_concurrency"`
}

func newServiceResource() resource.Resource { return &workloadResource{kind: serviceKind} }

// serviceKind is sless_service: a SlessService, a long-running web app
// served at /svc/{namespace}/{name}/.
var serviceKind = &workloadKind{
	name: "service", title: "Service", suffix: "_service",
	description: "A sless service: a long-running web app (a Python WSGI or ASGI app, a Node.js request handler, a Go http.Handler) " +
		"built from code like a function and served at /svc/{namespace}/{name}/ with the whole path passed through; " +
		"min_scale instances (1 unless set) stay up. Apply waits until the service is Ready; a failed build fails the apply with the build's message.",
	entrypoint: "The web app as module.attribute (e.g. app.app for a WSGI or ASGI app object in app.py); required unless image is set.",
	timeout:    slessv1alpha1.DefaultServiceTimeoutSeconds,
	attrs: map[string]schema.Attribute{
		"min_scale": schema.Int64Attribute{
			Optional: true, Computed: true, Default: int64default.StaticInt64(slessv1alpha1.DefaultServiceMinScale),
			Description: "Fewest instances kept running, 0 (scale to zero when idle) to 1000.",
			Validators:  []validator.Int64{between{0, slessv1alpha1.MaxScale}},
		},
		"max_scale": schema.Int64Attribute{
			Optional: true, Description: "Most instances, 1 to 1000 and at least min_scale; unset means no limit.",
			Validators: []validator.Int64{between{1, slessv1alpha1.MaxScale}},
		},
		"container_concurrency": schema.Int64Attribute{
			Optional: true, Description: "Hard limit of concurrent requests per instance, 0 (none) to 1000.",
			Validators: []validator.Int64{between{0, slessv1alpha1.MaxContainerConcurrency}},
		},
	},
	newModel: func() model { return &serviceModel{} },
	spec: func(ctx context.Context, m model) (slessv1alpha1.FunctionSpec, []path.Path, diag.Diagnostics) {
		return serviceSpec(ctx, m.(*serviceModel))
	},
	validate: func(ctx context.Context, m model, skip map[string]bool, diags *diag.Diagnostics) {
		validateServiceConfig(ctx, m.(*serviceModel), skip, diags)
	},
	mapper: serviceMapper,
	state: func(ctx context.Context, w workload, prior model) (model, diag.Diagnostics) {
		st, d := serviceState(w.(*slessv1alpha1.SlessService), prior.(*serviceModel))
		return &st, d
	},
	ownChanged: func(plan, state model) bool {
		p, s := plan.(*serviceModel), state.(*serviceModel)
		return !p.MinScale.Equal(s.MinScale) || !p.MaxScale.Equal(s.MaxScale) || !p.ContainerConcurrency.Equal(s.ContainerConcurrency)
	},
	patch: servicePatch,
	get: func(ctx context.Context, c *client.Client, ns, name string) (workload, error) {
		return asWorkload(c.GetService(ctx, ns, name))
	},
	create: func(ctx context.Context, c *client.Client, ns, name string, spec slessv1alpha1.FunctionSpec) (workload, error) {
		return asWorkload(c.CreateService(ctx, serviceObject(ns, name, spec)))
	},
	update: func(ctx context.Context, c *client.Client, ns, name string, p any) (workload, error) {
		return asWorkload(c.PatchService(ctx, ns, name, p))
	},
	remove: func(ctx context.Context, c *client.Client, ns, name string) error {
		return c.DeleteService(ctx, ns, name)
	},
	upload: func(ctx context.Context, c *client.Client, ns, name string, zip []byte, opts ...client.UploadOption) (*client.Upload, error) {
		return c.PutServiceSource(ctx, ns, name, zip, opts...)
	},
}

// serviceMapper names the attribute of each field of a SlessService.
func serviceMapper(env []path.Path) fieldMapper {
	return buildMapper(env, map[string]path.Path{
		"spec.minScale":             path.Root("min_scale"),
		"spec.maxScale":             path.Root("max_scale"),
		"spec.containerConcurrency": path.Root("container_concurrency"),
	})
}

// serviceSpec is the spec m asks for in a Function's shape, the service's
// scale as spec.scale (as SlessService.BuildSpec maps it).
func serviceSpec(ctx context.Context, m *serviceModel) (slessv1alpha1.FunctionSpec, []path.Path, diag.Diagnostics) {
	s, paths, diags := buildSpec(ctx, &m.buildModel)
	s.Scale = &slessv1alpha1.ScaleSpec{Min: int32Ptr(m.MinScale), Max: int32Ptr(m.MaxScale), ContainerConcurrency: int64Ptr(m.ContainerConcurrency)}
	return s, paths, diags
}

// serviceObject is the SlessService the API receives on create.
func serviceObject(ns, name string, s slessv1alpha1.FunctionSpec) *slessv1alpha1.SlessService {
	svc := &slessv1alpha1.SlessService{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: slessv1alpha1.SlessServiceSpec{
			WorkloadSpec:   s.WorkloadSpec,
			TimeoutSeconds: s.TimeoutSeconds,
		},
	}
	if sc := s.Scale; sc != nil {
		svc.Spec.MinScale, svc.Spec.MaxScale, svc.Spec.ContainerConcurrency = sc.Min, sc.Max, sc.ContainerConcurrency
	}
	return svc
}

// servicePatch is specPatch with the scale in the service's own fields,
// each named (null when unset) so a bound removed from the configuration
// goes from the server too.
func servicePatch(s *slessv1alpha1.FunctionSpec, withSource bool) map[string]any {
	p := specPatch(s, withSource)
	spec := p["spec"].(map[string]any)
	delete(spec, "scale")
	var sc slessv1alpha1.ScaleSpec
	if s.Scale != nil {
		sc = *s.Scale
	}
	spec["minScale"], spec["maxScale"], spec["containerConcurrency"] = nullable(sc.Min), nullable(sc.Max), nullable(sc.ContainerConcurrency)
	return p
}

// serviceState maps what the API holds onto the model (see functionState).
func serviceState(svc *slessv1alpha1.SlessService, prior *serviceModel) (serviceModel, diag.Diagnostics) {
	b, diags := buildState(svc, &prior.buildModel)
	d := svc.DeepCopy()
	d.SetDefaults()
	return serviceModel{
		buildModel: b, MinScale: optInt32(d.Spec.MinScale), MaxScale: optInt32(d.Spec.MaxScale),
		ContainerConcurrency: optInt64(d.Spec.ContainerConcurrency),
	}, diags
}

// validateServiceConfig reports what the API would refuse in m, but not on
// the attributes in skip (see skippedAttributes).
func validateServiceConfig(ctx context.Context, m *serviceModel, skip map[string]bool, diags *diag.Diagnostics) {
	unknown := checkSources(&m.buildModel, diags)
	spec, envPaths, d := serviceSpec(ctx, m)
	diags.Append(d...)
	planSource(&m.buildModel, unknown, &spec)
	svc := serviceObject("", m.Name.ValueString(), spec)
	serviceMapper(envPaths).addFieldErrors(diags, knownErrors(&m.buildModel, slessv1alpha1.ValidateSlessService(svc)), skip)
}
