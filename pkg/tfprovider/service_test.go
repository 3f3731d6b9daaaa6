package tfprovider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// baseService is a valid sless_service configuration, defaults filled as
// the schema fills them.
func baseService() serviceModel {
	f := baseFunction()
	b := f.buildModel
	b.Entrypoint = types.StringValue("app.app")
	b.TimeoutSec = types.Int64Value(slessv1alpha1.DefaultServiceTimeoutSeconds)
	return serviceModel{buildModel: b, MinScale: types.Int64Value(1), MaxScale: types.Int64Null(), ContainerConcurrency: types.Int64Null()}
}

// The API's validation of a SlessService runs at plan, its errors on the
// service's own attributes.
func TestValidateServiceConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(m *serviceModel)
		want []string
	}{
		{"valid", func(*serviceModel) {}, nil},
		{"scale to zero", func(m *serviceModel) { m.MinScale = types.Int64Value(0) }, nil},
		{"max below min", func(m *serviceModel) { m.MinScale, m.MaxScale = types.Int64Value(3), types.Int64Value(2) }, []string{"max_scale"}},
		{"negative min", func(m *serviceModel) { m.MinScale = types.Int64Value(-1) }, []string{"min_scale"}},
		{"max zero", func(m *serviceModel) { m.MaxScale = types.Int64Value(0) }, []string{"max_scale"}},
		{"concurrency above 1000", func(m *serviceModel) { m.ContainerConcurrency = types.Int64Value(1001) }, []string{"container_concurrency"}},
		{"timeout above 900", func(m *serviceModel) { m.TimeoutSec = types.Int64Value(901) }, []string{"timeout_sec"}},
		{"no source", func(m *serviceModel) { m.SourceDir = types.StringNull() }, []string{"source_dir"}},
		{"missing entrypoint", func(m *serviceModel) { m.Entrypoint = types.StringNull() }, []string{"entrypoint"}},
		{"bad name", func(m *serviceModel) { m.Name = types.StringValue("9lives") }, []string{"name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := baseService()
			tc.edit(&m)
			var diags diag.Diagnostics
			validateServiceConfig(context.Background(), &m, nil, &diags)
			got := errorPaths(t, diags)
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("errors on %v, want %v; diagnostics: %v", got, tc.want, diags)
			}
		})
	}
}

// A service the API stored without defaults (sless dev) has the CRD's in
// state, as the schema's defaults plan them: no perpetual diff.
func TestServiceStateFillsDefaults(t *testing.T) {
	svc := serviceObject("ns", "web", slessv1alpha1.FunctionSpec{
		WorkloadSpec: slessv1alpha1.WorkloadSpec{
			Runtime:    "python3.12",
			Entrypoint: "app.app",
			Source:     slessv1alpha1.FunctionSource{Inline: &slessv1alpha1.InlineSource{Files: map[string]string{"app.py": "x"}}},
		},
	})
	st, diags := serviceState(svc, &serviceModel{})
	if diags.HasError() {
		t.Fatal(diags)
	}
	for name, c := range map[string][2]types.Int64{
		"memory_mb":             {st.MemoryMB, types.Int64Null()},
		"timeout_sec":           {st.TimeoutSec, types.Int64Value(slessv1alpha1.DefaultServiceTimeoutSeconds)},
		"min_scale":             {st.MinScale, types.Int64Value(slessv1alpha1.DefaultServiceMinScale)},
		"max_scale":             {st.MaxScale, types.Int64Null()},
		"container_concurrency": {st.ContainerConcurrency, types.Int64Null()},
	} {
		if !c[0].Equal(c[1]) {
			t.Errorf("%s = %v, want %v", name, c[0], c[1])
		}
	}
	if svc.Spec.MinScale != nil || st.ID.ValueString() != "ns/web" {
		t.Errorf("serviceState changed its argument or got the id wrong: %v, %s", svc.Spec.MinScale, st.ID)
	}
}

// The service's scale goes in its own fields, each named so that a bound
// removed from the configuration is removed from the server.
func TestServicePatchNamesItsScale(t *testing.T) {
	m := baseService()
	spec, _, diags := serviceSpec(context.Background(), &m)
	if diags.HasError() {
		t.Fatal(diags)
	}
	p := servicePatch(&spec, false)["spec"].(map[string]any)
	if _, ok := p["scale"]; ok {
		t.Error("a SlessService has no spec.scale")
	}
	if p["minScale"] != any(spec.Scale.Min) {
		t.Errorf("minScale = %v", p["minScale"])
	}
	for _, k := range []string{"maxScale", "containerConcurrency"} {
		if v, ok := p[k]; !ok || v != nil {
			t.Errorf("%s = %v (present %v), want an explicit null", k, v, ok)
		}
	}
}

// A service's traffic list takes the function's way: validated on the
// entry's attribute, sent whole in the patch and on create, and read back
// spelt out.
func TestServiceTraffic(t *testing.T) {
	m := baseService()
	m.Name = types.StringValue("web")
	m.Traffic = trafficList(toRev("web-00001", 80, "stable"), toLatest(20, "next"))
	var diags diag.Diagnostics
	validateServiceConfig(context.Background(), &m, nil, &diags)
	if diags.HasError() {
		t.Fatalf("a valid split refused: %v", diags)
	}
	spec, _, diags := serviceSpec(context.Background(), &m)
	if diags.HasError() {
		t.Fatal(diags)
	}
	svc := serviceObject("ns", "web", spec)
	if got := svc.Spec.Traffic; len(got) != 2 || got[0].RevisionName != "web-00001" || got[1].Tag != "next" || got[1].PercentOf() != 20 {
		t.Errorf("the service created has spec.traffic %+v", got)
	}
	if got, ok := servicePatch(&spec, false)["spec"].(map[string]any)["traffic"].([]slessv1alpha1.TrafficTarget); !ok || len(got) != 2 {
		t.Errorf("the patch's traffic = %v", got)
	}
	st, diags := serviceState(svc, &serviceModel{})
	if diags.HasError() {
		t.Fatal(diags)
	}
	stable, next := toRev("web-00001", 80, "stable"), toLatest(20, "next")
	stable.Latest, next.Latest = types.BoolValue(false), types.BoolValue(true)
	if want := trafficList(stable, next); !st.Traffic.Equal(want) {
		t.Errorf("state traffic %v, want %v", st.Traffic, want)
	}

	m.Traffic = trafficList(toRev("other-00001", 100, ""))
	diags = nil
	validateServiceConfig(context.Background(), &m, nil, &diags)
	if got := errorPaths(t, diags); strings.Join(got, " ") != "traffic[0].revision" {
		t.Errorf("another workload's revision: errors on %v; %v", got, diags)
	}
}
