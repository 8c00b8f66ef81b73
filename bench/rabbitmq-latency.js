// rabbitmq-latency.js URL QUEUE N — consumes N messages with amqplib and
// prints "p50 p90 p99 max" of the time from each event's commit
// (created_at, its header, as the producer wrote it one transaction per
// event) to its arrival here, in ms.  bench/rabbitmq.sh runs it.
'use strict';
const amqp = require(process.env.AMQPLIB || 'amqplib');

async function main() {
  const [url, queue, nArg] = process.argv.slice(2);
  const n = parseInt(nArg, 10);
  const conn = await amqp.connect(url);
  const ch = await conn.createChannel();
  await ch.prefetch(1000);
  const lat = [];
  await new Promise((resolve) => {
    ch.consume(queue, (m) => {
      lat.push(Date.now() - Date.parse(m.properties.headers.created_at));
      ch.ack(m);
      if (lat.length >= n) resolve();
    });
  });
  lat.sort((a, b) => a - b);
  const p = (q) => lat[Math.min(lat.length - 1, Math.floor(q * lat.length))];
  console.log(`${p(0.5)} ${p(0.9)} ${p(0.99)} ${lat[lat.length - 1]}`);
  await conn.close();
}

main().catch((e) => {
  console.error('rabbitmq-latency.js: ' + (e && e.message ? e.message : e));
  process.exit(1);
});
