package v1alpha1

import (
	"bytes"
	"encoding/json"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MaxPayloadBytes is the largest payload, as compact JSON, that a cron
// trigger or a FunctionJob can hand its runs. A run gets it in the
// environment variable SLESS_PAYLOAD, and Linux refuses to start a process
// with an environment string ("NAME=value" and its NUL) over 128 KiB
// (MAX_ARG_STRLEN): the run's container would fail with "argument list too
// long" after its Job was made.
const MaxPayloadBytes = 128<<10 - len("SLESS_PAYLOAD=") - 1

// PayloadSize is the length of p as compact JSON, as a run gets it.
func PayloadSize(p *apiextensionsv1.JSON) int {
	if p == nil || len(p.Raw) == 0 {
		return 0
	}
	var b bytes.Buffer
	if err := json.Compact(&b, p.Raw); err != nil {
		return len(p.Raw)
	}
	return b.Len()
}

// PayloadTooLarge says why p cannot reach a run, or "" when it can.
func PayloadTooLarge(p *apiextensionsv1.JSON) string {
	n := PayloadSize(p)
	if n <= MaxPayloadBytes {
		return ""
	}
	return fmt.Sprintf("the payload is %d bytes as compact JSON, over the %d a run can get: runs get it in the environment variable SLESS_PAYLOAD, which Linux limits; pass a reference to the data (an object key, a URL) instead",
		n, MaxPayloadBytes)
}

// validatePayload refuses a payload no run could get. The CRD cannot
// measure a free-form JSON value, so kubectl apply lets one through and the
// controller reports it (PayloadTooLarge); the REST API refuses it here.
func validatePayload(path *field.Path, p *apiextensionsv1.JSON) field.ErrorList {
	if why := PayloadTooLarge(p); why != "" {
		return field.ErrorList{field.Invalid(path, fmt.Sprintf("%d bytes", PayloadSize(p)), why)}
	}
	return nil
}
