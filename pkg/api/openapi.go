package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"

	"github.com/gin-gonic/gin"
)

// operation is one method on one path of the OpenAPI document. The list
// below is written by hand, apart from the router; TestOpenAPIMatchesRoutes
// holds the two together.
type operation struct {
	method, path, id, summary string
	// kind of the resource in the body and answer, "" for none.
	kind string
	// body: "object", "patch", "zip" or "".
	body string
	// ok is the success status and its schema reference ("" for no body).
	ok       int
	okSchema string
	// errs are the problem statuses the operation answers with.
	errs []int
	// public operations take no bearer token.
	public bool
	// text answers plain text (health endpoints).
	text bool
}

var commonErrs = []int{400, 401, 403, 404, 503}

func operations() []operation {
	ops := []operation{
		{method: "GET", path: "/healthz", id: "healthz", summary: "Liveness", ok: 200, public: true, text: true},
		{method: "GET", path: "/readyz", id: "readyz", summary: "Readiness", ok: 200, errs: []int{503}, public: true, text: true},
		{method: "GET", path: "/metrics", id: "metrics", summary: "Prometheus metrics", ok: 200, public: true, text: true},
		{method: "GET", path: "/openapi.json", id: "openapi", summary: "This document", ok: 200, okSchema: "object", public: true},
		{method: "GET", path: "/v1/whoami", id: "whoami", summary: "The caller's identity and tenant namespace", ok: 200, okSchema: "Identity", errs: []int{401, 503}},
	}
	for _, k := range allKinds {
		col := "/v1/namespaces/{ns}/" + k.plural
		item := col + "/{name}"
		ops = append(ops,
			operation{method: "GET", path: col, id: "list" + k.kind, summary: "List " + k.plural + " (keyset-paginated: limit, cursor; filtered by labelSelector)", kind: k.kind, ok: 200, okSchema: k.kind + "List", errs: []int{400, 401, 403, 410, 503}},
			operation{method: "POST", path: col, id: "create" + k.kind, summary: "Create a " + k.kind, kind: k.kind, body: "object", ok: 201, okSchema: k.kind, errs: []int{400, 401, 403, 404, 408, 409, 413, 415, 503}},
			operation{method: "GET", path: item, id: "get" + k.kind, summary: "Read a " + k.kind, kind: k.kind, ok: 200, okSchema: k.kind, errs: commonErrs},
			operation{method: "PUT", path: item, id: "replace" + k.kind, summary: "Replace a " + k.kind + "'s spec, labels and annotations (If-Match honoured)", kind: k.kind, body: "object", ok: 200, okSchema: k.kind, errs: []int{400, 401, 403, 404, 408, 409, 412, 413, 415, 503}},
			operation{method: "PATCH", path: item, id: "patch" + k.kind, summary: "Change a " + k.kind + " with a JSON merge patch (If-Match honoured)", kind: k.kind, body: "patch", ok: 200, okSchema: k.kind, errs: []int{400, 401, 403, 404, 408, 409, 412, 413, 415, 503}},
			operation{method: "DELETE", path: item, id: "delete" + k.kind, summary: "Delete a " + k.kind + ": 204 when gone, 202 while finalizers run", kind: k.kind, ok: 204, errs: []int{400, 401, 403, 404, 412, 503}},
		)
	}
	for _, k := range allKinds {
		if k.built == nil {
			continue
		}
		item := "/v1/namespaces/{ns}/" + k.plural + "/{name}"
		name := strings.TrimPrefix(k.kind, "Sless")
		ops = append(ops,
			operation{method: "PUT", path: item + "/source", id: "put" + name + "Source", summary: "Upload the " + k.kind + "'s code as a zip (raw or multipart); sets spec.source.archive. 503 with Retry-After when the server's uploads in progress are at their bound", body: "zip", ok: 200, okSchema: "UploadResult", errs: []int{400, 401, 403, 408, 409, 412, 413, 415, 503}},
			operation{method: "GET", path: item + "/source", id: "get" + name + "Source", summary: "Download the " + k.kind + "'s uploaded zip", ok: 200, okSchema: "zip", errs: commonErrs},
		)
	}
	fn := "/v1/namespaces/{ns}/functions/{name}"
	svc := "/v1/namespaces/{ns}/services/{name}"
	ops = append(ops,
		operation{method: "GET", path: fn + "/logs", id: "getFunctionLogs", summary: "The output of the Function's instances as text, one line each; with follow=true a stream that stays open until the client leaves; 501 when the server reads no logs", ok: 200, text: true, errs: []int{400, 401, 403, 404, 501, 503}},
		operation{method: "GET", path: fn + "/builds/{build}/logs", id: "getBuildLogs", summary: "The output of one of the Function's builds (build: status.buildRef, or latest), one line each; following a build ends when it does", ok: 200, text: true, errs: []int{400, 401, 403, 404, 501, 503}},
		operation{method: "GET", path: svc + "/logs", id: "getServiceLogs", summary: "The output of the SlessService's instances as text, one line each; with follow=true a stream that stays open until the client leaves; 501 when the server reads no logs", ok: 200, text: true, errs: []int{400, 401, 403, 404, 501, 503}},
		operation{method: "GET", path: svc + "/builds/{build}/logs", id: "getServiceBuildLogs", summary: "The output of one of the SlessService's builds (build: status.buildRef, or latest), one line each; following a build ends when it does", ok: 200, text: true, errs: []int{400, 401, 403, 404, 501, 503}},
		operation{method: "GET", path: fn + "/revisions", id: "listRevisions", summary: "The Function's revisions, newest first: name, created, sourceDigest, image, ready (else reason and message), the percent of the calls status.traffic gives it, whether the latest-revision target follows it, and its tags with their URLs; 501 when the server lists none", ok: 200, okSchema: "object", errs: []int{401, 403, 404, 501, 503}},
		operation{method: "GET", path: svc + "/revisions", id: "listServiceRevisions", summary: "The SlessService's revisions, as listRevisions tells a Function's", ok: 200, okSchema: "object", errs: []int{401, 403, 404, 501, 503}},
		operation{method: "GET", path: svc + "/invocations", id: "listServiceInvocations", summary: "The SlessService's invocation records (trigger service unless the query names another), newest first (keyset-paginated); 501 when the server keeps none", ok: 200, okSchema: "object", errs: []int{400, 401, 403, 404, 501, 503}},
		operation{method: "GET", path: fn + "/invocations", id: "listInvocations", summary: "The Function's invocation records, newest first (keyset-paginated); 501 when the server keeps none (started without a database). With mode=async, its asynchronous calls instead (state filters them: queued, running, succeeded, failed, dead-lettered)", ok: 200, okSchema: "object", errs: []int{400, 401, 403, 404, 501, 503}},
		operation{method: "GET", path: fn + "/invocations/stats", id: "getInvocationStats", summary: "What charts are drawn from: per step of a window of the Function's invocation history, its calls, errors (5xx), cold starts and duration percentiles (p50, p95, p99, interpolated as PostgreSQL's percentile_cont); every step, those without calls too (no percentiles then); 501 when the server keeps no records", ok: 200, okSchema: "InvocationStats", errs: []int{400, 401, 403, 404, 501, 503}},
		operation{method: "GET", path: svc + "/invocations/stats", id: "getServiceInvocationStats", summary: "The SlessService's invocation stats, as getInvocationStats tells a Function's", ok: 200, okSchema: "InvocationStats", errs: []int{400, 401, 403, 404, 501, 503}},
		operation{method: "GET", path: fn + "/invocations/{id}", id: "getInvocation", summary: "The record of an asynchronous call (Prefer: respond-async): state, attempts, last error and the function's response; wait (up to 60s) holds the answer until the call ends; 501 when the server keeps no asynchronous calls", ok: 200, okSchema: "object", errs: []int{400, 401, 403, 404, 501, 503}},
		operation{method: "GET", path: "/v1/namespaces/{ns}/callbacks/signing-key", id: "getCallbackSigningKey", summary: "The key the namespace's callbacks (X-Callback-Url, spec.async.onSuccess/onFailure) are signed with: Sless-Signature: t=<unix>,v1=<hex HMAC-SHA256 of key over t.body>; made on first use; 501 when the server posts no callbacks", ok: 200, okSchema: "object", errs: []int{400, 401, 403, 501, 503}},
	)
	ops = append(ops,
		operation{method: "POST", path: "/v1/namespaces/{ns}/devices/{name}/rotate", id: "rotateDevice", summary: "Give an IoTDevice a new password, answered this once (its Secret keeps only the hash); its connections made with the old one are closed; 501 when the server keeps no Secrets", kind: "IoTDevice", ok: 200, okSchema: "DeviceCredentials", errs: []int{400, 401, 403, 404, 409, 501, 503}},
	)
	sec := "/v1/namespaces/{ns}/secrets"
	ops = append(ops,
		operation{method: "GET", path: sec, id: "listSecret", summary: "List the secrets made through this API: names, keys, versions, never values (keyset-paginated: limit, cursor)", kind: "Secret", ok: 200, okSchema: "SecretList", errs: []int{400, 401, 403, 410, 501, 503}},
		operation{method: "POST", path: sec, id: "createSecret", summary: "Create a secret from stringData (text) and data (base64) values", kind: "Secret", body: "secret", ok: 201, okSchema: "SecretInfo", errs: []int{400, 401, 403, 404, 408, 409, 413, 415, 501, 503}},
		operation{method: "GET", path: sec + "/{name}", id: "getSecret", summary: "Read a secret's keys and version (never its values)", kind: "Secret", ok: 200, okSchema: "SecretInfo", errs: []int{400, 401, 403, 404, 501, 503}},
		operation{method: "PUT", path: sec + "/{name}", id: "rotateSecret", summary: "Rotate: replace every value (If-Match honoured); functions referring to it roll a new revision", kind: "Secret", body: "secret", ok: 200, okSchema: "SecretInfo", errs: []int{400, 401, 403, 404, 408, 409, 412, 413, 415, 501, 503}},
		operation{method: "PATCH", path: sec + "/{name}", id: "patchSecret", summary: "Set some values and remove others (null) with a JSON merge patch of stringData and data (If-Match honoured)", kind: "Secret", body: "secretPatch", ok: 200, okSchema: "SecretInfo", errs: []int{400, 401, 403, 404, 408, 409, 412, 413, 415, 501, 503}},
		operation{method: "DELETE", path: sec + "/{name}", id: "deleteSecret", summary: "Delete a secret", kind: "Secret", ok: 204, errs: []int{400, 401, 403, 404, 412, 501, 503}},
	)
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"} {
		ops = append(ops,
			operation{method: m, path: "/fn/{ns}/{name}", id: "invoke" + strings.ToLower(m), summary: "Invoke a function (public or with a bearer token, per its triggers)", ok: 200, okSchema: "any", errs: []int{400, 401, 403, 404, 408, 413, 502, 503, 504}, public: true},
			operation{method: m, path: "/fn/{ns}/{name}/{path}", id: "invokePath" + strings.ToLower(m), summary: "Invoke a function with a sub-path", ok: 200, okSchema: "any", errs: []int{400, 401, 403, 404, 408, 413, 502, 503, 504}, public: true},
			operation{method: m, path: "/svc/{ns}/{name}", id: "callService" + strings.ToLower(m), summary: "Call a SlessService at its root (a bearer token of its namespace); 501 when the server runs no services", ok: 200, okSchema: "any", errs: []int{400, 401, 403, 404, 408, 413, 501, 502, 503, 504}, public: true},
			operation{method: m, path: "/svc/{ns}/{name}/{path}", id: "callServicePath" + strings.ToLower(m), summary: "Call a SlessService; it sees /{path} and the query unchanged", ok: 200, okSchema: "any", errs: []int{400, 401, 403, 404, 408, 413, 501, 502, 503, 504}, public: true},
		)
	}
	return ops
}

var (
	openapiOnce sync.Once
	openapiDoc  []byte
)

// OpenAPI is the OpenAPI 3.0 document of the API.
func OpenAPI() []byte {
	openapiOnce.Do(func() {
		b, err := json.Marshal(buildOpenAPI())
		if err != nil {
			panic(err)
		}
		openapiDoc = b
	})
	return openapiDoc
}

func (s *Server) openapi(c *gin.Context) { c.Data(http.StatusOK, "application/json", OpenAPI()) }

type obj = map[string]any

func ref(name string) obj { return obj{"$ref": "#/components/schemas/" + name} }

func buildOpenAPI() obj {
	paths := obj{}
	for _, op := range operations() {
		item, _ := paths[op.path].(obj)
		if item == nil {
			item = obj{}
			paths[op.path] = item
		}
		o := obj{"operationId": op.id, "summary": op.summary}
		var params []any
		for _, p := range []string{"ns", "name", "build", "id", "path"} {
			if strings.Contains(op.path, "{"+p+"}") {
				params = append(params, obj{"name": p, "in": "path", "required": true, "schema": obj{"type": "string"}})
			}
		}
		if strings.HasSuffix(op.id, "List") || strings.HasPrefix(op.id, "list") {
			params = append(params,
				obj{"name": "limit", "in": "query", "schema": obj{"type": "integer", "minimum": 1, "maximum": maxListLimit, "default": defaultListLimit}},
				obj{"name": "cursor", "in": "query", "description": "The next value of the previous page.", "schema": obj{"type": "string"}})
		}
		if strings.HasPrefix(op.id, "list") && op.kind != "" && op.kind != "Secret" {
			params = append(params, obj{"name": "labelSelector", "in": "query",
				"description": "Only objects whose labels match, in Kubernetes label selector syntax: `app=web,tier!=db`, `env in (a,b)`, `!canary`. Pass the same selector with each cursor. A selector that does not parse is a 400.",
				"schema":      obj{"type": "string"}, "example": "app=web,tier!=db"})
		}
		if op.id == "putFunctionSource" {
			params = append(params,
				obj{"name": "runtime", "in": "query", "schema": obj{"type": "string"},
					"description": "Sets spec.runtime together with the code (for an existing Function); the code is checked and built for it."},
				obj{"name": "entrypoint", "in": "query", "schema": obj{"type": "string"},
					"description": "Sets spec.entrypoint together with the code (for an existing Function), for code whose handler moved."})
		}
		if op.id == "getFunctionLogs" || op.id == "getBuildLogs" {
			params = append(params,
				obj{"name": "follow", "in": "query", "schema": obj{"type": "boolean", "default": false},
					"description": "Keep the answer open and send lines as they are written, until the client leaves (for a build: until it ends)."},
				obj{"name": "since", "in": "query", "schema": obj{"type": "string"}, "example": "10m",
					"description": "Only lines written since: a duration back from now (10m, 1h30m) or an RFC 3339 time."},
				obj{"name": "tail", "in": "query", "schema": obj{"type": "integer", "minimum": 0},
					"description": "Only the last lines (of those the other parameters select) written before the request."},
				obj{"name": "timestamps", "in": "query", "schema": obj{"type": "boolean", "default": false},
					"description": "Start each line with the RFC 3339 time it was written and a space (- when unknown)."})
			if op.id == "getFunctionLogs" {
				params = append(params, obj{"name": "invocation", "in": "query", "schema": obj{"type": "string"},
					"description": "Only lines the runtime tagged with this request id (the X-Request-Id of the call, the requestId of its invocation record)."})
			}
		}
		if op.id == "listInvocations" {
			params = append(params,
				obj{"name": "mode", "in": "query", "schema": obj{"type": "string", "enum": []string{"async"}},
					"description": "async lists the Function's asynchronous calls (newest first, limit only) instead of its invocation records."},
				obj{"name": "state", "in": "query", "schema": obj{"type": "string", "enum": []string{"queued", "running", "succeeded", "failed", "dead-lettered"}},
					"description": "With mode=async, only calls in this state."})
		}
		if op.id == "getInvocationStats" || op.id == "getServiceInvocationStats" {
			params = append(params,
				obj{"name": "window", "in": "query", "schema": obj{"type": "string", "default": "1h"}, "example": "24h",
					"description": "How far back: a whole number and s, m, h or d (15m, 24h, 7d) or a Go duration (1h30m); 1m to 31d."},
				obj{"name": "step", "in": "query", "schema": obj{"type": "string"}, "example": "15m",
					"description": "The width of each point: 1s or more, whole seconds, dividing the window into at most 1440 steps. Default: the first of 1s, 10s, 1m, 5m, 15m, 1h, 2h, 6h, 12h, 1d giving at most 100 steps (1h: 1m, 24h: 15m, 7d: 2h)."},
				obj{"name": "until", "in": "query", "schema": obj{"type": "string", "format": "date-time"},
					"description": "The window's end (RFC 3339, default now), rounded up to a whole step since the Unix epoch so steps stay put between calls."})
		}
		if op.id == "getInvocation" {
			params = append(params, obj{"name": "wait", "in": "query", "schema": obj{"type": "string"}, "example": "30s",
				"description": "Hold the answer until the call reaches a final state or this long passes (a duration or seconds, at most 60s)."})
		}
		if op.method == "PUT" || op.method == "PATCH" || op.method == "DELETE" {
			if !op.public {
				params = append(params,
					obj{"name": "If-Match", "in": "header", "description": "The ETag (resourceVersion) the change applies to; 412 when stale.", "schema": obj{"type": "string"}},
					obj{"name": "If-None-Match", "in": "header", "description": "412 when it names the current ETag (resourceVersion) or is * and the object exists.", "schema": obj{"type": "string"}})
			}
		}
		conditionalGet := op.method == "GET" && (op.id == "getFunctionSource" || op.id == "getSecret" || (op.kind != "" && op.okSchema == op.kind))
		if conditionalGet {
			params = append(params, obj{"name": "If-None-Match", "in": "header", "description": "304 without a body when it names the current ETag.", "schema": obj{"type": "string"}})
		}
		if params != nil {
			o["parameters"] = params
		}
		switch op.body {
		case "object":
			o["requestBody"] = obj{"required": true, "content": obj{"application/json": obj{"schema": ref(op.kind)}}}
		case "secret":
			o["requestBody"] = obj{"required": true, "content": obj{"application/json": obj{"schema": ref("SecretInput")}}}
		case "secretPatch":
			o["requestBody"] = obj{"required": true, "content": obj{MergePatchContentType: obj{"schema": ref("SecretPatch")}}}
		case "patch":
			o["requestBody"] = obj{"required": true, "content": obj{MergePatchContentType: obj{"schema": obj{"type": "object"}}}}
		case "zip":
			o["requestBody"] = obj{"required": true, "content": obj{
				"application/zip":     obj{"schema": obj{"type": "string", "format": "binary"}},
				"multipart/form-data": obj{"schema": obj{"type": "object", "properties": obj{"file": obj{"type": "string", "format": "binary"}}}},
			}}
		}
		responses := obj{}
		okResp := obj{"description": http.StatusText(op.ok)}
		switch {
		case op.text:
			okResp["content"] = obj{"text/plain": obj{"schema": obj{"type": "string"}}}
		case op.okSchema == "zip":
			okResp["content"] = obj{"application/zip": obj{"schema": obj{"type": "string", "format": "binary"}}}
		case op.okSchema == "any":
			okResp["content"] = obj{"*/*": obj{"schema": obj{}}}
		case op.okSchema == "object":
			okResp["content"] = obj{"application/json": obj{"schema": obj{"type": "object"}}}
		case op.okSchema != "":
			okResp["content"] = obj{"application/json": obj{"schema": ref(op.okSchema)}}
		}
		if op.kind != "" && op.ok != 204 && op.method != "GET" || (op.method == "GET" && op.kind != "" && (op.okSchema == op.kind || op.id == "getSecret")) {
			okResp["headers"] = obj{"ETag": obj{"description": "The resourceVersion, quoted.", "schema": obj{"type": "string"}}}
		}
		responses[itoa(op.ok)] = okResp
		if conditionalGet {
			responses["304"] = obj{"description": "Not modified: If-None-Match names the current ETag"}
		}
		if op.method == "DELETE" && op.kind != "" && op.kind != "Secret" {
			responses["202"] = obj{"description": "Deleting: finalizers still run", "content": obj{"application/json": obj{"schema": ref(op.kind)}}}
		}
		for _, code := range op.errs {
			resp := obj{"description": http.StatusText(code), "content": obj{ProblemContentType: obj{"schema": ref("Problem")}}}
			if code == http.StatusServiceUnavailable {
				resp["headers"] = obj{"Retry-After": obj{"description": "Seconds to wait before trying again.", "schema": obj{"type": "integer"}}}
			}
			responses[itoa(code)] = resp
		}
		o["responses"] = responses
		if op.public {
			o["security"] = []any{}
		}
		item[strings.ToLower(op.method)] = o
		if _, listed := item["head"]; op.method == "GET" && !listed {
			head := obj{}
			for k, v := range o {
				head[k] = v
			}
			head["operationId"] = op.id + "Head"
			head["summary"] = op.summary + " (HEAD: the same status and headers, no body)"
			item["head"] = head
		}
	}

	resource := func(kind string) obj {
		return obj{"type": "object", "description": "A sless.dev/v1alpha1 " + kind + " as in its CRD (config/crd): apiVersion and kind are optional on input, status is ignored on input, unknown fields are refused.",
			"required": []any{"metadata", "spec"},
			"properties": obj{
				"apiVersion": obj{"type": "string", "enum": []any{"sless.dev/v1alpha1"}},
				"kind":       obj{"type": "string", "enum": []any{kind}},
				"metadata":   ref("ObjectMeta"),
				"spec":       obj{"type": "object"},
				"status":     obj{"type": "object", "readOnly": true},
			}}
	}
	list := func(kind string) obj {
		return obj{"type": "object", "required": []any{"items"}, "properties": obj{
			"items": obj{"type": "array", "items": ref(kind)},
			"next":  obj{"type": "string", "description": "Pass as cursor for the next page; absent on the last page."},
		}}
	}
	schemas := obj{
		"ObjectMeta": obj{"type": "object", "properties": obj{
			"name":            obj{"type": "string"},
			"namespace":       obj{"type": "string"},
			"labels":          obj{"type": "object", "additionalProperties": obj{"type": "string"}},
			"annotations":     obj{"type": "object", "additionalProperties": obj{"type": "string"}},
			"resourceVersion": obj{"type": "string"},
			"uid":             obj{"type": "string", "readOnly": true},
			"generation":      obj{"type": "integer", "readOnly": true},
		}, "additionalProperties": true},
		"Problem": obj{"type": "object", "description": "RFC 9457 problem details.", "required": []any{"type", "title", "status"}, "properties": obj{
			"type":     obj{"type": "string", "format": "uri"},
			"title":    obj{"type": "string"},
			"status":   obj{"type": "integer"},
			"detail":   obj{"type": "string"},
			"instance": obj{"type": "string"},
			"reason":   obj{"type": "string"},
			"errors": obj{"type": "array", "items": obj{"type": "object", "required": []any{"field", "detail", "type"}, "properties": obj{
				"field": obj{"type": "string"}, "detail": obj{"type": "string"}, "type": obj{"type": "string"},
			}}},
		}},
		"InvocationStats": obj{"type": "object", "required": []any{"window", "step", "from", "until", "points", "total"}, "properties": obj{
			"window": obj{"type": "string", "example": "1h"},
			"step":   obj{"type": "string", "example": "1m"},
			"from":   obj{"type": "string", "format": "date-time"},
			"until":  obj{"type": "string", "format": "date-time"},
			"points": obj{"type": "array", "items": obj{"type": "object", "required": []any{"start", "calls", "errors", "coldStarts"}, "properties": obj{
				"start":      obj{"type": "string", "format": "date-time"},
				"calls":      obj{"type": "integer"},
				"errors":     obj{"type": "integer", "description": "Calls answered 5xx, by the function or the platform."},
				"coldStarts": obj{"type": "integer"},
				"p50Ms":      obj{"type": "number", "description": "Absent for a step without calls."},
				"p95Ms":      obj{"type": "number"},
				"p99Ms":      obj{"type": "number"},
			}}},
			"total": obj{"type": "object", "properties": obj{
				"calls": obj{"type": "integer"}, "errors": obj{"type": "integer"}, "coldStarts": obj{"type": "integer"},
			}},
		}},
		"Identity": obj{"type": "object", "properties": obj{
			"subject": obj{"type": "string"}, "namespace": obj{"type": "string"}, "admin": obj{"type": "boolean"},
		}},
		"Archive": obj{"type": "object", "required": []any{"bucket", "key", "sha256"}, "properties": obj{
			"bucket": obj{"type": "string"}, "key": obj{"type": "string"}, "sha256": obj{"type": "string", "pattern": "^[a-f0-9]{64}$"},
		}},
		"UploadResult": obj{"type": "object", "required": []any{"archive", "changed"}, "properties": obj{
			"archive":      ref("Archive"),
			"buildContext": obj{"type": "object", "properties": obj{"key": obj{"type": "string"}, "digest": obj{"type": "string"}}},
			"changed":      obj{"type": "boolean"},
			"function":     ref("Function"),
			"service":      ref("SlessService"),
			"message":      obj{"type": "string", "description": "What to do next when the object does not exist yet and nothing was deployed."},
		}},
	}
	values := func(desc string, nullable bool) obj {
		v := obj{"type": "string"}
		if nullable {
			v["nullable"] = true
		}
		return obj{"type": "object", "description": desc, "additionalProperties": v}
	}
	schemas["SecretInput"] = obj{"type": "object", "description": "A secret's values. Keys as a Kubernetes Secret's (letters, digits, -, _ and .), at least one, together at most 512 KiB; a key in one of stringData and data only. Unknown fields are refused.",
		"required": []any{"metadata"}, "properties": obj{
			"metadata": obj{"type": "object", "properties": obj{
				"name":            obj{"type": "string", "description": "A DNS-1123 subdomain; required on create, the path's on rotate."},
				"namespace":       obj{"type": "string", "description": "The path's, if given."},
				"resourceVersion": obj{"type": "string", "description": "On rotate: must be the current version (409 otherwise)."},
			}},
			"stringData": values("Values as text.", false),
			"data":       obj{"type": "object", "description": "Values as base64.", "additionalProperties": obj{"type": "string", "format": "byte"}},
		}}
	schemas["SecretPatch"] = obj{"type": "object", "description": "Keys to set; a null removes the key. Other keys keep their values.", "properties": obj{
		"metadata":   obj{"type": "object", "properties": obj{"resourceVersion": obj{"type": "string"}}},
		"stringData": values("Values as text; null removes.", true),
		"data":       obj{"type": "object", "additionalProperties": obj{"type": "string", "format": "byte", "nullable": true}},
	}}
	schemas["SecretInfo"] = obj{"type": "object", "description": "A secret as the API shows it: keys, never values.", "required": []any{"metadata", "type", "keys", "updatedAt"}, "properties": obj{
		"metadata":  ref("ObjectMeta"),
		"type":      obj{"type": "string", "enum": []any{"Opaque"}},
		"keys":      obj{"type": "array", "items": obj{"type": "string"}},
		"updatedAt": obj{"type": "string", "format": "date-time"},
	}}
	schemas["SecretList"] = list("SecretInfo")
	schemas["DeviceCredentials"] = obj{"type": "object", "description": "An IoTDevice's MQTT credentials; the password is shown this once.", "required": []any{"username", "password", "secret"}, "properties": obj{
		"username":      obj{"type": "string", "description": "{namespace}/{name}"},
		"password":      obj{"type": "string"},
		"secret":        obj{"type": "string", "description": "The Secret that keeps the password's hash."},
		"credentialsID": obj{"type": "string", "description": "Tells this password from the next (status.credentialsID once the controller saw it)."},
	}}
	for _, k := range allKinds {
		schemas[k.kind] = resource(k.kind)
		schemas[k.kind+"List"] = list(k.kind)
	}
	return obj{
		"openapi": "3.0.3",
		"info": obj{"title": "sless API", "version": "v1",
			"description": "Functions, Triggers, FunctionJobs, SlessServices (at /services) and IoTDevices (at /devices) of sless.dev/v1alpha1, and secrets, over HTTP. Errors are application/problem+json (RFC 9457)."},
		"paths":      paths,
		"components": obj{"schemas": schemas, "securitySchemes": obj{"bearer": obj{"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}}},
		"security":   []any{obj{"bearer": []any{}}},
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
