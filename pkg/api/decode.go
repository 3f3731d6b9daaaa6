package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
)

// malformed answers a body that does not decode into the resource: a syntax
// error at its byte offset, or a value of the wrong type (or one its type
// refuses, like a cpu quantity that does not parse) named by its field.
// decode is the decoder that failed; it is tried on parts of the body to find
// the field, since the JSON decoder names the Go field of a type error only,
// and no field at all for an error of a value's own UnmarshalJSON.
func malformed(body []byte, err error, decode func([]byte) error) *Problem {
	if ok, offset := sigsjson.SyntaxErrorOffset(err); ok {
		detail := fmt.Sprintf("%s (at byte %d)", strings.TrimPrefix(err.Error(), "json: "), offset)
		return problem(http.StatusBadRequest, "malformed", "Malformed JSON", "the body is not valid JSON: %s", detail).
			naming("body", field.ErrorTypeInvalid, detail)
	}
	p := problem(http.StatusBadRequest, "malformed", "Malformed JSON", "the body is not valid JSON for this resource: %s", describeDecodeError(err))
	if decode != nil {
		if where, werr := locateDecodeError(body, decode); where != nil {
			// The located value's own error: with several bad values the
			// whole body's error may be another's.
			p.Detail = where.String() + ": " + describeDecodeError(werr)
			return p.naming(where.String(), field.ErrorTypeTypeInvalid, describeDecodeError(werr))
		}
	}
	return p.naming("body", field.ErrorTypeTypeInvalid, describeDecodeError(err))
}

var typeErrorRE = regexp.MustCompile(`^json: cannot unmarshal (.+?) into Go (?:struct field \S+|value) of type (\S+)$`)

// describeDecodeError words a decode error for a client, who knows JSON
// types rather than Go's.
func describeDecodeError(err error) string {
	m := typeErrorRE.FindStringSubmatch(err.Error())
	if m == nil {
		return strings.TrimPrefix(err.Error(), "json: ")
	}
	return fmt.Sprintf("must be %s, not %s", jsonTypeOf(m[2]), m[1])
}

// jsonTypeOf names the JSON a Go type decodes from.
func jsonTypeOf(goType string) string {
	t := strings.TrimLeft(goType, "*")
	switch {
	case strings.HasPrefix(t, "[]"):
		return "an array"
	case strings.HasPrefix(t, "map["):
		return "an object"
	case t == "string":
		return "a string"
	case t == "bool":
		return "true or false"
	case strings.HasPrefix(t, "int"):
		return "a whole number (" + t + ")"
	case strings.HasPrefix(t, "uint"):
		return "a whole number of at least 0 (" + t + ")"
	case strings.HasPrefix(t, "float"):
		return "a number"
	}
	return "an object"
}

// locateDecodeError finds the innermost value of body that decode refuses
// on its own, by decoding documents that hold only the path to one value,
// and returns its path and decode's error for it. The path is nil when no
// single value is at fault (or body is not JSON).
func locateDecodeError(body []byte, decode func([]byte) error) (*field.Path, error) {
	var doc any
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber() // numbers as sent: 1e20 must not come back as an int that fits
	if d.Decode(&doc) != nil {
		return nil, nil
	}
	failure := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return nil
		}
		return decode(b)
	}
	fails := func(v any) bool { return failure(v) != nil }
	var walk func(v any, wrap func(any) any, at *field.Path) (*field.Path, error)
	walk = func(v any, wrap func(any) any, at *field.Path) (*field.Path, error) {
		switch t := v.(type) {
		case map[string]any:
			if fails(wrap(map[string]any{})) {
				break // an object where none belongs: the fault is here
			}
			keys := make([]string, 0, len(t))
			for k := range t {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				w := func(x any) any { return wrap(map[string]any{k: x}) }
				if fails(w(t[k])) {
					return walk(t[k], w, child(at, k))
				}
			}
		case []any:
			if fails(wrap([]any{})) {
				break
			}
			for i, e := range t {
				w := func(x any) any { return wrap([]any{x}) }
				if fails(w(e)) {
					return walk(e, w, indexed(at, i))
				}
			}
		}
		return at, failure(wrap(v))
	}
	return walk(doc, func(x any) any { return x }, nil)
}

// strictDecoder decodes into a fresh value of obj's type, for locateDecodeError.
func strictDecoder(obj any) func([]byte) error {
	t := reflect.TypeOf(obj).Elem()
	return func(b []byte) error {
		_, err := sigsjson.UnmarshalStrict(b, reflect.New(t).Interface(), sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
		return err
	}
}
