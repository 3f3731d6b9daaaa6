package tracing

import "go.opentelemetry.io/otel/attribute"

// Attribute keys of sless's own span attributes, beside the semantic
// conventions' (docs/observability.md lists each). Renaming one breaks
// users' queries and dashboards: add, do not rename.
const (
	Namespace = attribute.Key("sless.namespace")
	Function  = attribute.Key("sless.function")
	Revision  = attribute.Key("sless.revision")
	Trigger   = attribute.Key("sless.trigger")
	RequestID = attribute.Key("sless.request_id")
	// ColdStart is true on a call that waited for an instance to start.
	ColdStart = attribute.Key("sless.cold_start")
	// Status is the call's recorded status: the status sent, or 499 when
	// the caller went away first.
	Status = attribute.Key("sless.status")
	// Source says who answered: function or platform.
	Source = attribute.Key("sless.source")
	// ErrorReason is the X-Sless-Error reason of a call sless answered.
	ErrorReason = attribute.Key("sless.error_reason")
	// Attempt numbers an asynchronous call's or a delivery's attempts from 1.
	Attempt = attribute.Key("sless.attempt")
	// Generation is the Function's metadata.generation a build is for.
	Generation = attribute.Key("sless.generation")
	// SourceDigest is the digest of the source a build builds.
	SourceDigest = attribute.Key("sless.source_digest")
	// BuildRef names the PipelineRun (or local build) of a build span.
	BuildRef = attribute.Key("sless.build_ref")
	// Step names a build step.
	Step = attribute.Key("sless.step")
	// Kind is what a build is for: Function or SlessService.
	Kind = attribute.Key("sless.kind")
)
