package limits

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

func TestParseSiteRefusals(t *testing.T) {
	for _, c := range []struct {
		name, req, lim, max, want string
	}{
		{name: "not a pair", lim: "memory", want: `--lim: "memory" is not name=quantity`},
		{name: "no name", req: "=1", want: `--req: "=1" is not name=quantity`},
		{name: "not a quantity", max: "memory=lots", want: `--max: memory=lots: "lots" is not a quantity`},
		{name: "named twice", max: "cpu=1,cpu=2", want: "--max: cpu is named twice"},
		{name: "zero maximum", max: "memory=0", want: "--max: memory=0 must be above zero"},
		{name: "bad maximum name", max: "Memory=1Gi", want: `--max: limits[Memory]: Invalid value: "Memory": resource names are cpu, memory`},
		{name: "bad resource name", lim: "gpu=1", want: `--req and --lim: limits[gpu]: Invalid value: "gpu": resource names are cpu, memory`},
		{name: "memory limit too small", lim: "memory=10Mi", want: "a memory limit must be at least 64Mi"},
		{name: "request over limit", req: "cpu=2", lim: "cpu=1", want: "a request must not exceed its limit (1)"},
		{name: "extended request", req: "nvidia.com/gpu=1", want: "extended resources are set in limits"},
		{name: "negative", req: "cpu=-1", want: "resource quantities must not be negative"},
		{name: "default over maximum", lim: "memory=4Gi", max: "memory=2Gi", want: "--lim: memory=4Gi is over --max's 2Gi"},
		{name: "default request over maximum", req: "cpu=3", max: "cpu=2", want: "--req: cpu=3 is over --max's 2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseSite(Setting{"--req", c.req}, Setting{"--lim", c.lim}, Setting{"--max", c.max})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ParseSite(%q, %q, %q) = %v, want an error containing %q", c.req, c.lim, c.max, err, c.want)
			}
		})
	}
}

func TestParseSite(t *testing.T) {
	site, err := ParseSite(Setting{"r", " cpu=100m , memory=256Mi"}, Setting{"l", "memory=512Mi,"}, Setting{"m", "memory=2Gi,cpu=2,nvidia.com/gpu=1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := site.Defaults.Requests[corev1.ResourceCPU]; got.String() != "100m" {
		t.Errorf("default cpu request %s, want 100m", got.String())
	}
	if got := site.Defaults.Limits[corev1.ResourceMemory]; got.String() != "512Mi" {
		t.Errorf("default memory limit %s, want 512Mi", got.String())
	}
	var names []string
	for _, e := range site.Max {
		names = append(names, string(e.Name)+"="+e.Value)
	}
	if got := strings.Join(names, ","); got != "cpu=2,memory=2Gi,nvidia.com/gpu=1" {
		t.Errorf("maximums %s, want them sorted by name", got)
	}
	none, err := ParseSite(Setting{}, Setting{}, Setting{})
	if err != nil || none.Defaults != nil || none.Max != nil {
		t.Errorf("empty settings = %+v, %v; want no defaults and no maximums", none, err)
	}
}

func q(s string) resource.Quantity { return resource.MustParse(s) }

func TestCheck(t *testing.T) {
	site, err := ParseSite(Setting{}, Setting{}, Setting{"m", "memory=1Gi,cpu=2"})
	if err != nil {
		t.Fatal(err)
	}
	mb := func(n int32) *int32 { return &n }
	cpu := q("2500m")
	for _, c := range []struct {
		name, annotation string
		spec             slessv1alpha1.WorkloadSpec
		want             string
	}{
		{name: "nothing asked", spec: slessv1alpha1.WorkloadSpec{}},
		{name: "under the site's", spec: slessv1alpha1.WorkloadSpec{Resources: &slessv1alpha1.ResourceSpec{Limits: corev1.ResourceList{"memory": q("1Gi")}}}},
		{name: "limit over the site's",
			spec: slessv1alpha1.WorkloadSpec{Resources: &slessv1alpha1.ResourceSpec{Limits: corev1.ResourceList{"memory": q("4Gi")}}},
			want: "spec.resources.limits.memory 4Gi is over namespace team-a's maximum 1Gi"},
		{name: "the namespace's replaces the site's", annotation: "memory=8Gi",
			spec: slessv1alpha1.WorkloadSpec{Resources: &slessv1alpha1.ResourceSpec{Limits: corev1.ResourceList{"memory": q("4Gi")}}}},
		{name: "over the namespace's", annotation: "memory = 2Gi, nvidia.com/gpu=1",
			spec: slessv1alpha1.WorkloadSpec{Resources: &slessv1alpha1.ResourceSpec{Limits: corev1.ResourceList{"nvidia.com/gpu": q("2")}}},
			want: "spec.resources.limits.nvidia.com/gpu 2 is over namespace team-a's maximum 1"},
		{name: "no maximum for a resource", spec: slessv1alpha1.WorkloadSpec{Resources: &slessv1alpha1.ResourceSpec{Limits: corev1.ResourceList{"nvidia.com/gpu": q("8")}}}},
		{name: "request", spec: slessv1alpha1.WorkloadSpec{Resources: &slessv1alpha1.ResourceSpec{Requests: corev1.ResourceList{"cpu": q("3")}}},
			want: "spec.resources.requests.cpu 3 is over namespace team-a's maximum 2"},
		{name: "memoryMB", spec: slessv1alpha1.WorkloadSpec{MemoryMB: mb(2048)},
			want: "spec.memoryMB 2048Mi is over namespace team-a's maximum 1Gi"},
		{name: "cpu", spec: slessv1alpha1.WorkloadSpec{CPU: &cpu},
			want: "spec.cpu 2500m is over namespace team-a's maximum 2"},
		{name: "limits before requests, cpu before memory",
			spec: slessv1alpha1.WorkloadSpec{Resources: &slessv1alpha1.ResourceSpec{
				Requests: corev1.ResourceList{"cpu": q("3")}, Limits: corev1.ResourceList{"memory": q("4Gi"), "cpu": q("3")}}},
			want: "spec.resources.limits.cpu 3 is over namespace team-a's maximum 2"},
		{name: "the namespace's first", annotation: "memory=2Gi",
			spec: slessv1alpha1.WorkloadSpec{Resources: &slessv1alpha1.ResourceSpec{Limits: corev1.ResourceList{"memory": q("4Gi"), "cpu": q("3")}}},
			want: "spec.resources.limits.memory 4Gi is over namespace team-a's maximum 2Gi"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := site.For("team-a", c.annotation)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if e := m.Check(&c.spec); e != nil {
				got = e.Detail
			}
			if got != c.want {
				t.Fatalf("Check = %q, want %q", got, c.want)
			}
		})
	}
}

func TestForMalformed(t *testing.T) {
	for _, a := range []string{"memory", "memory=lots", "memory=1Gi,memory=2Gi", "=1", "memory=1Gi=2"} {
		_, err := Site{}.For("team-a", a)
		want := "namespace team-a's annotation sless.dev/max-resources is malformed: want name=quantity pairs separated by commas"
		if err == nil || err.Error() != want {
			t.Errorf("For(%q) = %v, want %q", a, err, want)
		}
	}
}

func TestApplies(t *testing.T) {
	a := &slessv1alpha1.FunctionSpec{WorkloadSpec: slessv1alpha1.WorkloadSpec{Runtime: "python3.12"}}
	b := a.DeepCopy()
	if !Applies(nil, a) {
		t.Error("a create is not held to the maximums")
	}
	if Applies(a, b) {
		t.Error("a write that keeps the spec is held to the maximums")
	}
	b.Entrypoint = "main.handler"
	if !Applies(a, b) {
		t.Error("a changed spec is not held to the maximums")
	}
}
