// inbox-worker.js — a BullMQ Worker that applies each job exactly once
// through pgoutbox's inbox, as docs/bullmq.md recommends: in one
// transaction, pgoutbox.inbox_claim(consumer, event id) and, only when the
// claim is fresh, the effect (a row in the table `applied`).
//
//   node inbox-worker.js PACKAGE REDIS_URL OUT_FILE CONSUMER QUEUE...
//
// PostgreSQL from PGHOST (socket directory), PGPORT, PGUSER, PGDATABASE.
// Every job appends {id, name, fresh} to OUT_FILE.  Exits 0 on SIGTERM.
'use strict';

const fs = require('fs');
const { Pool } = require('pg');

const [pkgName, redisUrl, outFile, consumer, ...queues] = process.argv.slice(2);
if (!pkgName || !redisUrl || !outFile || !consumer || queues.length === 0) {
	process.stderr.write(
		'usage: node inbox-worker.js PACKAGE REDIS_URL OUT_FILE CONSUMER QUEUE...\n',
	);
	process.exit(2);
}
const { Worker } = require(pkgName);
const u = new URL(redisUrl);
const connection = {
	host: u.hostname,
	port: Number(u.port || 6379),
	db: Number((u.pathname || '/0').slice(1) || 0),
	maxRetriesPerRequest: null,
};
const pool = new Pool({ max: 4 });
const out = fs.openSync(outFile, 'a');

async function apply(job) {
	const eventId = job.id.replace(/^ob-/, '');
	const client = await pool.connect();
	try {
		await client.query('BEGIN');
		const { rows } = await client.query(
			'SELECT pgoutbox.inbox_claim($1, $2) AS fresh',
			[consumer, eventId],
		);
		const fresh = rows[0].fresh;
		if (fresh) {
			await client.query(
				'INSERT INTO applied (event_id, name, data) VALUES ($1, $2, $3)',
				[eventId, job.name, JSON.stringify(job.data)],
			);
		}
		await client.query('COMMIT');
		fs.writeSync(out, JSON.stringify({ id: job.id, name: job.name, fresh }) + '\n');
	} catch (err) {
		await client.query('ROLLBACK').catch(() => {});
		throw err;
	} finally {
		client.release();
	}
}

const workers = queues.map((queue) => {
	const w = new Worker(queue, apply, { connection, concurrency: 4 });
	w.on('error', (err) => process.stderr.write(`worker ${queue}: ${err.message}\n`));
	w.on('failed', (job, err) => process.stderr.write(`job ${job && job.id}: ${err.message}\n`));
	return w;
});
Promise.all(workers.map((w) => w.waitUntilReady())).then(() => {
	fs.writeFileSync(`${outFile}.ready`, 'ready\n');
});

let closing = false;
process.on('SIGTERM', async () => {
	if (closing) return;
	closing = true;
	await Promise.all(workers.map((w) => w.close()));
	await pool.end();
	fs.closeSync(out);
	process.exit(0);
});
