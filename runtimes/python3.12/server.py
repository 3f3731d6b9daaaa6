"""sless runtime wrapper for Python.

Loads the handler named by SLESS_ENTRYPOINT ("package.module.function") from
the function's code in SLESS_FUNCTION_DIR and serves it over HTTP on PORT, or,
with SLESS_MODE=job, runs it once on SLESS_PAYLOAD. With SLESS_MODE=service
the entrypoint names a WSGI or ASGI app, served whole (docs/services.md; the
ASGI server is sless_asgi.py beside this file). The contract
it implements is written down in docs/runtimes.md; the same holds for every
sless runtime.

Standard library only: it runs on any CPython from 3.9 on.
"""

import asyncio
import base64
import binascii
import codecs
import datetime
import decimal
import importlib
import inspect
import io
import json
import os
import signal
import socket
import sys
import threading
import time
import traceback
import uuid
import http.client
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server
from urllib.parse import parse_qsl, urlsplit

# Imported before the function's folders go on sys.path: a module of the
# function's own of the same name cannot stand in for it.
import sless_asgi
import sless_trace

HEALTH_PATH = "/_sless/health"

# A request's head (its request line and headers) as large as the Go and
# Node.js wrappers take: 1 MiB in all, the platform's proxies' limit too, in
# any number of headers, and 431 past it. http.server read it with limits of
# its own (414 past a 64 KiB request line; http.client's 100 headers and
# 64 KiB a line, 431 past them, and no limit on the total): RequestHandler
# reads the head against one budget, and http.client's limits are lifted
# out of its way.
MAX_HEADER_BYTES = 1 << 20
http.client._MAXHEADERS = MAX_HEADER_BYTES
http.client._MAXLINE = MAX_HEADER_BYTES
_real_stdout = sys.stdout
_write_lock = threading.Lock()
_local = threading.local()
# The OTLP exporter (sless_trace.Tracer), None when tracing is off.
TRACER = None


def _now_iso():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def log(level, msg, request_id=None, **fields):
    """Writes one JSON log line to the real stdout."""
    rec = {"time": _now_iso(), "level": level, "msg": msg}
    rid = request_id if request_id is not None else getattr(_local, "request_id", None) or sless_asgi.request_id.get()
    if rid:
        rec["requestId"] = rid
    span = getattr(_local, "span", None) or sless_asgi.current_span.get()
    if span is not None:
        rec["traceId"] = span.trace_id
        rec["spanId"] = span.span_id
    rec.update(fields)
    line = json.dumps(rec, default=str, ensure_ascii=False)
    with _write_lock:
        _real_stdout.write(line + "\n")
        _real_stdout.flush()


class _LineLogger(io.TextIOBase):
    """Stands in for sys.stdout/sys.stderr so that what a handler prints
    becomes JSON log lines tagged with the request id of its thread.

    It is a whole text stream to the code that uses it: it has a binary
    buffer, an encoding and a descriptor, whose absence made
    sys.stdout.buffer.write, libraries reading sys.stdout.encoding, and
    subprocess or faulthandler handed sys.stdout fail the call."""

    encoding = "utf-8"
    errors = "replace"

    def __init__(self, level, real):
        super().__init__()
        self._level = level
        self._real = real
        self._buffers = threading.local()
        self.buffer = _BinaryLines(self)

    def writable(self):
        return True

    def isatty(self):
        return False

    def fileno(self):
        # What is written to the descriptor itself (a child process, C code)
        # goes out as written, unstructured: only Go's wrapper captures it.
        return self._real.fileno()

    def write(self, s):
        if not isinstance(s, str):
            s = str(s)
        buf = getattr(self._buffers, "text", "") + s
        *lines, rest = buf.split("\n")
        self._buffers.text = rest
        for line in lines:
            log(self._level, line, source="function")
        return len(s)

    def flush(self):
        rest = getattr(self._buffers, "text", "")
        if rest:
            self._buffers.text = ""
            log(self._level, rest, source="function")


class _BinaryLines(io.RawIOBase):
    """The buffer of a _LineLogger: bytes written to it are its text, decoded
    as UTF-8 per thread so that a character split across writes stays whole."""

    def __init__(self, text):
        super().__init__()
        self._text = text
        self._decoders = threading.local()

    def writable(self):
        return True

    def write(self, b):
        dec = getattr(self._decoders, "d", None)
        if dec is None:
            dec = self._decoders.d = codecs.getincrementaldecoder("utf-8")("replace")
        data = bytes(b)
        self._text.write(dec.decode(data))
        return len(data)

    def flush(self):
        self._text.flush()

    def fileno(self):
        return self._text.fileno()


class Config:
    def __init__(self, env):
        self.port = int(env.get("PORT") or 8080)
        self.host = env.get("SLESS_LISTEN_HOST", "")
        self.entrypoint = env.get("SLESS_ENTRYPOINT", "")
        self.function_dir = env.get("SLESS_FUNCTION_DIR") or "/sless/function"
        self.function_name = env.get("SLESS_FUNCTION_NAME", "")
        self.namespace = env.get("SLESS_NAMESPACE", "")
        self.revision = env.get("SLESS_REVISION") or env.get("K_REVISION", "")
        self.timeout = float(env.get("SLESS_TIMEOUT_SECONDS") or 30)
        self.mode = env.get("SLESS_MODE", "")
        # Service mode: "asgi" or "wsgi" overrides what the app's kind says (docs/services.md).
        self.app_interface = env.get("PYTHON_APP_INTERFACE", "")
        self.payload = env.get("SLESS_PAYLOAD", "")
        self.termination_path = env.get("SLESS_TERMINATION_MESSAGE_PATH") or "/dev/termination-log"


class Context:
    """What a handler knows about its invocation."""

    def __init__(self, cfg, request_id, deadline_ms, span=None):
        self.function_name = cfg.function_name
        self.namespace = cfg.namespace
        self.revision = cfg.revision
        self.request_id = request_id
        self.deadline_ms = deadline_ms
        # The call's span: "" when tracing is off. traceparent goes on calls
        # the handler makes, so they join the trace.
        self.trace_id = span.trace_id if span else ""
        self.span_id = span.span_id if span else ""
        self.traceparent = span.traceparent if span else ""

    def remaining_ms(self):
        """Milliseconds left before the wrapper answers 504."""
        return max(0, self.deadline_ms - int(time.time() * 1000))

    def __repr__(self):
        return "Context(function_name=%r, namespace=%r, revision=%r, request_id=%r, deadline_ms=%r)" % (
            self.function_name, self.namespace, self.revision, self.request_id, self.deadline_ms)


class HandlerError(Exception):
    """Raised by the wrapper for a request it refuses before the handler runs."""

    def __init__(self, status, type_, message):
        super().__init__(message)
        self.status = status
        self.type = type_


def _check_not_shadowed(function_dir, top):
    """Refuses an entrypoint whose top-level module the runtime has imported
    already from the standard library (email, json, logging, ...): Python
    would hand back that module, and the load failed with "email has no
    function 'handler'" though the function's email.py has one. Run on its
    own, the function's file would have won; under the wrapper it cannot."""
    loaded = sys.modules.get(top)
    if loaded is None:
        return
    for own in (top + ".py", os.path.join(top, "__init__.py")):
        path = os.path.join(function_dir, own)
        if not os.path.isfile(path):
            continue
        where = os.path.abspath(getattr(loaded, "__file__", None) or "")
        if not where.startswith(os.path.abspath(function_dir) + os.sep):
            raise ValueError("the function's %s cannot be the entrypoint's module: %r is also a module of Python's "
                             "standard library, which the runtime has loaded already; rename it" % (own, top))


def load_handler(cfg):
    module_name, sep, func_name = cfg.entrypoint.rpartition(".")
    if not sep or not module_name or not func_name:
        raise ValueError("SLESS_ENTRYPOINT must be module.function, got %r" % cfg.entrypoint)
    deps = os.path.join(cfg.function_dir, ".deps")
    for p in (deps, cfg.function_dir):
        if os.path.isdir(p) and p not in sys.path:
            sys.path.insert(0, p)
    _check_not_shadowed(cfg.function_dir, module_name.split(".")[0])
    module = importlib.import_module(module_name)
    fn = getattr(module, func_name, None)
    if not callable(fn):
        raise ValueError("%s has no function %r" % (module_name, func_name))
    return fn


def _is_json(content_type):
    ct = content_type.split(";", 1)[0].strip().lower()
    return ct == "application/json" or (ct.startswith("application/") and ct.endswith("+json"))


def split_target(target):
    """The path and raw query of a request target, as the client wrote them."""
    if target.startswith("/"):
        path, _, query = target.partition("?")
        return path, query
    parts = urlsplit(target)  # absolute-form (through a proxy) or "*"
    return parts.path or "/", parts.query


def make_event(method, target, headers, body):
    """Builds the event of the contract from a raw request."""
    path, raw_query = split_target(target)
    query = {}
    for k, v in parse_qsl(raw_query, keep_blank_values=True):
        query.setdefault(k, v)
    hdrs = {}
    for k, v in headers:
        k = k.lower()
        hdrs[k] = hdrs[k] + ", " + v if k in hdrs else v
    event = {
        "method": method,
        "path": path,
        "query": query,
        "rawQuery": raw_query,
        "headers": hdrs,
        "body": None,
        "isBase64Encoded": False,
    }
    if body:
        if _is_json(hdrs.get("content-type", "")):
            try:
                event["body"] = parse_json(body)
            except ValueError as e:
                raise HandlerError(400, "BadRequest", "request body is not valid JSON: %s" % e)
        else:
            try:
                event["body"] = body.decode("utf-8")
            except UnicodeDecodeError:
                event["body"] = base64.b64encode(body).decode("ascii")
                event["isBase64Encoded"] = True
    return event


def _refuse_constant(name):
    raise ValueError("%s is not a JSON value" % name)


def parse_json(data):
    """Parses a JSON text as RFC 8259 has it, as JSON.parse and Go's
    encoding/json do: UTF-8 without a byte order mark, no NaN or Infinity.
    json.loads alone takes all three, so a body the other wrappers answer 400
    would reach a Python handler."""
    # A strict decode refuses bytes that are not UTF-8; json.loads then refuses
    # a BOM left in the text, where on bytes it would skip it.
    return json.loads(data.decode("utf-8"), parse_constant=_refuse_constant)


def _json_bytes(value):
    # allow_nan=False: json.dumps would write NaN and Infinity, which are not
    # JSON; no client's parser reads them. A result holding one is a BadResult,
    # as in Node.js and Go.
    return json.dumps(value, ensure_ascii=False, allow_nan=False, default=_json_default).encode("utf-8")


def _json_default(o):
    if isinstance(o, (bytes, bytearray)):
        return base64.b64encode(bytes(o)).decode("ascii")
    if isinstance(o, (datetime.datetime, datetime.date)):
        return o.isoformat()
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    raise TypeError("Object of type %s is not JSON serializable" % type(o).__name__)


def _status_of(value):
    """The statusCode of a response object, or None when value is not one.
    An integral float counts: JSON does not tell 200 from 200.0."""
    if not isinstance(value, dict):
        return None
    code = value.get("statusCode")
    if isinstance(code, bool):
        return None
    if isinstance(code, int):
        return code
    if isinstance(code, float) and code.is_integer():
        return int(code)
    return None


def is_response(value):
    return _status_of(value) is not None


# RFC 9110 token characters: what a header name may be made of.
_TOKEN = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
# The wrapper frames the body and names the request itself: a handler's own
# Content-Length or Transfer-Encoding would contradict the bytes sent, which a
# client or proxy on a shared connection reads as the start of another response.
WRAPPER_HEADERS = frozenset(("content-length", "transfer-encoding", "x-request-id"))


def _header_text(name, v):
    """A scalar header value as text, the same in every wrapper: Node.js's
    String(v), so a result means one thing everywhere. Anything else —
    a dict, a nested list, an object — has no agreed text (str() would
    send Python's repr), nor has a NaN or an infinity: ValueError."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return v
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            raise ValueError("header %s has the value %r, which is not a finite number" % (name, v))
        return js_number(v)
    raise ValueError("header %s has a %s value; a header value is a string, number, boolean or null, or a list of them"
                     % (name, type(v).__name__))


def js_number(x):
    """A finite float as JavaScript's Number#toString writes it (and Go's
    encoding/json): the shortest digits that read back as x, in plain
    notation from 1e-6 up to below 1e21 and in exponent notation beyond —
    2 not 2.0, 1e-7 not 1e-07, 1e+21."""
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    _, digits, exp = decimal.Decimal(repr(abs(x))).as_tuple()
    d = "".join(map(str, digits)).rstrip("0")
    exp += len(digits) - len(d)
    k, n = len(d), len(d) + exp  # x = 0.d * 10**n
    if k <= n <= 21:
        return sign + d + "0" * (n - k)
    if 0 < n <= 21:
        return sign + d[:n] + "." + d[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * -n + d
    e = n - 1
    mant = d if k == 1 else d[0] + "." + d[1:]
    return "%s%se%s%d" % (sign, mant, "+" if e > 0 else "-", abs(e))


def response_headers(given):
    """The handler's headers as (name, value) pairs to send; a list value is
    one header line per element. Raises ValueError for a name that is not an
    HTTP token or a value with a control character (CR and LF would let the
    value write headers or a whole response of its own)."""
    pairs = []
    for name, value in (given or {}).items():
        name = str(name)
        if not name or not set(name) <= _TOKEN:
            raise ValueError("header name %r is not an HTTP token" % name)
        if name.lower() in WRAPPER_HEADERS:
            continue
        for v in value if isinstance(value, (list, tuple)) else (value,):
            text = _header_text(name, v)
            if any((c < " " and c != "\t") or c == "\x7f" for c in text):
                raise ValueError("header %s has a control character in its value %r" % (name, text))
            pairs.append((name, text))
    return pairs


_BASE64_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")


def decode_base64(text):
    """Decodes a base64 body as every wrapper does (Go's StdEncoding): the
    standard alphabet, padded to a multiple of four, line breaks skipped.
    b64decode alone drops characters outside the alphabet (so URL-safe text
    decodes to other bytes) and, before Python 3.11, anything after the
    padding: a wrong body would be sent instead of a BadResult."""
    s = text.replace("\r", "").replace("\n", "")
    data = s.rstrip("=")
    if len(s) % 4 or len(s) - len(data) > 2 or not set(data) <= _BASE64_CHARS:
        raise ValueError("body is not base64 (the standard alphabet, padded to a multiple of 4 characters)")
    return base64.b64decode(s)


def encode_result(value):
    """Turns what a handler returned into (status, header pairs, body bytes)."""
    status = _status_of(value)
    if status is not None:
        if not 200 <= status <= 599:
            # 1xx are interim responses: a client would read the body as the real one.
            raise ValueError("statusCode %d is not a final HTTP status (200-599)" % status)
        headers = response_headers(value.get("headers"))
        has_type = any(k.lower() == "content-type" for k, _ in headers)
        body = value.get("body")
        if value.get("isBase64Encoded") and isinstance(body, str):
            data = decode_base64(body)
            default_ct = "application/octet-stream"
        elif body is None:
            data, default_ct = b"", None
        elif isinstance(body, (bytes, bytearray)):
            data, default_ct = bytes(body), "application/octet-stream"
        elif isinstance(body, str):
            data, default_ct = body.encode("utf-8"), "text/plain; charset=utf-8"
        else:
            data, default_ct = _json_bytes(body), "application/json"
        if default_ct and not has_type:
            headers.append(("Content-Type", default_ct))
        return status, headers, data
    if isinstance(value, (bytes, bytearray)):
        return 200, [("Content-Type", "application/octet-stream")], bytes(value)
    return 200, [("Content-Type", "application/json")], _json_bytes(value)


def error_body(type_, message, request_id):
    return {"error": {"type": type_, "message": message}, "requestId": request_id}


def call_handler(fn, event, ctx):
    result = fn(event, ctx)
    if inspect.isawaitable(result):
        async def wait():
            return await result
        result = asyncio.run(wait())
    return result


class Invocation:
    """One handler call on its own thread, so the caller can stop waiting at
    the deadline while a handler that cannot be interrupted runs on."""

    def __init__(self, fn, event, ctx, span=None):
        self.done = threading.Event()
        self.result = None
        self.error = None
        self.trace = None
        self._thread = threading.Thread(target=self._run, args=(fn, event, ctx, span), daemon=True,
                                        name="sless-handler-" + ctx.request_id)

    def _run(self, fn, event, ctx, span):
        _local.request_id = ctx.request_id
        _local.span = span
        try:
            self.result = call_handler(fn, event, ctx)
        except BaseException as e:  # a handler's SystemExit must not end the server either
            self.error = e
            self.trace = traceback.format_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            self.done.set()

    def run(self, timeout):
        self._thread.start()
        return self.done.wait(timeout)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, cfg, fn):
        self.cfg = cfg
        self.fn = fn
        self.draining = False
        self.in_flight = 0
        self.idle = threading.Condition()
        self.cold = True  # no call served yet: the span of the first says faas.coldstart
        super().__init__((cfg.host, cfg.port), RequestHandler)

    def enter(self):
        with self.idle:
            self.in_flight += 1

    def leave(self):
        with self.idle:
            self.in_flight -= 1
            if self.in_flight == 0:
                self.idle.notify_all()

    def wait_idle(self, timeout):
        end = time.monotonic() + timeout
        with self.idle:
            while self.in_flight > 0:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self.idle.wait(left)
        return True


class _HeadReader:
    """The request's stream while its head is read: lines are read from it
    against what is left of MAX_HEADER_BYTES, and a head that would pass it
    raises LineTooLong, which http.server answers with 431."""

    def __init__(self, rfile):
        self._rfile = rfile
        self._left = MAX_HEADER_BYTES

    def readline(self, size=-1):
        limit = self._left + 1 if size is None or size < 0 else min(size, self._left + 1)
        line = self._rfile.readline(limit)
        self._left -= len(line)
        if self._left < 0:
            raise http.client.LineTooLong("request line and headers past %d bytes" % MAX_HEADER_BYTES)
        return line


class RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Only what http.server answers itself (send_error on a malformed
    # request) names a server; without these it would name the Python version.
    server_version = "sless-python"
    sys_version = ""
    # Headers and body are separate writes: with Nagle's algorithm the body
    # waits for the peer's delayed ACK (~40 ms a request).
    disable_nagle_algorithm = True

    def log_message(self, format, *args):  # the wrapper logs requests itself
        pass

    def handle_one_request(self):
        # http.server's own reads the request line with a 64 KiB limit of its
        # own; this one reads the whole head through one _HeadReader.
        head = _HeadReader(self.rfile)
        try:
            self.raw_requestline = head.readline()
        except http.client.LineTooLong as e:
            self.requestline, self.request_version, self.command = "", "", ""
            self.send_error(431, "Request line too long", str(e))
            self._linger()
            return
        except TimeoutError:
            self.close_connection = True
            return
        if not self.raw_requestline:
            self.close_connection = True
            return
        rfile, self.rfile = self.rfile, head
        try:
            ok = self.parse_request()
        finally:
            self.rfile = rfile
        if not ok:
            # parse_request answered (400, 431, 505) and the connection closes.
            self._linger()
            return
        self._handle()
        self.wfile.flush()

    def _linger(self):
        """After a refusal sent before the request was read to its end:
        half-closes and reads what the client still sends, for up to a
        second. Closing with unread input resets the connection, and the
        client could lose the answer with it (Go's server waits so too)."""
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + 1
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self.connection.settimeout(left)
                if not self.connection.recv(1 << 16):
                    return
        except OSError:
            pass

    def _send(self, status, headers, body, request_id):
        # Not send_response: it adds its own Server and Date lines, so a
        # handler's Date went out next to the wrapper's (two Date headers,
        # which HTTP forbids) and a Server line no other wrapper sends. As
        # in Go and Node.js, Date is the handler's when it gives one.
        self.send_response_only(status)
        for k, v in headers:
            # send_header encodes Latin-1; this sends the value's UTF-8 bytes, as Go and Node do.
            self.send_header(k, v.encode("utf-8").decode("latin-1"))
        if not any(k.lower() == "date" for k, _ in headers):
            self.send_header("Date", self.date_time_string())
        self.send_header("X-Request-Id", request_id)
        no_body = status in (204, 304)
        if not no_body:
            self.send_header("Content-Length", str(len(body)))
        if self.server.draining:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command != "HEAD" and not no_body:
            self.wfile.write(body)

    def _send_json(self, status, value, request_id):
        self._send(status, [("Content-Type", "application/json")], _json_bytes(value), request_id)

    def _target(self):
        # self.path has leading slashes collapsed ("//a" becomes "/a"); the
        # request line has the target as sent.
        words = self.requestline.split()
        return words[1] if len(words) >= 2 else self.path

    def _read_body(self):
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline(65537).split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _handle(self):
        server = self.server
        cfg = server.cfg
        request_id = self.headers.get("X-Request-Id") or uuid.uuid4().hex
        if self.path.split("?", 1)[0] == HEALTH_PATH and self.command == "GET":
            self._send_json(200, {"status": "ok"}, request_id)
            return
        server.enter()
        start = time.monotonic()
        status = 500
        failure = None  # what went wrong, for the span's status
        span = _local.span = start_span(cfg, self.headers.get("traceparent"), self.headers.get("tracestate"),
                                        request_id, self.command, self.path, server)
        try:
            body = self._read_body()
            deadline_ms = int(time.time() * 1000 + cfg.timeout * 1000)
            try:
                event = make_event(self.command, self._target(), self.headers.items(), body)
            except HandlerError as e:
                status = e.status
                self._send_json(status, error_body(e.type, str(e), request_id), request_id)
                return
            inv = Invocation(server.fn, event, Context(cfg, request_id, deadline_ms, span), span)
            if not inv.run(cfg.timeout):
                status = 504
                failure = ("Timeout", "function exceeded its timeout of %gs" % cfg.timeout)
                log("error", "function timed out", request_id, timeoutSeconds=cfg.timeout)
                self._send_json(504, error_body("Timeout", "function exceeded its timeout of %gs" % cfg.timeout,
                                                request_id), request_id)
                return
            if inv.error is not None:
                failure = (type(inv.error).__name__, str(inv.error))
                log("error", "function raised %s: %s" % (type(inv.error).__name__, inv.error), request_id,
                    errorType=type(inv.error).__name__, stack=inv.trace)
                self._send_json(500, error_body(type(inv.error).__name__, str(inv.error), request_id), request_id)
                return
            try:
                status, headers, data = encode_result(inv.result)
            except Exception as e:
                status = 500
                failure = ("BadResult", "cannot encode the function's result: %s" % e)
                log("error", "cannot encode the function's result: %s" % e, request_id,
                    errorType="BadResult", stack=traceback.format_exc())
                self._send_json(500, error_body("BadResult", "cannot encode the function's result: %s" % e,
                                                request_id), request_id)
                return
            self._send(status, headers, data, request_id)
        finally:
            log("info", "request", request_id, method=self.command, path=self.path.split("?", 1)[0],
                status=status, durationMs=round((time.monotonic() - start) * 1000, 3))
            _local.span = None
            end_span(span, status, failure)
            server.leave()

    def __getattr__(self, name):
        # Every method goes to the handler: do_GET, do_POST, do_PURGE, ...
        if name.startswith("do_"):
            return self._handle
        raise AttributeError(name)


def start_span(cfg, traceparent, tracestate, request_id, method, target, server):
    """The span of one call (None when tracing is off), named for the
    function as OpenTelemetry's FaaS conventions have it."""
    if TRACER is None:
        return None
    cold, server.cold = server.cold, False
    return TRACER.start(cfg.function_name or cfg.entrypoint, traceparent, tracestate, {
        "faas.trigger": "http",
        "faas.invocation_id": request_id,
        "faas.coldstart": cold,
        "http.request.method": method,
        "url.path": target.split("?", 1)[0],
    })


def end_span(span, status, failure=None):
    if span is None:
        return
    span.set("http.response.status_code", status)
    if status >= 500:
        error_type, message = failure or ("Error", "HTTP %d" % status)
        span.set("error.type", error_type)
        span.fail(message)
    span.end()


def run_job(cfg, fn):
    """Job mode: one call on SLESS_PAYLOAD, result or error to the termination file."""
    request_id = os.environ.get("SLESS_REQUEST_ID") or uuid.uuid4().hex
    try:
        payload = json.loads(cfg.payload, parse_constant=_refuse_constant) if cfg.payload.strip() else None
    except ValueError as e:
        return finish_job(cfg, error_body("BadPayload", "SLESS_PAYLOAD is not valid JSON: %s" % e, request_id), 1)
    event = {"method": "POST", "path": "/", "query": {}, "rawQuery": "",
             "headers": {"content-type": "application/json"}, "body": payload, "isBase64Encoded": False}
    deadline_ms = int(time.time() * 1000 + cfg.timeout * 1000)
    inv = Invocation(fn, event, Context(cfg, request_id, deadline_ms))
    if not inv.run(cfg.timeout):
        log("error", "function timed out", request_id, timeoutSeconds=cfg.timeout)
        return finish_job(cfg, error_body("Timeout", "function exceeded its timeout of %gs" % cfg.timeout,
                                          request_id), 1)
    if inv.error is not None:
        log("error", "function raised %s: %s" % (type(inv.error).__name__, inv.error), request_id,
            errorType=type(inv.error).__name__, stack=inv.trace)
        return finish_job(cfg, error_body(type(inv.error).__name__, str(inv.error), request_id), 1)
    try:
        out = _json_bytes(inv.result)
    except Exception as e:
        log("error", "cannot encode the function's result: %s" % e, request_id,
            errorType="BadResult", stack=traceback.format_exc())
        return finish_job(cfg, error_body("BadResult", "cannot encode the function's result: %s" % e, request_id), 1)
    log("info", "job finished", request_id)
    return finish_job(cfg, out, 0)


def finish_job(cfg, result, code):
    data = result if isinstance(result, bytes) else _json_bytes(result)
    try:
        with open(cfg.termination_path, "wb") as f:
            f.write(data)
    except OSError as e:
        log("error", "cannot write the termination message: %s" % e)
        return 2
    return code


class _ServiceHandler(WSGIRequestHandler):
    """wsgiref's handler without its stderr access log: the wrapper's own
    log lines are JSON on stdout."""

    def log_message(self, format, *args):
        pass


class ServiceServer(ThreadingMixIn, WSGIServer):
    """A WSGI server with a thread per connection: wsgiref's own serves one
    request at a time, and one slow request or open stream would stall all."""
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


def with_health(app):
    """The app, but for GET on HEALTH_PATH, which the wrapper answers."""

    def wrapped(environ, start_response):
        if environ.get("REQUEST_METHOD") == "GET" and environ.get("PATH_INFO") == HEALTH_PATH:
            start_response("200 OK", [("Content-Type", "application/json")])
            return [b'{"status":"ok"}']
        return app(environ, start_response)

    return wrapped


def with_trace(app):
    """The WSGI app with a span around each request, ended when the server
    closes the response (after its last chunk went out)."""
    if TRACER is None:
        return app
    cold = [True]

    def traced(environ, start_response):
        first, cold[0] = cold[0], False
        span = _local.span = service_span(environ.get("REQUEST_METHOD", "GET"), environ.get("PATH_INFO", "/"),
                                          environ.get("HTTP_TRACEPARENT"), environ.get("HTTP_TRACESTATE"), first)
        status = [500]

        def start(status_line, headers, exc_info=None):
            try:
                status[0] = int(status_line.split(" ", 1)[0])
            except ValueError:
                pass
            return start_response(status_line, headers, exc_info)

        try:
            result = app(environ, start)
        except BaseException as e:
            _local.span = None
            end_span(span, 500, (type(e).__name__, str(e)))
            raise
        return _TracedBody(result, span, status)

    return traced


class _TracedBody:
    """A WSGI response whose close() also ends the request's span."""

    def __init__(self, body, span, status):
        self._body = body
        self._span = span
        self._status = status

    def __iter__(self):
        return iter(self._body)

    def __len__(self):
        # wsgiref sets Content-Length for a one-item list; a TypeError here
        # (an iterator has no length) tells it there is none, as before.
        return len(self._body)

    def close(self):
        try:
            if hasattr(self._body, "close"):
                self._body.close()
        finally:
            _local.span = None
            end_span(self._span, self._status[0])


def service_span(method, path, traceparent, tracestate, cold):
    """The span of one request to a service's app, named for its method as
    OpenTelemetry's HTTP conventions have it when the route is unknown."""
    return TRACER.start(method, traceparent, tracestate, {
        "faas.coldstart": cold,
        "http.request.method": method,
        "url.path": path,
    })


def app_interface(cfg, app):
    """"asgi" or "wsgi": PYTHON_APP_INTERFACE when set, else ASGI for an
    async callable (sless_asgi.is_asgi) and WSGI for any other."""
    given = cfg.app_interface.strip().lower()
    if given in ("asgi", "wsgi"):
        return given
    if given:
        raise ValueError("PYTHON_APP_INTERFACE is %r; it is asgi, wsgi or unset (the app's kind decides)"
                         % cfg.app_interface)
    return "asgi" if sless_asgi.is_asgi(app) else "wsgi"


def serve_service(cfg, app):
    """Service mode: the app gets every request with its whole path and
    streams its answer. An ASGI app is served by sless_asgi; a WSGI app by
    wsgiref, each chunk it yields flushed as it comes."""
    try:
        interface = app_interface(cfg, app)
    except ValueError as e:
        log("error", str(e))
        return 1
    if interface == "asgi":
        code = sless_asgi.serve(app, cfg.host, cfg.port, log, HEALTH_PATH, cfg.timeout,
                                lambda port: log("info", "listening", port=port, entrypoint=cfg.entrypoint,
                                                 mode="service", interface="asgi"),
                                span=service_span if TRACER is not None else None, end_span=end_span)
        log("info", "stopped", exitCode=code)
        return code
    server = make_server(cfg.host, cfg.port, with_health(with_trace(app)), server_class=ServiceServer,
                         handler_class=_ServiceHandler)
    stop = threading.Event()

    def on_term(signum, frame):
        if not stop.is_set():
            stop.set()
            log("info", "draining", signal=signal.Signals(signum).name)
            threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    log("info", "listening", port=server.server_address[1], entrypoint=cfg.entrypoint, mode="service",
        interface="wsgi")
    server.serve_forever(poll_interval=0.1)
    server.server_close()
    log("info", "stopped")
    return 0


def serve(cfg, fn):
    server = Server(cfg, fn)
    stop = threading.Event()

    def on_term(signum, frame):
        if not stop.is_set():
            stop.set()
            log("info", "draining", signal=signal.Signals(signum).name)
            server.draining = True
            # shutdown() blocks until serve_forever returns, so not on this thread.
            threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    log("info", "listening", port=server.server_address[1], entrypoint=cfg.entrypoint)
    server.serve_forever(poll_interval=0.1)
    server.socket.close()  # refuse new connections while in-flight requests finish
    if not server.wait_idle(cfg.timeout + 1):
        log("error", "in-flight requests did not finish before the drain deadline", inFlight=server.in_flight)
    log("info", "stopped")
    return 0


def main():
    global TRACER
    cfg = Config(os.environ)
    sys.stdout = _LineLogger("info", sys.__stdout__)
    sys.stderr = _LineLogger("error", sys.__stderr__)
    if cfg.mode != "job":
        TRACER = sless_trace.from_env(os.environ, resource(cfg), log)
    try:
        os.chdir(cfg.function_dir)
    except OSError:
        pass
    try:
        fn = load_handler(cfg)
    except BaseException as e:
        log("error", "cannot load handler %r: %s" % (cfg.entrypoint, e), errorType=type(e).__name__,
            stack=traceback.format_exc())
        if cfg.mode == "job":
            return finish_job(cfg, error_body("LoadError", str(e), ""), 1)
        return 1
    if cfg.mode == "job":
        return run_job(cfg, fn)
    if cfg.mode == "service":
        return serve_service(cfg, fn)
    return serve(cfg, fn)


def resource(cfg):
    """What the spans' resource says of this process; the OTEL_* variables
    add to it and win."""
    attrs = {"faas.name": cfg.function_name, "faas.version": cfg.revision, "service.namespace": cfg.namespace}
    attrs = {k: v for k, v in attrs.items() if v}
    if cfg.function_name:
        attrs["service.name"] = cfg.function_name
    return attrs


if __name__ == "__main__":
    code = main()
    if TRACER is not None:
        TRACER.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    # os._exit: handler threads still running past their deadline must not hold the exit.
    os._exit(code)
