// fleet_test.js — the web console over a fleet's databases in Debian's
// headless Chromium (playwright-core), for
// tests/integration/t_console_fleet.sh, which prepares three databases
// on three clusters (named shard1..shard3 by [database NAME] sections),
// starts `pgoutbox console --config CONF` and exports:
//   CONSOLE_URL, CONSOLE_TOKEN, CONSOLE_LOG, PGO_BIN, CONF
//   URL1, URL2, URL3     each database's conninfo
//   STOP3, START3        shell commands that stop and start cluster 3
//   DEAD_ID              the id of a dead letter of queue outbox that
//                        each database holds (a different payload each)
// Each check prints "ok - ..." or throws; the exit code says which.
'use strict';
const { chromium } = require('playwright-core');
const { execSync } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const URL = process.env.CONSOLE_URL;
const NAMES = ['shard1', 'shard2', 'shard3'];
const DEAD_ID = process.env.DEAD_ID;
const sh = cmd => execSync(cmd, { shell: '/bin/bash', encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
const q = (i, sql) => sh(`psql -XAtq -v ON_ERROR_STOP=1 "$URL${i}" -c ${JSON.stringify(sql)}`);
const ok = m => console.log('ok - ' + m);
function check(cond, msg) { if (!cond) throw new Error('FAIL: ' + msg); ok(msg); }
const sleep = ms => new Promise(r => setTimeout(r, ms));
async function until(what, fn, secs = 30) {
  const end = Date.now() + secs * 1000;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error('FAIL: timed out waiting for ' + what);
    await sleep(200);
  }
}
// `status --json` of the fleet (exit 1 while a database is down).
const status = () => {
  let out;
  try { out = sh('"$PGO_BIN" status --json --config "$CONF" 2>/dev/null'); } catch (e) { out = e.stdout.trim(); }
  const s = JSON.parse(out);
  return Object.fromEntries(s.databases.map(d => [d.database, d]));
};
// The text of cell `cls` in the row of queue `queue` of database `db`.
const cell = async (page, db, queue, cls) => {
  const l = page.locator(`#db-${db} #queues-${db} tr[data-queue="${queue}"] td.${cls}`);
  return (await l.count()) ? (await l.textContent()).trim() : null;
};
// Whether the overview shows database db with status --json's figures.
const matches = async (page, db, st) =>
  (await page.locator(`#db-${db}[data-state="up"]`).count()) === 1 &&
  Number(await cell(page, db, 'outbox', 'pending')) === st.pending_total &&
  Number(await cell(page, db, 'outbox', 'dead')) === st.dead_letters.count;

(async () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'pgo-chromium-'));
  const ctx = await chromium.launchPersistentContext(dataDir, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1280, height: 860 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const page = ctx.pages()[0] || await ctx.newPage();
  page.on('dialog', d => d.accept());
  try {
    // --- the overview: each database by its name, as status says ---
    await page.goto(URL + '/#/');
    await page.locator('#db-shard3').waitFor();
    const st = status();
    for (const db of NAMES) {
      await until(`${db}: pending ${st[db].pending_total}, dead ${st[db].dead_letters.count}`,
        () => matches(page, db, st[db]));
      const h = await page.locator(`#db-${db} h2`).first().textContent();
      check(h.includes('database ' + db),
        `overview: ${db} named, pending ${st[db].pending_total} and dead letters ${st[db].dead_letters.count} as status --json`);
    }
    // The DOM as Chromium has it: every name and figure in it.
    const dom = await page.content();
    for (const db of NAMES) check(dom.includes(`data-db="${db}"`), `DOM dump: section of ${db}`);
    const sum = NAMES.reduce((a, db) => a + st[db].pending_total, 0);
    const dead = NAMES.reduce((a, db) => a + st[db].dead_letters.count, 0);
    check((await page.locator('#fleet-up').textContent()) === '3 / 3' &&
      Number(await page.locator('#total-pending').textContent()) === sum &&
      Number(await page.locator('#total-dead').textContent()) === dead,
      `summary: 3 / 3 up, ${sum} pending, ${dead} dead letters`);
    check(/\d/.test(await cell(page, 'shard1', 'events', 'slot')),
      'overview: the WAL queue of shard1 shows its slot lag (' + await cell(page, 'shard1', 'events', 'slot') + ')');
    check((await cell(page, 'shard2', 'outbox', 'slot')) === '—', 'overview: no slot lag for a queue not captured through the WAL');

    // --- cluster 3 stops: its error row, the others still shown ---
    const t0 = Date.now();
    sh(process.env.STOP3);
    await until('shard3 shown down', async () =>
      (await page.locator('#db-shard3[data-state="down"] .db-error').count()) === 1, 15);
    const err = await page.locator('#db-shard3 .db-error').textContent();
    check(/^database shard3: /.test(err), `shard3 down within ${((Date.now() - t0) / 1000).toFixed(1)} s: "${err.slice(0, 90)}"`);
    check((await page.locator('#fleet-down').textContent()) === '1', 'summary: 1 database down');
    const st2 = status();
    for (const db of ['shard1', 'shard2'])
      check(await matches(page, db, st2[db]), `${db} still shown with its figures while shard3 is down`);
    // A database down costs the overview a refused connection, no more.
    const ms = await page.evaluate(async () => {
      const a = performance.now();
      await (await fetch('/api/overview')).json();
      return performance.now() - a;
    });
    check(ms < 2000, `the overview answers in ${ms.toFixed(0)} ms with shard3 down`);

    // --- a dead letter of shard2 retried from its page ---
    await page.fill('#login-who', 'alice');
    await page.fill('#login-token', process.env.CONSOLE_TOKEN);
    await page.click('#unlock');
    await page.locator('#who').waitFor();
    const noDb = await page.evaluate(async id => {
      const csrf = (await (await fetch('/api/session')).json()).csrf;
      const r = await fetch('/api/dead/retry', { method: 'POST',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded', 'X-CSRF-Token': csrf },
        body: 'queue=outbox&ids=' + id });
      return [r.status, (await r.json()).error];
    }, DEAD_ID);
    check(noDb[0] === 400 && /db: which database/.test(noDb[1]), `an action without db= is refused: ${noDb[1]}`);
    await page.click('#db-shard2 a.db-dead');
    await page.locator(`#dead tr[data-id="${DEAD_ID}"]`).waitFor();
    check((await page.locator('#page-db').textContent()) === 'database shard2', 'the dead letters page says it reads shard2');
    check((await page.locator(`#dead tr[data-id="${DEAD_ID}"] td.trunc`).textContent()).includes('shard2'),
      'the dead letter shown is shard2\'s');
    await page.locator(`#dead tr[data-id="${DEAD_ID}"] input[type=checkbox]`).check();
    await page.click('#retry');
    await until('retried', async () => /Retried 1/.test(await page.locator('#msg').textContent()));
    check(q(2, `SELECT count(*) FROM pgoutbox.dead_letters WHERE id = ${DEAD_ID}`) === '0' &&
      q(2, "SELECT count(*) FROM pgoutbox.outbox WHERE payload->>'from' = 'shard2'") === '1',
      'retry: shard2\'s dead letter is back in shard2\'s outbox');
    check(q(1, `SELECT count(*) FROM pgoutbox.dead_letters WHERE id = ${DEAD_ID}`) === '1' &&
      q(1, "SELECT count(*) FROM pgoutbox.outbox WHERE payload->>'from' = 'shard1'") === '0',
      'retry: shard1\'s dead letter of the same queue and id is untouched');
    check(/alice \(from 127\.0\.0\.1\) retried 1 dead letter\(s\) of queue outbox in database shard2/
      .test(fs.readFileSync(process.env.CONSOLE_LOG, 'utf8')), 'retry: logged with its database');

    // --- cluster 3 back: shown up again, its dead letter untouched ---
    sh(process.env.START3);
    await page.click('#nav-overview');
    await until('shard3 up again', async () => (await page.locator('#db-shard3[data-state="up"]').count()) === 1, 30);
    check(q(3, `SELECT count(*) FROM pgoutbox.dead_letters WHERE id = ${DEAD_ID}`) === '1',
      'shard3 up again; its dead letter of the same id untouched');
    const st3 = status();
    await until('shard2 as status says after the retry', () => matches(page, 'shard2', st3.shard2));
    ok(`overview: shard2 now ${st3.shard2.pending_total} pending, ${st3.shard2.dead_letters.count} dead, as status --json`);
  } finally {
    await ctx.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
})().catch(e => { console.error(e.message || e); process.exit(1); });
