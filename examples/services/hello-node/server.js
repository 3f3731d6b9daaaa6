// hello-node: a SlessService web app. The wrapper serves this http.Server's
// request listener (it does not call listen); every path is the app's.
const http = require('node:http');

const server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://localhost');
  if (req.method === 'GET' && url.pathname === '/') {
    const name = url.searchParams.get('name') || 'world';
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ message: `Hello, ${name}!`, path: url.pathname }));
    return;
  }
  if (req.method === 'POST' && url.pathname === '/greet') {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      let name = 'world';
      try { name = JSON.parse(body).name || name; } catch { /* not JSON: the default */ }
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ message: `Hello, ${name}!`, path: url.pathname }));
    });
    return;
  }
  res.writeHead(404, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify({ error: `no route for ${req.method} ${url.pathname}` }));
});

module.exports = { server };
