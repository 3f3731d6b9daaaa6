package invoke

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/sless-dev/sless/pkg/problems"
)

// ErrorHeader is set on every response sless itself produced instead of the
// function: its value is a short reason (see the Reason constants). A
// response without it came from the function, whatever its status. The proxy
// removes the header from functions' responses so a function cannot pose as
// the platform.
const ErrorHeader = "X-Sless-Error"

// Reasons carried by ErrorHeader and by the "reason" member of the problem.
// Calls of services at /svc/ get the same reasons as functions' calls.
const (
	ReasonNotFound         = "FunctionNotFound"
	ReasonNotReady         = "FunctionNotReady"
	ReasonFailed           = "FunctionFailed"
	ReasonUnauthorized     = "Unauthorized"
	ReasonForbidden        = "Forbidden"
	ReasonBodyTooLarge     = "RequestBodyTooLarge"
	ReasonBodyMalformed    = "RequestBodyMalformed"
	ReasonBodyIncomplete   = "RequestBodyIncomplete"
	ReasonBodyTimeout      = "RequestBodyTimeout"
	ReasonUnreachable      = "FunctionUnreachable"
	ReasonTimeout          = "FunctionTimeout"
	ReasonActivateFailed   = "ActivationFailed"
	ReasonUnavailable      = "Unavailable"
	ReasonInvalid          = "Invalid"
	ReasonMethodNotAllowed = "MethodNotAllowed"
	// ReasonNoServices answers /svc/ on a server that runs no services.
	ReasonNoServices = "ServicesNotServed"
)

// Problem is an RFC 9457 problem document, as every sless API error is.
// Reason is one of the Reason constants; RequestID ties it to the call's
// X-Request-Id.
type Problem = problems.Details

// The refusals a synchronous and an asynchronous call share, worded once.

func failedProblem(c *call) Problem {
	return Problem{Status: http.StatusServiceUnavailable, Reason: ReasonFailed,
		Detail: c.named() + " failed (" + c.target.Failed + ") and no revision of it serves; it serves again once its spec is fixed"}
}

func tooLargeProblem(limit int64) Problem {
	return Problem{Status: http.StatusRequestEntityTooLarge, Reason: ReasonBodyTooLarge,
		Detail: fmt.Sprintf("request body is larger than %d bytes", limit)}
}

func bodyIncompleteProblem() Problem {
	return Problem{Status: http.StatusBadRequest, Reason: ReasonBodyIncomplete,
		Detail: "the connection ended before the request body did"}
}

func bodyMalformedProblem(err error) Problem {
	return Problem{Status: http.StatusBadRequest, Reason: ReasonBodyMalformed,
		Detail: "the request body cannot be read: " + err.Error()}
}

func bodyTimeoutProblem(timeout time.Duration) Problem {
	return Problem{Status: http.StatusRequestTimeout, Reason: ReasonBodyTimeout,
		Detail: fmt.Sprintf("the request body did not arrive whole within the function's timeout (%s)", timeout)}
}

// FieldError is one invalid input, as in the REST API's problems.
type FieldError = problems.FieldError

// reasonTypes gives each reason the type URI the REST API uses for the
// same fault, so a client tells problems apart by type on every route.
var reasonTypes = map[string]string{
	ReasonNotFound:       problems.TypeBase + "not-found",
	ReasonNotReady:       problems.TypeBase + "not-ready",
	ReasonFailed:         problems.TypeBase + "function-failed",
	ReasonUnauthorized:   problems.TypeBase + "unauthorized",
	ReasonForbidden:      problems.TypeBase + "forbidden",
	ReasonBodyTooLarge:   problems.TypeBase + "too-large",
	ReasonBodyMalformed:  problems.TypeBase + "malformed",
	ReasonBodyIncomplete: problems.TypeBase + "body-incomplete",
	ReasonBodyTimeout:    problems.TypeBase + "body-timeout",
	ReasonUnreachable:    problems.TypeBase + "unreachable",
	ReasonTimeout:        problems.TypeBase + "function-timeout",
	ReasonActivateFailed: problems.TypeBase + "activation-failed",
	ReasonUnavailable:    problems.TypeBase + "unavailable",
	ReasonInvalid:        problems.TypeBase + "invalid",

	ReasonMethodNotAllowed: problems.TypeBase + "method-not-allowed",
	ReasonNoServices:       problems.TypeBase + "no-services",
	ReasonIdempotencyKey:   problems.TypeBase + "invalid",
	ReasonRequestIDTaken:   problems.TypeBase + "conflict",
	ReasonNoCallbacks:      problems.TypeBase + "not-implemented",
}

func writeProblem(w http.ResponseWriter, p Problem) {
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	if p.Type == "" {
		p.Type = reasonTypes[p.Reason]
	}
	body, err := json.Marshal(p)
	if err != nil {
		body = []byte(`{"title":"Internal Server Error","status":500}`)
		p.Status = http.StatusInternalServerError
	}
	h := w.Header()
	h.Set("Content-Type", problems.ContentType)
	h.Set("Content-Length", strconv.Itoa(len(body)+1))
	h.Set("Cache-Control", "no-store")
	h.Del("Content-Encoding")
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(body, '\n'))
}

// WriteProblem answers p as the proxy answers its own refusals; packages
// beside the proxy (the asynchronous calls' records) share its shape.
func WriteProblem(w http.ResponseWriter, p Problem) { writeProblem(w, p) }
