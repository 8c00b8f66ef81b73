// count.js URL QUEUE... — prints "QUEUE COUNT" per queue (queue.declare
// passive: the messages ready in it), with amqplib.
'use strict';
const amqp = require('amqplib');

async function main() {
  const [url, ...queues] = process.argv.slice(2);
  const conn = await amqp.connect(url);
  const ch = await conn.createChannel();
  for (const q of queues) {
    const ok = await ch.checkQueue(q);
    process.stdout.write(`${q} ${ok.messageCount}\n`);
  }
  await ch.close();
  await conn.close();
}

main().catch((e) => {
  console.error('count.js: ' + (e && e.message ? e.message : e));
  process.exit(1);
});
