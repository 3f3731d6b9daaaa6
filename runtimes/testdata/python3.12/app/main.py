"""Conformance function for the python3.12 runtime (see conformance_test.go)."""
import base64
import sys
import time

import tinydep


class Boom(Exception):
    pass


def handler(event, context):
    path = event["path"]
    if path == "/" and event["method"] == "POST":  # job mode
        if isinstance(event["body"], dict) and event["body"].get("fail"):
            raise Boom("job failed on purpose")
        if isinstance(event["body"], dict) and event["body"].get("nonfinite"):
            return {"x": float("nan")}
        if isinstance(event["body"], dict) and event["body"].get("encodefails"):
            return {"x": object()}
        return {"job": event["body"]}
    if path == "/echo" or path.startswith("/echo/"):
        return {"event": event, "context": {
            "functionName": context.function_name, "namespace": context.namespace,
            "revision": context.revision, "requestId": context.request_id,
            "deadlineMs": context.deadline_ms, "remainingMs": context.remaining_ms()}}
    if path == "/status":
        return {"statusCode": 201, "headers": {"X-Custom": "yes", "Content-Type": "text/plain"}, "body": "created"}
    if path == "/binary":
        return {"statusCode": 200, "headers": {"Content-Type": "image/png"}, "body": bytes(range(256))}
    if path == "/binary64":
        return {"statusCode": 202, "body": base64.b64encode(bytes(range(256))).decode(), "isBase64Encoded": True}
    if path == "/base64":
        return {"statusCode": 200, "body": event["query"].get("b", ""), "isBase64Encoded": True}
    if path == "/bytes":
        return bytes(range(256))
    if path == "/error":
        raise Boom("boom")
    if path == "/slow":
        ms = int(event["query"].get("ms", "0"))
        print("slow start ms=%d" % ms)
        time.sleep(ms / 1000)
        return {"slept": ms}
    if path == "/header":  # echoes a header the caller chose, as a careless handler would
        q = event["query"]
        return {"statusCode": 200, "headers": {q.get("name", "X-Echo"): q.get("value", "")}, "body": "ok"}
    if path == "/header-value":  # a header value of each type, by name
        v = {"float": 1.5, "intf": 2.0, "big": 1e21, "small": 1e-7, "micro": 1e-6, "neg": -0.5, "int": 7, "bool": True,
             "null": None, "list": [1.5, None, False], "obj": {"a": 1}, "nested": [[1]], "nan": float("nan"),
             "inf": float("inf")}[event["query"]["k"]]
        return {"statusCode": 200, "headers": {"X-V": v}, "body": "ok"}
    if path == "/headers-list":
        return {"statusCode": 200, "headers": {"X-Multi": ["a", "b"], "Set-Cookie": ["c1=1", "c2=2"], "X-Num": 7},
                "body": "ok"}
    if path == "/framing":
        return {"statusCode": 200, "headers": {"Content-Length": "0", "Transfer-Encoding": "chunked",
                                               "X-Request-Id": "from-handler"}, "body": "framed"}
    if path == "/code":
        raw = event["query"].get("c", "200")
        code = float(raw) if "." in raw else int(raw)
        return {"statusCode": code, "body": "x"}
    if path == "/nonfinite":
        q = event["query"]
        x = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}[q.get("v", "nan")]
        return {"statusCode": 200, "body": {"x": x}} if q.get("as") == "body" else {"x": x}
    if path == "/encode-fails":  # the result's own code fails while it is encoded
        class Weird:
            pass
        return {"x": Weird()}
    if path == "/nested-bytes":
        return {"b": bytes(range(256)), "list": [bytearray([1, 2])], "lookalike": {"type": "Buffer", "data": [104, 105]}}
    if path == "/dep":
        return {"dep": tinydep.shout("dep")}
    if path == "/print-long":
        print("L" * int(event["query"]["n"]))
        return "ok"
    if path == "/write-raw":  # written straight to the streams, the last line unterminated
        m = event["query"].get("marker", "")
        sys.stdout.write("raw-out ")
        sys.stdout.buffer.write((m + "\n").encode())  # bytes, as libraries write them
        sys.stderr.write("raw-err " + m)
        # What code asks of a real stream: an encoding, a descriptor.
        return "ok" if sys.stdout.encoding == "utf-8" and sys.stderr.fileno() == 2 else "not a whole stream"
    if path == "/print":
        print("printed", event["query"].get("marker", ""))
        return "ok"
    return {"statusCode": 404, "body": {"notFound": path}}
