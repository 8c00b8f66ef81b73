// receiver.js — the webhook endpoint of tests/integration/t_http*.sh.
//
// Every request is verified with `standardwebhooks` (the Standard Webhooks
// spec's own implementation) against each secret of VERIFY_SECRETS
// (space-separated whsec_ secrets: each one alone must verify it, which is
// what a receiver that has only the old or only the new secret sees during
// a rotation).  A request that does not verify is answered 401 and logged
// with valid: false.
//
// Every request is logged as one JSON line to LOG:
//   {t, path, id, ts, idem, ctype, traceparent, tracestate, valid, status,
//    events: [event ids], keys: [event keys], vals: [payload.v]}
// The log line is written before the answer is sent, with the status it
// gets.
//
// It can be told to fail with POST /_control (a JSON body, applies to the
// requests that come next):
//   {"status": 500, "count": 3, "body": "boom", "retry_after": "2"}
//                          answer the next 3 requests so (count -1: all;
//                          "jitter_ms": a random delay up to that)
//   {"delay_ms": 3000, "count": 1}  answer the next request that late
//   "path": "/p" in any of these: only requests to paths starting so
//   {"gone": "/gone"}      paths starting so always get 410
//   {"reset": true}        back to answering 200
// GET /_stats answers {"requests": n, "ok": n}.
//
// The events of every request answered 2xx go to EVENTS as NDJSON lines
// (the stdout sink's format when sink.http_body = event), in the order
// they were answered: tests/order_check.py reads them.
//
// Environment: PORT (0: any; the port is written to PORT_FILE), LOG, EVENTS,
// VERIFY_SECRETS, TLS_KEY, TLS_CERT (https), TLS_CA (then a client
// certificate signed by it is required: mTLS).
'use strict';
const fs = require('fs');
const http = require('http');
const https = require('https');
const { Webhook } = require('standardwebhooks');

const secrets = (process.env.VERIFY_SECRETS || '').split(/\s+/).filter(Boolean);
const verifiers = secrets.map((s) => new Webhook(s));
const log = fs.openSync(process.env.LOG || '/dev/null', 'a');
const events = fs.openSync(process.env.EVENTS || '/dev/null', 'a');
let plan = { status: 200, count: 0 };
let gone = null;
let requests = 0;
let ok = 0;

function listOf(body) {
	try {
		const v = JSON.parse(body);
		return Array.isArray(v) ? v : [v];
	} catch (e) {
		return [];
	}
}

function eventsOf(list) {
	return {
		events: list.map((e) => Number(e.id)),
		keys: list.map((e) => (e.key !== undefined ? e.key : e.subject)),
		vals: list.map((e) => {
			const p = e.payload !== undefined ? e.payload : e.data;
			return p && p.v !== undefined ? p.v : null;
		}),
	};
}

function handle(req, res) {
	const chunks = [];
	req.on('data', (c) => chunks.push(c));
	req.on('end', () => {
		const body = Buffer.concat(chunks).toString('utf8');
		if (req.url === '/_control') {
			const c = JSON.parse(body);
			if (c.reset) {
				plan = { status: 200, count: 0 };
				gone = null;
			} else if (c.gone) {
				gone = c.gone;
			} else {
				plan = c;
			}
			res.end('ok\n');
			return;
		}
		if (req.url === '/_stats') {
			res.setHeader('content-type', 'application/json');
			res.end(JSON.stringify({ requests, ok }) + '\n');
			return;
		}
		requests++;
		let valid = true;
		let why = null;
		for (const w of verifiers) {
			try {
				w.verify(body, req.headers);
			} catch (e) {
				valid = false;
				why = String(e && e.message);
			}
		}
		const list = listOf(body);
		let status = 200;
		let delay = 0;
		let text = '';
		const headers = {};
		if (!valid) {
			status = 401;
			text = 'bad signature: ' + why;
		} else if (gone && req.url.startsWith(gone)) {
			status = 410;
			text = 'this endpoint was disabled';
		} else if (plan.count && (!plan.path || req.url.startsWith(plan.path))) {
			if (plan.count > 0) plan.count--;
			status = plan.status || 200;
			delay = plan.delay_ms || 0;
			if (plan.jitter_ms) delay += Math.floor(Math.random() * plan.jitter_ms);
			text = plan.body || '';
			if (plan.retry_after) headers['retry-after'] = plan.retry_after;
		}
		const line = {
			t: Date.now(),
			path: req.url,
			id: req.headers['webhook-id'],
			ts: req.headers['webhook-timestamp'],
			sig: req.headers['webhook-signature'],
			idem: req.headers['idempotency-key'],
			ctype: req.headers['content-type'],
			traceparent: req.headers.traceparent,
			tracestate: req.headers.tracestate,
			extra: req.headers['x-extra'],
			valid,
			why,
			status,
			delay,
			...eventsOf(list),
		};
		const answer = () => {
			fs.writeSync(log, JSON.stringify(line) + '\n');
			if (status >= 200 && status < 300) {
				ok++;
				let lines = '';
				for (const e of list) lines += JSON.stringify(e) + '\n';
				fs.writeSync(events, lines);
			}
			res.writeHead(status, headers);
			res.end(text);
		};
		if (delay) setTimeout(answer, delay);
		else answer();
	});
}

let server;
if (process.env.TLS_CERT) {
	const opts = {
		key: fs.readFileSync(process.env.TLS_KEY),
		cert: fs.readFileSync(process.env.TLS_CERT),
	};
	if (process.env.TLS_CA) {
		opts.ca = fs.readFileSync(process.env.TLS_CA);
		opts.requestCert = true;
		opts.rejectUnauthorized = true;
	}
	server = https.createServer(opts, handle);
} else {
	server = http.createServer(handle);
}
server.keepAliveTimeout = 30000;
server.listen(Number(process.env.PORT || 0), '127.0.0.1', () => {
	if (process.env.PORT_FILE)
		fs.writeFileSync(process.env.PORT_FILE, String(server.address().port));
});
