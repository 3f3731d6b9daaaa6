package names

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

func TestPipelineRun(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	long := strings.Repeat("f", 52)
	tests := []struct {
		name    string
		fn      string
		attempt int
		want    string
	}{
		{"first build", "hello", 0, "hello-0123456789"},
		{"after one cancelled run", "hello", 1, "hello-01234567-1"},
		{"after nine", "hello", 9, "hello-01234567-9"},
		{"after ten", "hello", 10, "hello-0123456-10"},
		{"after a thousand", "hello", 1000, "hello-01234-1000"},
		{"longest function name, first build", long, 0, long + "-0123456789"},
		{"longest function name, rebuilt", long, 12, long + "-0123456-12"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fn := &slessv1alpha1.Function{ObjectMeta: metav1.ObjectMeta{Name: tc.fn}}
			got := PipelineRun(fn, digest, tc.attempt)
			if got != tc.want {
				t.Errorf("PipelineRun = %q, want %q", got, tc.want)
			}
			// Tekton labels the build's pods with the run's name.
			if errs := validation.IsValidLabelValue(got); len(errs) > 0 || validation.IsDNS1123Label(got) != nil {
				t.Errorf("%q is not a DNS label: %v", got, errs)
			}
		})
	}
}
