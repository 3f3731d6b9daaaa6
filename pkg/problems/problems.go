// Package problems holds the RFC 9457 problem document that every error sless
// answers over HTTP is, whether the REST API or the invoke proxy wrote it,
// and the check of a query string that both run before reading one.
package problems

import (
	"net/url"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ContentType is the media type of every problem body.
const ContentType = "application/problem+json"

// TypeBase prefixes the type URI of every problem: TypeBase + "not-found".
const TypeBase = "https://sless.dev/problems/"

// Details is the problem document.
type Details struct {
	Type     string `json:"type,omitempty"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`
	// Reason is a machine-readable cause, stable across releases.
	Reason string `json:"reason,omitempty"`
	// RequestID ties a proxy's problem to the call's X-Request-Id.
	RequestID string `json:"requestId,omitempty"`
	// Errors lists what is wrong with which input.
	Errors []FieldError `json:"errors,omitempty"`
}

// FieldError is one input's fault. Type is the Kubernetes field error type
// (FieldValueInvalid, FieldValueNotSupported, ...) or, for archives, the
// reason code of pkg/source (ZipBomb, PathTraversal, ...).
type FieldError struct {
	Field  string `json:"field"`
	Detail string `json:"detail"`
	Type   string `json:"type"`
}

// Unparsable names a query string that does not parse, err its error.
func Unparsable(err error) FieldError {
	return FieldError{Field: "query", Detail: err.Error(), Type: string(field.ErrorTypeInvalid)}
}

// Query parses a raw query string that may hold only the allowed
// parameters, each at most once. A pair that does not parse is the error;
// an unknown or repeated parameter is a FieldError, in the order of the
// names; a client is told which of them are wrong at once. Each would otherwise be dropped or half-read without a word, and a
// client would act on the answer to another request than the one it sent:
// a misspelt filter lists everything, ?dryRun=All writes, and a cursor with
// a stray % starts the list again. what names the reader in the message:
// "the invocations listing", or a route.
func Query(raw, what string, allowed []string) (url.Values, []FieldError, error) {
	values, err := url.ParseQuery(raw)
	if err != nil {
		return nil, nil, err
	}
	takes := what + " takes no query parameters"
	if len(allowed) > 0 {
		takes = what + " takes only " + strings.Join(allowed, ", ")
	}
	names := make([]string, 0, len(values))
	for name := range values {
		names = append(names, name)
	}
	slices.Sort(names)
	var errs []FieldError
	for _, name := range names {
		switch {
		case !slices.Contains(allowed, name):
			errs = append(errs, FieldError{Field: name, Type: string(field.ErrorTypeNotSupported),
				Detail: "unknown query parameter: " + takes})
		case len(values[name]) > 1:
			errs = append(errs, FieldError{Field: name, Type: string(field.ErrorTypeDuplicate), Detail: "give it once"})
		}
	}
	return values, errs, nil
}
