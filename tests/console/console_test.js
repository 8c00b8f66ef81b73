// console_test.js — drives the web console (`pgoutbox console`) in
// Debian's headless Chromium through playwright-core, for
// tests/integration/t_console.sh, which prepares the database, a relay
// (stdout sink) and the console, and exports:
//   CONSOLE_URL   http://127.0.0.1:PORT of the console
//   CONSOLE_TOKEN the token it was given (PGOUTBOX_CONSOLE_TOKEN)
//   PGO_BIN, DATABASE_URL, RELAY_OUT (the relay's stdout), CONSOLE_LOG
//   PG_STOP, PG_START   shell commands that stop and start PostgreSQL
//   SHOTS         a directory: write a PNG of each page there (optional)
//   ONLY=overview stop after the overview's checks (t_console_metrics.sh)
//   LAG_QUEUE     a queue with due items nobody takes: its lag is checked
//   WAL_QUEUE     a WAL queue no relay streams: its slot lag is checked
// Each check prints "ok - ..." or throws; the exit code says which.
'use strict';
const { chromium } = require('playwright-core');
const { execSync } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const URL = process.env.CONSOLE_URL;
const SHOTS = process.env.SHOTS || '';
const sh = cmd => execSync(cmd, { shell: '/bin/bash', encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
const q = sql => sh(`psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" -c ${JSON.stringify(sql)}`);
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
async function shot(page, name) {
  if (!SHOTS) return;
  await page.screenshot({ path: path.join(SHOTS, name + '.png'), fullPage: true });
  ok('screenshot ' + name + '.png');
}
// The text of the cell `cls` in the row of queue `name` on the overview.
const cell = (page, name, cls) =>
  page.locator(`#queues tr[data-queue="${name}"] td.${cls}`).textContent();

// The newest value a chart's line shows (its polyline's data-last).
const last = async (page, chart, name) => {
  const l = page.locator(`#chart-${chart} polyline[data-queue="${name}"]`).last();
  if (!(await l.count())) return null;
  const v = await l.getAttribute('data-last');
  return v === null ? null : Number(v);
};
const status = queue => JSON.parse(sh(`"$PGO_BIN" status --json --queue ${queue}`));

// The lag chart of a queue whose items nobody takes: its newest value is
// the age of the oldest item at the sample, which `status --json`
// (oldest_seconds, taken after) exceeds by at most a sample period and a
// refresh; the overview's series agrees with the database to a second.
async function checkLag(page, queue) {
  const v = await until(`a lag sample of ${queue} over 1 s`, async () => {
    const x = await last(page, 'lag', queue);
    return x !== null && x >= 1 ? x : null;
  }, 40);
  const st = status(queue);
  const oldest = Math.max(...st.pending.map(p => p.oldest_seconds));
  check(oldest - v >= -0.5 && oldest - v <= 12,
    `lag chart: ${queue} ${v} s, status --json oldest_seconds ${oldest} s taken after`);
  const series = await page.evaluate(async () => (await (await fetch('/api/overview')).json()).series);
  const t = series.t[series.t.length - 1];
  const lag = series.queues[queue].lag[series.queues[queue].lag.length - 1];
  const due = Number(q(`SELECT extract(epoch FROM min(run_at)) FROM pgoutbox."${queue}"`));
  check(Math.abs(t / 1000 - due - lag) < 1.5,
    `lag series: ${lag} s at the sample = its time minus the oldest run_at (${(t / 1000 - due).toFixed(2)} s)`);
  check(/\d/.test(await page.locator(`#legend-lag span[data-queue="${queue}"]`).textContent()),
    'lag legend shows the newest value');
}

// A WAL queue's slot lag in bytes, which only grows while no relay
// confirms: the chart's newest value lies between status --json's
// slot.lag_bytes before and after it was sampled; the seconds (no relay
// streams: 0) equal status's.
async function checkSlot(page, queue) {
  const b0 = status(queue).slot.lag_bytes;
  check(b0 > 0, `status --json: slot of ${queue} keeps ${b0} bytes`);
  const v = await until(`a slot sample of ${queue} >= ${b0}`, async () => {
    const x = await last(page, 'slot_bytes', queue);
    return x !== null && x >= b0 ? x : null;
  }, 40);
  const s1 = status(queue).slot;
  check(v >= b0 && v <= s1.lag_bytes,
    `slot lag chart: ${queue} ${v} bytes, between status --json's ${b0} before and ${s1.lag_bytes} after`);
  check(await last(page, 'slot_s', queue) === s1.lag_seconds,
    `slot lag seconds chart: ${s1.lag_seconds} as status --json says`);
}

// A transaction that holds xmin (as pgoutbox.health() sees it): the lag
// chart draws it dashed in red and the card says how long, within a
// sample period of its age in pg_stat_activity.  Returns the holder.
async function checkXmin(page) {
  const { spawn } = require('child_process');
  const holder = spawn('psql', ['-XAtq', process.env.DATABASE_URL, '-c',
    "SET application_name = 'xmin-holder'; BEGIN ISOLATION LEVEL REPEATABLE READ; " +
    "SELECT count(*) FROM pgoutbox.queues; SELECT pg_sleep(120); COMMIT"], { stdio: 'ignore' });
  const v = await until('the held xmin drawn', async () => {
    const x = await last(page, 'lag', 'xmin');
    return x !== null && x >= 3 ? x : null;
  }, 40);
  const held = Number(q(`SELECT extract(epoch FROM now() - xact_start) FROM pg_stat_activity WHERE application_name = 'xmin-holder'`));
  check(held - v >= -0.5 && held - v <= 12, `held xmin: chart ${v} s, pg_stat_activity ${held.toFixed(1)} s`);
  await until('the xmin card', async () => /\d/.test(await page.locator('#xmin-held').textContent()));
  ok('held xmin: the card shows its age');
  return holder;
}

(async () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'pgo-chromium-'));
  const ctx = await chromium.launchPersistentContext(dataDir, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1280, height: 860 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  let xssRan = false;
  const page = ctx.pages()[0] || await ctx.newPage();
  page.on('dialog', d => d.accept());
  page.on('console', m => { if (/xss/i.test(m.text())) xssRan = true; });
  try {
    // --- overview: the counts are those of `status --json` ---
    await page.goto(URL + '/#/');
    await page.locator('#queues tr[data-queue="outbox"]').waitFor();
    for (const queue of ['outbox', 'jobs']) {
      const st = JSON.parse(sh(`"$PGO_BIN" status --json --queue ${queue}`));
      await until(`${queue} pending = ${st.pending_total}`,
        async () => Number(await cell(page, queue, 'pending')) === st.pending_total);
      await until(`${queue} dead = ${st.dead_letters.count}`,
        async () => Number(await cell(page, queue, 'dead')) === st.dead_letters.count);
      check(true, `overview: ${queue} pending ${st.pending_total} and dead letters ${st.dead_letters.count} match status --json`);
    }
    await until('a relay shown as connected',
      async () => Number(await page.locator('#relays-alive').textContent()) >= 1);
    ok('overview: the running relay is counted');
    await until('a throughput sample', async () =>
      (await page.locator('#chart-out polyline').count()) >= 1, 30);
    ok('overview: throughput chart drawn from the samples');
    if (process.env.LAG_QUEUE) await checkLag(page, process.env.LAG_QUEUE);
    if (process.env.WAL_QUEUE) await checkSlot(page, process.env.WAL_QUEUE);
    let holder = null;
    if (process.env.LAG_QUEUE) holder = await checkXmin(page);
    if (process.env.ONLY === 'overview') return; // t_console_metrics.sh
    if (SHOTS) { // some traffic for the chart: 15 s of events, relayed
      sh(`for i in $(seq 60); do psql -XAtq "$DATABASE_URL" -c "INSERT INTO pgoutbox.outbox (topic, key, type, payload) SELECT 'orders', 'k' || (random() * 50)::int, 'order.created', jsonb_build_object('n', g) FROM generate_series(1, 10 + (random() * 30)::int) g" >/dev/null; sleep 0.25; done`);
      await until('the traffic relayed', async () => q("SELECT count(*) FROM pgoutbox.outbox WHERE run_at <= now()") === '0');
      await sleep(6000);
    }
    await shot(page, 'overview');
    if (holder) { holder.kill(); q(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'xmin-holder'`); }

    // --- a queue: items, search, one envelope ---
    await page.click('#queues tr[data-queue="outbox"] a');
    await page.locator('#items').waitFor();
    await page.selectOption('#state', 'scheduled');
    await page.fill('#search', 'later-3');
    await page.click('form.toolbar button[type=submit]');
    await until('search result', async () =>
      (await page.locator('#count').textContent()).startsWith('1 item'));
    ok('queue: search by key finds one scheduled item');
    await page.selectOption('#state', 'scheduled');
    await page.fill('#search', '');
    await page.click('form.toolbar button[type=submit]');
    await until('all scheduled items', async () =>
      (await page.locator('#count').textContent()).startsWith('7 item'));
    await page.locator('#items tbody tr').first().click();
    const env = await page.locator('#envelope').textContent();
    check(env.includes('"payload"') && env.includes('"headers"'), 'queue: one item\'s full envelope shown');
    await shot(page, 'queue');

    // --- dead letters: XSS shown as text, read-only refusal ---
    await page.click('#nav-dead');
    await page.locator('#dead').waitFor();
    const xssRow = page.locator('#dead tr[data-id="666"]');
    const payloadText = await xssRow.locator('td.trunc').textContent();
    check(payloadText.includes('<img src=x onerror='), 'XSS payload is shown as text');
    check(await page.locator('#dead img').count() === 0, 'XSS payload made no element');
    check((await xssRow.locator('td.err').textContent()).includes('<script>'), 'XSS error shown as text');
    await xssRow.click();
    check((await page.locator('#envelope').textContent()).includes('<img src=x'), 'XSS envelope shown as text');
    await sleep(300);
    check(!xssRan && await page.evaluate(() => window.__xss === undefined), 'no script of the payload ran');

    await page.locator('#dead tr[data-id="42"] input[type=checkbox]').check();
    await page.click('#retry');
    await until('refusal shown', async () => /read-only/.test(await page.locator('#msg').textContent()));
    check(q("SELECT count(*) FROM pgoutbox.dead_letters WHERE id = 42") === '1',
      'read-only: retry refused, the dead letter stays');
    const direct = await page.evaluate(async () => (await fetch('/api/dead/retry', {
      method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: 'queue=outbox&ids=42' })).status);
    check(direct === 403, 'read-only: a direct POST is refused (403)');
    await shot(page, 'dead-letters');

    // --- unlock, then the CSRF check, retry and discard ---
    await page.fill('#login-who', 'alice');
    await page.fill('#login-token', 'wrong');
    await page.click('#unlock');
    await until('wrong token refused', async () => /wrong token/.test(await page.locator('#msg').textContent()));
    ok('a wrong token is refused');
    await page.fill('#login-token', process.env.CONSOLE_TOKEN);
    await page.click('#unlock');
    await page.locator('#who').waitFor();
    ok('unlocked with the token');
    const noCsrf = await page.evaluate(async () => (await fetch('/api/dead/retry', {
      method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: 'queue=outbox&ids=42' })).status);
    check(noCsrf === 403 && q("SELECT count(*) FROM pgoutbox.dead_letters WHERE id = 42") === '1',
      'CSRF: an action without the CSRF token is refused');
    const bad = await page.evaluate(async csrf => {
      const r = await fetch('/api/dead/retry', { method: 'POST',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded', 'X-CSRF-Token': csrf },
        body: 'queue=outbox&ids=4x2' });
      return [r.status, (await r.json()).error];
    }, await page.evaluate(async () => (await (await fetch('/api/session')).json()).csrf));
    check(bad[0] === 400 && /ids:/.test(bad[1]), 'input: bad ids get a clear error (' + bad[1] + ')');
    const tokenShown = (await page.content()).includes(process.env.CONSOLE_TOKEN);
    check(!tokenShown, 'the token appears nowhere in the page');

    await page.click('#nav-dead');
    await page.locator('#dead tr[data-id="42"]').waitFor();
    await page.locator('#dead tr[data-id="42"] input[type=checkbox]').check();
    await page.click('#retry');
    await until('retried', async () => /Retried 1/.test(await page.locator('#msg').textContent()));
    await until('the relay delivers the retried event', async () =>
      fs.readFileSync(process.env.RELAY_OUT, 'utf8').includes('retry-me'), 30);
    ok('retry: the dead letter was delivered by the relay');
    check(/alice \(from 127\.0\.0\.1\) retried 1 dead letter/.test(fs.readFileSync(process.env.CONSOLE_LOG, 'utf8')),
      'retry: logged with who did it');

    await page.locator('#dead tr[data-id="43"] input[type=checkbox]').check();
    await page.click('#discard');
    await until('discarded', async () => /Discarded 1/.test(await page.locator('#msg').textContent()));
    check(q("SELECT count(*) FROM pgoutbox.dead_letters WHERE id = 43") === '0', 'discard: the dead letter is gone');
    check(/alice \(from 127\.0\.0\.1\) discarded 1 dead letter/.test(fs.readFileSync(process.env.CONSOLE_LOG, 'utf8')),
      'discard: logged with who did it');

    // --- cron: schedules, ticks, pause and resume ---
    await page.click('#nav-cron');
    await page.locator('#schedules').waitFor();
    const next = await page.locator('#schedules tbody tr').first().locator('td').nth(5).textContent();
    check(/^\d{4}-\d\d-\d\dT/.test(next), 'cron: next tick shown (' + next + ')');
    await page.click('#schedules button.toggle[data-name="nightly"]');
    await until('paused', async () => q("SELECT enabled FROM pgoutbox.cron_schedules WHERE name = 'nightly'") === 'f');
    ok('cron: paused');
    await page.locator('#schedules button.toggle[data-name="nightly"]:has-text("Resume")').waitFor();
    await shot(page, 'cron');
    await page.click('#schedules button.toggle[data-name="nightly"]');
    await until('resumed', async () => q("SELECT enabled FROM pgoutbox.cron_schedules WHERE name = 'nightly'") === 't');
    ok('cron: resumed');
    check(await page.locator('#history tbody tr').count() >= 1, 'cron: tick history shown');

    // --- PostgreSQL stops: the banner ---
    await page.click('#nav-overview');
    await page.locator('#queues').waitFor();
    sh(process.env.PG_STOP);
    await until('the banner', async () => await page.locator('#banner').isVisible() &&
      /PostgreSQL is down/.test(await page.locator('#banner').textContent()), 30);
    ok('PostgreSQL down: the banner says so');
    await shot(page, 'banner');
    sh(process.env.PG_START);
    await until('the banner gone', async () => !(await page.locator('#banner').isVisible()), 30);
    ok('PostgreSQL back: the banner is gone');
  } finally {
    await ctx.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
})().catch(e => { console.error(e.message || e); process.exit(1); });
