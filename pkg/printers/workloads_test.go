package printers

import (
	"bytes"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

func TestServices(t *testing.T) {
	var out bytes.Buffer
	if err := Services(&out, "", "team", nil); err != nil || out.String() != "No services in namespace team.\n" {
		t.Fatalf("empty: %q %v", out.String(), err)
	}
	svcs := []slessv1alpha1.SlessService{{
		ObjectMeta: metav1.ObjectMeta{Name: "web", CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Hour))},
		Spec:       slessv1alpha1.SlessServiceSpec{WorkloadSpec: slessv1alpha1.WorkloadSpec{Runtime: "nodejs22"}},
		Status: slessv1alpha1.FunctionStatus{Phase: slessv1alpha1.FunctionPhaseReady, URL: "https://s.example/svc/team/web/",
			Conditions: []metav1.Condition{{Type: "Ready", Status: "True"}}},
	}, {
		ObjectMeta: metav1.ObjectMeta{Name: "idle", CreationTimestamp: metav1.NewTime(time.Now())},
		Spec:       slessv1alpha1.SlessServiceSpec{WorkloadSpec: slessv1alpha1.WorkloadSpec{Runtime: "python3.12"}, MinScale: ptr.To[int32](0)},
	}}
	out.Reset()
	if err := Services(&out, "", "team", svcs); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("table:\n%s", out.String())
	}
	for i, want := range [][]string{
		{"NAME", "RUNTIME", "PHASE", "READY", "MIN", "URL", "AGE"},
		{"web", "nodejs22", "Ready", "True", "1", "https://s.example/svc/team/web/", "60m"},
		{"idle", "python3.12", "Pending", "Unknown", "0"},
	} {
		f := strings.Fields(lines[i])
		for j, w := range want {
			if j >= len(f) || f[j] != w {
				t.Errorf("line %d: %q, want fields %v", i, lines[i], want)
				break
			}
		}
	}
	out.Reset()
	if err := Services(&out, "json", "team", nil); err != nil || !strings.Contains(out.String(), `"items": []`) {
		t.Errorf("json of none: %q %v", out.String(), err)
	}
}
