package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// checkPayloadNumbers refuses a payload number the object store cannot keep
// as sent. The apiserver (and local mode's store) hold JSON numbers as int64
// or float64: 12345678901234567890 would come back as 12345678901234567000
// and 0.1000000000000000055 as 0.1, changing the event a function is called
// with, and 1e400 does not fit at all (local mode answered it 500).
func checkPayloadNumbers(obj client.Object) field.ErrorList {
	var payload *apiextensionsv1.JSON
	switch o := obj.(type) {
	case *slessv1alpha1.Trigger:
		payload = o.Spec.Payload
	case *slessv1alpha1.FunctionJob:
		payload = o.Spec.Payload
	}
	if payload == nil || len(payload.Raw) == 0 {
		return nil
	}
	var doc any
	d := json.NewDecoder(bytes.NewReader(payload.Raw))
	d.UseNumber()
	if d.Decode(&doc) != nil {
		return nil // not JSON: the decoder has said so already
	}
	var errs field.ErrorList
	var walk func(v any, at *field.Path)
	walk = func(v any, at *field.Path) {
		switch t := v.(type) {
		case map[string]any:
			for k, e := range t {
				walk(e, at.Child(k))
			}
		case []any:
			for i, e := range t {
				walk(e, at.Index(i))
			}
		case json.Number:
			if msg := numberKept(string(t)); msg != "" {
				errs = append(errs, field.Invalid(at, string(t), msg))
			}
		}
	}
	walk(doc, field.NewPath("spec", "payload"))
	return errs
}

// numberKept says why a JSON number would not be stored as sent, or "".
func numberKept(s string) string {
	if _, err := strconv.ParseInt(s, 10, 64); err == nil {
		return ""
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return "out of the range a JSON number is stored in (float64); send it as a string"
	}
	sent, ok1 := new(big.Rat).SetString(s)
	kept, ok2 := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
	if !ok1 || !ok2 || sent.Cmp(kept) != 0 {
		return fmt.Sprintf("would be stored as %s (JSON numbers are kept as int64 or float64); send it as a string to keep every digit", strconv.FormatFloat(f, 'g', -1, 64))
	}
	return ""
}
