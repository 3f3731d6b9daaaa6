package tfprovider

import (
	"context"
	"sort"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// buildModel is what sless_function's and sless_service's state and plan
// share: the code, how it is built and run, and what the API reports of it.
type buildModel struct {
	ID              types.String `tfsdk:"id"`
	Name            types.String `tfsdk:"name"`
	Namespace       types.String `tfsdk:"namespace"`
	Runtime         types.String `tfsdk:"runtime"`
	Entrypoint      types.String `tfsdk:"entrypoint"`
	SourceDir       types.String `tfsdk:"source_dir"`
	SourceZip       types.String `tfsdk:"source_zip"`
	Image           types.String `tfsdk:"image"`
	SourceSHA256    types.String `tfsdk:"source_sha256"`
	Env             types.Map    `tfsdk:"env"`
	SecretEnv       types.Map    `tfsdk:"secret_env"`
	MemoryMB        types.Int64  `tfsdk:"memory_mb"`
	CPU             types.String `tfsdk:"cpu"`
	TimeoutSec      types.Int64  `tfsdk:"timeout_sec"`
	BuildTimeoutSec types.Int64  `tfsdk:"build_timeout_sec"`
	WaitTimeout     types.String `tfsdk:"wait_timeout"`
	URL             types.String `tfsdk:"url"`
	ResolvedImage   types.String `tfsdk:"resolved_image"`
	Revision        types.String `tfsdk:"revision"`
	Phase           types.String `tfsdk:"phase"`
	Traffic         types.List   `tfsdk:"traffic"`
	// Resources and placement (placement.go).
	Resources         types.Object `tfsdk:"resources"`
	NodeSelector      types.Map    `tfsdk:"node_selector"`
	Tolerations       types.List   `tfsdk:"tolerations"`
	NodeAffinity      types.String `tfsdk:"node_affinity_json"`
	PriorityClassName types.String `tfsdk:"priority_class_name"`
	RuntimeClassName  types.String `tfsdk:"runtime_class_name"`
	// Volumes (volumes.go).
	Volumes types.List `tfsdk:"volumes"`
}

// build is the shared part of a sless_function or sless_service model.
func (b *buildModel) build() *buildModel { return b }

// model is a sless_function or sless_service model.
type model interface{ build() *buildModel }

// functionModel is sless_function's state and plan.
type functionModel struct {
	buildModel
	Scale types.Object `tfsdk:"scale"`
	Async types.Object `tfsdk:"async"`
}

type scaleModel struct {
	Min                  types.Int64 `tfsdk:"min"`
	Max                  types.Int64 `tfsdk:"max"`
	Target               types.Int64 `tfsdk:"target"`
	ContainerConcurrency types.Int64 `tfsdk:"container_concurrency"`
}

var scaleAttrTypes = map[string]attr.Type{
	"min": types.Int64Type, "max": types.Int64Type, "target": types.Int64Type, "container_concurrency": types.Int64Type,
}

type asyncModel struct {
	Concurrency    types.Int64  `tfsdk:"concurrency"`
	MaxRetries     types.Int64  `tfsdk:"max_retries"`
	MaxEventAgeSec types.Int64  `tfsdk:"max_event_age_sec"`
	OnSuccess      types.String `tfsdk:"on_success"`
	OnFailure      types.String `tfsdk:"on_failure"`
}

var asyncAttrTypes = map[string]attr.Type{
	"concurrency": types.Int64Type, "max_retries": types.Int64Type, "max_event_age_sec": types.Int64Type,
	"on_success": types.StringType, "on_failure": types.StringType,
}

type secretRefModel struct {
	Secret types.String `tfsdk:"secret"`
	Key    types.String `tfsdk:"key"`
}

var secretRefAttrTypes = map[string]attr.Type{"secret": types.StringType, "key": types.StringType}

// buildMapper names the attribute of each field a Function and a
// SlessService share, plus those of more.
func buildMapper(env []path.Path, more map[string]path.Path) fieldMapper {
	prefixes := map[string]path.Path{
		"metadata.name":            path.Root("name"),
		"metadata.namespace":       path.Root("namespace"),
		"spec.runtime":             path.Root("runtime"),
		"spec.entrypoint":          path.Root("entrypoint"),
		"spec.source.image":        path.Root("image"),
		"spec.env":                 path.Root("env"),
		"spec.memoryMB":            path.Root("memory_mb"),
		"spec.cpu":                 path.Root("cpu"),
		"spec.timeoutSeconds":      path.Root("timeout_sec"),
		"spec.buildTimeoutSeconds": path.Root("build_timeout_sec"),
		"spec.traffic":             path.Root("traffic"),
	}
	for k, v := range placementPaths {
		prefixes[k] = v
	}
	for k, v := range more {
		prefixes[k] = v
	}
	return fieldMapper{env: env, prefixes: prefixes}
}

// functionMapper names the attribute of each field of a Function.
func functionMapper(env []path.Path) fieldMapper {
	return buildMapper(env, map[string]path.Path{
		"spec.scale":                      path.Root("scale"),
		"spec.scale.min":                  path.Root("scale").AtName("min"),
		"spec.scale.max":                  path.Root("scale").AtName("max"),
		"spec.scale.target":               path.Root("scale").AtName("target"),
		"spec.scale.containerConcurrency": path.Root("scale").AtName("container_concurrency"),
		"spec.async":                      path.Root("async"),
		"spec.async.concurrency":          path.Root("async").AtName("concurrency"),
		"spec.async.maxRetries":           path.Root("async").AtName("max_retries"),
		"spec.async.maxEventAgeSeconds":   path.Root("async").AtName("max_event_age_sec"),
		"spec.async.onSuccess":            path.Root("async").AtName("on_success"),
		"spec.async.onFailure":            path.Root("async").AtName("on_failure"),
	})
}

// specFromModel builds the FunctionSpec the model asks for, leaving the
// source to the caller. Unknown values are left out (validation at plan
// skips them). The returned paths name the attribute of each spec.env entry.
func specFromModel(ctx context.Context, m *functionModel) (slessv1alpha1.FunctionSpec, []path.Path, diag.Diagnostics) {
	s, paths, diags := buildSpec(ctx, &m.buildModel)
	if !m.Scale.IsNull() && !m.Scale.IsUnknown() {
		var sc scaleModel
		diags.Append(m.Scale.As(ctx, &sc, basetypes.ObjectAsOptions{UnhandledUnknownAsEmpty: true})...)
		s.Scale = &slessv1alpha1.ScaleSpec{
			Min: int32Ptr(sc.Min), Max: int32Ptr(sc.Max), Target: int32Ptr(sc.Target),
			ContainerConcurrency: int64Ptr(sc.ContainerConcurrency),
		}
	}
	if !m.Async.IsNull() && !m.Async.IsUnknown() {
		var a asyncModel
		diags.Append(m.Async.As(ctx, &a, basetypes.ObjectAsOptions{UnhandledUnknownAsEmpty: true})...)
		s.Async = &slessv1alpha1.AsyncSpec{
			Concurrency: int32Ptr(a.Concurrency), MaxRetries: int32Ptr(a.MaxRetries),
			MaxEventAgeSeconds: int32Ptr(a.MaxEventAgeSec),
			OnSuccess:          a.OnSuccess.ValueString(), OnFailure: a.OnFailure.ValueString(),
		}
	}
	return s, paths, diags
}

// buildSpec is the part of the spec both kinds share (specFromModel).
func buildSpec(ctx context.Context, m *buildModel) (slessv1alpha1.FunctionSpec, []path.Path, diag.Diagnostics) {
	var diags diag.Diagnostics
	s := slessv1alpha1.FunctionSpec{
		WorkloadSpec: slessv1alpha1.WorkloadSpec{
			Runtime:             m.Runtime.ValueString(),
			Entrypoint:          m.Entrypoint.ValueString(),
			MemoryMB:            int32Ptr(m.MemoryMB),
			BuildTimeoutSeconds: int32Ptr(m.BuildTimeoutSec),
		},
		TimeoutSeconds: int32Ptr(m.TimeoutSec),
	}
	s.Traffic = trafficSpec(ctx, m.Traffic, &diags)
	placementSpec(ctx, m, &s.WorkloadSpec, &diags)
	if !m.Image.IsNull() && !m.Image.IsUnknown() {
		s.Source.Image = m.Image.ValueString()
	}
	if !m.CPU.IsNull() && !m.CPU.IsUnknown() {
		if q, err := resource.ParseQuantity(m.CPU.ValueString()); err == nil {
			s.CPU = &q
		}
	}
	type envEntry struct {
		v slessv1alpha1.EnvVar
		p path.Path
	}
	var entries []envEntry
	if !m.Env.IsNull() && !m.Env.IsUnknown() {
		for k, v := range m.Env.Elements() {
			sv, ok := v.(types.String)
			if !ok || sv.IsUnknown() {
				continue
			}
			entries = append(entries, envEntry{slessv1alpha1.EnvVar{Name: k, Value: sv.ValueString()}, path.Root("env").AtMapKey(k)})
		}
	}
	if !m.SecretEnv.IsNull() && !m.SecretEnv.IsUnknown() {
		refs := map[string]secretRefModel{}
		diags.Append(m.SecretEnv.ElementsAs(ctx, &refs, true)...)
		for k, r := range refs {
			if r.Secret.IsUnknown() || r.Key.IsUnknown() {
				continue
			}
			entries = append(entries, envEntry{slessv1alpha1.EnvVar{Name: k, ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: r.Secret.ValueString()}, Key: r.Key.ValueString()},
			}}, path.Root("secret_env").AtMapKey(k)})
		}
	}
	// Sorted by name, secret after plain for the same name (a duplicate the
	// validation reports), so the body sent is the same on every run.
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].v.Name < entries[j].v.Name })
	var paths []path.Path
	for _, e := range entries {
		s.Env = append(s.Env, e.v)
		paths = append(paths, e.p)
	}
	return s, paths, diags
}

// specPatch is the merge patch that makes the server's spec what s says,
// leaving spec.source alone unless withSource: absent optional fields are
// sent as null so they are removed.
func specPatch(s *slessv1alpha1.FunctionSpec, withSource bool) map[string]any {
	spec := map[string]any{
		"runtime":             s.Runtime,
		"entrypoint":          nullableString(s.Entrypoint),
		"env":                 s.Env,
		"memoryMB":            nullable(s.MemoryMB),
		"cpu":                 nullable(s.CPU),
		"timeoutSeconds":      nullable(s.TimeoutSeconds),
		"buildTimeoutSeconds": nullable(s.BuildTimeoutSeconds),
		"scale":               scalePatch(s.Scale),
		"async":               asyncPatch(s.Async),
		"traffic":             trafficPatch(s.Traffic),
	}
	if s.Env == nil {
		spec["env"] = nil
	}
	if withSource {
		src := map[string]any{"inline": nil, "archive": nil, "image": nil}
		switch {
		case s.Source.Image != "":
			src["image"] = s.Source.Image
			// A prebuilt image has no build to run again, and the API
			// refuses spec.rebuild beside it.
			spec["rebuild"] = nil
		case s.Source.Inline != nil:
			src["inline"] = s.Source.Inline
		case s.Source.Archive != nil:
			src["archive"] = s.Source.Archive
		}
		spec["source"] = src
	}
	return map[string]any{"spec": spec}
}

// scalePatch is spec.scale in a merge patch: every field named, null when
// unset, since a merge patch leaves out fields unchanged, and a bound
// removed from the configuration must go from the server too.
func scalePatch(sc *slessv1alpha1.ScaleSpec) any {
	if sc == nil {
		return nil
	}
	return map[string]any{
		"min": nullable(sc.Min), "max": nullable(sc.Max), "target": nullable(sc.Target),
		"containerConcurrency": nullable(sc.ContainerConcurrency),
	}
}

// asyncPatch is spec.async in a merge patch, every field named as in
// scalePatch.
func asyncPatch(a *slessv1alpha1.AsyncSpec) any {
	if a == nil {
		return nil
	}
	return map[string]any{
		"concurrency": nullable(a.Concurrency), "maxRetries": nullable(a.MaxRetries),
		"maxEventAgeSeconds": nullable(a.MaxEventAgeSeconds),
		"onSuccess":          nullableString(a.OnSuccess), "onFailure": nullableString(a.OnFailure),
	}
}

// functionState maps what the API holds onto the model, keeping the prior
// state's choices where the API cannot tell them apart (null or empty
// maps, the user's spelling of a CPU quantity) and the attributes that only
// the configuration holds (source_dir, source_zip, wait_timeout).
func functionState(ctx context.Context, fn *slessv1alpha1.Function, prior *functionModel) (functionModel, diag.Diagnostics) {
	b, diags := buildState(fn, &prior.buildModel)
	m := functionModel{buildModel: b}
	if sc := fn.Spec.Scale; sc != nil && (sc.Min != nil || sc.Max != nil || sc.Target != nil || sc.ContainerConcurrency != nil) {
		obj, d := types.ObjectValue(scaleAttrTypes, map[string]attr.Value{
			"min": optInt32(sc.Min), "max": optInt32(sc.Max), "target": optInt32(sc.Target),
			"container_concurrency": optInt64(sc.ContainerConcurrency),
		})
		diags.Append(d...)
		m.Scale = obj
	} else if !prior.Scale.IsNull() && !prior.Scale.IsUnknown() && allNull(prior.Scale) {
		m.Scale = prior.Scale
	} else {
		m.Scale = types.ObjectNull(scaleAttrTypes)
	}
	defaulted := fn.DeepCopy()
	defaulted.SetDefaults()
	m.Async = asyncState(defaulted.Spec.Async, &diags)
	_ = ctx
	return m, diags
}

// asyncState is the async block as the API holds it, with the CRD's
// defaults filled in, as the schema's defaults fill the plan.
func asyncState(a *slessv1alpha1.AsyncSpec, diags *diag.Diagnostics) types.Object {
	if a == nil {
		return types.ObjectNull(asyncAttrTypes)
	}
	obj, d := types.ObjectValue(asyncAttrTypes, map[string]attr.Value{
		"concurrency": optInt32(a.Concurrency), "max_retries": optInt32(a.MaxRetries),
		"max_event_age_sec": optInt32(a.MaxEventAgeSeconds),
		"on_success":        optString(a.OnSuccess), "on_failure": optString(a.OnFailure),
	})
	diags.Append(d...)
	return obj
}

// buildState is the part of the state both kinds share (functionState).
func buildState(w slessv1alpha1.Workload, prior *buildModel) (buildModel, diag.Diagnostics) {
	var diags diag.Diagnostics
	// A field the CRD defaults means its default when a server leaves it
	// unset (sless dev stores objects as written): the timeouts always
	// have a value in state, as they do in a plan. memory_mb has none:
	// memory may be set in resources instead.
	w = w.DeepCopyObject().(slessv1alpha1.Workload)
	w.SetDefaults()
	spec, status := w.BuildSpec(), w.WorkloadStatus()
	m := buildModel{
		ID:              types.StringValue(w.GetNamespace() + "/" + w.GetName()),
		Name:            types.StringValue(w.GetName()),
		Namespace:       types.StringValue(w.GetNamespace()),
		Runtime:         types.StringValue(spec.Runtime),
		Entrypoint:      optString(spec.Entrypoint),
		SourceDir:       prior.SourceDir,
		SourceZip:       prior.SourceZip,
		Image:           optString(spec.Source.Image),
		MemoryMB:        optInt32(spec.MemoryMB),
		TimeoutSec:      optInt32(spec.TimeoutSeconds),
		BuildTimeoutSec: optInt32(spec.BuildTimeoutSeconds),
		WaitTimeout:     prior.WaitTimeout,
		URL:             optString(status.URL),
		ResolvedImage:   optString(status.Image),
		Revision:        optString(status.LatestReadyRevision),
		Phase:           optString(string(status.Phase)),
		Traffic:         trafficState(spec.Traffic, &diags),
	}
	// An alias the user wrote stays as written when the server canonicalised it.
	if !prior.Runtime.IsNull() && !prior.Runtime.IsUnknown() && prior.Runtime.ValueString() != spec.Runtime {
		a, _ := slessv1alpha1.CanonicalRuntime(prior.Runtime.ValueString())
		b, _ := slessv1alpha1.CanonicalRuntime(spec.Runtime)
		if a != "" && a == b {
			m.Runtime = prior.Runtime
		}
	}
	if m.SourceDir.IsUnknown() {
		m.SourceDir = types.StringNull()
	}
	if m.SourceZip.IsUnknown() {
		m.SourceZip = types.StringNull()
	}
	if m.WaitTimeout.IsUnknown() || m.WaitTimeout.IsNull() {
		m.WaitTimeout = types.StringValue(defaultFunctionWait.String())
	}

	// The source's digest is the digest of the zip the provider would
	// upload: an uploaded archive carries it; inline files are zipped the
	// same deterministic way, so files equal to the directory's plan no change.
	switch src := spec.Source; {
	case src.Archive != nil:
		m.SourceSHA256 = types.StringValue(src.Archive.SHA256)
	case src.Inline != nil:
		if a, err := zipFiles(inlineToFiles(src.Inline.Files)); err == nil {
			m.SourceSHA256 = types.StringValue(a.SHA256)
		} else {
			m.SourceSHA256 = types.StringNull()
		}
	default:
		m.SourceSHA256 = types.StringNull()
	}

	if c := spec.CPU; c != nil {
		m.CPU = types.StringValue(c.String())
		if !prior.CPU.IsNull() && !prior.CPU.IsUnknown() {
			if q, err := resource.ParseQuantity(prior.CPU.ValueString()); err == nil && q.Cmp(*c) == 0 {
				m.CPU = prior.CPU
			}
		}
	} else {
		m.CPU = types.StringNull()
	}

	plain := map[string]attr.Value{}
	secret := map[string]attr.Value{}
	for _, e := range spec.Env {
		switch {
		case e.ValueFrom == nil:
			plain[e.Name] = types.StringValue(e.Value)
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			obj, d := types.ObjectValue(secretRefAttrTypes, map[string]attr.Value{
				"secret": types.StringValue(ref.Name), "key": types.StringValue(ref.Key),
			})
			diags.Append(d...)
			secret[e.Name] = obj
		}
		// Other sources (ConfigMaps, fields) are not managed by this
		// resource; an apply replaces the env list with the configured one.
	}
	m.Env = mapState(prior.Env, types.StringType, plain, &diags)
	m.SecretEnv = mapState(prior.SecretEnv, types.ObjectType{AttrTypes: secretRefAttrTypes}, secret, &diags)
	placementState(&spec.WorkloadSpec, prior, &m, &diags)
	return m, diags
}

// mapState is a map attribute's state: null when the server has no entries
// unless the prior state said {} (both mean "none" to the API).
func mapState(prior types.Map, elem attr.Type, got map[string]attr.Value, diags *diag.Diagnostics) types.Map {
	if len(got) == 0 {
		if !prior.IsNull() && !prior.IsUnknown() && len(prior.Elements()) == 0 {
			return prior
		}
		return types.MapNull(elem)
	}
	v, d := types.MapValue(elem, got)
	diags.Append(d...)
	return v
}

func allNull(o types.Object) bool {
	for _, v := range o.Attributes() {
		if !v.IsNull() {
			return false
		}
	}
	return true
}

func inlineToFiles(in map[string]string) map[string][]byte {
	out := make(map[string][]byte, len(in))
	for k, v := range in {
		out[k] = []byte(v)
	}
	return out
}

// functionObject is the Function the API receives on create.
func functionObject(ns, name string, spec slessv1alpha1.FunctionSpec) *slessv1alpha1.Function {
	return &slessv1alpha1.Function{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       spec,
	}
}
