"""A WSGI app for the service-mode conformance test."""

import json
import threading

released = threading.Event()


def app(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/events":
        # The second event waits for POST /release: a wrapper that buffered
        # the stream would hold the first until the test gave up.
        start_response("200 OK", [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")])

        def stream():
            yield b"data: first\n\n"
            released.wait(20)
            yield b"data: second\n\n"

        return stream()
    if path == "/release":
        released.set()
        start_response("204 No Content", [])
        return []
    size = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(size).decode() if size else ""
    out = json.dumps({"method": environ["REQUEST_METHOD"], "path": path,
                      "query": environ.get("QUERY_STRING", ""), "body": body}).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(out)))])
    return [out]
