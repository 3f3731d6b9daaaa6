"""OpenTelemetry traces for the sless Python runtime, standard library only.

The wrapper opens one span per call around the handler (a child of the
caller's W3C `traceparent`, or the root of a new trace) and exports the
spans with OTLP/HTTP in its JSON encoding, in batches, from a thread of its
own. Off (from_env returns None) unless OTEL_EXPORTER_OTLP_ENDPOINT or
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set. docs/observability.md has the
variables read here; every runtime reads the same ones.
"""

import json
import os
import re
import secrets
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

SERVER = 2  # OTLP SpanKind
STATUS_ERROR = 2
_TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$")
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16


def parse_traceparent(value):
    """(trace id, parent span id, sampled) of a W3C traceparent header, or
    None when it is absent or malformed (the call then starts a new trace)."""
    m = _TRACEPARENT.match((value or "").strip())
    if not m:
        return None
    version, trace_id, span_id, flags, rest = m.groups()
    # Version ff is invalid; version 00 has nothing after the flags.
    if version == "ff" or (version == "00" and rest) or trace_id == _ZERO_TRACE or span_id == _ZERO_SPAN:
        return None
    return trace_id, span_id, bool(int(flags, 16) & 1)


def _env_list(text):
    """key=value,key=value with percent-encoded values (W3C Baggage form, as
    OTEL_RESOURCE_ATTRIBUTES and OTEL_EXPORTER_OTLP_HEADERS are written)."""
    out = {}
    for item in (text or "").split(","):
        key, eq, value = item.partition("=")
        key = key.strip()
        if eq and key:
            out[key] = urllib.parse.unquote(value.strip())
    return out


def _attr_value(v):
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}  # int64 is a string in OTLP/JSON
    if isinstance(v, float):
        return {"doubleValue": v}
    return {"stringValue": str(v)}


def _attrs(d):
    return [{"key": k, "value": _attr_value(v)} for k, v in d.items()]


class Span:
    """One span; ended once, then queued for export when sampled."""

    def __init__(self, tracer, name, trace_id, parent_id, sampled, trace_state, attributes):
        self._tracer = tracer
        self.name = name
        self.trace_id = trace_id
        self.span_id = secrets.token_hex(8)
        self.parent_id = parent_id
        self.sampled = sampled
        self.trace_state = trace_state
        self.attributes = dict(attributes)
        self.start_ns = time.time_ns()
        self.end_ns = 0
        self.error = None

    @property
    def traceparent(self):
        """This span as the traceparent of calls the handler makes."""
        return "00-%s-%s-%s" % (self.trace_id, self.span_id, "01" if self.sampled else "00")

    def set(self, key, value):
        self.attributes[key] = value

    def fail(self, message):
        self.error = message

    def end(self):
        if self.end_ns:
            return
        self.end_ns = time.time_ns()
        if self.sampled:
            self._tracer._queue(self)

    def otlp(self):
        out = {
            "traceId": self.trace_id,
            "spanId": self.span_id,
            "name": self.name,
            "kind": SERVER,
            "startTimeUnixNano": str(self.start_ns),
            "endTimeUnixNano": str(self.end_ns),
            "attributes": _attrs(self.attributes),
            "status": {"code": STATUS_ERROR, "message": self.error} if self.error is not None else {},
        }
        if self.parent_id:
            out["parentSpanId"] = self.parent_id
        if self.trace_state:
            out["traceState"] = self.trace_state
        return out


class Tracer:
    """Makes spans and sends the ended ones in batches, off the request path:
    a full queue drops spans rather than slow a call."""

    def __init__(self, endpoint, headers, resource, log, delay=5.0, max_queue=2048, max_batch=512, timeout=10.0):
        self.endpoint = endpoint
        self._headers = dict(headers, **{"Content-Type": "application/json"})
        self._resource = {"attributes": _attrs(resource)}
        self._log = log
        self._delay = max(delay, 0.01)  # 0 would spin
        self._max_queue = max_queue
        self._max_batch = max_batch
        self._timeout = timeout
        self._spans = []
        self._dropped = 0
        self._cond = threading.Condition()
        self._stopping = False
        self._last_warning = 0.0
        self._thread = threading.Thread(target=self._run, name="sless-trace-export", daemon=True)
        self._thread.start()

    def start(self, name, traceparent=None, tracestate=None, attributes=()):
        """A span around one call: the caller's child when traceparent is
        valid, else the root of a new, sampled trace."""
        parent = parse_traceparent(traceparent)
        if parent is None:
            return Span(self, name, secrets.token_hex(16), "", True, "", dict(attributes))
        trace_id, parent_id, sampled = parent
        return Span(self, name, trace_id, parent_id, sampled, (tracestate or "").strip(), dict(attributes))

    def _queue(self, span):
        with self._cond:
            if len(self._spans) >= self._max_queue:
                self._dropped += 1
                return
            self._spans.append(span)
            if len(self._spans) >= self._max_batch:
                self._cond.notify()

    def _run(self):
        while True:
            with self._cond:
                if not self._stopping and len(self._spans) < self._max_batch:
                    self._cond.wait(self._delay)
                batch, self._spans = self._spans[:self._max_batch], self._spans[self._max_batch:]
                stopping = self._stopping and not self._spans
            if batch:
                self._send(batch)
            if stopping:
                return

    def _send(self, batch):
        doc = {"resourceSpans": [{"resource": self._resource, "scopeSpans": [{
            "scope": {"name": "sless-runtime-python"},
            "spans": [s.otlp() for s in batch]}]}]}
        req = urllib.request.Request(self.endpoint, data=json.dumps(doc).encode("utf-8"), headers=self._headers,
                                     method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self._timeout) as resp:
                resp.read()
        except (urllib.error.URLError, OSError, ValueError) as e:
            self._warn("cannot export %d spans to %s: %s" % (len(batch), self.endpoint, e))
            return
        if self._dropped:
            self._warn("dropped %d spans: the export queue was full" % self._dropped)
            self._dropped = 0

    def _warn(self, msg):
        # At most once a minute: a collector that is down must not flood the log.
        now = time.monotonic()
        if self._last_warning and now - self._last_warning < 60:
            return
        self._last_warning = now
        self._log("warn", msg, request_id="")

    def shutdown(self, timeout=5.0):
        """Sends what is queued, waiting at most timeout seconds."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        self._thread.join(timeout)


def _millis(env, name, default):
    try:
        return max(0.0, float(env.get(name) or default) / 1000)
    except ValueError:
        return default / 1000


def endpoint_from_env(env):
    """The OTLP/HTTP traces URL, or "" when tracing is off."""
    if (env.get("OTEL_SDK_DISABLED") or "").strip().lower() == "true":
        return ""
    if (env.get("OTEL_TRACES_EXPORTER") or "otlp").strip().lower() != "otlp":
        return ""
    traces = (env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or "").strip()
    if traces:
        return traces
    base = (env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or "").strip()
    return base.rstrip("/") + "/v1/traces" if base else ""


def from_env(env, resource, log):
    """A Tracer configured by the standard OTEL_* variables, or None when
    they turn tracing off (no endpoint, OTEL_SDK_DISABLED, another exporter,
    or the gRPC protocol, which the standard library cannot speak)."""
    endpoint = endpoint_from_env(env)
    if not endpoint:
        return None
    protocol = (env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
                or "http/json").strip()
    if protocol == "grpc":
        log("warn", "traces are off: the runtime exports OTLP over HTTP (JSON) and OTEL_EXPORTER_OTLP_PROTOCOL "
                    "is grpc; point OTEL_EXPORTER_OTLP_TRACES_ENDPOINT at the collector's HTTP port", request_id="")
        return None
    headers = _env_list(env.get("OTEL_EXPORTER_OTLP_HEADERS"))
    headers.update(_env_list(env.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS")))
    attrs = dict(resource)
    attrs.update(_env_list(env.get("OTEL_RESOURCE_ATTRIBUTES")))
    if env.get("OTEL_SERVICE_NAME"):
        attrs["service.name"] = env["OTEL_SERVICE_NAME"]
    attrs.setdefault("service.name", "unknown_service:python")
    attrs.update({"telemetry.sdk.name": "sless-runtime", "telemetry.sdk.language": "python"})
    timeout = _millis(env, "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", 0) or _millis(env, "OTEL_EXPORTER_OTLP_TIMEOUT", 10000)
    return Tracer(endpoint, headers, attrs, log, delay=_millis(env, "OTEL_BSP_SCHEDULE_DELAY", 5000),
                  timeout=timeout or 10.0)
