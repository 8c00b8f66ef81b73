// http-receiver.js PORT_FILE — the webhook endpoint of bench/http.sh: node's
// own http server on a free port of 127.0.0.1 (written to PORT_FILE),
// answering 204 to every POST once its body is read, and printing one
// line {"id":N, per event as it arrives (the webhook-id header for a
// request of one event, each element's "id" for a batch), the start of the
// stdout sink's lines, which pgoutbox-bench's latency workload reads.
// No signature check: this measures the relay, not the receiver.
'use strict';
const http = require('http');
const fs = require('fs');

const out = [];
let pending = false;
function flush() {
  pending = false;
  if (out.length) process.stdout.write(out.splice(0).join(''));
}
const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const id = req.headers['webhook-id'];
    const body = Buffer.concat(chunks).toString();
    if (body.startsWith('[')) {
      for (const ev of JSON.parse(body)) out.push(`{"id":${ev.id},\n`);
    } else if (id) {
      out.push(`{"id":${id},\n`);
    }
    if (!pending) {
      pending = true;
      setImmediate(flush);
    }
    res.writeHead(204);
    res.end();
  });
});
server.keepAliveTimeout = 60000;
server.listen(0, '127.0.0.1', () => {
  fs.writeFileSync(process.argv[2], `${server.address().port}\n`);
});
process.on('SIGTERM', () => { flush(); process.exit(0); });
