// Conformance function for the nodejs22 runtime (see conformance_test.go).
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const isNumber = require('is-number');

class Boom extends Error {
  constructor(message) {
    super(message);
    this.name = 'Boom';
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export async function handle(event, context) {
  const path = event.path;
  if (path === '/' && event.method === 'POST') { // job mode
    if (event.body && event.body.fail) throw new Boom('job failed on purpose');
    if (event.body && event.body.nonfinite) return { x: NaN };
    if (event.body && event.body.encodefails) return { x: { toJSON() { throw new Error('cannot be JSON'); } } };
    return { job: event.body };
  }
  switch (path.startsWith('/echo/') ? '/echo' : path) {
    case '/echo':
      return {
        event,
        context: {
          functionName: context.functionName, namespace: context.namespace, revision: context.revision,
          requestId: context.requestId, deadlineMs: context.deadlineMs, remainingMs: context.remainingMs(),
        },
      };
    case '/status':
      return { statusCode: 201, headers: { 'X-Custom': 'yes', 'Content-Type': 'text/plain' }, body: 'created' };
    case '/binary':
      return { statusCode: 200, headers: { 'Content-Type': 'image/png' }, body: Buffer.from([...Array(256).keys()]) };
    case '/binary64':
      return { statusCode: 202, body: Buffer.from([...Array(256).keys()]).toString('base64'), isBase64Encoded: true };
    case '/base64':
      return { statusCode: 200, body: event.query.b || '', isBase64Encoded: true };
    case '/bytes':
      return Buffer.from([...Array(256).keys()]);
    case '/error':
      throw new Boom('boom');
    case '/throw': // values that are not Errors, as rejected promises carry them
      throw {
        string: 'plain text', named: { name: 'NotFound', message: 'no such order' }, object: { code: 7 },
        null: null, number: 42,
      }[event.query.what];
    case '/slow': {
      const ms = Number(event.query.ms || 0);
      console.log(`slow start ms=${ms}`);
      await sleep(ms);
      return { slept: ms };
    }
    case '/header': // echoes a header the caller chose, as a careless handler would
      return { statusCode: 200, headers: { [event.query.name || 'X-Echo']: event.query.value || '' }, body: 'ok' };
    case '/header-value': { // a header value of each type, by name
      const v = {
        float: 1.5, intf: 2.0, big: 1e21, small: 1e-7, micro: 1e-6, neg: -0.5, int: 7, bool: true,
        null: null, list: [1.5, null, false], obj: { a: 1 }, nested: [[1]], nan: NaN, inf: Infinity,
      }[event.query.k];
      return { statusCode: 200, headers: { 'X-V': v }, body: 'ok' };
    }
    case '/headers-list':
      return { statusCode: 200, headers: { 'X-Multi': ['a', 'b'], 'Set-Cookie': ['c1=1', 'c2=2'], 'X-Num': 7 }, body: 'ok' };
    case '/framing':
      return { statusCode: 200, headers: { 'Content-Length': '0', 'Transfer-Encoding': 'chunked', 'X-Request-Id': 'from-handler' }, body: 'framed' };
    case '/code':
      return { statusCode: Number(event.query.c || '200'), body: 'x' };
    case '/nonfinite': {
      const x = { nan: NaN, inf: Infinity, '-inf': -Infinity }[event.query.v || 'nan'];
      return event.query.as === 'body' ? { statusCode: 200, body: { x } } : { x };
    }
    case '/encode-fails': // the result's own code fails while it is encoded
      return { x: { toJSON() { throw new Error('cannot be JSON'); } } };
    case '/nested-bytes':
      return { b: Buffer.from([...Array(256).keys()]), list: [new Uint8Array([1, 2])], lookalike: { type: 'Buffer', data: [104, 105] } };
    case '/dep':
      return { dep: isNumber(5) ? 'DEP!' : 'no' };
    case '/print-long':
      console.log('L'.repeat(Number(event.query.n)));
      return 'ok';
    case '/write-raw': { // written straight to the streams, the last line unterminated
      const m = event.query.marker || '';
      process.stdout.write('raw-out ');
      process.stdout.write(Buffer.from(`${m}\n`));
      process.stderr.write(`raw-err ${m}`);
      return 'ok';
    }
    case '/print':
      console.log('printed', event.query.marker || '');
      return 'ok';
    default:
      return { statusCode: 404, body: { notFound: path } };
  }
}
