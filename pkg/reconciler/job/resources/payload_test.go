package resources

import (
	"os/exec"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// jsonString is a JSON string whose encoding is n bytes long.
func jsonString(n int) []byte { return []byte(`"` + strings.Repeat("a", n-2) + `"`) }

// A payload is refused exactly when the run's environment could not hold
// it, measured as the compact JSON the run gets.
func TestPayloadTooLarge(t *testing.T) {
	for _, tc := range []struct {
		name    string
		payload []byte
		refused bool
	}{
		{name: "none"},
		{name: "at the limit", payload: jsonString(slessv1alpha1.MaxPayloadBytes)},
		{name: "one byte over", payload: jsonString(slessv1alpha1.MaxPayloadBytes + 1), refused: true},
		{name: "1 MiB", payload: jsonString(1 << 20), refused: true},
		{name: "over only with its spaces", payload: []byte(`[` + strings.Repeat(" ", slessv1alpha1.MaxPayloadBytes) + `1]`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := &slessv1alpha1.FunctionJob{}
			if tc.payload != nil {
				j.Spec.Payload = &apiextensionsv1.JSON{Raw: tc.payload}
			}
			msg := slessv1alpha1.PayloadTooLarge(j.Spec.Payload)
			if (msg != "") != tc.refused {
				t.Fatalf("PayloadTooLarge = %q, want refused %v", msg, tc.refused)
			}
			if tc.refused && !strings.Contains(msg, "SLESS_PAYLOAD") {
				t.Errorf("message %q does not say why", msg)
			}
		})
	}
}

// The limit is the kernel's: a process starts with SLESS_PAYLOAD of
// slessv1alpha1.MaxPayloadBytes and not with one byte more.
func TestMaxPayloadBytesIsTheKernelsLimit(t *testing.T) {
	for _, tc := range []struct {
		n      int
		starts bool
	}{{slessv1alpha1.MaxPayloadBytes, true}, {slessv1alpha1.MaxPayloadBytes + 1, false}} {
		cmd := exec.Command("/bin/true")
		cmd.Env = []string{"SLESS_PAYLOAD=" + strings.Repeat("a", tc.n)}
		if err := cmd.Run(); (err == nil) != tc.starts {
			t.Errorf("%d bytes: started %v (%v), want %v", tc.n, err == nil, err, tc.starts)
		}
	}
}
