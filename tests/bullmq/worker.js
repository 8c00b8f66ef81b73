// worker.js — a real BullMQ Worker for tests/integration/t_bullmq.sh.
//
//   node worker.js PACKAGE REDIS_URL OUT_FILE QUEUE...
//
// PACKAGE is the npm alias of the bullmq version under test (bullmq5,
// bullmq6).  Every processing attempt appends one JSON line to OUT_FILE:
// {queue, id, name, data, attemptsMade, opts, outcome}.  A job whose data
// has "fail_once": true throws on its first attempt, so BullMQ retries it
// (the job's attempts option).  Exits 0 on SIGTERM after closing the
// workers.
'use strict';

const fs = require('fs');

const [pkgName, redisUrl, outFile, ...queues] = process.argv.slice(2);
if (!pkgName || !redisUrl || !outFile || queues.length === 0) {
	process.stderr.write('usage: node worker.js PACKAGE REDIS_URL OUT_FILE QUEUE...\n');
	process.exit(2);
}
const { Worker } = require(pkgName);
const version = require(`${pkgName}/package.json`).version;
const u = new URL(redisUrl);
const connection = {
	host: u.hostname,
	port: Number(u.port || 6379),
	db: Number((u.pathname || '/0').slice(1) || 0),
	maxRetriesPerRequest: null,
};
const out = fs.openSync(outFile, 'a');

function record(queue, job, outcome) {
	const line = JSON.stringify({
		queue,
		id: job.id,
		name: job.name,
		data: job.data,
		attemptsMade: job.attemptsMade,
		opts: job.opts,
		outcome,
	});
	fs.writeSync(out, line + '\n');
}

const workers = queues.map((queue) => {
	const w = new Worker(
		queue,
		async (job) => {
			if (job.data && job.data.fail_once && job.attemptsMade === 0) {
				record(queue, job, 'thrown');
				throw new Error('failing once on purpose');
			}
			record(queue, job, 'done');
			return { ok: true };
		},
		{ connection, concurrency: 4 },
	);
	w.on('error', (err) => process.stderr.write(`worker ${queue}: ${err.message}\n`));
	return w;
});
Promise.all(workers.map((w) => w.waitUntilReady())).then(() => {
	process.stderr.write(`bullmq ${version}: workers ready on ${queues.join(', ')}\n`);
	fs.writeFileSync(`${outFile}.ready`, version + '\n');
});

let closing = false;
process.on('SIGTERM', async () => {
	if (closing) return;
	closing = true;
	await Promise.all(workers.map((w) => w.close()));
	fs.closeSync(out);
	process.exit(0);
});
