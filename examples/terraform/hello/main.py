import os


def handler(event, context):
    body = event.get("body") if isinstance(event.get("body"), dict) else {}
    name = body.get("name") or (event.get("query") or {}).get("name") or "world"
    return {"message": "%s, %s!" % (os.environ.get("GREETING", "Hello"), name)}
