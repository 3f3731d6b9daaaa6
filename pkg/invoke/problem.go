package invoke

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// ErrorHeader is set on every response sless itself produced instead of the
// function: its value is a short reason (see the Reason constants). A
// response without it came from the function, whatever its status. The proxy
// removes the header from functions' responses so a function cannot pose as
// the platform.
const ErrorHeader = "X-Sless-Error"

// Reasons carried by ErrorHeader and by the "reason" member of the problem.
const (
	ReasonNotFound       = "FunctionNotFound"
	ReasonNotReady       = "FunctionNotReady"
	ReasonFailed         = "FunctionFailed"
	ReasonUnauthorized   = "Unauthorized"
	ReasonForbidden      = "Forbidden"
	ReasonBodyTooLarge   = "RequestBodyTooLarge"
	ReasonUnreachable    = "FunctionUnreachable"
	ReasonTimeout        = "FunctionTimeout"
	ReasonActivateFailed = "ActivationFailed"
	ReasonUnavailable    = "Unavailable"
	ReasonInvalid        = "Invalid"
)

// Problem is an RFC 9457 problem document, as every sless API error is.
type Problem struct {
	Type     string `json:"type,omitempty"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`
	// Reason is a machine-readable cause (one of the Reason constants).
	Reason string `json:"reason,omitempty"`
	// RequestID ties the problem to the call's X-Request-Id.
	RequestID string `json:"requestId,omitempty"`
	// Errors lists what is wrong with which input, for 400s.
	Errors []FieldError `json:"errors,omitempty"`
}

// FieldError is one invalid input. Type is the Kubernetes field error type
// (FieldValueInvalid, FieldValueDuplicate), as in the REST API's problems.
type FieldError struct {
	Field  string `json:"field"`
	Detail string `json:"detail"`
	Type   string `json:"type"`
}

// problemBase prefixes the type URI of the invocations listing's problems,
// which belong to the REST API and so read as its problems do.
const problemBase = "https://sless.dev/problems/"

func writeProblem(w http.ResponseWriter, p Problem) {
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	body, err := json.Marshal(p)
	if err != nil {
		body = []byte(`{"title":"Internal Server Error","status":500}`)
		p.Status = http.StatusInternalServerError
	}
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(body)+1))
	h.Set("Cache-Control", "no-store")
	h.Del("Content-Encoding")
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(body, '\n'))
}
