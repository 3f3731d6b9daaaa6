import os


def app(environ, start_response):
    """A WSGI app: greets with the configured greeting and the path it was called with."""
    body = "%s from %s\n" % (os.environ.get("GREETING", "Hello"), environ.get("PATH_INFO", "/"))
    start_response("200 OK", [("Content-Type", "text/plain; charset=utf-8")])
    return [body.encode()]
