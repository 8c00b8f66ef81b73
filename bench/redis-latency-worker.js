// redis-latency-worker.js — the BullMQ consumer of bench/redis-latency.sh:
// a real BullMQ Worker (concurrency 1 unless CONCURRENCY) that, per job, stamps its arrival
// (performance.timeOrigin + performance.now(), wall clock in ms with
// sub-ms precision) as the processor starts, then in ONE PostgreSQL
// transaction claims the event in the inbox and, when fresh, calls the SQL
// handler FUNC(payload) (what `pgoutbox consume --sql FUNC` does), commits
// and stamps the moment COMMIT returned.
//
//   node redis-latency-worker.js NODE_DIR PACKAGE REDIS_URL QUEUE GROUP FUNC OUT [CONCURRENCY]
//
// NODE_DIR holds node_modules (tests/bullmq); PACKAGE is the bullmq alias
// there (bullmq6).  PostgreSQL from PGHOST, PGPORT, PGUSER, PGDATABASE.
// OUT gets one line per job: "run seq arrival_ms job_timestamp_ms commit_ms
// fresh" (job_timestamp_ms: the time the relay put in the job, ms).  Prints
// "ready" on stderr once the Worker is connected; SIGTERM closes it and
// prints the counts.
'use strict';

const fs = require('fs');
const path = require('path');
const { createRequire } = require('module');
const { performance } = require('perf_hooks');

const [nodeDir, pkgName, redisUrl, queue, group, func, outFile, conc = '1'] = process.argv.slice(2);
const concurrency = Number(conc);
if (!outFile || !/^[a-z_][a-z0-9_.]*$/i.test(func) || !(concurrency >= 1)) {
	process.stderr.write(
		'usage: node redis-latency-worker.js NODE_DIR PACKAGE REDIS_URL QUEUE GROUP FUNC OUT [CONCURRENCY]\n',
	);
	process.exit(2);
}
const req = createRequire(path.join(path.resolve(nodeDir), 'package.json'));
const { Worker } = req(pkgName);
const { Pool } = req('pg');

const now = () => performance.timeOrigin + performance.now();
const u = new URL(redisUrl);
const connection = {
	host: u.hostname,
	port: Number(u.port || 6379),
	db: Number((u.pathname || '/0').slice(1) || 0),
	maxRetriesPerRequest: null,
};
const pool = new Pool({ max: concurrency }); // a connection per job in hand
const out = fs.openSync(outFile, 'a');
let fresh = 0, dups = 0;

async function handle(job) {
	const arrival = now();
	const eventId = job.id.replace(/^ob-/, '');
	const client = await pool.connect();
	let isFresh;
	try {
		await client.query('BEGIN');
		const { rows } = await client.query('SELECT pgoutbox.inbox_claim($1, $2) AS fresh', [group, eventId]);
		isFresh = rows[0].fresh;
		if (isFresh) await client.query(`SELECT ${func}($1::jsonb)`, [JSON.stringify(job.data)]);
		await client.query('COMMIT');
	} catch (err) {
		await client.query('ROLLBACK').catch(() => {});
		throw err;
	} finally {
		client.release();
	}
	const committed = now();
	if (isFresh) fresh++;
	else dups++;
	fs.writeSync(out, `${job.data.run} ${job.data.seq} ${arrival.toFixed(3)} ${job.timestamp} ${committed.toFixed(3)} ${isFresh ? 1 : 0}\n`);
}

const worker = new Worker(queue, handle, { connection, concurrency });
worker.on('error', (err) => process.stderr.write(`worker: ${err.message}\n`));
worker.on('failed', (job, err) => process.stderr.write(`job ${job && job.id} failed: ${err.message}\n`));
worker.waitUntilReady().then(() => process.stderr.write(`ready on ${queue}\n`));

let closing = false;
process.on('SIGTERM', async () => {
	if (closing) return;
	closing = true;
	await worker.close();
	await pool.end();
	process.stderr.write(`bullmq worker: ${group} on ${queue}: recorded ${fresh}, duplicates skipped ${dups}\n`);
	process.exit(0);
});
