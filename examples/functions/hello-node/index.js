// A sless function: GET /?name=Ada or POST {"name": "Ada"}.
exports.handler = async (event, context) => {
  const body = event.body && typeof event.body === 'object' ? event.body : {};
  const name = body.name || event.query.name || 'world';
  return { message: `Hello, ${name}!`, requestId: context.requestId };
};
