package tfprovider

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// The provider's schema is what Terraform sees: the framework checks it
// (names, defaults on computed attributes, nested types) when it is served.
func TestProviderSchemaIsValid(t *testing.T) {
	srv, err := providerserver.NewProtocol6WithError(New("test")())()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.GetProviderSchema(context.Background(), &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range resp.Diagnostics {
		t.Errorf("schema diagnostic: %s: %s", d.Summary, d.Detail)
	}
	var got []string
	for name := range resp.ResourceSchemas {
		got = append(got, "resource "+name)
	}
	for name := range resp.DataSourceSchemas {
		got = append(got, "data "+name)
	}
	sort.Strings(got)
	want := "data sless_function,data sless_functions,resource sless_function,resource sless_job,resource sless_secret,resource sless_service,resource sless_trigger"
	if strings.Join(got, ",") != want {
		t.Errorf("types = %v, want %s", got, want)
	}
	fn := resp.ResourceSchemas["sless_function"]
	for _, a := range fn.Block.Attributes {
		if a.Name == "token" || (a.Name == "env" && a.Sensitive) {
			t.Errorf("unexpected attribute flags on %s", a.Name)
		}
	}
	if tok := findAttr(resp.Provider.Block.Attributes, "token"); tok == nil || !tok.Sensitive {
		t.Errorf("provider token must be sensitive")
	}
}

func findAttr(attrs []*tfprotov6.SchemaAttribute, name string) *tfprotov6.SchemaAttribute {
	for _, a := range attrs {
		if a.Name == name {
			return a
		}
	}
	return nil
}

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var helloPy = map[string]string{
	"main.py":          "def handler(event, context):\n    return {'ok': True}\n",
	"lib/util.py":      "X = 1\n",
	"requirements.txt": "",
}

func TestZipDirIsDeterministic(t *testing.T) {
	a := writeTree(t, helloPy)
	b := writeTree(t, helloPy)
	// Times, modes and tool litter must not change the digest.
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(b, "main.py"), old, old); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(b, "lib/util.py"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, litter := range []string{".git/HEAD", "__pycache__/main.cpython-312.pyc", "lib/util.pyc", ".terraform/x", "node_modules/m/index.js"} {
		p := filepath.Join(b, filepath.FromSlash(litter))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("litter"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	za, err := zipDir(a)
	if err != nil {
		t.Fatal(err)
	}
	zb, err := zipDir(b)
	if err != nil {
		t.Fatal(err)
	}
	za2, err := zipDir(a)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(za.Zip, za2.Zip) || za.SHA256 != za2.SHA256 {
		t.Fatal("two zips of one directory differ")
	}
	if za.SHA256 != zb.SHA256 {
		t.Fatalf("times, modes or skipped files changed the digest: %s vs %s", za.SHA256, zb.SHA256)
	}
	if len(za.Files) != 3 || string(za.Files["lib/util.py"]) != "X = 1\n" {
		t.Fatalf("files = %v", za.Files.Names())
	}
	// Inline files equal to the directory digest the same: a function whose
	// spec holds them inline plans no change against the directory.
	inl, err := zipFiles(inlineToFiles(helloPy))
	if err != nil {
		t.Fatal(err)
	}
	if inl.SHA256 != za.SHA256 {
		t.Fatalf("inline digest %s != directory digest %s", inl.SHA256, za.SHA256)
	}

	if err := os.WriteFile(filepath.Join(b, "main.py"), []byte("def handler(e, c):\n    return 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	zc, err := zipDir(b)
	if err != nil {
		t.Fatal(err)
	}
	if zc.SHA256 == za.SHA256 {
		t.Fatal("a content change kept the digest")
	}
	if err := os.WriteFile(filepath.Join(b, "new.py"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	zd, err := zipDir(b)
	if err != nil {
		t.Fatal(err)
	}
	if zd.SHA256 == zc.SHA256 {
		t.Fatal("a new empty file kept the digest")
	}
}

func TestZipDirRejects(t *testing.T) {
	empty := t.TempDir()
	link := writeTree(t, helloPy)
	if err := os.Symlink("/etc/hostname", filepath.Join(link, "host.txt")); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(writeTree(t, helloPy), "main.py")
	notZip := filepath.Join(t.TempDir(), "code.zip")
	if err := os.WriteFile(notZip, []byte("not a zip"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, want string
		run        func() (*archive, error)
	}{
		{"missing directory", "no such file", func() (*archive, error) { return zipDir(filepath.Join(empty, "nope")) }},
		{"empty directory", "holds no files", func() (*archive, error) { return zipDir(empty) }},
		{"symlink out of the directory", "outside the directory", func() (*archive, error) { return zipDir(link) }},
		{"a file, not a directory", "not a directory", func() (*archive, error) { return zipDir(file) }},
		{"not a zip", "BadArchive", func() (*archive, error) { return readZipFile(notZip) }},
		{"missing zip", "no such file", func() (*archive, error) { return readZipFile(filepath.Join(empty, "x.zip")) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.run()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestReadZipFileKeepsBytes(t *testing.T) {
	a, err := zipDir(writeTree(t, helloPy))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "code.zip")
	if err := os.WriteFile(p, a.Zip, 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := readZipFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if b.SHA256 != a.SHA256 || len(b.Files) != len(a.Files) {
		t.Fatalf("zip file read back as %s with %d files", b.SHA256, len(b.Files))
	}
}

// baseFunction is a valid configuration; the table rows break one thing each.
func baseFunction() functionModel {
	return functionModel{buildModel: buildModel{
		Name:            types.StringValue("hello"),
		Namespace:       types.StringNull(),
		Runtime:         types.StringValue("python3.12"),
		Entrypoint:      types.StringValue("main.handler"),
		SourceDir:       types.StringValue("./src"),
		SourceZip:       types.StringNull(),
		Image:           types.StringNull(),
		Env:             types.MapNull(types.StringType),
		SecretEnv:       types.MapNull(types.ObjectType{AttrTypes: secretRefAttrTypes}),
		MemoryMB:        types.Int64Value(128),
		CPU:             types.StringNull(),
		TimeoutSec:      types.Int64Value(30),
		BuildTimeoutSec: types.Int64Value(900),
		Traffic:         types.ListNull(trafficElemType),
	}, Scale: types.ObjectNull(scaleAttrTypes), Async: types.ObjectNull(asyncAttrTypes)}
}

// trafficList is a traffic list of the entries.
func trafficList(entries ...trafficModel) types.List {
	elems := make([]attr.Value, len(entries))
	for i, e := range entries {
		elems[i] = types.ObjectValueMust(trafficAttrTypes, map[string]attr.Value{
			"revision": e.Revision, "latest": e.Latest, "percent": e.Percent, "tag": e.Tag})
	}
	return types.ListValueMust(trafficElemType, elems)
}

func toRev(name string, percent int64, tag string) trafficModel {
	t := trafficModel{Revision: types.StringValue(name), Latest: types.BoolNull(), Percent: types.Int64Value(percent), Tag: types.StringNull()}
	if tag != "" {
		t.Tag = types.StringValue(tag)
	}
	return t
}

func toLatest(percent int64, tag string) trafficModel {
	t := toRev("", percent, tag)
	t.Revision = types.StringNull()
	return t
}

func asyncObj(concurrency, retries, age int64) types.Object {
	return types.ObjectValueMust(asyncAttrTypes, map[string]attr.Value{"concurrency": types.Int64Value(concurrency),
		"max_retries": types.Int64Value(retries), "max_event_age_sec": types.Int64Value(age),
		"on_success": types.StringNull(), "on_failure": types.StringNull()})
}

func scaleObj(min, max, target, cc types.Int64) types.Object {
	return types.ObjectValueMust(scaleAttrTypes, map[string]attr.Value{"min": min, "max": max, "target": target, "container_concurrency": cc})
}

func TestValidateFunctionConfig(t *testing.T) {
	null := types.Int64Null()
	for _, tc := range []struct {
		name string
		edit func(m *functionModel)
		// want lists the attribute paths with errors, sorted; nil for valid.
		want []string
	}{
		{"valid", func(*functionModel) {}, nil},
		{"valid image without entrypoint", func(m *functionModel) {
			m.SourceDir, m.Entrypoint, m.Image = types.StringNull(), types.StringNull(), types.StringValue("ghcr.io/acme/app@sha256:"+strings.Repeat("a", 64))
		}, nil},
		{"unknown source may be an image", func(m *functionModel) {
			m.SourceDir, m.Entrypoint = types.StringUnknown(), types.StringNull()
		}, nil},
		{"unknown runtime is not judged", func(m *functionModel) { m.Runtime = types.StringUnknown() }, nil},
		{"negative memory", func(m *functionModel) { m.MemoryMB = types.Int64Value(-10) }, []string{"memory_mb"}},
		{"memory above the limit", func(m *functionModel) { m.MemoryMB = types.Int64Value(4097) }, []string{"memory_mb"}},
		{"memory beyond int32", func(m *functionModel) { m.MemoryMB = types.Int64Value(1 << 40) }, []string{"memory_mb"}},
		{"unknown runtime name", func(m *functionModel) { m.Runtime = types.StringValue("cobol85") }, []string{"runtime"}},
		{"two sources", func(m *functionModel) { m.Image = types.StringValue("ghcr.io/acme/app:1") }, []string{"image", "source_dir"}},
		{"three sources", func(m *functionModel) {
			m.Image, m.SourceZip = types.StringValue("ghcr.io/acme/app:1"), types.StringValue("x.zip")
		}, []string{"image", "source_dir", "source_zip"}},
		{"no source", func(m *functionModel) { m.SourceDir = types.StringNull() }, []string{"source_dir"}},
		{"missing entrypoint", func(m *functionModel) { m.Entrypoint = types.StringNull() }, []string{"entrypoint"}},
		{"malformed entrypoint", func(m *functionModel) { m.Entrypoint = types.StringValue("handler") }, []string{"entrypoint"}},
		{"bad name", func(m *functionModel) { m.Name = types.StringValue("Hello_World") }, []string{"name"}},
		{"name too long", func(m *functionModel) { m.Name = types.StringValue("a" + strings.Repeat("b", 52)) }, []string{"name"}},
		{"bad image reference", func(m *functionModel) {
			m.SourceDir, m.Image = types.StringNull(), types.StringValue("UPPER CASE")
		}, []string{"image"}},
		{"timeout zero", func(m *functionModel) { m.TimeoutSec = types.Int64Value(0) }, []string{"timeout_sec"}},
		{"timeout above 900", func(m *functionModel) { m.TimeoutSec = types.Int64Value(901) }, []string{"timeout_sec"}},
		{"build timeout too short", func(m *functionModel) { m.BuildTimeoutSec = types.Int64Value(59) }, []string{"build_timeout_sec"}},
		{"zero cpu", func(m *functionModel) { m.CPU = types.StringValue("0") }, []string{"cpu"}},
		{"env name not an identifier", func(m *functionModel) {
			m.Env = types.MapValueMust(types.StringType, map[string]attr.Value{"OK": types.StringValue("1"), "1BAD": types.StringValue("x")})
		}, []string{`env["1BAD"]`}},
		{"reserved env name", func(m *functionModel) {
			m.Env = types.MapValueMust(types.StringType, map[string]attr.Value{"SLESS_X": types.StringValue("x")})
		}, []string{`env["SLESS_X"]`}},
		{"env and secret env share a name", func(m *functionModel) {
			m.Env = types.MapValueMust(types.StringType, map[string]attr.Value{"DB": types.StringValue("x")})
			m.SecretEnv = types.MapValueMust(types.ObjectType{AttrTypes: secretRefAttrTypes}, map[string]attr.Value{
				"DB": types.ObjectValueMust(secretRefAttrTypes, map[string]attr.Value{"secret": types.StringValue("db"), "key": types.StringValue("url")}),
			})
		}, []string{`secret_env["DB"]`}},
		{"scale max below min", func(m *functionModel) {
			m.Scale = scaleObj(types.Int64Value(5), types.Int64Value(2), null, null)
		}, []string{"scale.max"}},
		{"scale negative min", func(m *functionModel) { m.Scale = scaleObj(types.Int64Value(-1), null, null, null) }, []string{"scale.min"}},
		{"container concurrency above 1000", func(m *functionModel) {
			m.Scale = scaleObj(null, null, null, types.Int64Value(1001))
		}, []string{"scale.container_concurrency"}},
		{"valid async", func(m *functionModel) { m.Async = asyncObj(5, 0, 60) }, nil},
		{"async concurrency zero", func(m *functionModel) { m.Async = asyncObj(0, 2, 3600) }, []string{"async.concurrency"}},
		{"async retries above 10", func(m *functionModel) { m.Async = asyncObj(10, 11, 3600) }, []string{"async.max_retries"}},
		{"async event age below a minute", func(m *functionModel) { m.Async = asyncObj(10, 2, 59) }, []string{"async.max_event_age_sec"}},
		{"async event age above 6 hours", func(m *functionModel) { m.Async = asyncObj(10, 2, 21601) }, []string{"async.max_event_age_sec"}},
		{"async callback not http", func(m *functionModel) {
			a := asyncObj(10, 2, 600).Attributes()
			a["on_failure"] = types.StringValue("ftp://example.com/hook")
			m.Async = types.ObjectValueMust(asyncAttrTypes, a)
		}, []string{"async.on_failure"}},
		{"valid traffic split", func(m *functionModel) {
			m.Traffic = trafficList(toRev("hello-00001", 90, "stable"), toLatest(10, "canary"))
		}, nil},
		{"traffic not summing to 100", func(m *functionModel) {
			m.Traffic = trafficList(toRev("hello-00001", 50, ""), toLatest(40, ""))
		}, []string{"traffic"}},
		{"traffic with two latest entries", func(m *functionModel) {
			m.Traffic = trafficList(toLatest(50, "a"), toLatest(50, "b"))
		}, []string{"traffic[1]"}},
		{"traffic tag not a DNS label", func(m *functionModel) {
			m.Traffic = trafficList(toLatest(100, "Canary_1"))
		}, []string{"traffic[0].tag"}},
		{"traffic tag twice", func(m *functionModel) {
			m.Traffic = trafficList(toRev("hello-00001", 50, "x"), toLatest(50, "x"))
		}, []string{"traffic[1].tag"}},
		{"traffic revision of another function", func(m *functionModel) {
			m.Traffic = trafficList(toRev("other-00001", 100, ""))
		}, []string{"traffic[0].revision"}},
		{"traffic latest false without a revision", func(m *functionModel) {
			e := toLatest(100, "")
			e.Latest = types.BoolValue(false)
			m.Traffic = trafficList(e)
		}, []string{"traffic[0].latest"}},
		{"traffic percent above 100", func(m *functionModel) {
			m.Traffic = trafficList(toLatest(101, ""))
		}, []string{"traffic", "traffic[0].percent"}},
		{"traffic revision unknown is not judged", func(m *functionModel) {
			e := toRev("", 100, "")
			e.Revision = types.StringUnknown()
			m.Traffic = trafficList(e)
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := baseFunction()
			tc.edit(&m)
			var diags diag.Diagnostics
			validateFunctionConfig(context.Background(), &m, nil, &diags)
			got := errorPaths(t, diags)
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("errors on %v, want %v; diagnostics: %v", got, tc.want, diags)
			}
		})
	}
}

func compact(s []string) []string {
	var out []string
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

func TestFunctionStateKeepsNullsAndSpelling(t *testing.T) {
	cpu := resource.MustParse("0.25")
	fn := &slessv1alpha1.Function{
		Spec: slessv1alpha1.FunctionSpec{
			WorkloadSpec: slessv1alpha1.WorkloadSpec{
				Runtime:    "python3.12",
				Entrypoint: "main.handler",
				Source:     slessv1alpha1.FunctionSource{Archive: &slessv1alpha1.ArchiveSource{Bucket: "b", Key: "k", SHA256: strings.Repeat("c", 64)}},
				Env: []slessv1alpha1.EnvVar{
					{Name: "A", Value: "1"},
					{Name: "PW", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "pw"}}},
				},
				MemoryMB:            ptr.To[int32](256),
				CPU:                 &cpu,
				BuildTimeoutSeconds: ptr.To[int32](900),
			},
			TimeoutSeconds: ptr.To[int32](30),
		},
		Status: slessv1alpha1.FunctionStatus{Phase: slessv1alpha1.FunctionPhaseReady, URL: "http://x/fn/ns/hello", Image: "local/ns/hello@sha256:" + strings.Repeat("d", 64), LatestReadyRevision: "hello-00001"},
	}
	fn.Namespace, fn.Name = "ns", "hello"

	prior := baseFunction()
	prior.CPU = types.StringValue("250m")
	prior.Runtime = types.StringValue("python3.11")
	fn.Spec.Runtime = "python3.12"
	st, diags := functionState(context.Background(), fn, &prior)
	if diags.HasError() {
		t.Fatal(diags)
	}
	checks := map[string][2]string{
		"id":             {st.ID.ValueString(), "ns/hello"},
		"cpu":            {st.CPU.ValueString(), "250m"},           // 0.25 == 250m: the user's spelling stays
		"runtime":        {st.Runtime.ValueString(), "python3.11"}, // an alias of what the server says
		"source_sha256":  {st.SourceSHA256.ValueString(), strings.Repeat("c", 64)},
		"source_dir":     {st.SourceDir.ValueString(), "./src"},
		"resolved_image": {st.ResolvedImage.ValueString(), fn.Status.Image},
		"revision":       {st.Revision.ValueString(), "hello-00001"},
		"wait_timeout":   {st.WaitTimeout.ValueString(), "10m0s"},
	}
	for name, c := range checks {
		if c[0] != c[1] {
			t.Errorf("%s = %q, want %q", name, c[0], c[1])
		}
	}
	if !st.Image.IsNull() || !st.Scale.IsNull() {
		t.Errorf("unset optional attributes must be null: image=%v scale=%v", st.Image, st.Scale)
	}
	if v := st.Env.Elements()["A"]; v == nil || v.(types.String).ValueString() != "1" || len(st.Env.Elements()) != 1 {
		t.Errorf("env = %v", st.Env)
	}
	if len(st.SecretEnv.Elements()) != 1 {
		t.Errorf("secret_env = %v", st.SecretEnv)
	}

	// A CPU that differs in value takes the server's; no env at all is null
	// unless the configuration said {}.
	prior.CPU = types.StringValue("500m")
	fn.Spec.Env = nil
	st, _ = functionState(context.Background(), fn, &prior)
	if st.CPU.ValueString() != "250m" || !st.Env.IsNull() || !st.SecretEnv.IsNull() {
		t.Errorf("cpu=%v env=%v secret_env=%v", st.CPU, st.Env, st.SecretEnv)
	}
	prior.Env = types.MapValueMust(types.StringType, map[string]attr.Value{})
	st, _ = functionState(context.Background(), fn, &prior)
	if st.Env.IsNull() || len(st.Env.Elements()) != 0 {
		t.Errorf("env {} in configuration must stay {}, got %v", st.Env)
	}
	// Empty strings from the API are null in state.
	fn.Spec.Entrypoint, fn.Status.URL = "", ""
	st, _ = functionState(context.Background(), fn, &prior)
	if !st.Entrypoint.IsNull() || !st.URL.IsNull() {
		t.Errorf("entrypoint=%v url=%v, want null", st.Entrypoint, st.URL)
	}
}

// A server that stores a Function as written (sless dev) leaves the CRD's
// defaults unset; state holds the defaults, as a plan of the same
// configuration does, and the Function passed in is not changed.
func TestFunctionStateFillsDefaults(t *testing.T) {
	fn := &slessv1alpha1.Function{Spec: slessv1alpha1.FunctionSpec{
		WorkloadSpec: slessv1alpha1.WorkloadSpec{
			Runtime:    "python3.12",
			Entrypoint: "main.handler",
			Source:     slessv1alpha1.FunctionSource{Inline: &slessv1alpha1.InlineSource{Files: map[string]string{"main.py": "x"}}},
		},
	}}
	fn.Namespace, fn.Name = "ns", "hello"
	st, diags := functionState(context.Background(), fn, &functionModel{})
	if diags.HasError() {
		t.Fatal(diags)
	}
	for name, c := range map[string][2]types.Int64{
		"memory_mb":         {st.MemoryMB, types.Int64Null()},
		"timeout_sec":       {st.TimeoutSec, types.Int64Value(slessv1alpha1.DefaultTimeoutSeconds)},
		"build_timeout_sec": {st.BuildTimeoutSec, types.Int64Value(slessv1alpha1.DefaultBuildTimeoutSeconds)},
	} {
		if !c[0].Equal(c[1]) {
			t.Errorf("%s = %v, want %v", name, c[0], c[1])
		}
	}
	if fn.Spec.MemoryMB != nil {
		t.Errorf("functionState changed its argument: memoryMB = %d", *fn.Spec.MemoryMB)
	}
	if !st.Async.IsNull() {
		t.Errorf("no spec.async must be a null async block, got %v", st.Async)
	}
	// A server that stores spec.async as written (sless dev) holds what the
	// CRD would default, as the schema's defaults put it in the plan.
	fn.Spec.Async = &slessv1alpha1.AsyncSpec{MaxRetries: ptr.To[int32](0)}
	if st, _ = functionState(context.Background(), fn, &functionModel{}); !st.Async.Equal(asyncObj(
		slessv1alpha1.DefaultAsyncConcurrency, 0, slessv1alpha1.DefaultAsyncMaxEventAgeSeconds)) {
		t.Errorf("async = %v, want the defaults beside max_retries = 0", st.Async)
	}
}

func TestSpecPatchRemovesUnsetFields(t *testing.T) {
	m := baseFunction()
	spec, _, diags := specFromModel(context.Background(), &m)
	if diags.HasError() {
		t.Fatal(diags)
	}
	p := specPatch(&spec, false)["spec"].(map[string]any)
	for _, k := range []string{"env", "cpu", "scale", "async"} {
		if v, ok := p[k]; !ok || v != nil {
			t.Errorf("%s = %v (present %v), want an explicit null", k, v, ok)
		}
	}
	// Within scale, a bound left out is an explicit null too.
	m.Scale = scaleObj(types.Int64Value(1), types.Int64Value(2), types.Int64Null(), types.Int64Null())
	spec, _, _ = specFromModel(context.Background(), &m)
	sc := specPatch(&spec, false)["spec"].(map[string]any)["scale"].(map[string]any)
	for _, k := range []string{"target", "containerConcurrency"} {
		if v, ok := sc[k]; !ok || v != nil {
			t.Errorf("scale.%s = %v (present %v), want an explicit null", k, v, ok)
		}
	}
	if _, ok := p["source"]; ok {
		t.Error("the source is the upload API's to set unless it is an image")
	}
	spec.Source.Image = "ghcr.io/acme/app:1"
	src := specPatch(&spec, true)["spec"].(map[string]any)["source"].(map[string]any)
	if src["image"] != "ghcr.io/acme/app:1" || src["archive"] != nil || src["inline"] != nil {
		t.Errorf("source patch = %v", src)
	}
}

func TestJSONStateKeepsFormatting(t *testing.T) {
	prior := types.StringValue(`{ "b": 1, "a": [1, 2] }`)
	got := jsonState(prior, &apiextensionsv1.JSON{Raw: []byte(`{"a":[1,2],"b":1}`)})
	if got.ValueString() != prior.ValueString() {
		t.Errorf("same document must keep the user's formatting, got %s", got)
	}
	got = jsonState(prior, &apiextensionsv1.JSON{Raw: []byte(`{"a": [1], "b": 1}`)})
	if got.ValueString() != `{"a":[1],"b":1}` {
		t.Errorf("a changed document must be the server's, got %s", got)
	}
	if !jsonState(prior, nil).IsNull() {
		t.Error("no payload must be null")
	}
}

func TestFieldMapper(t *testing.T) {
	m := functionMapper(nil)
	for api, want := range map[string]string{
		"spec.memoryMB":                   "memory_mb",
		"spec.scale.containerConcurrency": "scale.container_concurrency",
		"spec.scale":                      "scale",
		"spec.async.maxEventAgeSeconds":   "async.max_event_age_sec",
		"spec.source.image":               "image",
		"metadata.name":                   "name",
		"spec.traffic":                    "traffic",
		"spec.traffic[2].revisionName":    "traffic[2].revision",
		"spec.traffic[0].latestRevision":  "traffic[0].latest",
		"spec.traffic[1]":                 "traffic[1]",
	} {
		p, ok := m.attr(api)
		if !ok || p.String() != want {
			t.Errorf("%s -> %v (%v), want %s", api, p, ok, want)
		}
	}
	if _, ok := m.attr("spec.unknownField"); ok {
		t.Error("an unknown field must not map to an attribute")
	}
	if p, ok := triggerMapper.attr("spec.queue.maxRetries"); !ok || p.String() != "queue.max_retries" {
		t.Errorf("queue.maxRetries -> %v", p)
	}
}

func TestImportID(t *testing.T) {
	for _, id := range []string{"", "/", "a/", "/b", "a/b/c"} {
		if _, _, err := importID(id); err == nil {
			t.Errorf("import ID %q accepted", id)
		}
	}
	for id, want := range map[string][2]string{"team-a/hello": {"team-a", "hello"}, "hello": {"", "hello"}} {
		ns, name, err := importID(id)
		if err != nil || ns != want[0] || name != want[1] {
			t.Errorf("importID(%q) = %q %q %v, want %q %q", id, ns, name, err, want[0], want[1])
		}
	}
}

func writeFile(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// How a wait for a job's run ends decides what the apply reports: a
// failed run is an error; a wait that ends before the run does is a warning
// at create (an error would taint the job, and the next apply would run it
// again) and an error at update, and both say the next apply waits again.
func TestWaitOutcome(t *testing.T) {
	unfinished := errors.New(`run 3 of job ns/j did not finish within 3s (wait_timeout); it is "Running"`)
	for _, tc := range []struct {
		name     string
		err      error
		created  bool
		severity diag.Severity // 0: no diagnostic
		summary  string
	}{
		{"succeeded at create", nil, true, 0, ""},
		{"succeeded at update", nil, false, 0, ""},
		{"run failed at create", &runFailed{"run 3 of job ns/j failed: boom"}, true, diag.SeverityError, "Job run failed"},
		{"run failed at update", &runFailed{"run 3 of job ns/j failed: boom"}, false, diag.SeverityError, "Job run failed"},
		{"wait ended at create", unfinished, true, diag.SeverityWarning, "Job run not finished"},
		{"wait ended at update", unfinished, false, diag.SeverityError, "Job run not finished"},
		{"interrupted at create", context.Canceled, true, diag.SeverityWarning, "Job run not finished"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			diags := waitOutcome(tc.err, tc.created, 3)
			if tc.severity == 0 {
				if len(diags) != 0 {
					t.Fatalf("diagnostics %v, want none", diags)
				}
				return
			}
			if len(diags) != 1 || diags[0].Severity() != tc.severity || diags[0].Summary() != tc.summary {
				t.Fatalf("diagnostics %v, want one %v %q", diags, tc.severity, tc.summary)
			}
			if tc.summary == "Job run not finished" && !strings.Contains(diags[0].Detail(), "waits for run 3 again") {
				t.Errorf("detail %q does not say the next apply waits for the run", diags[0].Detail())
			}
		})
	}
}

// errorPaths are the attributes diags' errors name, sorted, each once; an
// error that names none fails t.
func errorPaths(t *testing.T, diags diag.Diagnostics) []string {
	t.Helper()
	var got []string
	for _, d := range diags.Errors() {
		wp, ok := d.(diag.DiagnosticWithPath)
		if !ok {
			t.Errorf("error without an attribute: %s: %s", d.Summary(), d.Detail())
			continue
		}
		got = append(got, wp.Path().String())
	}
	sort.Strings(got)
	return compact(got)
}

// The traffic list's state spells out each latest and percent as the plan
// does, whatever the server holds (written by Terraform, kubectl or the
// API), so neither import nor refresh shows a change of spelling; and the
// plan fills in a latest left out once the revision is known.
func TestTrafficStateAndPlan(t *testing.T) {
	var diags diag.Diagnostics
	server := []slessv1alpha1.TrafficTarget{
		{RevisionName: "hello-00001", Percent: ptr.To[int64](100)},
		{LatestRevision: ptr.To(true), Tag: "next"},
	}
	got := trafficState(server, &diags)
	rev, latest := toRev("hello-00001", 100, ""), toLatest(0, "next")
	rev.Latest, latest.Latest = types.BoolValue(false), types.BoolValue(true)
	if want := trafficList(rev, latest); !got.Equal(want) {
		t.Errorf("state %v, want %v", got, want)
	}
	if !trafficState(nil, &diags).IsNull() {
		t.Error("no traffic: the state's list must be null")
	}
	// What the state holds means to the server what it held.
	back := trafficSpec(context.Background(), got, &diags)
	if back[0].IsLatest() || back[0].PercentOf() != 100 || !back[1].IsLatest() || back[1].PercentOf() != 0 || back[1].Tag != "next" {
		t.Errorf("trafficSpec %+v", back)
	}

	unknownRev := toRev("", 50, "")
	unknownRev.Revision, unknownRev.Latest = types.StringUnknown(), types.BoolUnknown()
	named, follows := toRev("hello-00002", 25, "b"), toLatest(25, "c")
	named.Latest, follows.Latest = types.BoolUnknown(), types.BoolUnknown()
	planned := planTraffic(context.Background(), trafficList(unknownRev, named, follows), &diags)
	wantNamed, wantFollows := named, follows
	wantNamed.Latest, wantFollows.Latest = types.BoolValue(false), types.BoolValue(true)
	if want := trafficList(unknownRev, wantNamed, wantFollows); !planned.Equal(want) {
		t.Errorf("plan %v, want %v", planned, want)
	}
	if diags.HasError() {
		t.Fatal(diags)
	}
	if p := specPatch(&slessv1alpha1.FunctionSpec{}, false)["spec"].(map[string]any); p["traffic"] != nil {
		t.Errorf("no traffic must be a null in the patch, got %v", p["traffic"])
	}
}
