#!/usr/bin/env node
// bullmq-export.js — writes the add script of the installed bullmq package
// into a file that pgoutbox's bullmq sink loads (sink.bullmq_script).
//
//   node tools/bullmq-export.js [--package bullmq] [--from DIR] --out FILE
//
// The script is BullMQ's own: dist/cjs/scripts/addStandardJob-9.js exports
// {name, content, keys} with its includes already expanded, and Queue.add
// runs exactly that content.  The file is one header line, then the
// content byte for byte:
//
//   --! pgoutbox-bullmq-export bullmq=6.7.0 script=addStandardJob keys=9
//
// The header is a Lua comment; the sink strips it before SCRIPT LOAD, so
// the SHA-1 matches the one BullMQ's own clients load.  Run it at deploy
// time with the bullmq version your Workers use (--from: the directory of
// that project; --package: an npm alias such as bullmq6).
'use strict';

const fs = require('fs');
const path = require('path');

function usage(msg) {
	if (msg) process.stderr.write(`bullmq-export: ${msg}\n`);
	process.stderr.write(
		'usage: node tools/bullmq-export.js [--package bullmq] ' +
			'[--from DIR] --out FILE\n',
	);
	process.exit(2);
}

const opts = { package: 'bullmq', from: process.cwd(), out: null };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
	const a = argv[i];
	const v = () => (i + 1 < argv.length ? argv[++i] : usage(`${a} needs a value`));
	if (a === '--package') opts.package = v();
	else if (a === '--from') opts.from = path.resolve(v());
	else if (a === '--out') opts.out = v();
	else if (a === '-h' || a === '--help') usage();
	else usage(`unknown argument ${a}`);
}
if (!opts.out) usage('--out is required');

let pkgJson;
try {
	pkgJson = require.resolve(`${opts.package}/package.json`, {
		paths: [opts.from],
	});
} catch (e) {
	process.stderr.write(
		`bullmq-export: cannot find package ${opts.package} from ${opts.from} ` +
			`(npm install bullmq there, or pass --from)\n`,
	);
	process.exit(1);
}
const pkg = JSON.parse(fs.readFileSync(pkgJson, 'utf8'));
if (pkg.name !== 'bullmq') {
	process.stderr.write(
		`bullmq-export: ${opts.package} is the package ${pkg.name}, not bullmq\n`,
	);
	process.exit(1);
}
const root = path.dirname(pkgJson);
const dir = path.join(root, 'dist', 'cjs', 'scripts');
const want = 'addStandardJob';
let found = null;
let files = [];
try {
	files = fs.readdirSync(dir).filter((f) => /^addStandardJob-\d+\.js$/.test(f));
} catch (e) {
	/* reported below */
}
for (const f of files) {
	const mod = require(path.join(dir, f));
	const s = mod[want];
	if (s && s.name === want && typeof s.content === 'string') found = s;
}
if (!found) {
	process.stderr.write(
		`bullmq-export: bullmq ${pkg.version} at ${root} has no ` +
			`dist/cjs/scripts/addStandardJob-*.js exporting {name, content, keys}\n`,
	);
	process.exit(1);
}
const header =
	`--! pgoutbox-bullmq-export bullmq=${pkg.version} ` +
	`script=${found.name} keys=${found.keys}\n`;
const tmp = `${opts.out}.tmp${process.pid}`;
fs.writeFileSync(tmp, header + found.content);
fs.renameSync(tmp, opts.out);
process.stderr.write(
	`bullmq-export: ${opts.out}: ${found.name} of bullmq ${pkg.version} ` +
		`(${found.keys} keys, ${Buffer.byteLength(found.content)} bytes)\n`,
);
