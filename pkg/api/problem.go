package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sless-dev/sless/pkg/adapter/s3"
	"github.com/sless-dev/sless/pkg/auth"
	"github.com/sless-dev/sless/pkg/problems"
	"github.com/sless-dev/sless/pkg/source"
)

// ProblemContentType is the media type of every error body (RFC 9457).
const ProblemContentType = problems.ContentType

// Problem is an RFC 9457 problem details body. Errors lists what is wrong
// with each field of the request, in the words of the shared validation.
type Problem struct {
	problems.Details

	retryAfter int
}

// FieldError is one field's fault.
type FieldError = problems.FieldError

func (p *Problem) Error() string { return fmt.Sprintf("%d %s: %s", p.Status, p.Title, p.Detail) }

func problem(status int, slug, title, format string, args ...any) *Problem {
	return &Problem{Details: problems.Details{Type: problems.TypeBase + slug, Title: title, Status: status, Detail: fmt.Sprintf(format, args...)}}
}

func (p *Problem) withRetry(seconds int) *Problem { p.retryAfter = seconds; return p }

// naming names the part of the request at fault (a field of the body, the
// body itself, a header), so every refused input is named in errors[].
func (p *Problem) naming(fieldName string, typ field.ErrorType, detail string) *Problem {
	p.Errors = append(p.Errors, FieldError{Field: fieldName, Detail: detail, Type: string(typ)})
	return p
}

// unsupportedMediaType is a 415 naming the Content-Type header.
func unsupportedMediaType(format string, args ...any) *Problem {
	p := problem(http.StatusUnsupportedMediaType, "unsupported-media-type", "Unsupported media type", format, args...)
	return p.naming("Content-Type", field.ErrorTypeNotSupported, p.Detail)
}

func badRequest(format string, args ...any) *Problem {
	return problem(http.StatusBadRequest, "bad-request", "Bad request", format, args...)
}

func notFound(format string, args ...any) *Problem {
	return problem(http.StatusNotFound, "not-found", "Not found", format, args...)
}

func conflict(format string, args ...any) *Problem {
	return problem(http.StatusConflict, "conflict", "Conflict", format, args...)
}

func preconditionFailed(format string, args ...any) *Problem {
	return problem(http.StatusPreconditionFailed, "precondition-failed", "Precondition failed", format, args...)
}

func tooLarge(format string, args ...any) *Problem {
	return problem(http.StatusRequestEntityTooLarge, "too-large", "Request body too large", format, args...)
}

func unavailable(seconds int, format string, args ...any) *Problem {
	return problem(http.StatusServiceUnavailable, "unavailable", "Service unavailable", format, args...).withRetry(seconds)
}

// invalid is a 400 carrying field errors from the shared validation.
func invalid(kind string, errs field.ErrorList) *Problem {
	p := problem(http.StatusBadRequest, "invalid", kind+" is invalid", "%s", errs.ToAggregate().Error())
	for _, e := range errs {
		p.Errors = append(p.Errors, FieldError{Field: e.Field, Detail: e.ErrorBody(), Type: string(e.Type)})
	}
	return p
}

// sourceProblem answers a refused archive: 413 for size limits (and bombs),
// 400 for malformed content.
func sourceProblem(fieldPath string, se *source.Error) *Problem {
	var p *Problem
	if se.IsSizeLimit() {
		p = tooLarge("%s", se.Error())
	} else {
		p = problem(http.StatusBadRequest, "invalid-source", "Source archive is invalid", "%s", se.Error())
	}
	p.Reason = se.Reason
	detail := se.Message
	if se.Path != "" {
		detail = se.Path + ": " + se.Message
	}
	p.Errors = []FieldError{{Field: fieldPath, Detail: detail, Type: se.Reason}}
	return p
}

// authProblem answers a failed authentication.
func authProblem(err error) *Problem {
	var ae *auth.Error
	if errors.As(err, &ae) {
		p := problem(http.StatusUnauthorized, "unauthorized", "Unauthorized", "%s", ae.Message)
		p.Reason = ae.Reason
		return p
	}
	return unavailable(5, "authentication is not available: %v", err)
}

// storeProblem turns an error of the object store into a problem. A store
// error the client caused is a 4xx; one of the store itself is a 503 when it
// may pass, else a 500.
func storeProblem(err error) *Problem {
	var st apierrors.APIStatus
	var status metav1.Status
	if errors.As(err, &st) {
		status = st.Status()
	}
	switch {
	case apierrors.IsNotFound(err):
		return notFound("%s", status.Message)
	case apierrors.IsAlreadyExists(err):
		return conflict("%s", status.Message)
	case apierrors.IsConflict(err):
		return conflict("%s", status.Message)
	case apierrors.IsInvalid(err):
		p := problem(http.StatusBadRequest, "invalid", "Invalid", "%s", status.Message)
		if status.Details != nil {
			for _, c := range status.Details.Causes {
				p.Errors = append(p.Errors, FieldError{Field: c.Field, Detail: c.Message, Type: string(c.Type)})
			}
		}
		return p
	case apierrors.IsBadRequest(err):
		return badRequest("%s", status.Message)
	case apierrors.IsResourceExpired(err), apierrors.IsGone(err):
		return problem(http.StatusGone, "cursor-expired", "List cursor expired", "the list cursor has expired: start the list again without a cursor")
	case apierrors.IsRequestEntityTooLargeError(err):
		return tooLarge("%s", status.Message)
	case apierrors.IsForbidden(err) && strings.Contains(status.Message, "being terminated"):
		return conflict("%s", status.Message).withRetry(5)
	case apierrors.IsTimeout(err), apierrors.IsServerTimeout(err), apierrors.IsTooManyRequests(err),
		apierrors.IsServiceUnavailable(err), apierrors.IsUnexpectedServerError(err):
		secs, ok := apierrors.SuggestsClientDelay(err)
		if !ok || secs <= 0 {
			secs = 1
		}
		return unavailable(secs, "the object store is busy: %s", status.Message)
	}
	if isConnectionError(err) {
		return unavailable(5, "the object store cannot be reached")
	}
	return problem(http.StatusInternalServerError, "internal", "Internal error", "the object store failed: %v", err)
}

// blobProblem turns an error of the blob store into a problem.
func blobProblem(err error) *Problem {
	if errors.Is(err, s3.ErrUnavailable) || isConnectionError(err) {
		return unavailable(10, "object storage cannot be reached; nothing was changed, try again")
	}
	return problem(http.StatusInternalServerError, "internal", "Internal error", "object storage failed: %v", err)
}

func isConnectionError(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "connection refused") || strings.Contains(msg, "no such host") ||
		strings.Contains(msg, "i/o timeout") || strings.Contains(msg, "connection reset")
}

// writeProblem sends p and stops the handler chain.
func writeProblem(c *gin.Context, p *Problem) {
	if p.Instance == "" {
		p.Instance = c.Request.URL.Path
	}
	if p.retryAfter > 0 {
		c.Header("Retry-After", strconv.Itoa(p.retryAfter))
	}
	if p.Status == http.StatusUnsupportedMediaType {
		// Say what would have been taken (RFC 5789 2.2; Accept-Post of the
		// W3C's Linked Data Platform for POST).
		switch c.Request.Method {
		case http.MethodPatch:
			c.Header("Accept-Patch", MergePatchContentType)
		case http.MethodPost:
			c.Header("Accept-Post", "application/json")
		}
	}
	b, err := json.Marshal(p)
	if err != nil {
		b = []byte(`{"type":"` + problems.TypeBase + `internal","title":"Internal error","status":500}`)
		p.Status = http.StatusInternalServerError
	}
	c.Abort()
	c.Data(p.Status, ProblemContentType, b)
}
