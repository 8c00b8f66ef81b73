// chat-worker.js — the BullMQ consumer of tests/chaos/chat.sh --consumer
// bullmq: a real Worker that, per job, in ONE PostgreSQL transaction calls
// pgoutbox.inbox_claim(GROUP, event id) and, when the claim is fresh, the
// SQL handler FUNC(payload) (as `pgoutbox consume --sql FUNC` does), then
// lets BullMQ complete the job.  A redelivery (a crash between COMMIT and
// the job's completion, a stalled job) is claimed again and skipped.
//
//   node chat-worker.js PACKAGE REDIS_URL QUEUE GROUP FUNC [--exit-after-commit N]
//
// PostgreSQL from PGHOST (socket directory), PGPORT, PGUSER, PGDATABASE.
// --exit-after-commit N: exit(1) right after the N-th COMMIT, before the
// job is completed (BullMQ's stalled-job check then delivers it again).
// SIGTERM: finish the job in hand, close, exit 0.  Logs to stderr: one
// line per skipped duplicate, and the counts when it exits.
'use strict';

const { Pool } = require('pg');

const args = process.argv.slice(2);
let exitAfter = 0;
const i = args.indexOf('--exit-after-commit');
if (i >= 0) {
	exitAfter = Number(args[i + 1]);
	args.splice(i, 2);
}
const [pkgName, redisUrl, queue, group, func] = args;
if (!pkgName || !redisUrl || !queue || !group || !/^[a-z_][a-z0-9_.]*$/i.test(func || '')) {
	process.stderr.write(
		'usage: node chat-worker.js PACKAGE REDIS_URL QUEUE GROUP FUNC [--exit-after-commit N]\n',
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
	retryStrategy: () => 100, // reconnect every 100 ms while Redis is down
};
const pool = new Pool({ max: 1 });
let commits = 0, recorded = 0, skipped = 0;

function log(level, msg) {
	process.stderr.write(`${new Date().toISOString()} ${level} chat-worker ${group}: ${msg}\n`);
}
function counts() {
	process.stderr.write(`bullmq worker: ${group} on ${queue}: recorded ${recorded}, duplicates skipped ${skipped}\n`);
}

async function handle(job) {
	const eventId = job.id.replace(/^ob-/, '');
	const client = await pool.connect();
	let fresh;
	try {
		await client.query('BEGIN');
		const { rows } = await client.query('SELECT pgoutbox.inbox_claim($1, $2) AS fresh', [group, eventId]);
		fresh = rows[0].fresh;
		if (fresh) await client.query(`SELECT ${func}($1::jsonb)`, [JSON.stringify(job.data)]);
		await client.query('COMMIT');
	} catch (err) {
		await client.query('ROLLBACK').catch(() => {});
		throw err;
	} finally {
		client.release();
	}
	commits++;
	if (fresh) recorded++;
	else {
		skipped++;
		log('INFO', `event ${eventId} (job ${job.id}) again: already in the inbox, skipped`);
	}
	if (exitAfter && commits === exitAfter) {
		log('WARN', `exiting after commit ${commits} (event ${eventId}), before the job is completed`);
		counts();
		process.exit(1);
	}
}

// One job at a time, in queue order; a dead worker's job comes back soon.
const worker = new Worker(queue, handle, {
	connection,
	concurrency: 1,
	lockDuration: 4000,
	stalledInterval: 1000,
	maxStalledCount: 10,
});
worker.on('error', (err) => log('WARN', `worker: ${err.message}`));
worker.on('failed', (job, err) => log('ERROR', `job ${job && job.id} failed: ${err.message}`));
worker.waitUntilReady().then(() => log('INFO', `ready on ${queue}`));

let closing = false;
process.on('SIGTERM', async () => {
	if (closing) return;
	closing = true;
	await worker.close();
	await pool.end();
	counts();
	process.exit(0);
});
