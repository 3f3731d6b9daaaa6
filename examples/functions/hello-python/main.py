"""A sless function: GET /?name=Ada or POST {"name": "Ada"}."""


def handler(event, context):
    body = event["body"] if isinstance(event["body"], dict) else {}
    name = body.get("name") or event["query"].get("name") or "world"
    return {"message": "Hello, %s!" % name, "requestId": context.request_id}
