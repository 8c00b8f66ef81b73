// consumer.js — applies events exactly once with pgoutbox's inbox
// (docs/examples.md): each event's id is claimed in the transaction that
// writes its effect, so a redelivered event changes nothing.  The events
// come as NDJSON on stdin, as `pgoutbox relay --sink exec` hands them
// over; from a broker, claim the same id the same way.  Exit 0 acks.
'use strict';
const { Client } = require('pg');
const readline = require('readline');

async function main() {
  const db = new Client({ connectionString: process.env.DATABASE_URL });
  await db.connect();
  try {
    for await (const line of readline.createInterface({ input: process.stdin })) {
      if (!line.trim()) continue;
      const event = JSON.parse(line);
      await db.query('BEGIN');
      const { rows } = await db.query('SELECT pgoutbox.inbox_claim($1, $2) AS first',
        ['shipping', String(event.id)]);
      if (rows[0].first) {
        await db.query('INSERT INTO shipments (order_id) VALUES ($1)', [event.payload.order_id]);
        console.error(`event ${event.id}: shipped order ${event.payload.order_id}`);
      } else {
        console.error(`event ${event.id}: a duplicate, skipped`);
      }
      await db.query('COMMIT');
    }
  } catch (err) {
    await db.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    await db.end();
  }
}

main().catch((err) => {
  console.error(`consumer: ${err.message}`);
  process.exit(1);
});
