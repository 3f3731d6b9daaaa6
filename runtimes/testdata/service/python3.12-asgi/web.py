"""An ASGI app for the service-mode conformance and protocol tests."""

import asyncio
import json

released = asyncio.Event()
disconnects = []  # paths of streams whose client left, as the app heard it


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                scope["state"]["greeting"] = "started"
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] == "websocket":
        await websocket(scope, receive, send)
        return
    path = scope["path"]
    if path == "/events":
        # The second event waits for POST /release: a server that buffered
        # the stream would hold the first until the test gave up.
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]})
        await send({"type": "http.response.body", "body": b"data: first\n\n", "more_body": True})
        await asyncio.wait_for(released.wait(), 20)
        await send({"type": "http.response.body", "body": b"data: second\n\n"})
        return
    if path == "/release":
        released.set()
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body"})
        return
    if path == "/forever":
        # Streams until the client leaves, then notes that http.disconnect came.
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"tick\n", "more_body": True})
        while (await receive())["type"] != "http.disconnect":
            pass
        disconnects.append(path)
        return
    if path == "/disconnects":
        await reply(send, {"disconnects": disconnects})
        return
    if path == "/state":
        await reply(send, {"greeting": scope["state"].get("greeting")})
        return
    if path == "/print":
        print("printed by the app")
        await reply(send, {})
        return
    if path == "/boom":
        raise RuntimeError("boom")
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    query = scope["query_string"].decode()
    await reply(send, {"method": scope["method"], "path": path, "query": query, "body": body.decode()})


async def reply(send, value):
    out = json.dumps(value).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(out)).encode())]})
    await send({"type": "http.response.body", "body": out})


async def websocket(scope, receive, send):
    message = await receive()
    assert message["type"] == "websocket.connect"
    if scope["path"] == "/ws/reject":
        await send({"type": "websocket.close", "code": 1008})
        return
    await send({"type": "websocket.accept"})
    if scope["path"] == "/ws/boom":
        raise RuntimeError("boom after accept")
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            return
        if message.get("text") == "close please":
            await send({"type": "websocket.close", "code": 4000, "reason": "asked"})
            return
        if message.get("text") is not None:
            await send({"type": "websocket.send", "text": message["text"]})
        else:
            await send({"type": "websocket.send", "bytes": message["bytes"]})
