"""An ASGI 3 server for the sless Python runtime's service mode, on asyncio
and the standard library only: no ASGI server (uvicorn, hypercorn) is in the
runtime's image, and a service's requirements need not bring one.

It speaks HTTP/1.1 (keep-alive, Content-Length and chunked request bodies,
streamed responses flushed as the app sends them, HEAD, Expect:
100-continue), WebSocket (RFC 6455, without extensions) and the lifespan
protocol. docs/services.md says what it does and where its limits are.
"""

import asyncio
import base64
import binascii
import contextvars
import hashlib
import inspect
import re
import signal
import sys
import time
import traceback
import uuid
from email.utils import formatdate
from urllib.parse import unquote

# The request id of the request a task serves: server.py's log lines (and
# what the app prints) carry it, as threads carry theirs in function mode.
request_id = contextvars.ContextVar("sless_request_id", default=None)
# The span of that request (sless_trace.Span), when tracing is on.
current_span = contextvars.ContextVar("sless_span", default=None)

# The request line and headers together, as in the other wrappers: 431 past it.
MAX_HEAD_BYTES = 1 << 20
# A WebSocket message, whole or in fragments: the connection closes with 1009 past it.
MAX_WS_MESSAGE_BYTES = 16 << 20
# A connection with no request under way, or a head not arriving whole, is closed after this.
IDLE_SECONDS = 75
# How long a close handshake waits for the peer's close frame.
WS_CLOSE_SECONDS = 5
# Read no further ahead of the app than this: the socket is paused past it.
READ_AHEAD_BYTES = 1 << 20
# Unread request body a keep-alive connection discards for the next request; past it the connection closes.
DISCARD_BYTES = 1 << 18

_TOKEN = frozenset(b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
# Control characters but tab: none may stand in a header value or (with space) a request target.
_CONTROL = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
_TARGET_BAD = re.compile(rb"[\x00-\x20\x7f]")
_WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_REASONS = {
    100: "Continue", 101: "Switching Protocols", 200: "OK", 201: "Created", 202: "Accepted", 204: "No Content",
    206: "Partial Content", 301: "Moved Permanently", 302: "Found", 303: "See Other", 304: "Not Modified",
    307: "Temporary Redirect", 308: "Permanent Redirect", 400: "Bad Request", 401: "Unauthorized",
    403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed", 408: "Request Timeout", 409: "Conflict",
    413: "Content Too Large", 414: "URI Too Long", 415: "Unsupported Media Type", 422: "Unprocessable Content",
    426: "Upgrade Required", 429: "Too Many Requests", 431: "Request Header Fields Too Large",
    500: "Internal Server Error", 501: "Not Implemented", 502: "Bad Gateway", 503: "Service Unavailable",
    504: "Gateway Timeout", 505: "HTTP Version Not Supported",
}


def is_asgi(app):
    """An app is ASGI when it, or its __call__, is a coroutine function
    (async def): ASGI 3's single callable. Anything else is taken for WSGI."""
    if inspect.iscoroutinefunction(app):
        return True
    call = getattr(type(app), "__call__", None)
    return call is not None and inspect.iscoroutinefunction(call)


class ClientDisconnected(OSError):
    """Raised by send() once the client has gone (ASGI spec 2.4)."""


class _BadRequest(Exception):
    def __init__(self, status, message, headers=()):
        super().__init__(message)
        self.status = status
        self.headers = list(headers)


class _Closed(Exception):
    """The peer closed (or reset) the connection."""


def _http_date():
    return formatdate(usegmt=True).encode("ascii")


def _has_token(value, token):
    return any(part.strip().lower() == token for part in value.split(b","))


def _check_header(name, value):
    if not name or not set(name) <= _TOKEN:
        raise ValueError("header name %r is not an HTTP token" % name)
    if _CONTROL.search(value):
        raise ValueError("header %s has a control character in its value %r" % (name.decode("latin-1"), value))


def _head_bytes(status, headers):
    out = [b"HTTP/1.1 %d %s\r\n" % (status, _REASONS.get(status, "Status").encode("ascii"))]
    out.extend(name + b": " + value + b"\r\n" for name, value in headers)
    out.append(b"\r\n")
    return b"".join(out)


def _plain(status, message, extra=(), close=True):
    """A whole response of the wrapper's own, with a text body."""
    body = (message + "\n").encode("utf-8")
    headers = [(b"Content-Type", b"text/plain; charset=utf-8"), (b"Content-Length", str(len(body)).encode()),
               (b"Date", _http_date())] + list(extra)
    if close:
        headers.append((b"Connection", b"close"))
    return _head_bytes(status, headers) + body


class _Connection(asyncio.Protocol):
    """One client connection: reads requests one after another and hands each
    to the app, or turns into a WebSocket after an upgrade."""

    def __init__(self, server):
        self.server = server
        self.loop = server.loop
        self.transport = None
        self.buf = bytearray()
        self.eof = False
        self.reading_paused = False
        self._data_waiter = None
        self._can_write = asyncio.Event()
        self._can_write.set()
        self.gone = self.loop.create_future()  # done when the client closes or resets
        self.idle = True
        self.ws = None
        self.task = None

    # asyncio.Protocol

    def connection_made(self, transport):
        self.transport = transport
        self.server.connections.add(self)
        self.task = self.loop.create_task(self._serve())

    def data_received(self, data):
        self.buf += data
        if len(self.buf) > READ_AHEAD_BYTES and not self.reading_paused:
            self.reading_paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self):
        # A half-closed client is taken for a gone one, as browsers and proxies
        # do not half-close; the transport stays open to write what is pending.
        self.eof = True
        self._set_gone()
        self._wake()
        return True

    def connection_lost(self, exc):
        self.eof = True
        self._set_gone()
        self._can_write.set()
        self._wake()

    def pause_writing(self):
        self._can_write.clear()

    def resume_writing(self):
        self._can_write.set()

    def _set_gone(self):
        if not self.gone.done():
            self.gone.set_result(None)

    def _wake(self):
        w, self._data_waiter = self._data_waiter, None
        if w is not None and not w.done():
            w.set_result(None)

    # reading

    async def _more(self):
        """Waits for more bytes; _Closed at the end of the stream."""
        if self.eof:
            raise _Closed()
        if self.reading_paused:
            self.reading_paused = False
            self.transport.resume_reading()
        self._data_waiter = self.loop.create_future()
        await self._data_waiter

    def _take(self, n):
        out = bytes(self.buf[:n])
        del self.buf[:n]
        if self.reading_paused and len(self.buf) < READ_AHEAD_BYTES // 2:
            self.reading_paused = False
            self.transport.resume_reading()
        return out

    async def read_line(self, limit):
        """A line with its ending stripped; _BadRequest past limit bytes."""
        start = 0
        while True:
            i = self.buf.find(b"\n", start)
            if i >= 0:
                if i + 1 > limit:
                    raise _BadRequest(431, "request head past %d bytes" % MAX_HEAD_BYTES)
                line = self._take(i + 1)
                return line[:-2] if line.endswith(b"\r\n") else line[:-1]
            if len(self.buf) > limit:
                raise _BadRequest(431, "request head past %d bytes" % MAX_HEAD_BYTES)
            start = len(self.buf)
            await self._more()

    async def read_exactly(self, n):
        while len(self.buf) < n:
            await self._more()
        return self._take(n)

    async def read_some(self, n):
        if not self.buf:
            await self._more()
        return self._take(min(n, len(self.buf)))

    # writing

    async def write(self, data):
        if self.transport.is_closing():
            raise ClientDisconnected("the client has closed the connection")
        self.transport.write(data)
        await self._can_write.wait()
        if self.transport.is_closing() and self.gone.done():
            raise ClientDisconnected("the client has closed the connection")

    def close(self):
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    # serving

    async def _serve(self):
        try:
            while not self.server.draining:
                self.idle = True
                try:
                    head = await asyncio.wait_for(self._read_head(), IDLE_SECONDS)
                except asyncio.TimeoutError:
                    if self.buf:
                        await self._refuse(408, "the request head did not arrive in %ds" % IDLE_SECONDS)
                    return
                except _BadRequest as e:
                    await self._refuse(e.status, str(e), e.headers)
                    return
                if head is None:
                    return
                self.idle = False
                if not await self._request(*head):
                    return
        except _Closed:
            pass
        except Exception as e:  # a bug of the server's own: log it, drop the connection
            self.server.log("error", "connection failed: %s: %s" % (type(e).__name__, e), stack=traceback.format_exc())
        finally:
            self.close()
            self.server.connections.discard(self)

    async def _refuse(self, status, message, extra=()):
        """Answers a request the server refuses before any app sees it, and
        closes after reading what the client still sends for a moment (closing
        with unread input resets the connection, and the answer with it)."""
        self.server.log("info", "request refused", status=status, error=message)
        try:
            self.transport.write(_plain(status, message, extra))
            if self.transport.can_write_eof():
                self.transport.write_eof()
            deadline = self.loop.time() + 1
            while not self.eof and self.loop.time() < deadline:
                self.buf.clear()
                await asyncio.wait_for(self._more(), deadline - self.loop.time())
        except (asyncio.TimeoutError, _Closed, OSError):
            pass

    async def _read_head(self):
        """The request line and headers, or None when the connection ends before a request."""
        while True:
            while self.buf[:2] == b"\r\n":  # RFC 9112 2.2: empty lines before a request are ignored
                del self.buf[:2]
            if self.buf and self.buf != b"\r":
                break
            try:
                await self._more()
            except _Closed:
                return None
        budget = MAX_HEAD_BYTES
        line = await self.read_line(budget)
        budget -= len(line) + 2
        parts = line.split(b" ")
        if len(parts) != 3:
            raise _BadRequest(400, "malformed request line")
        method, target, version = parts
        if not method or not set(method) <= _TOKEN:
            raise _BadRequest(400, "malformed method")
        if not target or _TARGET_BAD.search(target):
            raise _BadRequest(400, "malformed request target")
        if version not in (b"HTTP/1.1", b"HTTP/1.0"):
            if version.startswith(b"HTTP/"):
                raise _BadRequest(505, "HTTP version %s is not supported" % version.decode("latin-1"))
            raise _BadRequest(400, "malformed request line")
        headers = []
        while True:
            line = await self.read_line(budget)
            budget -= len(line) + 2
            if not line:
                break
            name, colon, value = line.partition(b":")
            if not colon or not name or not set(name) <= _TOKEN:
                raise _BadRequest(400, "malformed header line")
            value = value.strip(b" \t")
            if _CONTROL.search(value):
                raise _BadRequest(400, "control character in the value of header %s" % name.decode("latin-1"))
            headers.append((name.lower(), value))
        return method.decode("ascii"), target, version, headers

    async def _request(self, method, target, version, headers):
        """Serves one request; False when the connection must close after it."""
        path, _, query = target.partition(b"?")
        if not path.startswith(b"/"):
            # absolute-form (through a proxy): its path; "*" (OPTIONS) stays as it is
            if b"://" in path:
                rest = path.split(b"://", 1)[1]
                path = b"/" + rest.partition(b"/")[2]
        rid = next((v.decode("latin-1") for k, v in headers if k == b"x-request-id"), None) or uuid.uuid4().hex
        token = request_id.set(rid)
        try:
            if method == "GET" and path == self.server.health_path:
                body = b'{"status":"ok"}'
                self.transport.write(_head_bytes(200, [(b"Content-Type", b"application/json"),
                                                       (b"Content-Length", str(len(body)).encode()),
                                                       (b"Date", _http_date())]) + body)
                return True
            scope = {
                "asgi": {"version": "3.0", "spec_version": "2.4"},
                "http_version": version[5:].decode("ascii"),
                "method": method,
                "scheme": "http",
                "path": unquote(path.decode("latin-1")),
                "raw_path": path,
                "query_string": query,
                "root_path": "",
                "headers": headers,
                "client": self.transport.get_extra_info("peername")[:2],
                "server": self.transport.get_extra_info("sockname")[:2],
                "state": dict(self.server.state),
            }
            upgrade = next((v for k, v in headers if k == b"upgrade"), b"")
            connection = b",".join(v for k, v in headers if k == b"connection")
            if _has_token(upgrade, b"websocket") and _has_token(connection, b"upgrade"):
                scope["type"] = "websocket"
                scope["scheme"] = "ws"
                del scope["method"]
                await self._traced(_WebSocket(self, scope, version), method, headers)
                return False
            scope["type"] = "http"
            return await self._traced(_HTTPExchange(self, scope, version), method, headers)
        finally:
            request_id.reset(token)

    async def _traced(self, exchange, method, headers):
        """Runs an exchange under a span of its own when tracing is on."""
        server = self.server
        if server.span is None:
            return await exchange.run()
        cold, server.cold = server.cold, False
        header = dict((k, v.decode("latin-1")) for k, v in headers if k in (b"traceparent", b"tracestate"))
        span = server.span(method, exchange.scope["path"], header.get(b"traceparent"), header.get(b"tracestate"), cold)
        token = current_span.set(span)
        try:
            return await exchange.run()
        except BaseException as e:
            server.end_span(span, 500, (type(e).__name__, str(e)))
            span = None
            raise
        finally:
            current_span.reset(token)
            if span is not None:
                server.end_span(span, exchange.status or 500)


class _HTTPExchange:
    """One HTTP request and its response, between a connection and the app."""

    def __init__(self, conn, scope, version):
        self.conn = conn
        self.scope = scope
        self.head = scope["method"] == "HEAD"
        self.http10 = version == b"HTTP/1.0"
        headers = scope["headers"]
        connection = b",".join(v for k, v in headers if k == b"connection")
        self.keep_alive = _has_token(connection, b"keep-alive") if self.http10 else not _has_token(connection, b"close")
        self.expect_continue = any(k == b"expect" and v.lower() == b"100-continue" for k, v in headers)
        self.chunked = False
        self.left = 0  # body bytes still to read (Content-Length), or of the current chunk
        self.body_done = False
        self.bad = None
        te = [v for k, v in headers if k == b"transfer-encoding"]
        lengths = {v for k, v in headers if k == b"content-length"}
        if te:
            given = b",".join(te)
            if self.http10:
                self.bad = (400, "Transfer-Encoding in an HTTP/1.0 request")
            elif given.split(b",")[-1].strip().lower() != b"chunked":
                self.bad = (501, "transfer coding %s is not supported" % given.decode("latin-1"))
            self.chunked = True
            # RFC 9112 6.3: with both, Transfer-Encoding wins and the connection must close after.
            if lengths:
                self.keep_alive = False
        elif lengths:
            if len(lengths) != 1 or not next(iter(lengths)).isdigit():
                self.bad = (400, "malformed Content-Length")
            else:
                self.left = int(next(iter(lengths)))
        self.body_done = not self.chunked and self.left == 0
        self.sent_continue = False
        self.body_given = False  # the app has had the last http.request
        # response state
        self.started = False
        self.status = None
        self.out_headers = None
        self.out_length = None  # the app's Content-Length, if it gave one
        self.sent_bytes = 0
        self.out_chunked = False
        self.complete = False
        self.done = conn.loop.create_future()  # the response is complete (or abandoned)

    async def run(self):
        conn = self.conn
        start = time.monotonic()
        if self.bad is not None:
            await conn._refuse(*self.bad)
            return False
        raised = False
        try:
            await conn.server.app(self.scope, self.receive, self.send)
        except ClientDisconnected:
            pass
        except Exception as e:
            raised = True
            conn.server.log("error", "app raised %s: %s" % (type(e).__name__, e), errorType=type(e).__name__,
                            stack=traceback.format_exc())
        finally:
            if not self.done.done():
                self.done.set_result(None)
        if self.started and self.out_headers is not None:
            self.started = False  # a start with no body after it: nothing went out
        if not self.started and not conn.gone.done():
            self.status = 500
            if not raised:
                conn.server.log("error", "app returned without a response")
            conn.transport.write(_plain(500, "Internal Server Error", close=not self.keep_alive))
            self.complete = True
        conn.server.log("info", "request", method=self.scope["method"], path=self.scope["path"],
                        status=self.status, durationMs=round((time.monotonic() - start) * 1000, 3))
        if not self.complete or not self.keep_alive or conn.gone.done() or conn.server.draining:
            return False
        return await self._discard_body()

    async def _discard_body(self):
        """Reads away what the app left of the request body, so that the next
        request starts where it should; closes instead past DISCARD_BYTES or
        when a 100 Continue was expected and not sent (the client waits)."""
        if self.body_done:
            return True
        if self.expect_continue and not self.sent_continue:
            return False
        read = 0
        try:
            while not self.body_done:
                chunk = await self._read_body(DISCARD_BYTES)
                read += len(chunk)
                if read > DISCARD_BYTES:
                    return False
        except (_BadRequest, _Closed):
            return False
        return True

    async def _read_body(self, n):
        """Up to n bytes of the request body, decoded from its framing."""
        conn = self.conn
        if not self.chunked:
            data = await conn.read_some(min(n, self.left))
            self.left -= len(data)
            self.body_done = self.left == 0
            return data
        if self.left == 0:
            line = await conn.read_line(4096)
            size = line.split(b";", 1)[0].strip()
            try:
                if not size or not set(size) <= set(b"0123456789abcdefABCDEF"):
                    raise ValueError
                self.left = int(size, 16)
            except ValueError:
                raise _BadRequest(400, "malformed chunk size")
            if self.left == 0:
                while await conn.read_line(MAX_HEAD_BYTES):  # trailers, which no app is given
                    pass
                self.body_done = True
                return b""
        data = await conn.read_some(min(n, self.left))
        self.left -= len(data)
        if self.left == 0:
            if await conn.read_exactly(2) != b"\r\n":
                raise _BadRequest(400, "malformed chunk")
        return data

    async def receive(self):
        conn = self.conn
        if not self.body_given and not conn.gone.done():
            if self.expect_continue and not self.sent_continue and not self.started:
                self.sent_continue = True
                conn.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            try:
                data = b""
                # an empty chunk-size line's read can yield no bytes: read until there are some or the body ends
                while not data and not self.body_done:
                    data = await self._read_body(1 << 16)
                self.body_given = self.body_done
                return {"type": "http.request", "body": data, "more_body": not self.body_done}
            except _Closed:
                pass
            except _BadRequest as e:
                conn.server.log("info", "bad request body: %s" % e)
                self.keep_alive = False
                if not self.started:
                    self.started = True
                    self.status = e.status
                    conn.transport.write(_plain(e.status, str(e)))
                conn.close()
                conn._set_gone()
        # The body is read: the next event is the client leaving or the response ending.
        await asyncio.wait([conn.gone, self.done], return_when=asyncio.FIRST_COMPLETED)
        return {"type": "http.disconnect"}

    async def send(self, message):
        conn = self.conn
        kind = message.get("type")
        if conn.gone.done():
            raise ClientDisconnected("the client has closed the connection")
        if kind == "http.response.start":
            if self.started:
                raise RuntimeError("http.response.start sent twice")
            status = message.get("status")
            if not isinstance(status, int) or not 100 <= status <= 599:
                raise ValueError("http.response.start has the status %r, not a number from 100 to 599" % (status,))
            headers = []
            for name, value in message.get("headers") or ():
                name, value = bytes(name), bytes(value)
                _check_header(name, value)
                low = name.lower()
                if low == b"transfer-encoding":
                    continue  # the server frames the body itself
                if low == b"content-length":
                    if not value.strip().isdigit():
                        raise ValueError("Content-Length %r is not a number" % value)
                    self.out_length = int(value)
                headers.append((name, value))
            self.status = status
            self.out_headers = headers
            self.started = True
            return
        if kind != "http.response.body":
            raise ValueError("unexpected message %r in an HTTP exchange" % kind)
        if not self.started:
            raise RuntimeError("http.response.body before http.response.start")
        if self.complete:
            raise RuntimeError("http.response.body after the response was complete")
        body = bytes(message.get("body") or b"")
        more = bool(message.get("more_body", False))
        no_body = self.status in (204, 304) or self.status < 200
        out = bytearray()
        if self.out_headers is not None:
            out += self._head(len(body) if not more else None, no_body)
            self.out_headers = None
        if not self.head and not no_body and body:
            if self.out_length is not None and self.sent_bytes + len(body) > self.out_length:
                conn.close()
                raise RuntimeError("the app sent more than its Content-Length of %d bytes" % self.out_length)
            self.sent_bytes += len(body)
            out += b"%x\r\n%s\r\n" % (len(body), body) if self.out_chunked else body
        if not more:
            if self.out_chunked:
                out += b"0\r\n\r\n"
            if self.out_length is not None and self.sent_bytes < self.out_length and not self.head and not no_body:
                self.keep_alive = False  # the client waits for bytes that will never come: close tells it
            self.complete = True
        if out:
            await conn.write(bytes(out))
        if self.complete and not self.done.done():
            self.done.set_result(None)

    def _head(self, whole_length, no_body):
        headers = self.out_headers
        names = {k.lower() for k, _ in headers}
        if b"date" not in names:
            headers.append((b"Date", _http_date()))
        if not no_body and self.out_length is None:
            if whole_length is not None and (not self.head or whole_length):
                headers.append((b"Content-Length", str(whole_length).encode()))
                self.out_length = whole_length
            elif self.http10:
                self.keep_alive = False  # an HTTP/1.0 body of unknown length ends with the connection
            elif not self.head:
                headers.append((b"Transfer-Encoding", b"chunked"))
                self.out_chunked = True
        if self.conn.server.draining:
            self.keep_alive = False
        if not self.keep_alive:
            headers.append((b"Connection", b"close"))
        elif self.http10:
            headers.append((b"Connection", b"keep-alive"))
        return _head_bytes(self.status, headers)


class _WebSocket:
    """A WebSocket session (RFC 6455) between a connection and the app."""

    def __init__(self, conn, scope, version):
        self.conn = conn
        self.scope = scope
        self.version = version
        self.state = "connecting"  # connecting, open, closing, closed
        self.incoming = asyncio.Queue(maxsize=16)
        self.connect_given = False
        self.close_code = None
        self.status = None  # of the handshake's answer
        self.disconnect = None  # the websocket.disconnect event, once the session is over
        self.reader = None
        self.closed = conn.loop.create_future()  # the close handshake is over, or the connection gone
        conn.ws = self

    def _handshake_error(self):
        headers = self.scope["headers"]
        if self.version != b"HTTP/1.1":
            return 400, "a WebSocket handshake needs HTTP/1.1", ()
        if next((v for k, v in headers if k == b"sec-websocket-version"), b"") != b"13":
            return 426, "Sec-WebSocket-Version must be 13", [(b"Sec-WebSocket-Version", b"13")]
        key = next((v for k, v in headers if k == b"sec-websocket-key"), b"")
        try:
            if len(base64.b64decode(key, validate=True)) != 16:
                raise ValueError
        except (ValueError, binascii.Error):
            return 400, "Sec-WebSocket-Key must be 16 bytes in base64", ()
        if any(k in (b"content-length", b"transfer-encoding") for k, _ in headers):
            return 400, "a WebSocket handshake has no body", ()
        return None

    async def run(self):
        conn = self.conn
        start = time.monotonic()
        err = self._handshake_error()
        if err is not None:
            await conn._refuse(*err)
            return
        self.scope["subprotocols"] = [p.strip().decode("latin-1") for k, v in self.scope["headers"]
                                      if k == b"sec-websocket-protocol" for p in v.split(b",") if p.strip()]
        try:
            await conn.server.app(self.scope, self.receive, self.send)
        except ClientDisconnected:
            pass
        except Exception as e:
            conn.server.log("error", "app raised %s: %s" % (type(e).__name__, e), errorType=type(e).__name__,
                            stack=traceback.format_exc())
            if self.state == "connecting":
                self.state = "closed"
                self.status = 500
                conn.transport.write(_plain(500, "Internal Server Error"))
            elif self.state == "open":
                await self._close(1011, "")
        if self.state == "connecting":
            # The app left without accepting: the handshake is refused (ASGI's rule).
            self.state = "closed"
            self.status = 403
            conn.transport.write(_plain(403, "Forbidden"))
        elif self.state == "open":
            await self._close(1000, "")
        if self.state == "closing":
            try:
                await asyncio.wait_for(asyncio.shield(self.closed), WS_CLOSE_SECONDS)
            except asyncio.TimeoutError:
                pass
        if self.reader is not None:
            self.reader.cancel()
        conn.server.log("info", "websocket", path=self.scope["path"], status=self.status, closeCode=self.close_code,
                        durationMs=round((time.monotonic() - start) * 1000, 3))

    async def receive(self):
        if not self.connect_given:
            self.connect_given = True
            return {"type": "websocket.connect"}
        if self.state == "connecting":
            # Not accepted yet: nothing can arrive but the client's leaving.
            await self.conn.gone
            return {"type": "websocket.disconnect", "code": 1006}
        while True:
            if not self.incoming.empty():
                return self.incoming.get_nowait()
            if self.disconnect is not None:
                return self.disconnect
            getter = asyncio.ensure_future(self.incoming.get())
            await asyncio.wait([getter, self.closed], return_when=asyncio.FIRST_COMPLETED)
            if getter.done():
                return getter.result()
            getter.cancel()

    async def send(self, message):
        conn = self.conn
        kind = message.get("type")
        if self.state == "connecting":
            if conn.gone.done():
                raise ClientDisconnected("the client has closed the connection")
            if kind == "websocket.accept":
                await self._accept(message)
                return
            if kind == "websocket.close":
                # Closed before accept: the handshake is refused with 403 (ASGI's rule).
                self.state = "closed"
                self.status = 403
                conn.transport.write(_plain(403, "Forbidden"))
                return
            raise RuntimeError("%r before websocket.accept" % kind)
        if self.state != "open":
            raise ClientDisconnected("the WebSocket is closed")
        if kind == "websocket.send":
            if message.get("bytes") is not None:
                await conn.write(_frame(0x2, bytes(message["bytes"])))
            elif message.get("text") is not None:
                await conn.write(_frame(0x1, message["text"].encode("utf-8")))
            else:
                raise ValueError("websocket.send has neither bytes nor text")
            return
        if kind == "websocket.close":
            code = message.get("code") or 1000
            if not isinstance(code, int) or not (1000 <= code <= 4999) or code in (1004, 1005, 1006, 1015):
                raise ValueError("websocket.close has the code %r, which cannot be sent" % (code,))
            await self._close(code, message.get("reason") or "")
            return
        raise ValueError("unexpected message %r in a WebSocket session" % kind)

    async def _accept(self, message):
        conn = self.conn
        key = next(v for k, v in self.scope["headers"] if k == b"sec-websocket-key")
        accept = base64.b64encode(hashlib.sha1(key + _WS_GUID).digest())
        headers = [(b"Upgrade", b"websocket"), (b"Connection", b"Upgrade"), (b"Sec-WebSocket-Accept", accept)]
        sub = message.get("subprotocol")
        if sub:
            headers.append((b"Sec-WebSocket-Protocol", sub.encode("latin-1")))
        for name, value in message.get("headers") or ():
            name, value = bytes(name), bytes(value)
            _check_header(name, value)
            if name.lower() not in (b"upgrade", b"connection", b"sec-websocket-accept", b"sec-websocket-protocol"):
                headers.append((name, value))
        self.state = "open"
        self.status = 101
        await conn.write(_head_bytes(101, headers))
        self.reader = conn.loop.create_task(self._read_frames())

    async def _close(self, code, reason):
        """Starts the close handshake: the peer's close frame ends it."""
        if self.state != "open":
            return
        self.state = "closing"
        self.close_code = code
        payload = code.to_bytes(2, "big") + reason.encode("utf-8")[:123]
        try:
            await self.conn.write(_frame(0x8, payload))
        except ClientDisconnected:
            self._finish(1006)

    def _finish(self, code):
        if self.disconnect is None:
            self.disconnect = {"type": "websocket.disconnect", "code": code}
        if self.state != "closed":
            self.state = "closed"
            if self.close_code is None:
                self.close_code = code
        if not self.closed.done():
            self.closed.set_result(None)
        self.conn.close()

    def _deliver(self, event):
        # The app reads it after what is queued; set before _finish wakes receive().
        if self.disconnect is None:
            self.disconnect = event

    async def _fail(self, code, why):
        """Closes for a protocol error of the client's (RFC 6455 7.1.7)."""
        self.conn.server.log("info", "closing the WebSocket: %s" % why, closeCode=code)
        was_open = self.state == "open"
        if was_open:
            await self._close(code, why)
        self._deliver({"type": "websocket.disconnect", "code": code})
        self._finish(code)

    async def _read_frames(self):
        conn = self.conn
        message = None  # (opcode, bytearray) of a fragmented message under way
        try:
            while True:
                b0, b1 = await conn.read_exactly(2)
                fin, rsv, opcode = b0 & 0x80, b0 & 0x70, b0 & 0x0F
                masked, length = b1 & 0x80, b1 & 0x7F
                if rsv:
                    return await self._fail(1002, "reserved bits set without an extension")
                if not masked:
                    return await self._fail(1002, "a client's frame must be masked")
                if opcode >= 0x8:
                    if opcode not in (0x8, 0x9, 0xA):
                        return await self._fail(1002, "unknown opcode %d" % opcode)
                    if not fin or length > 125:
                        return await self._fail(1002, "a control frame must be whole and at most 125 bytes")
                elif opcode not in (0x0, 0x1, 0x2):
                    return await self._fail(1002, "unknown opcode %d" % opcode)
                if length == 126:
                    length = int.from_bytes(await conn.read_exactly(2), "big")
                elif length == 127:
                    length = int.from_bytes(await conn.read_exactly(8), "big")
                have = len(message[1]) if message else 0
                if opcode < 0x8 and have + length > MAX_WS_MESSAGE_BYTES:
                    return await self._fail(1009, "message past %d bytes" % MAX_WS_MESSAGE_BYTES)
                mask = await conn.read_exactly(4)
                payload = _unmask(await conn.read_exactly(length), mask)
                if opcode == 0x9:
                    if self.state == "open":
                        await conn.write(_frame(0xA, payload))
                    continue
                if opcode == 0xA:
                    continue
                if opcode == 0x8:
                    return await self._on_close(payload)
                if opcode == 0x0:
                    if message is None:
                        return await self._fail(1002, "a continuation frame with no message under way")
                    message[1].extend(payload)
                else:
                    if message is not None:
                        return await self._fail(1002, "a new message before the last one's final frame")
                    message = (opcode, bytearray(payload))
                if not fin:
                    continue
                opcode, data = message
                message = None
                if self.state != "open":
                    continue  # closing: data is dropped (RFC 6455 1.4)
                if opcode == 0x1:
                    try:
                        event = {"type": "websocket.receive", "text": data.decode("utf-8")}
                    except UnicodeDecodeError:
                        return await self._fail(1007, "a text message that is not UTF-8")
                else:
                    event = {"type": "websocket.receive", "bytes": bytes(data)}
                await self.incoming.put(event)
        except (_Closed, ClientDisconnected):
            self._deliver({"type": "websocket.disconnect", "code": 1006})
            self._finish(1006)

    async def _on_close(self, payload):
        code, reason = 1005, ""
        if len(payload) == 1:
            return await self._fail(1002, "a close frame of one byte")
        if len(payload) >= 2:
            code = int.from_bytes(payload[:2], "big")
            if not (1000 <= code <= 1003 or 1007 <= code <= 1014 or 3000 <= code <= 4999):
                return await self._fail(1002, "close code %d is not one a peer may send" % code)
            try:
                reason = payload[2:].decode("utf-8")
            except UnicodeDecodeError:
                return await self._fail(1007, "a close reason that is not UTF-8")
        if self.state == "open":
            # The client closes first: answer with its code, then the app hears of it.
            self.state = "closing"
            self.close_code = code
            try:
                await self.conn.write(_frame(0x8, payload[:2]))
            except ClientDisconnected:
                pass
        self._deliver({"type": "websocket.disconnect", "code": code, "reason": reason})
        self._finish(code)


def _frame(opcode, payload):
    n = len(payload)
    if n < 126:
        head = bytes((0x80 | opcode, n))
    elif n < 1 << 16:
        head = bytes((0x80 | opcode, 126)) + n.to_bytes(2, "big")
    else:
        head = bytes((0x80 | opcode, 127)) + n.to_bytes(8, "big")
    return head + payload


def _unmask(data, mask):
    # XOR as one big integer: a loop over the bytes in Python is ~50x slower.
    n = len(data)
    if n == 0:
        return b""
    key = (mask * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "big") ^ int.from_bytes(key, "big")).to_bytes(n, "big")


class _Lifespan:
    """The lifespan protocol: startup before the first request, shutdown
    after the last. An app that raises on the lifespan scope before its
    first message does not support it, which is fine."""

    def __init__(self, server):
        self.server = server
        self.events = asyncio.Queue()
        self.startup = server.loop.create_future()
        self.shutdown = server.loop.create_future()
        self.task = None
        self.supported = True

    async def start(self):
        """True when the app started (or takes no lifespan), False when it failed."""
        scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": self.server.state}
        self.task = self.server.loop.create_task(self._run(scope))
        await self.events.put({"type": "lifespan.startup"})
        await asyncio.wait([self.startup, self.task], return_when=asyncio.FIRST_COMPLETED)
        return self.startup.result()  # _run sets it whenever the task ends

    async def stop(self, timeout):
        if not self.supported or self.task.done():
            return
        await self.events.put({"type": "lifespan.shutdown"})
        done, _ = await asyncio.wait([self.shutdown, self.task], timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if not done:
            self.server.log("error", "the app's lifespan shutdown did not finish in %gs" % timeout)

    async def _run(self, scope):
        try:
            await self.server.app(scope, self.events.get, self._send)
        except Exception as e:
            if not self.startup.done():
                # Raised before answering startup: taken for an app without lifespan support.
                self.supported = False
                self.server.log("info", "the app does not take the lifespan protocol (%s: %s)" % (type(e).__name__, e))
                self.startup.set_result(True)
            else:
                self.server.log("error", "the app's lifespan raised %s: %s" % (type(e).__name__, e),
                                stack=traceback.format_exc())
        else:
            if not self.startup.done():
                self.supported = False
                self.startup.set_result(True)

    async def _send(self, message):
        kind = message.get("type")
        if kind == "lifespan.startup.complete":
            self.startup.set_result(True)
        elif kind == "lifespan.startup.failed":
            self.server.log("error", "the app's startup failed: %s" % message.get("message", ""))
            self.startup.set_result(False)
        elif kind == "lifespan.shutdown.complete":
            self.shutdown.set_result(True)
        elif kind == "lifespan.shutdown.failed":
            self.server.log("error", "the app's shutdown failed: %s" % message.get("message", ""))
            self.shutdown.set_result(False)
        else:
            raise ValueError("unexpected message %r in the lifespan protocol" % kind)


class Server:
    """Serves an ASGI 3 app on host:port until SIGTERM or SIGINT, then drains:
    idle connections close, those with a request under way close after it,
    WebSockets get a close frame (1001), and lifespan shutdown runs last."""

    def __init__(self, app, host, port, log, health_path, drain_seconds, span=None, end_span=None):
        self.app = app
        # span(method, path, traceparent, tracestate, cold) opens a request's
        # span and end_span(span, status[, failure]) ends it; None: no tracing.
        self.span = span
        self.end_span = end_span
        self.cold = True
        self.host = host
        self.port = port
        self.log = log
        self.health_path = health_path.encode("ascii")
        self.drain_seconds = drain_seconds
        self.connections = set()
        self.state = {}
        self.draining = False
        self.loop = None

    def run(self, ready=None):
        """Serves until a signal; the exit code. ready(port) is called once listening."""
        if sys.version_info < (3, 10):
            # 3.9's asyncio objects bind to the thread's loop when made (an app's
            # module-level Event at import): serve on that loop, not a new one.
            return asyncio.get_event_loop().run_until_complete(self._main(ready))
        return asyncio.run(self._main(ready))

    async def _main(self, ready):
        self.loop = asyncio.get_running_loop()
        lifespan = _Lifespan(self)
        if not await lifespan.start():
            return 1
        try:
            server = await self.loop.create_server(lambda: _Connection(self), self.host or None, self.port,
                                                   reuse_address=True, backlog=128)
        except OSError as e:
            self.log("error", "cannot listen on port %d: %s" % (self.port, e))
            await lifespan.stop(self.drain_seconds)
            return 1
        stop = self.loop.create_future()
        for sig in (signal.SIGTERM, signal.SIGINT):
            self.loop.add_signal_handler(sig, lambda s=sig: stop.done() or stop.set_result(s))
        port = server.sockets[0].getsockname()[1]
        if ready is not None:
            ready(port)
        sig = await stop
        self.log("info", "draining", signal=signal.Signals(sig).name)
        self.draining = True
        server.close()
        for conn in list(self.connections):
            if conn.idle and conn.ws is None:
                conn.close()
            elif conn.ws is not None and conn.ws.state == "open":
                await conn.ws._close(1001, "the server is going away")
        tasks = [c.task for c in self.connections if c.task is not None]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=self.drain_seconds)
            if pending:
                self.log("error", "in-flight requests did not finish before the drain deadline", inFlight=len(pending))
                for conn in list(self.connections):
                    conn.close()
        await lifespan.stop(self.drain_seconds)
        return 0


def serve(app, host, port, log, health_path, drain_seconds, ready=None, span=None, end_span=None):
    """Serves app until SIGTERM or SIGINT; the process's exit code."""
    return Server(app, host, port, log, health_path, drain_seconds, span, end_span).run(ready)


if __name__ == "__main__":
    sys.exit("sless_asgi is run by server.py (SLESS_MODE=service)")
