'use strict';
// OpenTelemetry traces for the sless Node.js runtime, standard library only.
//
// The wrapper opens one span per call around the handler (a child of the
// caller's W3C traceparent, or the root of a new trace) and exports the spans
// with OTLP/HTTP in its JSON encoding, in batches, off the request path. Off
// (fromEnv returns null) unless OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set; docs/observability.md has the
// variables, the same in every runtime.

const http = require('node:http');
const https = require('node:https');
const crypto = require('node:crypto');

const SERVER = 2; // OTLP SpanKind
const STATUS_ERROR = 2;
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

// parseTraceparent returns {traceId, spanId, sampled} of a W3C traceparent,
// or null when it is absent or malformed (the call then starts a new trace).
function parseTraceparent(value) {
  const m = TRACEPARENT.exec(String(value || '').trim());
  if (!m) return null;
  const [, version, traceId, spanId, flags, rest] = m;
  if (version === 'ff' || (version === '00' && rest) || /^0+$/.test(traceId) || /^0+$/.test(spanId)) return null;
  return { traceId, spanId, sampled: (parseInt(flags, 16) & 1) === 1 };
}

// envList reads key=value,key=value with percent-encoded values, the form of
// OTEL_RESOURCE_ATTRIBUTES and OTEL_EXPORTER_OTLP_HEADERS.
function envList(text) {
  const out = {};
  for (const item of String(text || '').split(',')) {
    const eq = item.indexOf('=');
    const key = eq < 0 ? '' : item.slice(0, eq).trim();
    if (!key) continue;
    let value = item.slice(eq + 1).trim();
    try {
      value = decodeURIComponent(value);
    } catch {
      // a malformed escape stays as written
    }
    out[key] = value;
  }
  return out;
}

function attrValue(v) {
  if (typeof v === 'boolean') return { boolValue: v };
  if (Number.isInteger(v)) return { intValue: String(v) }; // int64 is a string in OTLP/JSON
  if (typeof v === 'number') return { doubleValue: v };
  return { stringValue: String(v) };
}

function attrs(obj) {
  return Object.entries(obj).map(([key, v]) => ({ key, value: attrValue(v) }));
}

function nowNanos() {
  // Date.now() has milliseconds; hrtime adds the finer part from a fixed origin.
  return originNanos + (process.hrtime.bigint() - originHr);
}
const originHr = process.hrtime.bigint();
const originNanos = BigInt(Date.now()) * 1000000n;

class Span {
  constructor(tracer, name, traceId, parentId, sampled, traceState, attributes) {
    this.tracer = tracer;
    this.name = name;
    this.traceId = traceId;
    this.spanId = crypto.randomBytes(8).toString('hex');
    this.parentId = parentId;
    this.sampled = sampled;
    this.traceState = traceState;
    this.attributes = { ...attributes };
    this.start = nowNanos();
    this.endTime = 0n;
    this.error = null;
  }

  // traceparent is this span as the parent of calls the handler makes.
  get traceparent() {
    return `00-${this.traceId}-${this.spanId}-${this.sampled ? '01' : '00'}`;
  }

  set(key, value) {
    this.attributes[key] = value;
  }

  fail(message) {
    this.error = message;
  }

  end() {
    if (this.endTime) return;
    this.endTime = nowNanos();
    if (this.sampled) this.tracer.queue(this);
  }

  otlp() {
    const out = {
      traceId: this.traceId,
      spanId: this.spanId,
      name: this.name,
      kind: SERVER,
      startTimeUnixNano: String(this.start),
      endTimeUnixNano: String(this.endTime),
      attributes: attrs(this.attributes),
      status: this.error !== null ? { code: STATUS_ERROR, message: this.error } : {},
    };
    if (this.parentId) out.parentSpanId = this.parentId;
    if (this.traceState) out.traceState = this.traceState;
    return out;
  }
}

// Tracer makes spans and sends the ended ones in batches from a timer; a full
// queue drops spans rather than slow a call.
class Tracer {
  constructor({ endpoint, headers, resource, log, delayMs = 5000, timeoutMs = 10000, maxQueue = 2048, maxBatch = 512 }) {
    this.endpoint = new URL(endpoint);
    this.headers = { ...headers, 'Content-Type': 'application/json' };
    this.resource = { attributes: attrs(resource) };
    this.log = log;
    this.delayMs = Math.max(delayMs, 10); // 0 would spin
    this.timeoutMs = timeoutMs;
    this.maxQueue = maxQueue;
    this.maxBatch = maxBatch;
    this.spans = [];
    this.dropped = 0;
    this.lastWarning = 0;
    this.inFlight = new Set();
    // unref: a pending export never keeps the process alive by itself.
    this.timer = setInterval(() => this.flush(), this.delayMs).unref();
  }

  // start opens a span around one call: the caller's child when traceparent
  // is valid, else the root of a new, sampled trace.
  start(name, traceparent, tracestate, attributes) {
    const parent = parseTraceparent(traceparent);
    if (!parent) return new Span(this, name, crypto.randomBytes(16).toString('hex'), '', true, '', attributes);
    return new Span(this, name, parent.traceId, parent.spanId, parent.sampled, String(tracestate || '').trim(), attributes);
  }

  queue(span) {
    if (this.spans.length >= this.maxQueue) {
      this.dropped++;
      return;
    }
    this.spans.push(span);
    if (this.spans.length >= this.maxBatch) this.flush();
  }

  // flush sends what is queued; the promise settles when the posts have.
  flush() {
    while (this.spans.length > 0) {
      const batch = this.spans.splice(0, this.maxBatch);
      const p = this.send(batch);
      this.inFlight.add(p);
      p.finally(() => this.inFlight.delete(p));
    }
    return Promise.all([...this.inFlight]);
  }

  send(batch) {
    const body = JSON.stringify({
      resourceSpans: [{ resource: this.resource, scopeSpans: [{ scope: { name: 'sless-runtime-nodejs' }, spans: batch.map((s) => s.otlp()) }] }],
    });
    const client = this.endpoint.protocol === 'https:' ? https : http;
    return new Promise((resolve) => {
      const req = client.request(this.endpoint, {
        method: 'POST',
        headers: { ...this.headers, 'Content-Length': Buffer.byteLength(body) },
        timeout: this.timeoutMs,
      }, (res) => {
        res.resume();
        res.on('end', () => {
          if (res.statusCode >= 300) this.warn(`cannot export ${batch.length} spans to ${this.endpoint.href}: HTTP ${res.statusCode}`);
          else if (this.dropped) {
            this.warn(`dropped ${this.dropped} spans: the export queue was full`);
            this.dropped = 0;
          }
          resolve();
        });
      });
      req.on('timeout', () => req.destroy(new Error(`no answer in ${this.timeoutMs} ms`)));
      req.on('error', (e) => {
        this.warn(`cannot export ${batch.length} spans to ${this.endpoint.href}: ${e.message}`);
        resolve();
      });
      req.end(body);
    });
  }

  warn(msg) {
    // At most once a minute: a collector that is down must not flood the log.
    const now = Date.now();
    if (this.lastWarning && now - this.lastWarning < 60000) return;
    this.lastWarning = now;
    this.log('warn', msg, {}, null);
  }

  // shutdown sends what is queued, waiting at most timeoutMs.
  shutdown(timeoutMs = 5000) {
    clearInterval(this.timer);
    let timer;
    const limit = new Promise((resolve) => {
      timer = setTimeout(resolve, timeoutMs);
    });
    return Promise.race([this.flush(), limit]).finally(() => clearTimeout(timer));
  }
}

function millis(env, name, fallback) {
  const n = Number(env[name]);
  return env[name] && Number.isFinite(n) && n >= 0 ? n : fallback;
}

// endpointFromEnv is the OTLP/HTTP traces URL, or '' when tracing is off.
function endpointFromEnv(env) {
  if (String(env.OTEL_SDK_DISABLED || '').trim().toLowerCase() === 'true') return '';
  if (String(env.OTEL_TRACES_EXPORTER || 'otlp').trim().toLowerCase() !== 'otlp') return '';
  const traces = String(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || '').trim();
  if (traces) return traces;
  const base = String(env.OTEL_EXPORTER_OTLP_ENDPOINT || '').trim();
  return base ? base.replace(/\/+$/, '') + '/v1/traces' : '';
}

// fromEnv is a Tracer configured by the standard OTEL_* variables, or null
// when they turn tracing off (no endpoint, OTEL_SDK_DISABLED, another
// exporter, or the gRPC protocol, which the standard library cannot speak).
function fromEnv(env, resource, log) {
  const endpoint = endpointFromEnv(env);
  if (!endpoint) return null;
  const protocol = String(env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL || env.OTEL_EXPORTER_OTLP_PROTOCOL || 'http/json').trim();
  if (protocol === 'grpc') {
    log('warn', 'traces are off: the runtime exports OTLP over HTTP (JSON) and OTEL_EXPORTER_OTLP_PROTOCOL is grpc; '
      + "point OTEL_EXPORTER_OTLP_TRACES_ENDPOINT at the collector's HTTP port", {}, null);
    return null;
  }
  try {
    new URL(endpoint); // eslint-disable-line no-new
  } catch {
    log('warn', `traces are off: the OTLP endpoint ${JSON.stringify(endpoint)} is not a URL`, {}, null);
    return null;
  }
  const headers = { ...envList(env.OTEL_EXPORTER_OTLP_HEADERS), ...envList(env.OTEL_EXPORTER_OTLP_TRACES_HEADERS) };
  const res = { ...resource, ...envList(env.OTEL_RESOURCE_ATTRIBUTES) };
  if (env.OTEL_SERVICE_NAME) res['service.name'] = env.OTEL_SERVICE_NAME;
  if (!res['service.name']) res['service.name'] = 'unknown_service:node';
  res['telemetry.sdk.name'] = 'sless-runtime';
  res['telemetry.sdk.language'] = 'nodejs';
  const timeoutMs = millis(env, 'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT', millis(env, 'OTEL_EXPORTER_OTLP_TIMEOUT', 10000)) || 10000;
  return new Tracer({ endpoint, headers, resource: res, log, delayMs: millis(env, 'OTEL_BSP_SCHEDULE_DELAY', 5000), timeoutMs });
}

module.exports = { fromEnv, parseTraceparent, endpointFromEnv };
