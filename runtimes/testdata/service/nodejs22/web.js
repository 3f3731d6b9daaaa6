// An http.Server for the service-mode conformance test, with a WebSocket
// echo written out by hand (no packages).
const http = require('node:http');
const crypto = require('node:crypto');

let release;
const released = new Promise((resolve) => { release = resolve; });

const server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://x');
  if (url.pathname === '/events') {
    res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
    res.write('data: first\n\n');
    released.then(() => res.end('data: second\n\n'));
    return;
  }
  if (url.pathname === '/release') {
    release();
    res.writeHead(204).end();
    return;
  }
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const out = JSON.stringify({ method: req.method, path: url.pathname, query: url.search.slice(1), body: Buffer.concat(chunks).toString() });
    res.writeHead(200, { 'Content-Type': 'application/json' }).end(out);
  });
});

server.on('upgrade', (req, socket) => {
  const accept = crypto.createHash('sha1')
    .update(req.headers['sec-websocket-key'] + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64');
  socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
    `Sec-WebSocket-Accept: ${accept}\r\n\r\n`);
  socket.on('data', (buf) => {
    // One masked text frame under 126 bytes from the client, echoed unmasked.
    const len = buf[1] & 0x7f;
    const mask = buf.subarray(2, 6);
    const data = Buffer.from(buf.subarray(6, 6 + len).map((b, i) => b ^ mask[i % 4]));
    socket.write(Buffer.concat([Buffer.from([0x81, len]), data]));
  });
});

module.exports = { server };
