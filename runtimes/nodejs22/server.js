'use strict';
// sless runtime wrapper for Node.js.
//
// Loads the handler named by SLESS_ENTRYPOINT ("path/to/module.export") from
// the function's code in SLESS_FUNCTION_DIR and serves it over HTTP on PORT,
// or, with SLESS_MODE=job, runs it once on SLESS_PAYLOAD. The contract it
// implements is written down in docs/runtimes.md; the same holds for every
// sless runtime. Node's standard library only; runs on Node 18 and later.

const http = require('node:http');
const fs = require('node:fs');
const path = require('node:path');
const util = require('node:util');
const crypto = require('node:crypto');
const { AsyncLocalStorage } = require('node:async_hooks');
const { pathToFileURL } = require('node:url');
const trace = require('./trace.js');

const HEALTH_PATH = '/_sless/health';
const MAX_HEADER_BYTES = 1 << 20;
// How a request the parser refuses is answered, by its error code (Node's
// own answers); any other is 400.
const REFUSALS = {
  HPE_HEADER_OVERFLOW: '431 Request Header Fields Too Large',
  HPE_CHUNK_EXTENSIONS_OVERFLOW: '413 Payload Too Large',
  ERR_HTTP_REQUEST_TIMEOUT: '408 Request Timeout',
};
// The call code runs for: {requestId, span} (span null when tracing is off).
const requestStore = new AsyncLocalStorage();
// The OTLP exporter (trace.js), null when tracing is off.
let tracer = null;

function config(env) {
  return {
    port: Number(env.PORT || 8080),
    host: env.SLESS_LISTEN_HOST || undefined,
    entrypoint: env.SLESS_ENTRYPOINT || '',
    functionDir: env.SLESS_FUNCTION_DIR || '/sless/function',
    functionName: env.SLESS_FUNCTION_NAME || '',
    namespace: env.SLESS_NAMESPACE || '',
    revision: env.SLESS_REVISION || env.K_REVISION || '',
    timeoutMs: Math.round(Number(env.SLESS_TIMEOUT_SECONDS || 30) * 1000),
    mode: env.SLESS_MODE || '',
    payload: env.SLESS_PAYLOAD || '',
    terminationPath: env.SLESS_TERMINATION_MESSAGE_PATH || '/dev/termination-log',
  };
}

const stdoutWrite = process.stdout.write.bind(process.stdout);

// log writes one JSON line. call is the call it belongs to ({requestId,
// span}, or a bare request id); undefined means the current one, null none.
function log(level, msg, fields = {}, call) {
  const rec = { time: new Date().toISOString(), level, msg };
  const c = call !== undefined ? call : requestStore.getStore();
  const rid = typeof c === 'string' ? c : c && c.requestId;
  if (rid) rec.requestId = rid;
  if (c && c.span) {
    rec.traceId = c.span.traceId;
    rec.spanId = c.span.spanId;
  }
  Object.assign(rec, fields);
  stdoutWrite(JSON.stringify(rec) + '\n');
}

// What a handler writes with console.* becomes JSON log lines tagged with the
// request id of the call it belongs to (AsyncLocalStorage follows awaits).
function captureConsole() {
  const levels = { log: 'info', info: 'info', debug: 'debug', warn: 'warn', error: 'error', trace: 'debug' };
  for (const [name, level] of Object.entries(levels)) {
    console[name] = (...args) => log(level, util.format(...args), { source: 'function' });
  }
}

// What is written to process.stdout or process.stderr directly — by the
// handler, a library, console.dir or console.table — becomes JSON log lines
// too (level info and error, as Python's sys.stdout and sys.stderr): raw text
// would break the one-object-per-line stdout, and an unterminated write would
// glue itself to the front of the next JSON line, the wrapper's request line
// included. Unterminated text waits, per call, for its newline or the end of
// the call (flushOutput).
const pendingOutput = new Map(); // level + '\0' + request id -> {text without its newline yet, call}

function captureStreams() {
  for (const [stream, level] of [[process.stdout, 'info'], [process.stderr, 'error']]) {
    stream.write = (chunk, encoding, cb) => {
      if (typeof encoding === 'function') [cb, encoding] = [encoding, undefined];
      let text;
      if (typeof chunk === 'string') {
        text = encoding && !/^utf-?8$/i.test(encoding) ? Buffer.from(chunk, encoding).toString('utf8') : chunk;
      } else {
        text = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).toString('utf8');
      }
      const call = requestStore.getStore() || null;
      const key = `${level}\0${(call && call.requestId) || ''}`;
      const lines = (((pendingOutput.get(key) || {}).text || '') + text).split('\n');
      const rest = lines.pop();
      if (rest) pendingOutput.set(key, { text: rest, call });
      else pendingOutput.delete(key);
      for (const line of lines) log(level, line, { source: 'function' }, call);
      if (cb) process.nextTick(cb);
      return true;
    };
  }
}

// flushOutput logs what a call (or, with no id, code outside any call) wrote
// without a final newline.
function flushOutput(requestId) {
  for (const level of ['info', 'error']) {
    const key = `${level}\0${requestId || ''}`;
    const rest = pendingOutput.get(key);
    if (rest === undefined) continue;
    pendingOutput.delete(key);
    log(level, rest.text, { source: 'function' }, rest.call);
  }
}

function flushAllOutput() {
  for (const key of [...pendingOutput.keys()]) flushOutput(key.slice(key.indexOf('\0') + 1));
}

// exit ends the process once the queued spans are sent (or 5 s passed).
function exit(code) {
  if (!tracer) process.exit(code);
  tracer.shutdown().then(() => process.exit(code));
}

async function loadHandler(cfg) {
  const ep = cfg.entrypoint;
  const dot = ep.lastIndexOf('.');
  if (dot <= 0 || dot === ep.length - 1) {
    throw new Error(`SLESS_ENTRYPOINT must be module.function, got ${JSON.stringify(ep)}`);
  }
  const modPath = ep.slice(0, dot);
  const fnName = ep.slice(dot + 1);
  const base = path.resolve(cfg.functionDir, modPath);
  const file = ['.js', '.mjs', '.cjs'].map((ext) => base + ext).find((f) => fs.existsSync(f));
  if (!file) throw new Error(`no ${modPath}.js, .mjs or .cjs in ${cfg.functionDir}`);
  // import() loads CommonJS and ES modules alike; a CommonJS module's exports
  // are its default export.
  const mod = await import(pathToFileURL(file).href);
  let fn = mod[fnName];
  if (typeof fn !== 'function' && mod.default && typeof mod.default[fnName] === 'function') {
    fn = mod.default[fnName];
  }
  if (typeof fn !== 'function') throw new Error(`${modPath} exports no function ${JSON.stringify(fnName)}`);
  return fn;
}

// loadApp loads a service's web app: a request listener (req, res) — an
// express app is one — or an http.Server made but not listening, whose
// 'request' and 'upgrade' listeners then serve (WebSockets included).
async function loadApp(cfg) {
  const ep = cfg.entrypoint;
  const dot = ep.lastIndexOf('.');
  if (dot <= 0 || dot === ep.length - 1) {
    throw new Error(`SLESS_ENTRYPOINT must be module.app, got ${JSON.stringify(ep)}`);
  }
  const modPath = ep.slice(0, dot);
  const name = ep.slice(dot + 1);
  const base = path.resolve(cfg.functionDir, modPath);
  const file = ['.js', '.mjs', '.cjs'].map((ext) => base + ext).find((f) => fs.existsSync(f));
  if (!file) throw new Error(`no ${modPath}.js, .mjs or .cjs in ${cfg.functionDir}`);
  const mod = await import(pathToFileURL(file).href);
  let app = mod[name];
  if (app === undefined && mod.default) app = mod.default[name];
  if (typeof app === 'function' || app instanceof http.Server) return app;
  throw new Error(`${modPath} exports no request listener or http.Server ${JSON.stringify(name)}`);
}

// serveService serves a web app whole: every path but the wrapper's health
// path, streamed both ways, upgrades passed to an http.Server's listeners.
function serveService(cfg, app) {
  const target = app instanceof http.Server ? app : null;
  let cold = true;
  const server = http.createServer({ maxHeaderSize: MAX_HEADER_BYTES }, (req, res) => {
    if (req.method === 'GET' && req.url.split('?')[0] === HEALTH_PATH) {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end('{"status":"ok"}');
      return;
    }
    const pass = () => (target ? target.emit('request', req, res) : app(req, res));
    if (!tracer) return pass();
    // As OpenTelemetry's HTTP conventions name a server span whose route is unknown: its method.
    const span = tracer.start(req.method, req.headers.traceparent, req.headers.tracestate, {
      'faas.coldstart': cold, 'http.request.method': req.method, 'url.path': req.url.split('?')[0],
    });
    cold = false;
    res.once('close', () => endSpan(span, res.statusCode || 500));
    requestStore.run({ requestId: req.headers['x-request-id'], span }, pass);
  });
  server.on('upgrade', (req, socket, head) => {
    if (target && target.listenerCount('upgrade') > 0) target.emit('upgrade', req, socket, head);
    else socket.destroy();
  });
  // Streams and long polls are the app's to end, not a wrapper's timeout.
  server.requestTimeout = 0;
  const stop = (signal) => {
    log('info', 'draining', { signal });
    server.close(() => {
      log('info', 'stopped');
      flushAllOutput();
      exit(0);
    });
    server.closeIdleConnections();
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
  server.listen(cfg.port, cfg.host || undefined, () => {
    log('info', 'listening', { port: server.address().port, entrypoint: cfg.entrypoint, mode: 'service' });
  });
}

function isJSON(contentType) {
  const ct = (contentType || '').split(';')[0].trim().toLowerCase();
  return ct === 'application/json' || (ct.startsWith('application/') && ct.endsWith('+json'));
}

class RequestError extends Error {
  constructor(status, type, message) {
    super(message);
    this.status = status;
    this.type = type;
  }
}

// The path and raw query of a request target, as the client wrote them: the
// URL class would resolve dot segments and re-escape characters.
function splitTarget(target) {
  if (target.startsWith('/')) {
    const q = target.indexOf('?');
    return q < 0 ? [target, ''] : [target.slice(0, q), target.slice(q + 1)];
  }
  const url = new URL(target, 'http://localhost'); // absolute-form (through a proxy) or "*"
  return [url.pathname || '/', url.search.slice(1)];
}

// A JSON text as RFC 8259 has it, read as Python's and Go's wrappers read it:
// toString('utf8') would turn bytes that are not UTF-8 into U+FFFD, and a
// TextDecoder by default drops a byte order mark, where JSON.parse refuses one.
const strictUTF8 = new util.TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

function parseJSON(bytes) {
  return JSON.parse(strictUTF8.decode(bytes));
}

function makeEvent(req, body) {
  const [path, rawQuery] = splitTarget(req.url);
  const query = {};
  // The leading '?' keeps a query that itself starts with '?' as written.
  for (const [k, v] of new URLSearchParams('?' + rawQuery)) if (!(k in query)) query[k] = v;
  const headers = {};
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    const k = req.rawHeaders[i].toLowerCase();
    const v = req.rawHeaders[i + 1];
    headers[k] = k in headers ? `${headers[k]}, ${v}` : v;
  }
  const event = {
    method: req.method,
    path,
    query,
    rawQuery,
    headers,
    body: null,
    isBase64Encoded: false,
  };
  if (body.length > 0) {
    if (isJSON(headers['content-type'])) {
      try {
        event.body = parseJSON(body);
      } catch (e) {
        throw new RequestError(400, 'BadRequest', `request body is not valid JSON: ${e.message}`);
      }
    } else {
      const text = new util.TextDecoder('utf-8', { fatal: true });
      try {
        event.body = text.decode(body);
      } catch {
        event.body = body.toString('base64');
        event.isBase64Encoded = true;
      }
    }
  }
  return event;
}

function makeContext(cfg, requestId, deadlineMs, span) {
  return {
    functionName: cfg.functionName,
    namespace: cfg.namespace,
    revision: cfg.revision,
    requestId,
    // The call's span ('' when tracing is off); traceparent goes on calls
    // the handler makes, so they join the trace.
    traceId: span ? span.traceId : '',
    spanId: span ? span.spanId : '',
    traceparent: span ? span.traceparent : '',
    deadlineMs,
    remainingMs() {
      return Math.max(0, deadlineMs - Date.now());
    },
  };
}

// The JSON of a result. Bytes anywhere in it become base64 strings: the
// holder's own value (this[k]) is looked at, because a Buffer's toJSON has
// already turned v into {type, data} and a Uint8Array has none. NaN and
// Infinity throw: JSON.stringify would write null, quietly changing the
// result, where Python and Go refuse to encode them.
function jsonBytes(value) {
  const s = JSON.stringify(value, function replace(k, v) {
    const raw = this[k];
    if (raw instanceof Uint8Array) return Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('base64');
    if ((typeof v === 'number' || v instanceof Number) && !Number.isFinite(Number(v))) {
      throw new TypeError(`${Number(v)} is not a JSON value`);
    }
    return v;
  });
  return Buffer.from(s === undefined ? 'null' : s, 'utf8');
}

function isResponse(v) {
  return v !== null && typeof v === 'object' && !Buffer.isBuffer(v) && Number.isInteger(v.statusCode);
}

// RFC 9110 token: what a header name may be made of.
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\x00-\x08\x0a-\x1f\x7f]/;
// The wrapper frames the body and names the request itself: a handler's own
// Content-Length or Transfer-Encoding would contradict the bytes sent, which a
// client or proxy on a shared connection reads as the start of another response.
const WRAPPER_HEADERS = new Set(['content-length', 'transfer-encoding', 'x-request-id']);

// A scalar header value as text, the same in every wrapper: String(v).
// Anything else — an object, a nested array — has no agreed text (String
// would send "[object Object]"), nor has NaN or an infinity.
function headerText(name, v) {
  switch (typeof v) {
    case 'string':
      return v;
    case 'boolean':
    case 'bigint':
      return String(v);
    case 'number':
      if (!Number.isFinite(v)) throw new Error(`header ${name} has the value ${v}, which is not a finite number`);
      return String(v);
    default:
      if (v === null) return 'null';
      throw new Error(`header ${name} has a value of type ${Array.isArray(v) ? 'array' : typeof v}; a header value is a string, number, boolean or null, or a list of them`);
  }
}

// The handler's headers, checked, as { name: [values] }; a list value is one
// header line per element. A name that is not an HTTP token, or a value with a
// control character (CR and LF would let it write headers or a response of its
// own), makes the result unusable.
function responseHeaders(given) {
  const headers = {};
  for (const [name, value] of Object.entries(given || {})) {
    if (!TOKEN.test(name)) throw new Error(`header name ${JSON.stringify(name)} is not an HTTP token`);
    if (WRAPPER_HEADERS.has(name.toLowerCase())) continue;
    if (value === undefined) continue; // as JSON leaves an undefined property out
    const values = (Array.isArray(value) ? value : [value]).map((v) => headerText(name, v));
    for (const v of values) {
      if (CONTROL.test(v)) throw new Error(`header ${name} has a control character in its value ${JSON.stringify(v)}`);
    }
    // Node writes header strings as Latin-1; the UTF-8 bytes as Latin-1 text go out unchanged.
    headers[name] = values.map((v) => Buffer.from(v, 'utf8').toString('latin1'));
  }
  return headers;
}

// decodeBase64 decodes a base64 body as every wrapper does (Go's
// StdEncoding): the standard alphabet, padded to a multiple of four, line
// breaks skipped. Buffer.from(b, 'base64') takes anything — the URL-safe
// alphabet, missing padding, stray characters it drops — so a wrong body
// would be sent instead of a BadResult.
function decodeBase64(text) {
  const s = text.replace(/[\r\n]/g, '');
  let end = s.length;
  while (end > 0 && s.charCodeAt(end - 1) === 61 /* = */) end--;
  let ok = s.length % 4 === 0 && s.length - end <= 2;
  for (let i = 0; ok && i < end; i++) {
    const c = s.charCodeAt(i);
    ok = (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || (c >= 48 && c <= 57) || c === 43 || c === 47;
  }
  if (!ok) throw new Error('body is not base64 (the standard alphabet, padded to a multiple of 4 characters)');
  return Buffer.from(s, 'base64');
}

// Turns what a handler returned into { status, headers, body: Buffer }.
function encodeResult(value) {
  if (isResponse(value)) {
    if (value.statusCode < 200 || value.statusCode > 599) {
      // 1xx are interim responses: a client would read the body as the real one.
      throw new Error(`statusCode ${value.statusCode} is not a final HTTP status (200-599)`);
    }
    const headers = responseHeaders(value.headers);
    const hasType = Object.keys(headers).some((k) => k.toLowerCase() === 'content-type');
    let body;
    let type;
    const b = value.body;
    if (value.isBase64Encoded && typeof b === 'string') {
      body = decodeBase64(b);
      type = 'application/octet-stream';
    } else if (b === undefined || b === null) {
      body = Buffer.alloc(0);
    } else if (Buffer.isBuffer(b) || b instanceof Uint8Array) {
      body = Buffer.from(b);
      type = 'application/octet-stream';
    } else if (typeof b === 'string') {
      body = Buffer.from(b, 'utf8');
      type = 'text/plain; charset=utf-8';
    } else {
      body = jsonBytes(b);
      type = 'application/json';
    }
    if (type && !hasType) headers['Content-Type'] = type;
    return { status: value.statusCode, headers, body };
  }
  if (Buffer.isBuffer(value) || value instanceof Uint8Array) {
    return { status: 200, headers: { 'Content-Type': 'application/octet-stream' }, body: Buffer.from(value) };
  }
  return { status: 200, headers: { 'Content-Type': 'application/json' }, body: jsonBytes(value === undefined ? null : value) };
}

function errorBody(type, message, requestId) {
  return { error: { type, message }, requestId };
}

// What a handler threw need not be an Error: a rejected promise often
// carries a string or a plain {name, message} object. Its type is then its
// own name when it has one, else "Error" — as a Go error without a type of
// its own — not typeof ("string", "object"); its message is the string, the
// message property, or the value as JSON, not "[object Object]".
function errorType(e) {
  if (e instanceof Error) return e.name || (e.constructor && e.constructor.name) || 'Error';
  if (e !== null && typeof e === 'object' && typeof e.name === 'string' && e.name !== '') return e.name;
  return 'Error';
}

function errorMessage(e) {
  if (e instanceof Error) return e.message;
  if (typeof e === 'string') return e;
  if (e !== null && typeof e === 'object') {
    if (typeof e.message === 'string') return e.message;
    try {
      const s = JSON.stringify(e);
      if (s !== undefined) return s;
    } catch {
      // a cycle or a BigInt: String below
    }
  }
  return String(e);
}

const TIMED_OUT = Symbol('timed out');

// Calls the handler under its request id and races it against the deadline.
// A handler cannot be stopped; past the deadline its result is dropped.
function invoke(fn, event, ctx, timeoutMs, who = { requestId: ctx.requestId, span: null }) {
  let timer;
  const call = requestStore.run(who, () => {
    try {
      return Promise.resolve(fn(event, ctx));
    } catch (e) {
      return Promise.reject(e);
    }
  });
  const deadline = new Promise((resolve) => {
    timer = setTimeout(() => resolve(TIMED_OUT), timeoutMs);
  });
  return Promise.race([call, deadline]).finally(() => clearTimeout(timer));
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function serve(cfg, fn) {
  let draining = false;
  let inFlight = 0;
  let onIdle = null;

  // Request headers as large as the Go and Python wrappers take (1 MiB, the
  // platform's proxies' limit too); Node's default of 16 KiB answered 431 to
  // a request with a big cookie the others serve. No count limit either.
  const server = http.createServer({ maxHeaderSize: MAX_HEADER_BYTES }, async (req, res) => {
    const requestId = req.headers['x-request-id'] || crypto.randomUUID().replaceAll('-', '');
    const send = (status, headers, body) => {
      if (res.headersSent || res.destroyed) return;
      const noBody = status === 204 || status === 304;
      const h = { ...headers, 'X-Request-Id': requestId };
      if (!noBody) h['Content-Length'] = body.length;
      if (draining) h.Connection = 'close';
      res.writeHead(status, h);
      res.end(req.method === 'HEAD' || noBody ? undefined : body);
    };
    const sendJSON = (status, value) => send(status, { 'Content-Type': 'application/json' }, jsonBytes(value));

    if (req.method === 'GET' && req.url.split('?')[0] === HEALTH_PATH) {
      sendJSON(200, { status: 'ok' });
      return;
    }
    inFlight++;
    const start = process.hrtime.bigint();
    let status = 500;
    let failure = null; // [type, message] of what went wrong, for the span
    const call = { requestId, span: startSpan(cfg, req, requestId) };
    try {
      const body = await readBody(req);
      const deadlineMs = Date.now() + cfg.timeoutMs;
      let event;
      try {
        event = makeEvent(req, body);
      } catch (e) {
        if (!(e instanceof RequestError)) throw e;
        status = e.status;
        sendJSON(status, errorBody(e.type, e.message, requestId));
        return;
      }
      let result;
      try {
        result = await invoke(fn, event, makeContext(cfg, requestId, deadlineMs, call.span), cfg.timeoutMs, call);
      } catch (e) {
        failure = [errorType(e), errorMessage(e)];
        log('error', `function threw ${errorType(e)}: ${errorMessage(e)}`, { errorType: errorType(e), stack: e && e.stack }, call);
        sendJSON(500, errorBody(errorType(e), errorMessage(e), requestId));
        return;
      }
      if (result === TIMED_OUT) {
        status = 504;
        failure = ['Timeout', `function exceeded its timeout of ${cfg.timeoutMs / 1000}s`];
        log('error', 'function timed out', { timeoutSeconds: cfg.timeoutMs / 1000 }, call);
        sendJSON(504, errorBody('Timeout', `function exceeded its timeout of ${cfg.timeoutMs / 1000}s`, requestId));
        return;
      }
      let out;
      try {
        out = encodeResult(result);
      } catch (e) {
        failure = ['BadResult', `cannot encode the function's result: ${e.message}`];
        log('error', `cannot encode the function's result: ${e.message}`, { errorType: 'BadResult', stack: e.stack }, call);
        sendJSON(500, errorBody('BadResult', `cannot encode the function's result: ${e.message}`, requestId));
        return;
      }
      status = out.status;
      send(out.status, out.headers, out.body);
    } catch (e) {
      failure = ['InternalError', errorMessage(e)];
      log('error', `wrapper error: ${errorMessage(e)}`, { stack: e && e.stack }, call);
      sendJSON(500, errorBody('InternalError', errorMessage(e), requestId));
    } finally {
      flushOutput(requestId);
      const durationMs = Number(process.hrtime.bigint() - start) / 1e6;
      log('info', 'request', { method: req.method, path: req.url.split('?')[0], status, durationMs: Math.round(durationMs * 1000) / 1000 }, call);
      endSpan(call.span, status, failure);
      inFlight--;
      if (inFlight === 0 && onIdle) onIdle();
    }
  });
  server.maxHeadersCount = 0;
  // A request refused before it was read to its end (431 past
  // MAX_HEADER_BYTES, 400 malformed) is answered as Node answers it, then
  // the connection is half-closed and what the client still sends is read
  // for up to a second. Node destroyed it at once, and closing with unread
  // input resets the connection: the client lost the answer (Go's server
  // waits so too).
  server.on('clientError', (err, socket) => {
    if (socket.slessRefused) return; // what arrives later fails the parser again
    socket.slessRefused = true;
    // As Node: no answer once a response on the connection has begun.
    const answering = socket._httpMessage && socket._httpMessage.headersSent;
    if (err.code === 'ECONNRESET' || !socket.writable || answering) {
      socket.destroy();
      return;
    }
    const status = REFUSALS[err.code] || '400 Bad Request';
    socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
    socket.on('data', () => {});
    socket.on('end', () => socket.destroy());
    setTimeout(() => socket.destroy(), 1000).unref();
  });
  server.keepAliveTimeout = 65000;
  server.requestTimeout = 0;

  const stop = (signal) => {
    if (draining) return;
    draining = true;
    log('info', 'draining', { signal });
    server.close(); // stop accepting; open connections end after their response
    server.closeIdleConnections();
    const finish = () => {
      flushAllOutput();
      log('info', 'stopped');
      exit(0);
    };
    if (inFlight === 0) return finish();
    onIdle = finish;
    setTimeout(() => {
      log('error', 'in-flight requests did not finish before the drain deadline', { inFlight });
      finish();
    }, cfg.timeoutMs + 1000).unref();
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));

  server.listen(cfg.port, cfg.host, () => {
    log('info', 'listening', { port: server.address().port, entrypoint: cfg.entrypoint });
  });
}

let coldCall = true;

// startSpan opens the span of one call (null when tracing is off), named for
// the function as OpenTelemetry's FaaS conventions have it.
function startSpan(cfg, req, requestId) {
  if (!tracer) return null;
  const cold = coldCall;
  coldCall = false;
  return tracer.start(cfg.functionName || cfg.entrypoint, req.headers.traceparent, req.headers.tracestate, {
    'faas.trigger': 'http',
    'faas.invocation_id': requestId,
    'faas.coldstart': cold,
    'http.request.method': req.method,
    'url.path': req.url.split('?')[0],
  });
}

function endSpan(span, status, failure) {
  if (!span) return;
  span.set('http.response.status_code', status);
  if (status >= 500) {
    const [type, message] = failure || ['Error', `HTTP ${status}`];
    span.set('error.type', type);
    span.fail(message);
  }
  span.end();
}

// resource is what the spans' resource says of this process; the OTEL_*
// variables add to it and win.
function resource(cfg) {
  const res = {};
  if (cfg.functionName) {
    res['service.name'] = cfg.functionName;
    res['faas.name'] = cfg.functionName;
  }
  if (cfg.revision) res['faas.version'] = cfg.revision;
  if (cfg.namespace) res['service.namespace'] = cfg.namespace;
  return res;
}

async function runJob(cfg, fn) {
  const requestId = process.env.SLESS_REQUEST_ID || crypto.randomUUID().replaceAll('-', '');
  let payload = null;
  if (cfg.payload.trim() !== '') {
    try {
      payload = JSON.parse(cfg.payload);
    } catch (e) {
      return finishJob(cfg, errorBody('BadPayload', `SLESS_PAYLOAD is not valid JSON: ${e.message}`, requestId), 1);
    }
  }
  const event = { method: 'POST', path: '/', query: {}, rawQuery: '', headers: { 'content-type': 'application/json' }, body: payload, isBase64Encoded: false };
  const ctx = makeContext(cfg, requestId, Date.now() + cfg.timeoutMs);
  let result;
  try {
    result = await invoke(fn, event, ctx, cfg.timeoutMs);
  } catch (e) {
    log('error', `function threw ${errorType(e)}: ${errorMessage(e)}`, { errorType: errorType(e), stack: e && e.stack }, requestId);
    return finishJob(cfg, errorBody(errorType(e), errorMessage(e), requestId), 1);
  }
  if (result === TIMED_OUT) {
    log('error', 'function timed out', { timeoutSeconds: cfg.timeoutMs / 1000 }, requestId);
    return finishJob(cfg, errorBody('Timeout', `function exceeded its timeout of ${cfg.timeoutMs / 1000}s`, requestId), 1);
  }
  // Encoded before the run counts as finished: a result that has no JSON is
  // the run's BadResult error (exit 1), as in Python and Go, not a failure to
  // write the termination message.
  let out;
  try {
    out = jsonBytes(result === undefined ? null : result);
  } catch (e) {
    log('error', `cannot encode the function's result: ${e.message}`, { errorType: 'BadResult', stack: e.stack }, requestId);
    return finishJob(cfg, errorBody('BadResult', `cannot encode the function's result: ${e.message}`, requestId), 1);
  }
  log('info', 'job finished', {}, requestId);
  return writeTermination(cfg, out, 0);
}

function finishJob(cfg, value, code) {
  return writeTermination(cfg, jsonBytes(value), code);
}

function writeTermination(cfg, data, code) {
  try {
    fs.writeFileSync(cfg.terminationPath, data);
  } catch (e) {
    log('error', `cannot write the termination message: ${e.message}`);
    return 2;
  }
  return code;
}

async function main() {
  const cfg = config(process.env);
  captureConsole();
  captureStreams();
  if (cfg.mode !== 'job') tracer = trace.fromEnv(process.env, resource(cfg), log);
  try {
    process.chdir(cfg.functionDir);
  } catch {
    // a missing directory shows up as a load error below
  }
  let fn;
  try {
    fn = cfg.mode === 'service' ? await loadApp(cfg) : await loadHandler(cfg);
  } catch (e) {
    flushAllOutput();
    log('error', `cannot load handler ${JSON.stringify(cfg.entrypoint)}: ${errorMessage(e)}`, { errorType: errorType(e), stack: e && e.stack });
    if (cfg.mode === 'job') process.exit(finishJob(cfg, errorBody('LoadError', errorMessage(e), ''), 1));
    process.exit(1);
  }
  if (cfg.mode === 'job') {
    // exit explicitly: a handler's leftover timers must not keep a job alive.
    const code = await runJob(cfg, fn);
    flushAllOutput();
    process.exit(code);
  }
  process.on('unhandledRejection', (e) => {
    log('error', `unhandled rejection: ${errorMessage(e)}`, { errorType: errorType(e), stack: e && e.stack });
  });
  process.on('uncaughtException', (e) => {
    log('error', `uncaught exception: ${errorMessage(e)}`, { errorType: errorType(e), stack: e && e.stack });
  });
  if (cfg.mode === 'service') serveService(cfg, fn);
  else serve(cfg, fn);
}

module.exports = { makeEvent, encodeResult, isResponse, config, RequestError };

if (require.main === module) main();
