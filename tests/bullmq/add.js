// add.js — adds one job with BullMQ's own Queue.add, as the reference the
// relay's jobs are compared with (tests/integration/t_bullmq.sh).
//
//   node add.js PACKAGE REDIS_URL QUEUE NAME DATA_JSON OPTS_JSON
'use strict';

const [pkgName, redisUrl, queue, name, data, opts] = process.argv.slice(2);
const { Queue } = require(pkgName);
const u = new URL(redisUrl);
const q = new Queue(queue, {
	connection: { host: u.hostname, port: Number(u.port || 6379) },
});
q.add(name, JSON.parse(data), JSON.parse(opts))
	.then((job) => {
		process.stdout.write(`${job.id}\n`);
		return q.close();
	})
	.catch((err) => {
		process.stderr.write(`add.js: ${err.message}\n`);
		process.exit(1);
	});
