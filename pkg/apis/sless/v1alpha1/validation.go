package v1alpha1

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The patterns below are the CRD's, character for character; the agreement
// test in this package holds the two together.
var (
	functionNameRE = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)
	labelNameRE    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	entrypointRE   = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$-]*([./][A-Za-z_$][A-Za-z0-9_$-]*)*\.[A-Za-z_$][A-Za-z0-9_$]*$`)
	rebuildRE      = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._:+-]*[A-Za-z0-9])?$`)
	imageRE        = regexp.MustCompile(`^(?:(?:localhost(?::[0-9]+)?|(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))+(?::[0-9]+)?|(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]):[0-9]+)/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$`)
	envNameRE      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	sha256RE       = regexp.MustCompile(`^[a-f0-9]{64}$`)
	timeZoneRE     = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_+-]{0,13}(/[A-Za-z0-9_+][A-Za-z0-9_+-]{0,13})*$`)
	descriptorRE   = regexp.MustCompile(`^@(yearly|annually|monthly|weekly|daily|midnight|hourly)$`)
	callbackURLRE  = regexp.MustCompile(`^https?://[^/?#@\s]+([/?#]\S*)?$`)
)

var reservedEnv = map[string]bool{"PORT": true, "K_SERVICE": true, "K_CONFIGURATION": true, "K_REVISION": true}

// CanonicalRuntime maps a runtime name, alias or not, onto the runtime that
// builds it. ok is false for names sless does not know.
func CanonicalRuntime(name string) (canonical string, ok bool) {
	switch name {
	case RuntimePython312, RuntimePython311:
		return RuntimePython312, true
	case RuntimeNodeJS22, RuntimeNodeJS20:
		return RuntimeNodeJS22, true
	case RuntimeGo124:
		return RuntimeGo124, true
	}
	return "", false
}

// SupportedRuntimes lists every name spec.runtime accepts, canonical first.
func SupportedRuntimes() []string {
	return []string{RuntimePython312, RuntimeNodeJS22, RuntimeGo124, RuntimePython311, RuntimeNodeJS20}
}

// ValidateFunction checks a Function as the CRD schema does.
func ValidateFunction(fn *Function) field.ErrorList {
	errs := validateName(fn.Name, functionNameRE, MaxNameLength, "a DNS-1035 label")
	errs = append(errs, ValidateFunctionSpec(&fn.Spec, field.NewPath("spec"))...)
	return append(errs, ValidateTraffic(fn.Name, "function", fn.Spec.Traffic, field.NewPath("spec", "traffic"))...)
}

// ValidateFunctionSpec checks a FunctionSpec as the CRD schema does.
func ValidateFunctionSpec(s *FunctionSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Runtime == "" {
		errs = append(errs, field.Required(p.Child("runtime"), ""))
	} else if _, ok := CanonicalRuntime(s.Runtime); !ok {
		errs = append(errs, field.NotSupported(p.Child("runtime"), s.Runtime, SupportedRuntimes()))
	}

	hasImage := s.Source.Image != ""
	if s.Entrypoint == "" {
		if !hasImage {
			errs = append(errs, field.Required(p.Child("entrypoint"), "entrypoint is required when building from source"))
		}
	} else if !entrypointRE.MatchString(s.Entrypoint) || len(s.Entrypoint) > 253 {
		errs = append(errs, field.Invalid(p.Child("entrypoint"), s.Entrypoint, "must be module.function, e.g. main.handler"))
	}

	errs = append(errs, validateSource(&s.Source, p.Child("source"))...)
	errs = append(errs, validateEnv(s, p.Child("env"))...)
	errs = append(errs, inRange(p.Child("memoryMB"), s.MemoryMB, MinMemoryMB, MaxMemoryMB)...)
	errs = append(errs, validateResources(&s.WorkloadSpec, p)...)
	errs = append(errs, validatePlacement(&s.WorkloadSpec, p)...)
	errs = append(errs, validateVolumes(s.Volumes, p.Child("volumes"))...)
	errs = append(errs, validateNetwork(s.Network, p)...)
	errs = append(errs, inRange(p.Child("timeoutSeconds"), s.TimeoutSeconds, MinTimeoutSeconds, MaxTimeoutSeconds)...)
	errs = append(errs, inRange(p.Child("buildTimeoutSeconds"), s.BuildTimeoutSeconds, MinBuildTimeoutSeconds, MaxBuildTimeoutSeconds)...)
	switch {
	case s.Rebuild == "":
	case len(s.Rebuild) > MaxRebuildLength:
		errs = append(errs, field.TooLong(p.Child("rebuild"), s.Rebuild, MaxRebuildLength))
	case !rebuildRE.MatchString(s.Rebuild):
		errs = append(errs, field.Invalid(p.Child("rebuild"), s.Rebuild, "must be letters, digits and . _ : + -, starting and ending with a letter or digit, e.g. a timestamp"))
	case hasImage:
		errs = append(errs, field.Invalid(p.Child("rebuild"), s.Rebuild, "rebuild retries a build, and a function whose source is an image has none"))
	}
	if s.CPU != nil && s.CPU.Sign() <= 0 {
		errs = append(errs, field.Invalid(p.Child("cpu"), s.CPU.String(), "must be greater than zero"))
	}
	if sc := s.Scale; sc != nil {
		sp := p.Child("scale")
		errs = append(errs, inRange(sp.Child("min"), sc.Min, 0, 1000)...)
		errs = append(errs, inRange(sp.Child("max"), sc.Max, 1, 1000)...)
		errs = append(errs, inRange(sp.Child("target"), sc.Target, 1, 1000)...)
		if cc := sc.ContainerConcurrency; cc != nil && (*cc < 0 || *cc > MaxContainerConcurrency) {
			errs = append(errs, field.Invalid(sp.Child("containerConcurrency"), *cc, fmt.Sprintf("must be between 0 and %d", MaxContainerConcurrency)))
		}
		if sc.Min != nil && sc.Max != nil && *sc.Max < *sc.Min {
			errs = append(errs, field.Invalid(sp.Child("max"), *sc.Max, "max must be greater than or equal to min"))
		}
	}
	if a := s.Async; a != nil {
		ap := p.Child("async")
		errs = append(errs, inRange(ap.Child("concurrency"), a.Concurrency, 1, MaxAsyncConcurrency)...)
		errs = append(errs, inRange(ap.Child("maxRetries"), a.MaxRetries, 0, MaxAsyncMaxRetries)...)
		errs = append(errs, inRange(ap.Child("maxEventAgeSeconds"), a.MaxEventAgeSeconds, MinAsyncMaxEventAgeSeconds, MaxAsyncMaxEventAgeSeconds)...)
		for _, cb := range []struct{ name, url string }{{"onSuccess", a.OnSuccess}, {"onFailure", a.OnFailure}} {
			if cb.url == "" {
				continue
			}
			if msg := CheckCallbackURL(cb.url); msg != "" {
				errs = append(errs, field.Invalid(ap.Child(cb.name), cb.url, msg))
			}
		}
	}
	return errs
}

func validateSource(src *FunctionSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	n := 0
	if src.Inline != nil {
		n++
	}
	if src.Archive != nil {
		n++
	}
	if src.Image != "" {
		n++
	}
	if n != 1 {
		errs = append(errs, field.Invalid(p, summarizeSource(src), "exactly one of inline, archive or image must be set"))
	}
	if in := src.Inline; in != nil {
		fp := p.Child("inline", "files")
		switch {
		case len(in.Files) == 0:
			errs = append(errs, field.Required(fp, "at least one file"))
		case len(in.Files) > MaxInlineFiles:
			errs = append(errs, field.TooMany(fp, len(in.Files), MaxInlineFiles))
		}
		total := 0
		for name, content := range in.Files {
			total += len(name) + len(content)
			if msg := checkRelativePath(name); msg != "" {
				errs = append(errs, field.Invalid(fp, name, msg))
			}
		}
		if total > MaxInlineBytes {
			errs = append(errs, field.TooLong(fp, "", MaxInlineBytes))
		}
	}
	if a := src.Archive; a != nil {
		ap := p.Child("archive")
		if l := len(a.Bucket); l < 3 || l > 63 {
			errs = append(errs, field.Invalid(ap.Child("bucket"), a.Bucket, "must be 3 to 63 characters"))
		}
		if l := len(a.Key); l < 1 || l > 1024 {
			errs = append(errs, field.Invalid(ap.Child("key"), a.Key, "must be 1 to 1024 characters"))
		}
		if !sha256RE.MatchString(a.SHA256) {
			errs = append(errs, field.Invalid(ap.Child("sha256"), a.SHA256, "must be 64 lower-case hex digits"))
		}
	}
	if src.Image != "" && (!imageRE.MatchString(src.Image) || len(src.Image) > 512) {
		errs = append(errs, field.Invalid(p.Child("image"), src.Image, "must be an image reference [registry[:port]/]path[:tag][@sha256:digest] with a lower-case path, such as registry.example.com/team/app:1.0"))
	}
	return errs
}

func summarizeSource(src *FunctionSource) string {
	var set []string
	if src.Inline != nil {
		set = append(set, "inline")
	}
	if src.Archive != nil {
		set = append(set, "archive")
	}
	if src.Image != "" {
		set = append(set, "image")
	}
	if len(set) == 0 {
		return "none"
	}
	return strings.Join(set, ", ")
}

// checkRelativePath returns why name is not a clean relative file path, or "".
func checkRelativePath(name string) string {
	if len(name) > 255 {
		return "file names must be at most 255 characters"
	}
	if strings.HasPrefix(name, "/") || strings.Contains(name, `\`) {
		return "file names must be relative paths without '.', '..' or empty segments"
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "file names must be relative paths without '.', '..' or empty segments"
		}
	}
	if path.Clean(name) != name {
		return "file names must be relative paths without '.', '..' or empty segments"
	}
	return ""
}

func validateEnv(s *FunctionSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(s.Env) > MaxEnvVars {
		errs = append(errs, field.TooMany(p, len(s.Env), MaxEnvVars))
	}
	seen := map[string]bool{}
	for i, e := range s.Env {
		ep := p.Index(i)
		switch {
		case !envNameRE.MatchString(e.Name) || len(e.Name) > 128:
			errs = append(errs, field.Invalid(ep.Child("name"), e.Name, "env names must be C identifiers"))
		case reservedEnv[e.Name] || strings.HasPrefix(e.Name, "SLESS_"):
			errs = append(errs, field.Invalid(ep.Child("name"), e.Name, "env names PORT, K_SERVICE, K_CONFIGURATION, K_REVISION and SLESS_* are reserved"))
		case seen[e.Name]:
			errs = append(errs, field.Duplicate(ep, e.Name))
		}
		seen[e.Name] = true
		if len(e.Value) > 32768 {
			errs = append(errs, field.TooLong(ep.Child("value"), "", 32768))
		}
		if e.Value != "" && e.ValueFrom != nil {
			errs = append(errs, field.Invalid(ep, e.Name, "env entries take value or valueFrom, not both"))
		}
		if vf := e.ValueFrom; vf != nil {
			errs = append(errs, validateEnvSource(vf, ep.Child("valueFrom"))...)
		}
	}
	return errs
}

// validateEnvSource holds valueFrom to what a Pod's env takes and Knative
// passes: one source, and a named Secret or ConfigMap.
func validateEnvSource(vf *corev1.EnvVarSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	n := 0
	for _, set := range []bool{vf.SecretKeyRef != nil, vf.ConfigMapKeyRef != nil, vf.FieldRef != nil, vf.ResourceFieldRef != nil} {
		if set {
			n++
		}
	}
	if n != 1 || vf.FileKeyRef != nil {
		errs = append(errs, field.Invalid(p, "", "valueFrom takes exactly one of secretKeyRef, configMapKeyRef, fieldRef or resourceFieldRef"))
	}
	if r := vf.SecretKeyRef; r != nil && r.Name == "" {
		errs = append(errs, field.Required(p.Child("secretKeyRef", "name"), "secretKeyRef must name a Secret"))
	}
	if r := vf.ConfigMapKeyRef; r != nil && r.Name == "" {
		errs = append(errs, field.Required(p.Child("configMapKeyRef", "name"), "configMapKeyRef must name a ConfigMap"))
	}
	return errs
}

func inRange[T ~int32 | ~int64](p *field.Path, v *T, lo, hi T) field.ErrorList {
	if v == nil || (*v >= lo && *v <= hi) {
		return nil
	}
	return field.ErrorList{field.Invalid(p, *v, fmt.Sprintf("must be between %d and %d", lo, hi))}
}

func validateName(name string, re *regexp.Regexp, max int, what string) field.ErrorList {
	p := field.NewPath("metadata", "name")
	switch {
	case name == "":
		return field.ErrorList{field.Required(p, "")}
	case !re.MatchString(name):
		return field.ErrorList{field.Invalid(p, name, "name must be "+what)}
	case len(name) > max:
		return field.ErrorList{field.TooLong(p, name, max)}
	}
	return nil
}

// ValidateTrigger checks a Trigger as the CRD schema does, and also parses the
// time zone, which the schema can only shape-check.
func ValidateTrigger(t *Trigger) field.ErrorList {
	errs := validateName(t.Name, labelNameRE, MaxNameLength, "a DNS-1123 label")
	p := field.NewPath("spec")
	s := &t.Spec
	errs = append(errs, validateRef(p.Child("function"), s.Function)...)
	switch s.Type {
	case TriggerTypeHTTP, TriggerTypeCron, TriggerTypeQueue, TriggerTypeNATS, TriggerTypeMQTT, TriggerTypeKafka:
	case "":
		errs = append(errs, field.Required(p.Child("type"), ""))
	default:
		errs = append(errs, field.NotSupported(p.Child("type"), s.Type, []TriggerType{TriggerTypeHTTP, TriggerTypeCron, TriggerTypeQueue, TriggerTypeNATS, TriggerTypeMQTT, TriggerTypeKafka}))
	}
	// Checked whatever the type, as the schema does (it only matters to cron).
	if d := s.StartingDeadlineSeconds; d != nil && (*d < 1 || *d > 86400) {
		errs = append(errs, field.Invalid(p.Child("startingDeadlineSeconds"), *d, "must be between 1 and 86400"))
	}
	if s.Type == TriggerTypeCron {
		errs = append(errs, validatePayload(p.Child("payload"), s.Payload)...)
		if s.Schedule == "" {
			errs = append(errs, field.Required(p.Child("schedule"), "schedule is required for cron triggers"))
		} else if err := ParseSchedule(s.Schedule); err != nil {
			errs = append(errs, field.Invalid(p.Child("schedule"), s.Schedule, err.Error()))
		}
		if _, err := LoadTimeZone(s.TimeZone); err != nil {
			errs = append(errs, field.Invalid(p.Child("timeZone"), s.TimeZone, err.Error()))
		}
		switch s.ConcurrencyPolicy {
		case "", ConcurrencyAllow, ConcurrencyForbid, ConcurrencyReplace:
		default:
			errs = append(errs, field.NotSupported(p.Child("concurrencyPolicy"), s.ConcurrencyPolicy, []ConcurrencyPolicy{ConcurrencyAllow, ConcurrencyForbid, ConcurrencyReplace}))
		}
		errs = append(errs, inRange(p.Child("preWarmSeconds"), s.PreWarmSeconds, 0, MaxPreWarmSeconds)...)
	} else {
		// Each on its own field, so that the user is pointed at the line to
		// remove.
		for _, f := range []struct {
			name string
			set  bool
		}{{"schedule", s.Schedule != ""}, {"timeZone", s.TimeZone != ""}, {"preWarmSeconds", s.PreWarmSeconds != nil}, {"concurrencyPolicy", s.ConcurrencyPolicy != ""}} {
			if f.set {
				errs = append(errs, field.Forbidden(p.Child(f.name), f.name+" applies only to cron triggers"))
			}
		}
	}
	for _, b := range []struct {
		typ      TriggerType
		set      bool
		validate func(*field.Path) field.ErrorList
	}{
		{TriggerTypeQueue, s.Queue != nil, func(p *field.Path) field.ErrorList { return validateQueue(s.Queue, p) }},
		{TriggerTypeNATS, s.NATS != nil, func(p *field.Path) field.ErrorList { return validateNATS(s.NATS, p) }},
		{TriggerTypeMQTT, s.MQTT != nil, func(p *field.Path) field.ErrorList { return validateMQTT(s.MQTT, p) }},
		{TriggerTypeKafka, s.Kafka != nil, func(p *field.Path) field.ErrorList { return validateKafka(s.Kafka, p) }},
	} {
		// Each broker's block is named like its type.
		name := string(b.typ)
		switch {
		case s.Type == b.typ && !b.set:
			errs = append(errs, field.Required(p.Child(name), name+" is required for "+name+" triggers"))
		case s.Type == b.typ:
			errs = append(errs, b.validate(p.Child(name))...)
		case b.set:
			errs = append(errs, field.Forbidden(p.Child(name), name+" applies only to "+name+" triggers"))
		}
	}
	return errs
}

// The shapes of MQTT names, as the CRD's patterns have them: a topic filter
// is levels separated by /, + a whole level and # only the whole last one;
// a topic to publish to has no wildcards and does not start with $, which
// brokers keep for themselves.
var (
	mqttFilterRE      = regexp.MustCompile(`^(#|(\+|[^+#/]*)(/(\+|[^+#/]*))*(/#)?)$`)
	mqttTopicRE       = regexp.MustCompile(`^[^+#$][^+#]*$`)
	mqttShareGroupRE  = regexp.MustCompile(`^[^/+#\s]+$`)
	mqttClientIDRE    = regexp.MustCompile(`^[0-9A-Za-z_.:-]+$`)
	maxMQTTTopicBytes = 1024
	maxMQTTNameBytes  = 128
)

// ValidateMQTT checks an mqtt trigger's block alone, as `sless consume`
// takes it: field paths start at its fields.
func ValidateMQTT(m *MQTTSpec) field.ErrorList { return validateMQTT(m, nil) }

func validateMQTT(m *MQTTSpec, p *field.Path) field.ErrorList {
	errs := validateConnectionSecret(m.ConnectionSecret, p.Child("connectionSecret"))
	switch {
	case m.Topic == "":
		errs = append(errs, field.Required(p.Child("topic"), ""))
	case len(m.Topic) > maxMQTTTopicBytes:
		errs = append(errs, field.TooLong(p.Child("topic"), m.Topic, maxMQTTTopicBytes))
	case strings.HasPrefix(m.Topic, "$share/"):
		errs = append(errs, field.Invalid(p.Child("topic"), m.Topic, "topic must be a plain filter: set shareGroup for a shared subscription"))
	case !mqttFilterRE.MatchString(m.Topic) || strings.ContainsRune(m.Topic, 0):
		errs = append(errs, field.Invalid(p.Child("topic"), m.Topic, "topic must be levels separated by /, with + only as a whole level and # only as the whole last level"))
	}
	errs = append(errs, validateMQTTName(p.Child("shareGroup"), m.ShareGroup, mqttShareGroupRE, "shareGroup must not contain /, +, # or whitespace")...)
	errs = append(errs, validateMQTTName(p.Child("clientID"), m.ClientID, mqttClientIDRE, "clientID must be letters, digits, _, ., : and -")...)
	errs = append(errs, validateDelivery(&m.Delivery, p)...)
	switch dl := m.DeadLetterTopic; {
	case dl == "":
	case len(dl) > maxMQTTTopicBytes:
		errs = append(errs, field.TooLong(p.Child("deadLetterTopic"), dl, maxMQTTTopicBytes))
	case !mqttTopicRE.MatchString(dl) || strings.ContainsRune(dl, 0):
		errs = append(errs, field.Invalid(p.Child("deadLetterTopic"), dl, "deadLetterTopic must be a topic without wildcards (+, #) that does not start with $"))
	case MQTTTopicMatches(m.Topic, dl):
		errs = append(errs, field.Invalid(p.Child("deadLetterTopic"), dl, "deadLetterTopic must not match topic "+m.Topic+", or dead letters would be consumed again"))
	}
	return errs
}

func validateMQTTName(p *field.Path, name string, re *regexp.Regexp, msg string) field.ErrorList {
	switch {
	case name == "":
		return nil
	case len(name) > maxMQTTNameBytes:
		return field.ErrorList{field.TooLong(p, name, maxMQTTNameBytes)}
	case !re.MatchString(name):
		return field.ErrorList{field.Invalid(p, name, msg)}
	}
	return nil
}

// MQTTTopicMatches says whether the topic is one the filter (with + and #
// wildcards) matches. As brokers do, wildcards at the first level do not
// match topics starting with $.
func MQTTTopicMatches(filter, topic string) bool {
	if strings.HasPrefix(topic, "$") && (strings.HasPrefix(filter, "+") || strings.HasPrefix(filter, "#")) {
		return false
	}
	f, t := strings.Split(filter, "/"), strings.Split(topic, "/")
	for i, lvl := range f {
		if lvl == "#" {
			// "a/#" matches "a" too: # includes the parent level.
			return len(t) >= i
		}
		if i >= len(t) || (lvl != "+" && lvl != t[i]) {
			return false
		}
	}
	return len(f) == len(t)
}

// The shapes of NATS names, as the CRD's patterns have them: a stream or
// consumer name has no whitespace, dots, wildcards or path separators; a
// subject is dot-separated tokens, * a whole token, > only the last.
var (
	natsNameRE          = regexp.MustCompile(`^[^\s.*>/\\]+$`)
	natsSubjectRE       = regexp.MustCompile(`^(>|(\*|[^\s.*>]+)(\.(\*|[^\s.*>]+))*(\.>)?)$`)
	natsPlainSubjectRE  = regexp.MustCompile(`^[^\s.*>]+(\.[^\s.*>]+)*$`)
	maxNATSNameBytes    = 255
	maxNATSSubjectBytes = 255
)

// ValidateNATS checks a nats trigger's block alone, as `sless consume`
// takes it: field paths start at its fields.
func ValidateNATS(n *NATSSpec) field.ErrorList { return validateNATS(n, nil) }

func validateNATS(n *NATSSpec, p *field.Path) field.ErrorList {
	errs := validateConnectionSecret(n.ConnectionSecret, p.Child("connectionSecret"))
	errs = append(errs, validateNATSName(p.Child("stream"), n.Stream, "stream", true)...)
	errs = append(errs, validateNATSName(p.Child("durable"), n.Durable, "durable", false)...)
	switch {
	case n.Subject == "":
		errs = append(errs, field.Required(p.Child("subject"), ""))
	case len(n.Subject) > maxNATSSubjectBytes:
		errs = append(errs, field.TooLong(p.Child("subject"), n.Subject, maxNATSSubjectBytes))
	case !natsSubjectRE.MatchString(n.Subject):
		errs = append(errs, field.Invalid(p.Child("subject"), n.Subject, "subject must be tokens separated by dots, without whitespace; * and > only as whole tokens, > only last"))
	}
	errs = append(errs, validateDelivery(&n.Delivery, p)...)
	switch dl := n.DeadLetterSubject; {
	case dl == "":
	case len(dl) > maxNATSSubjectBytes:
		errs = append(errs, field.TooLong(p.Child("deadLetterSubject"), dl, maxNATSSubjectBytes))
	case !natsPlainSubjectRE.MatchString(dl):
		errs = append(errs, field.Invalid(p.Child("deadLetterSubject"), dl, "deadLetterSubject must be tokens separated by dots, without whitespace or wildcards"))
	case NATSSubjectMatches(n.Subject, dl):
		errs = append(errs, field.Invalid(p.Child("deadLetterSubject"), dl, "deadLetterSubject must not match subject "+n.Subject+", or dead letters would be consumed again"))
	}
	return errs
}

func validateNATSName(p *field.Path, name, what string, required bool) field.ErrorList {
	switch {
	case name == "" && required:
		return field.ErrorList{field.Required(p, "")}
	case name == "":
		return nil
	case len(name) > maxNATSNameBytes:
		return field.ErrorList{field.TooLong(p, name, maxNATSNameBytes)}
	case !natsNameRE.MatchString(name):
		return field.ErrorList{field.Invalid(p, name, what+" must be a NATS name: no whitespace, ., *, >, / or \\")}
	}
	return nil
}

// NATSSubjectMatches says whether the literal subject is one the filter
// (with * and > wildcards) matches.
func NATSSubjectMatches(filter, subject string) bool {
	f, s := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, tok := range f {
		if tok == ">" {
			return len(s) > i
		}
		if i >= len(s) || (tok != "*" && tok != s[i]) {
			return false
		}
	}
	return len(f) == len(s)
}

// kafkaNameRE is the shape of a Kafka topic or group name as the CRD's
// patterns have it: Kafka's legal topic characters.
var kafkaNameRE = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

// ValidateKafka checks a kafka trigger's block alone, as `sless consume`
// takes it: field paths start at its fields.
func ValidateKafka(k *KafkaSpec) field.ErrorList { return validateKafka(k, nil) }

func validateKafka(k *KafkaSpec, p *field.Path) field.ErrorList {
	errs := validateConnectionSecret(k.ConnectionSecret, p.Child("connectionSecret"))
	errs = append(errs, validateKafkaName(p.Child("topic"), k.Topic, "topic", true)...)
	errs = append(errs, validateKafkaName(p.Child("group"), k.Group, "group", false)...)
	errs = append(errs, validateDelivery(&k.Delivery, p)...)
	errs = append(errs, validateKafkaName(p.Child("deadLetterTopic"), k.DeadLetterTopic, "deadLetterTopic", false)...)
	switch {
	case k.DeadLetterTopic == "" && len(k.Topic) > MaxKafkaTopicBytes-len(".dlq"):
		errs = append(errs, field.Invalid(p.Child("topic"), k.Topic,
			fmt.Sprintf("topic must be at most %d characters when deadLetterTopic is unset, leaving room for <topic>.dlq", MaxKafkaTopicBytes-len(".dlq"))))
	case k.DeadLetterTopic != "" && k.DeadLetterTopic == k.Topic:
		errs = append(errs, field.Invalid(p.Child("deadLetterTopic"), k.DeadLetterTopic, "deadLetterTopic must differ from topic, or dead letters would be consumed again"))
	}
	return errs
}

func validateKafkaName(p *field.Path, name, what string, required bool) field.ErrorList {
	switch {
	case name == "" && required:
		return field.ErrorList{field.Required(p, "")}
	case name == "":
		return nil
	case len(name) > MaxKafkaTopicBytes:
		return field.ErrorList{field.TooLong(p, name, MaxKafkaTopicBytes)}
	case !kafkaNameRE.MatchString(name):
		return field.ErrorList{field.Invalid(p, name, what+" must be letters, digits, ., _ and - only")}
	case name == "." || name == "..":
		return field.ErrorList{field.Invalid(p, name, what+" must not be . or .., which Kafka refuses")}
	}
	return nil
}
func validateConnectionSecret(name string, p *field.Path) field.ErrorList {
	switch {
	case name == "":
		return field.ErrorList{field.Required(p, "")}
	case len(name) > 253:
		return field.ErrorList{field.TooLong(p, name, 253)}
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return field.ErrorList{field.Invalid(p, name, "must name a Secret: "+strings.Join(msgs, "; "))}
	}
	return nil
}

// validateDelivery checks the delivery settings every consuming trigger
// has, at p (they are inline in its broker's block).
func validateDelivery(d *Delivery, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, inRange(p.Child("prefetch"), d.Prefetch, 1, 1000)...)
	errs = append(errs, inRange(p.Child("concurrency"), d.Concurrency, 1, 100)...)
	errs = append(errs, inRange(p.Child("maxRetries"), d.MaxRetries, 0, 100)...)
	errs = append(errs, inRange(p.Child("backoffSeconds"), d.BackoffSeconds, 1, 3600)...)
	return errs
}

func validateQueue(q *QueueSpec, p *field.Path) field.ErrorList {
	errs := validateConnectionSecret(q.ConnectionSecret, p.Child("connectionSecret"))
	switch {
	case q.Queue == "":
		errs = append(errs, field.Required(p.Child("queue"), ""))
	case len(q.Queue) > MaxQueueNameBytes:
		errs = append(errs, field.Invalid(p.Child("queue"), q.Queue, fmt.Sprintf("queue must be at most %d bytes, leaving room for the names of its retry queues (<queue>.retry.<delay>ms)", MaxQueueNameBytes)))
	case strings.HasPrefix(q.Queue, "amq."):
		errs = append(errs, field.Invalid(p.Child("queue"), q.Queue, "queue names starting with amq. are reserved by RabbitMQ"))
	}
	errs = append(errs, validateDelivery(&q.Delivery, p)...)
	switch dlq := q.DeadLetterQueue; {
	case dlq == "":
	case dlq == q.Queue:
		errs = append(errs, field.Invalid(p.Child("deadLetterQueue"), dlq, "deadLetterQueue must differ from queue, or dead letters would be consumed again"))
	case len(dlq) > 255 || strings.HasPrefix(dlq, "amq."):
		errs = append(errs, field.Invalid(p.Child("deadLetterQueue"), dlq, "deadLetterQueue must be at most 255 bytes and not start with amq., which RabbitMQ reserves"))
	}
	return errs
}

func validateRef(p *field.Path, name string) field.ErrorList {
	switch {
	case name == "":
		return field.ErrorList{field.Required(p, "")}
	case !functionNameRE.MatchString(name):
		return field.ErrorList{field.Invalid(p, name, "must name a Function: a DNS-1035 label")}
	case len(name) > MaxNameLength:
		return field.ErrorList{field.TooLong(p, name, MaxNameLength)}
	}
	return nil
}

// LoadTimeZone loads a cron trigger's time zone as batch/v1 CronJobs take
// it: UTC when tz is empty, else an IANA name of at most 14 characters a
// part that the time zone database knows. Local is refused, as CronJobs
// refuse it: it would be the zone of whichever process reads it, and the
// controller's next run time would disagree with the CronJob's.
func LoadTimeZone(tz string) (*time.Location, error) {
	switch {
	case tz == "":
		return time.UTC, nil
	case strings.EqualFold(tz, "Local"):
		return nil, errors.New("timeZone must name an IANA time zone such as Europe/Berlin, not Local")
	case !timeZoneRE.MatchString(tz) || len(tz) > 64:
		return nil, errors.New("must be an IANA time zone name such as Europe/Berlin")
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %s", tz)
	}
	return loc, nil
}

// ParseSchedule reports whether a cron schedule is one sless runs: five
// fields or an @ descriptor, with no embedded time zone (spec.timeZone says it).
func ParseSchedule(schedule string) error {
	if strings.Contains(schedule, "TZ=") {
		return fmt.Errorf("set the time zone in timeZone, not in the schedule")
	}
	if strings.HasPrefix(schedule, "@") && !descriptorRE.MatchString(schedule) {
		return fmt.Errorf("unknown descriptor %q: use @yearly, @monthly, @weekly, @daily or @hourly", schedule)
	}
	if _, err := cron.ParseStandard(schedule); err != nil {
		return err
	}
	return nil
}

// ValidateFunctionJob checks a FunctionJob as the CRD schema does.
func ValidateFunctionJob(j *FunctionJob) field.ErrorList {
	errs := validateName(j.Name, labelNameRE, 40, "a DNS-1123 label")
	p := field.NewPath("spec")
	errs = append(errs, validateRef(p.Child("function"), j.Spec.Function)...)
	if j.Spec.RunID < 0 {
		errs = append(errs, field.Invalid(p.Child("runID"), j.Spec.RunID, "must be greater than or equal to 0"))
	}
	errs = append(errs, inRange(p.Child("timeoutSeconds"), j.Spec.TimeoutSeconds, 1, MaxJobTimeoutSeconds)...)
	errs = append(errs, validatePayload(p.Child("payload"), j.Spec.Payload)...)
	return errs
}

// ValidateSlessService checks a SlessService as the CRD schema does: its
// build fields as a Function's, then its scale.
func ValidateSlessService(s *SlessService) field.ErrorList {
	errs := validateName(s.Name, functionNameRE, MaxNameLength, "a DNS-1035 label")
	p := field.NewPath("spec")
	bs := s.BuildSpec()
	bs.Scale = nil // checked below under the service's own field names
	errs = append(errs, ValidateFunctionSpec(bs, p)...)
	errs = append(errs, ValidateTraffic(s.Name, "service", s.Spec.Traffic, p.Child("traffic"))...)
	sp := &s.Spec
	errs = append(errs, inRange(p.Child("minScale"), sp.MinScale, 0, MaxScale)...)
	errs = append(errs, inRange(p.Child("maxScale"), sp.MaxScale, 1, MaxScale)...)
	if cc := sp.ContainerConcurrency; cc != nil && (*cc < 0 || *cc > MaxContainerConcurrency) {
		errs = append(errs, field.Invalid(p.Child("containerConcurrency"), *cc, fmt.Sprintf("must be between 0 and %d", MaxContainerConcurrency)))
	}
	if sp.MinScale != nil && sp.MaxScale != nil && *sp.MaxScale < *sp.MinScale {
		errs = append(errs, field.Invalid(p.Child("maxScale"), *sp.MaxScale, "maxScale must be greater than or equal to minScale"))
	}
	return errs
}

// CheckCallbackURL says what is wrong with u as a callback URL (spec.async's
// onSuccess and onFailure, the X-Callback-Url header), "" when nothing: an
// absolute http or https URL with a host, no user info and no spaces, at
// most MaxCallbackURLLength bytes. Whether sless may post to its host is
// the operator's policy, checked where calls are accepted and delivered.
func CheckCallbackURL(u string) string {
	if len(u) > MaxCallbackURLLength {
		return fmt.Sprintf("must be at most %d characters", MaxCallbackURLLength)
	}
	if !callbackURLRE.MatchString(u) {
		return "must be an absolute http:// or https:// URL with a host, without user info or spaces, e.g. https://hooks.example.com/done"
	}
	parsed, err := url.Parse(u)
	if err != nil {
		return "is not a URL: " + strings.TrimPrefix(err.Error(), "parse \""+u+"\": ")
	}
	if parsed.Hostname() == "" {
		return "must name a host"
	}
	return ""
}

// ValidateTraffic checks a workload's spec.traffic as Knative checks a
// Service's traffic block, and as the CRD schema does: each target follows
// the latest revision or names one of the workload's own (<name>-…), the
// percents lie in 0..100 and sum to 100, at most one target follows the
// latest revision, and tags are DNS-1035 labels, unique, and short enough
// that {tag}-{name} is a DNS label. An empty list is no split: every call
// goes to the latest ready revision. what names the workload's kind in
// messages.
func ValidateTraffic(name, what string, traffic []TrafficTarget, p *field.Path) field.ErrorList {
	if len(traffic) == 0 {
		return nil
	}
	var errs field.ErrorList
	if len(traffic) > MaxTrafficTargets {
		errs = append(errs, field.TooMany(p, len(traffic), MaxTrafficTargets))
	}
	var sum int64
	latest := -1
	tags := map[string]int{}
	for i, t := range traffic {
		tp := p.Index(i)
		if t.LatestRevision != nil && *t.LatestRevision == (t.RevisionName != "") {
			errs = append(errs, field.Invalid(tp.Child("latestRevision"), *t.LatestRevision,
				"latestRevision: true takes no revisionName, and latestRevision: false needs one"))
		}
		if r := t.RevisionName; r != "" {
			switch {
			case len(r) > 63 || !labelNameRE.MatchString(r):
				errs = append(errs, field.Invalid(tp.Child("revisionName"), r, "must be a revision name: a DNS-1123 label"))
			case name != "" && !strings.HasPrefix(r, name+"-"):
				errs = append(errs, field.Invalid(tp.Child("revisionName"), r, fmt.Sprintf("revisionName must name a revision of this %s: %s-…", what, name)))
			}
		} else {
			if latest >= 0 {
				errs = append(errs, field.Invalid(tp, "latestRevision", fmt.Sprintf("at most one traffic target may follow the latest revision; %s also does", p.Index(latest))))
			}
			latest = i
		}
		if pc := t.Percent; pc != nil {
			if *pc < 0 || *pc > 100 {
				errs = append(errs, field.Invalid(tp.Child("percent"), *pc, "must be between 0 and 100"))
			}
			sum += *pc
		}
		if t.URL != "" {
			errs = append(errs, field.Forbidden(tp.Child("url"), "url and address are set in status only"))
		}
		if t.Address != "" {
			errs = append(errs, field.Forbidden(tp.Child("address"), "url and address are set in status only"))
		}
		if tag := t.Tag; tag != "" {
			switch {
			case len(tag) > 63 || !functionNameRE.MatchString(tag):
				errs = append(errs, field.Invalid(tp.Child("tag"), tag, "a tag must be a DNS-1035 label: lower-case letters, digits and '-', starting with a letter"))
			case len(tag)+1+len(name) > 63:
				errs = append(errs, field.Invalid(tp.Child("tag"), tag, "a tag and the name, joined by '-', must make a DNS label of at most 63 characters"))
			}
			if j, dup := tags[tag]; dup {
				errs = append(errs, field.Duplicate(tp.Child("tag"), fmt.Sprintf("%s, as %s", tag, p.Index(j).Child("tag"))))
			} else {
				tags[tag] = i
			}
		}
	}
	if sum != 100 {
		errs = append(errs, field.Invalid(p, sum, fmt.Sprintf("traffic targets sum to %d, want 100", sum)))
	}
	return errs
}
