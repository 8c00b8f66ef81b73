// drain.js URL QUEUE — takes every message ready in QUEUE with amqplib (a
// consumer with prefetch, until as many messages as checkQueue counted
// have come) and prints one JSON line per message, in arrival order: the
// properties, headers, routing and the body as text.  Each message is
// acknowledged once printed.
'use strict';
const amqp = require('amqplib');

async function main() {
  const [url, queue] = process.argv.slice(2);
  const conn = await amqp.connect(url);
  const ch = await conn.createChannel();
  const { messageCount } = await ch.checkQueue(queue);
  const out = [];
  if (messageCount > 0) {
    await ch.prefetch(1000);
    await new Promise((resolve, reject) => {
      ch.consume(queue, (m) => {
        if (!m) return reject(new Error('consumer cancelled'));
        const p = m.properties;
        out.push(JSON.stringify({
          message_id: p.messageId,
          type: p.type,
          timestamp: p.timestamp,
          content_type: p.contentType,
          delivery_mode: p.deliveryMode,
          app_id: p.appId,
          headers: p.headers,
          exchange: m.fields.exchange,
          routing_key: m.fields.routingKey,
          redelivered: m.fields.redelivered,
          body: m.content.toString('utf8'),
        }));
        ch.ack(m);
        if (out.length >= messageCount) resolve();
      }).catch(reject);
    });
  }
  process.stdout.write(out.length ? out.join('\n') + '\n' : '');
  await ch.close();
  await conn.close();
}

main().catch((e) => {
  console.error('drain.js: ' + (e && e.message ? e.message : e));
  process.exit(1);
});
