// producer.js — pgoutbox from Node with pg (docs/examples.md): an order
// and its event in one transaction, then three orders and their events
// with one send_batch call.  DATABASE_URL names the database.
'use strict';
const { Client } = require('pg');

async function main() {
  const db = new Client({ connectionString: process.env.DATABASE_URL });
  await db.connect();
  try {
    // The order and its event commit together, or neither does.
    await db.query('BEGIN');
    await db.query('INSERT INTO orders (id, total) VALUES ($1, $2)', [1, '9.90']);
    const { rows } = await db.query(
      "SELECT pgoutbox.send('orders', $1, 'order.created', $2) AS id",
      ['1', { order_id: 1, total: '9.90' }]);
    await db.query('COMMIT');
    console.log(`order 1: event ${rows[0].id}`);

    // Many at once: one call, the events in array order.  The casts pick
    // send_batch(topic text, keys text[], types text[], payloads jsonb[]).
    const orders = [{ order_id: 2, total: '5.00' }, { order_id: 3, total: '7.50' },
      { order_id: 4, total: '1.25' }];
    await db.query('BEGIN');
    await db.query('INSERT INTO orders (id, total) SELECT * FROM unnest($1::bigint[], $2::numeric[])',
      [orders.map((o) => o.order_id), orders.map((o) => o.total)]);
    const batch = await db.query(
      'SELECT pgoutbox.send_batch($1::text, $2::text[], $3::text[], $4::jsonb[]) AS ids',
      ['orders', orders.map((o) => String(o.order_id)), orders.map(() => 'order.created'),
        orders.map((o) => JSON.stringify(o))]);
    await db.query('COMMIT');
    console.log(`orders 2-4: events ${batch.rows[0].ids.join(' ')}`);
  } catch (err) {
    await db.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    await db.end();
  }
}

main().catch((err) => {
  console.error(`producer: ${err.message}`);
  process.exit(1);
});
