/*
 * app.js — the console's pages, built with the DOM: every value from the
 * server (payloads, keys, errors are user data) goes in as textContent,
 * never as markup.  Routes are the URL's hash: #/ (overview),
 * #/queue/NAME, #/dead, #/cron.  A console over a fleet's databases
 * (session.databases) shows them all on the overview, and its other
 * pages read one: #/db/DB/queue/NAME, #/db/DB/dead, #/db/DB/cron, each
 * request carrying db=DB.
 */
'use strict';

const state = { session: { writable: false, token_configured: false }, timer: null, db: '' };
const COLORS = ['#0969da', '#1a7f37', '#bf3989', '#9a6700', '#8250df', '#cf222e'];

/* el('td', {className: 'num'}, 'text', child...): strings become text. */
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(e.dataset, v);
    else if (k in e) e[k] = v;
    else e.setAttribute(k, v);
  }
  for (const k of kids.flat()) {
    if (k === null || k === undefined) continue;
    e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return e;
}

function show(msg, kind) {
  const m = document.getElementById('msg');
  m.hidden = !msg;
  m.className = 'msg ' + (kind || '');
  m.textContent = msg || '';
}

function banner(text) {
  const b = document.getElementById('banner');
  b.hidden = !text;
  b.textContent = text || '';
}

/* The parameters of a request: a fleet's pages name their database. */
function withDb(params) {
  return state.db ? Object.assign({ db: state.db }, params || {}) : (params || {});
}

/* The hash of a page (rest: '/dead', '/queue/NAME'), in the current
 * database of a fleet. */
function link(rest, db) {
  db = db || state.db;
  return db ? '#/db/' + encodeURIComponent(db) + rest : '#' + rest;
}

/* " — database DB" after a fleet's page title. */
function dbTitle() {
  return state.db ? el('span', { className: 'pill', id: 'page-db' }, 'database ' + state.db) : null;
}

async function api(path, params) {
  const qs = new URLSearchParams(path === 'session' || path === 'overview' ? params || {} : withDb(params)).toString();
  let r;
  try {
    r = await fetch('/api/' + path + (qs ? '?' + qs : ''), { credentials: 'same-origin' });
  } catch (e) {
    banner('The console does not answer: is `pgoutbox console` running?');
    throw e;
  }
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || ('HTTP ' + r.status));
  return body;
}

async function post(path, params) {
  const r = await fetch('/api/' + path, {
    method: 'POST', credentials: 'same-origin',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded',
               'X-CSRF-Token': state.session.csrf || '' },
    body: new URLSearchParams(path === 'login' || path === 'logout' ? params : withDb(params)).toString(),
  });
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || ('HTTP ' + r.status));
  return body;
}

function stamp() {
  document.getElementById('updated').textContent = new Date().toLocaleTimeString();
}

function age(s) {
  s = Number(s) || 0;
  if (s < 60) return s.toFixed(0) + ' s';
  if (s < 3600) return (s / 60).toFixed(1) + ' min';
  if (s < 86400) return (s / 3600).toFixed(1) + ' h';
  return (s / 86400).toFixed(1) + ' d';
}

function table(cols, rows, opts) {
  opts = opts || {};
  const head = el('tr', {}, cols.map(c => el('th', { className: c.num ? 'num' : '' }, c.label)));
  const body = rows.map(r => {
    const tr = el('tr', { className: opts.onrow ? 'clickable' : '' },
      cols.map(c => {
        const v = c.get ? c.get(r) : r[c.key];
        return el('td', { className: (c.num ? 'num ' : '') + (c.cls || '') },
          v instanceof Node ? v : (v === null || v === undefined ? '' : String(v)));
      }));
    if (opts.onrow) tr.addEventListener('click', ev => {
      if (ev.target.tagName !== 'INPUT' && ev.target.tagName !== 'A') opts.onrow(r);
    });
    if (opts.rowdata) Object.assign(tr.dataset, opts.rowdata(r));
    return tr;
  });
  return el('table', { id: opts.id || '' }, el('thead', {}, head), el('tbody', {}, body));
}

/* --- the session: unlocking with the token --- */

async function loadSession() {
  try { state.session = await api('session'); } catch (e) { /* banner */ }
  drawAuth();
}

function drawAuth() {
  const f = document.getElementById('auth');
  const s = state.session;
  f.replaceChildren();
  if (s.writable) {
    f.append(el('span', { id: 'who', className: 'pill on' }, 'unlocked: ' + s.who),
      el('button', { type: 'button', id: 'lock', onclick: async () => {
        try { await post('logout', {}); } catch (e) { show(e.message, 'bad'); }
        await loadSession(); route();
      } }, 'Lock'));
  } else if (s.token_configured) {
    const who = el('input', { id: 'login-who', placeholder: 'your name', size: 10 });
    const tok = el('input', { id: 'login-token', type: 'password', placeholder: 'console token', size: 14 });
    f.append(el('span', { className: 'pill off', id: 'readonly' }, 'read-only'), who, tok,
      el('button', { type: 'submit', id: 'unlock' }, 'Unlock'));
    f.onsubmit = async ev => {
      ev.preventDefault();
      try {
        const r = await fetch('/api/login', {
          method: 'POST', credentials: 'same-origin',
          headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams({ who: who.value, token: tok.value }).toString(),
        });
        const b = await r.json();
        tok.value = '';
        if (!r.ok) throw new Error(b.error);
        state.session = b;
        show('Unlocked: actions are logged as ' + b.who + '.', 'ok');
        drawAuth(); route();
      } catch (e) { show(e.message, 'bad'); }
    };
  } else {
    f.append(el('span', { className: 'pill off', id: 'readonly' }, 'read-only (no token configured)'));
  }
}

/* --- overview --- */

/* The size of n bytes, for a chart's scale and legend. */
function bytes(n) {
  n = Number(n) || 0;
  if (n < 1024) return n.toFixed(0) + ' B';
  if (n < 1048576) return (n / 1024).toFixed(1) + ' KiB';
  if (n < 1073741824) return (n / 1048576).toFixed(1) + ' MiB';
  return (n / 1073741824).toFixed(1) + ' GiB';
}

/* A line chart of the last 15 minutes: lines [{name, values, color,
 * danger}] over the sample times t; fmt writes a value (the scale and
 * the legend).  Each line's polyline carries its name and its newest
 * value (data-queue, data-last); a null value breaks the line. */
function lineChart(id, t, lines, fmt) {
  const NS = 'http://www.w3.org/2000/svg';
  const W = 900, H = 160, L = 56, B = 18;
  const svg = document.createElementNS(NS, 'svg');
  svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
  svg.setAttribute('class', 'chart');
  svg.setAttribute('id', 'chart-' + id);
  let max = 0;
  for (const ln of lines) for (const v of ln.values) if (v !== null) max = Math.max(max, v);
  max = max > 0 ? max : 1;
  /* Since the first sample, at most 15 minutes, at least one. */
  const span = Math.min(15 * 60 * 1000, Math.max(60 * 1000, t.length ? Date.now() - t[0] : 0));
  const t0 = Date.now() - span;
  const x = ms => L + (W - L - 6) * Math.max(0, (ms - t0) / span);
  const y = v => (H - B) - (H - B - 8) * (v / max);
  const line = (x1, y1, x2, y2, c) => {
    const l = document.createElementNS(NS, 'line');
    l.setAttribute('x1', x1); l.setAttribute('y1', y1);
    l.setAttribute('x2', x2); l.setAttribute('y2', y2);
    l.setAttribute('stroke', c);
    svg.append(l);
  };
  const label = (xx, yy, s, anchor) => {
    const tx = document.createElementNS(NS, 'text');
    tx.setAttribute('x', xx); tx.setAttribute('y', yy);
    tx.setAttribute('text-anchor', anchor || 'start');
    tx.textContent = s;
    svg.append(tx);
  };
  line(L, H - B, W - 6, H - B, '#d0d7de');
  line(L, 8, L, H - B, '#d0d7de');
  label(L - 4, 14, fmt(max), 'end');
  label(L - 4, H - B, '0', 'end');
  label(L, H - 4, span >= 15 * 60 * 1000 ? '−15 min' : '−' + Math.round(span / 1000) + ' s');
  label(W - 6, H - 4, 'now', 'end');
  for (const ln of lines) {
    let run = [];
    const flush = () => {
      if (!run.length) return;
      const p = document.createElementNS(NS, 'polyline');
      p.setAttribute('points', run.join(' '));
      p.setAttribute('fill', 'none');
      p.setAttribute('stroke', ln.color);
      p.setAttribute('stroke-width', '2');
      if (ln.danger) p.setAttribute('stroke-dasharray', '6 3');
      p.dataset.queue = ln.name;
      const last = ln.values.length ? ln.values[ln.values.length - 1] : null;
      if (last !== null) p.dataset.last = String(last);
      svg.append(p);
      run = [];
    };
    ln.values.forEach((v, k) => {
      if (v === null) flush();
      else run.push(`${x(t[k]).toFixed(1)},${y(v).toFixed(1)}`);
    });
    flush();
  }
  return svg;
}

/* One chart of every queue's series `which` (in, out, lag, slot_*). */
function chart(series, which, fmt, only) {
  const names = Object.keys(series.queues || {});
  const lines = names.map((n, i) => ({ name: n, values: series.queues[n][which], color: COLORS[i % COLORS.length] }))
    .filter(ln => ln.values && (!only || only(ln.name)));
  return lineChart(which, series.t || [], lines, fmt);
}

/* The legend of a chart: each queue's colour, and with fmt its newest
 * value. */
function legend(series, which, fmt, only) {
  const names = Object.keys(series.queues || {});
  return el('div', { className: 'legend', id: which ? 'legend-' + which : '' }, names.map((n, i) => {
    const v = which && series.queues[n][which];
    if (which && (!v || (only && !only(n)))) return null;
    const last = v && v.length ? v[v.length - 1] : null;
    return el('span', { dataset: { queue: n } }, el('i', { style: 'background:' + COLORS[i % COLORS.length] }), n,
      fmt && last !== null ? ' ' + fmt(last) : '');
  }));
}

/* A fleet's overview: its summary, then each database by its name, a
 * database that could not be read as its error row. */
function fleetOverview(d) {
  const main = document.getElementById('main');
  const f = d.fleet;
  const atLeast = (n, capped) => capped ? '≥ ' + Number(n).toLocaleString('en-US') : n;
  const perSec = v => (v < 10 ? v.toFixed(1) : v.toFixed(0)) + '/s';
  const lastOf = a => a && a.length ? a[a.length - 1] : null;
  banner(f.down ? `${f.down} of ${f.databases} databases cannot be read; the others are shown.` : '');
  stamp();
  const section = db => {
    const name = db.name;
    if (!db.db.ok) {
      const e = db.db.error || 'unreachable';
      return el('section', { className: 'db down', id: 'db-' + name, dataset: { db: name, state: 'down' } },
        el('h2', {}, 'database ' + name + ' ', el('span', { className: 'pill bad' }, 'down')),
        el('p', { className: 'msg bad db-error' }, e.startsWith('database ' + name + ':') ? e : 'database ' + name + ': ' + e));
    }
    const s = db.series || { queues: {} };
    const pending = db.queues.reduce((a, q) => a + (Number(q.pending) || 0), 0);
    const dead = db.queues.reduce((a, q) => a + (Number(q.dead) || 0), 0);
    const relays = db.sessions.filter(x => x.role === 'relay').length;
    const names = Object.keys(s.queues || {});
    return el('section', { className: 'db up', id: 'db-' + name, dataset: { db: name, state: 'up' } },
      el('h2', {}, 'database ' + name + ' ', el('span', { className: 'pill on' }, 'up'), ' ',
        el('span', { className: 'muted' }, `${pending} pending, `,
          el('a', { href: link('/dead', name), className: 'db-dead' }, `${dead} dead letter(s)`),
          `, ${relays} relay(s) connected, `, el('a', { href: link('/cron', name) }, 'cron'))),
      db.warnings.length ? table([
        { label: 'Kind', key: 'kind' }, { label: 'Subject', key: 'subject' },
        { label: 'Detail', key: 'detail', cls: 'err' },
      ], db.warnings, { id: 'warnings-' + name }) : null,
      table([
        { label: 'Queue', get: q => el('a', { href: link('/queue/' + encodeURIComponent(q.name), name) }, q.name) },
        { label: 'Kind', key: 'kind' },
        { label: 'Pending', get: q => atLeast(q.pending, q.pending_capped), num: true, cls: 'pending' },
        { label: 'Oldest pending', get: q => q.pending > 0 ? age(q.oldest_s) : '—', num: true, cls: 'lag' },
        { label: 'Done', get: q => s.queues[q.name] && lastOf(s.queues[q.name].out) !== null ? perSec(lastOf(s.queues[q.name].out)) : '—', num: true },
        { label: 'Dead letters', key: 'dead', num: true, cls: 'dead' },
        { label: 'Slot lag', get: q => q.slot_lag_bytes === null || q.slot_lag_bytes === undefined ? '—' : bytes(q.slot_lag_bytes), num: true, cls: 'slot' },
        { label: 'Relay members', key: 'members', num: true },
      ], db.queues, { id: 'queues-' + name, rowdata: q => ({ queue: q.name }),
                      onrow: q => { location.hash = link('/queue/' + encodeURIComponent(q.name), name); } }),
      names.length && (s.t || []).length ? el('figure', {}, el('p', { className: 'muted' }, 'done per second, last 15 minutes'),
        lineChart('out-' + name, s.t || [], names.map((n, i) => ({ name: n, values: s.queues[n].out, color: COLORS[i % COLORS.length] })), perSec),
        legend(s)) : null);
  };
  main.replaceChildren(
    el('h1', {}, 'Overview of the fleet'),
    el('div', { className: 'cards' },
      el('div', { className: 'card' + (f.down ? ' danger' : '') }, el('div', { className: 'v', id: 'fleet-up' }, `${f.up} / ${f.databases}`),
        el('div', { className: 'k' }, 'databases up')),
      el('div', { className: 'card' + (f.down ? ' danger' : '') }, el('div', { className: 'v', id: 'fleet-down' }, f.down),
        el('div', { className: 'k' }, 'databases down')),
      el('div', { className: 'card' }, el('div', { className: 'v', id: 'total-pending' }, atLeast(f.pending, f.pending_capped)),
        el('div', { className: 'k' }, 'pending in the databases up')),
      el('div', { className: 'card' }, el('div', { className: 'v', id: 'total-dead' }, f.dead),
        el('div', { className: 'k' }, 'dead letters in the databases up'))),
    ...d.databases.map(section));
}

async function overview() {
  const main = document.getElementById('main');
  let d;
  try { d = await api('overview'); } catch (e) { show(e.message, 'bad'); return; }
  if (d.fleet) { fleetOverview(d); return; }
  if (!d.db.ok) {
    banner('PostgreSQL is down or unreachable (' + d.db.error.replace(/^PostgreSQL is unreachable: /, '') +
           '). The console retries every few seconds; the figures below are from before.');
    return;
  }
  banner('');
  stamp();
  const totals = d.queues.reduce((a, q) => {
    a.pending += Number(q.pending) || 0; a.dead += Number(q.dead) || 0;
    a.capped = a.capped || q.pending_capped === true; return a;
  }, { pending: 0, dead: 0, capped: false });
  /* A queue's counts stop at the server's cap (pending_capped): past it
   * they are lower bounds, shown as "≥ 10,000". */
  const atLeast = (n, capped) => capped ? '≥ ' + Number(n).toLocaleString('en-US') : n;
  const xs = d.series.xmin_s || [];
  const xminHeld = xs.length ? xs[xs.length - 1] : 0;
  const wal = Object.keys(d.series.queues || {}).filter(n => d.series.queues[n].slot_bytes);
  const isWal = n => wal.includes(n);
  const perSec = v => (v < 10 ? v.toFixed(1) : v.toFixed(0)) + '/s';
  /* Each queue's lag, and the held xmin dashed in red when it was ever
   * over a second: a vacuum held back lets the queue's tables bloat. */
  const lagChart = series => {
    const names = Object.keys(series.queues || {});
    const lines = names.map((n, i) => ({ name: n, values: series.queues[n].lag, color: COLORS[i % COLORS.length] }));
    if (Math.max(0, ...xs) >= 1) lines.push({ name: 'xmin', values: xs, color: '#cf222e', danger: true });
    return lineChart('lag', series.t || [], lines, age);
  };
  const relays = d.sessions.filter(s => s.role === 'relay').length;
  const workers = d.sessions.filter(s => s.role === 'worker').length;
  main.replaceChildren(
    el('h1', {}, 'Overview'),
    el('div', { className: 'cards' },
      el('div', { className: 'card' }, el('div', { className: 'v', id: 'total-pending' }, atLeast(totals.pending, totals.capped)), el('div', { className: 'k' }, 'pending in all queues')),
      el('div', { className: 'card' }, el('div', { className: 'v', id: 'total-dead' }, totals.dead), el('div', { className: 'k' }, 'dead letters')),
      el('div', { className: 'card' }, el('div', { className: 'v', id: 'relays-alive' }, relays), el('div', { className: 'k' }, 'relays connected')),
      el('div', { className: 'card' }, el('div', { className: 'v', id: 'workers-alive' }, workers), el('div', { className: 'k' }, 'workers connected')),
      el('div', { className: 'card' + (xminHeld >= 60 ? ' danger' : ''), id: 'xmin-card' },
        el('div', { className: 'v', id: 'xmin-held' }, xminHeld >= 1 ? age(xminHeld) : '—'),
        el('div', { className: 'k' }, xminHeld >= 60 ? 'xmin held: vacuum is held back' : 'oldest transaction holding xmin'))),
    d.warnings.length ? el('div', { id: 'warnings' }, el('h2', {}, 'Warnings'), table([
      { label: 'Kind', key: 'kind' }, { label: 'Subject', key: 'subject' },
      { label: 'Detail', key: 'detail', cls: 'err' },
    ], d.warnings)) : null,
    el('h2', {}, 'Queues'),
    table([
      { label: 'Queue', get: q => el('a', { href: '#/queue/' + encodeURIComponent(q.name) }, q.name) },
      { label: 'Kind', key: 'kind' },
      { label: 'Pending', get: q => atLeast(q.pending, q.pending_capped), num: true, cls: 'pending' },
      { label: 'Scheduled', get: q => atLeast(q.scheduled, q.pending_capped), num: true },
      { label: 'Retrying', get: q => atLeast(q.retrying, q.pending_capped), num: true },
      { label: 'Oldest pending', get: q => q.pending > 0 ? age(q.oldest_s) : '—', num: true },
      { label: 'Dead letters', key: 'dead', num: true, cls: 'dead' },
      { label: 'Relay members', key: 'members', num: true },
      { label: 'Leases held', get: q => q.leases + ' / ' + q.shards, num: true },
    ], d.queues, { id: 'queues', rowdata: q => ({ queue: q.name }),
                   onrow: q => { location.hash = '#/queue/' + encodeURIComponent(q.name); } }),
    el('div', { className: 'charts' },
      el('figure', {}, el('h2', {}, 'Done per second, last 15 minutes'),
        el('p', { className: 'muted' }, 'delivered by a relay or finished by a worker'),
        chart(d.series, 'out', perSec), legend(d.series)),
      el('figure', {}, el('h2', {}, 'Enqueued per second'),
        el('p', { className: 'muted' }, 'what producers added'),
        chart(d.series, 'in', perSec), legend(d.series)),
      el('figure', {}, el('h2', {}, 'Lag: how long the oldest due item has waited'),
        xminHeld >= 1 ? el('p', { className: 'muted' }, 'dashed red: the oldest transaction holding back vacuum')
          : el('p', { className: 'muted' }, 'no transaction holds back vacuum'),
        lagChart(d.series), legend(d.series, 'lag', age),
        Math.max(0, ...xs) >= 1 ? el('div', { className: 'legend' }, el('span', { id: 'legend-xmin' },
          el('i', { className: 'danger' }), 'held xmin ' + age(xminHeld))) : null),
      wal.length ? el('figure', { id: 'slot' }, el('h2', {}, 'Slot lag: WAL kept for a WAL queue'),
        el('p', { className: 'muted' }, 'bytes past the slot\'s confirmed position'),
        chart(d.series, 'slot_bytes', bytes, isWal), legend(d.series, 'slot_bytes', bytes, isWal),
        el('p', { className: 'muted' }, 'flush lag, seconds'),
        chart(d.series, 'slot_s', age, isWal), legend(d.series, 'slot_s', age, isWal)) : null),
    el('h2', {}, 'Connected processes'),
    d.sessions.length ? table([
      { label: 'Role', key: 'role' }, { label: 'application_name', key: 'name' },
      { label: 'Connections', key: 'connections', num: true }, { label: 'Up', key: 'up' },
    ], d.sessions, { id: 'sessions' }) : el('p', { className: 'muted' }, 'No relay, worker or scheduler is connected.'));
}

/* --- a queue --- */

function envelope(title, obj) {
  const box = document.getElementById('detail');
  box.replaceChildren(el('h2', {}, title),
    el('pre', { className: 'envelope', id: 'envelope' }, JSON.stringify(obj, null, 2)));
  box.scrollIntoView({ block: 'nearest' });
}

async function queuePage(name, opts) {
  const main = document.getElementById('main');
  opts = Object.assign({ state: 'pending', q: '', page: 0 }, opts);
  let d;
  try { d = await api('queue', { name, state: opts.state, q: opts.q, page: opts.page }); }
  catch (e) { main.replaceChildren(el('h1', {}, 'Queue ' + name, ' ', dbTitle()), el('p', { className: 'msg bad' }, e.message)); return; }
  banner(''); stamp();
  const total = d.total[0].n;
  const search = el('input', { id: 'search', placeholder: 'id, key, type or topic', value: opts.q, size: 28 });
  const pick = el('select', { id: 'state' },
    el('option', { value: 'pending', selected: opts.state === 'pending' }, 'pending (due)'),
    el('option', { value: 'scheduled', selected: opts.state === 'scheduled' }, 'scheduled (later)'));
  const go = p => queuePage(name, { state: pick.value, q: search.value, page: p });
  main.replaceChildren(
    el('h1', {}, 'Queue ', el('span', { id: 'queue-name' }, d.name), ' ', el('span', { className: 'pill' }, d.kind), ' ', dbTitle()),
    el('form', { className: 'toolbar', onsubmit: ev => { ev.preventDefault(); go(0); } },
      search, pick, el('button', { type: 'submit' }, 'Search'),
      el('span', { className: 'muted', id: 'count' }, `${total} item(s); page ${d.page + 1}`),
      el('button', { type: 'button', disabled: d.page === 0, onclick: () => go(d.page - 1) }, '← Prev'),
      el('button', { type: 'button', disabled: (d.page + 1) * d.page_rows >= total, onclick: () => go(d.page + 1) }, 'Next →')),
    table([
      { label: 'Id', key: 'id', num: true }, { label: 'Topic', key: 'topic' },
      { label: 'Key', key: 'key' }, { label: 'Type', key: 'type' },
      { label: 'Created', key: 'created_at' }, { label: 'Run at', key: 'run_at' },
      { label: 'Attempts', key: 'attempts', num: true }, { label: 'Last error', key: 'last_error', cls: 'err' },
    ], d.items, { id: 'items', rowdata: r => ({ id: r.id }), onrow: async r => {
      try { const it = await api('item', { queue: name, id: r.id }); envelope('Item ' + r.id, it.item[0]); }
      catch (e) { show(e.message, 'bad'); }
    } }),
    el('div', { id: 'detail' }),
    el('h2', {}, 'Shard leases'),
    d.leases.length ? table([
      { label: 'Owner', key: 'owner' }, { label: 'Mode', key: 'mode' }, { label: 'Pid', key: 'pid', num: true },
      { label: 'Shards', key: 'shards', num: true }, { label: 'Which', key: 'ranges' },
      { label: 'Newest epoch', key: 'epoch', num: true },
      { label: 'Held since', get: l => (l.since || '').slice(0, 19) }, { label: 'Heartbeat age', key: 'heartbeat_age' },
    ], d.leases, { id: 'leases' }) : el('p', { className: 'muted' }, 'No shard is leased (concurrent relays lease none; ordered and strict ones do).'),
    el('h2', {}, 'Last errors'),
    d.errors.length ? table([
      { label: 'Where', key: 'what' }, { label: 'Id', key: 'id', num: true },
      { label: 'Attempts', key: 'attempts', num: true }, { label: 'At', key: 'at' },
      { label: 'Error', key: 'last_error', cls: 'err' },
    ], d.errors, { id: 'errors' }) : el('p', { className: 'muted' }, 'No errors.'));
}

/* --- dead letters --- */

async function deadPage(opts) {
  const main = document.getElementById('main');
  opts = Object.assign({ queue: '', q: '', page: 0 }, opts);
  let d;
  try { d = await api('dead', opts); }
  catch (e) { main.replaceChildren(el('h1', {}, 'Dead letters ', dbTitle()), el('p', { className: 'msg bad' }, e.message)); return; }
  banner(''); stamp();
  const total = d.total[0].n;
  const pickQ = el('select', { id: 'dead-queue' }, el('option', { value: '' }, 'all queues'),
    d.queues.map(q => el('option', { value: q.queue, selected: q.queue === opts.queue }, `${q.queue} (${q.n})`)));
  const search = el('input', { id: 'dead-search', placeholder: 'id, key, type or topic', value: opts.q, size: 24 });
  const go = p => deadPage({ queue: pickQ.value, q: search.value, page: p });
  const checked = () => [...document.querySelectorAll('#dead input[type=checkbox]:checked')]
    .map(c => ({ queue: c.dataset.queue, id: c.dataset.id }));
  /* One request per queue: each is one transaction. */
  const act = async (what, verb) => {
    const sel = checked();
    if (!sel.length) { show('Select dead letters first.', 'bad'); return; }
    if (what === 'discard' && !confirm(`Discard ${sel.length} dead letter(s) for good?`)) return;
    const byQ = {};
    for (const s of sel) (byQ[s.queue] = byQ[s.queue] || []).push(s.id);
    try {
      let n = 0;
      for (const [queue, ids] of Object.entries(byQ)) {
        const r = await post('dead/' + what, { queue, ids: ids.join(',') });
        n += r.retried || r.discarded || 0;
      }
      show(`${verb} ${n} dead letter(s).`, 'ok');
    } catch (e) { show(e.message, 'bad'); }
    go(opts.page);
  };
  main.replaceChildren(
    el('h1', {}, 'Dead letters ', dbTitle()),
    el('form', { className: 'toolbar', onsubmit: ev => { ev.preventDefault(); go(0); } },
      pickQ, search, el('button', { type: 'submit' }, 'Search'),
      el('span', { className: 'muted', id: 'dead-count' }, `${total} dead letter(s); page ${d.page + 1}`),
      el('button', { type: 'button', disabled: d.page === 0, onclick: () => go(d.page - 1) }, '← Prev'),
      el('button', { type: 'button', disabled: (d.page + 1) * d.page_rows >= total, onclick: () => go(d.page + 1) }, 'Next →')),
    el('div', { className: 'toolbar' },
      el('button', { type: 'button', id: 'retry', onclick: () => act('retry', 'Retried') }, 'Retry selected'),
      el('button', { type: 'button', id: 'discard', className: 'danger', onclick: () => act('discard', 'Discarded') }, 'Discard selected'),
      state.session.writable ? null : el('span', { className: 'muted' }, 'Read-only: actions are refused until the console is unlocked.')),
    table([
      { label: '', get: r => el('input', { type: 'checkbox', dataset: { queue: r.queue, id: r.id } }) },
      { label: 'Queue', key: 'queue' }, { label: 'Id', key: 'id', num: true },
      { label: 'Topic', key: 'topic' }, { label: 'Key', key: 'key' }, { label: 'Type', key: 'type' },
      { label: 'Attempts', key: 'attempts', num: true }, { label: 'Failed at', key: 'failed_at' },
      { label: 'Payload', key: 'payload', cls: 'trunc' }, { label: 'Last error', key: 'last_error', cls: 'err' },
    ], d.items, { id: 'dead', rowdata: r => ({ id: r.id, queue: r.queue }), onrow: async r => {
      try { const it = await api('dead/item', { queue: r.queue, id: r.id }); envelope(`Dead letter ${r.id} of ${r.queue}`, it.item[0]); }
      catch (e) { show(e.message, 'bad'); }
    } }),
    el('div', { id: 'detail' }));
}

/* --- cron --- */

async function cronPage(name) {
  const main = document.getElementById('main');
  let d;
  try { d = await api('cron', { name: name || '' }); }
  catch (e) { main.replaceChildren(el('h1', {}, 'Cron ', dbTitle()), el('p', { className: 'msg bad' }, e.message)); return; }
  banner(''); stamp();
  const toggle = s => el('button', { type: 'button', className: 'toggle', dataset: { name: s.name }, onclick: async () => {
    try {
      await post(s.enabled ? 'cron/pause' : 'cron/resume', { name: s.name });
      show(`Schedule ${s.name} ${s.enabled ? 'paused' : 'resumed'}.`, 'ok');
    } catch (e) { show(e.message, 'bad'); }
    cronPage(name);
  } }, s.enabled ? 'Pause' : 'Resume');
  main.replaceChildren(
    el('h1', {}, 'Cron ', dbTitle()),
    d.schedules.length ? table([
      { label: 'Name', get: s => el('a', { href: link('/cron/' + encodeURIComponent(s.name)) }, s.name) },
      { label: 'Expression', key: 'expr' }, { label: 'Zone', key: 'tz' }, { label: 'Queue', key: 'queue' },
      { label: 'Last tick', get: s => s.last_tick || '—' },
      { label: 'Next tick', get: s => s.enabled ? (d.next[s.name] || '?') : '—' },
      { label: 'State', get: s => el('span', { className: 'pill ' + (s.enabled ? 'on' : 'off') }, s.enabled ? 'active' : 'paused') },
      { label: '', get: toggle },
    ], d.schedules, { id: 'schedules' }) : el('p', { className: 'muted' }, 'No schedules (pgoutbox cron add).'),
    el('h2', {}, 'Ticks' + (name ? ' of ' + name : ', newest first')),
    d.history.length ? table([
      { label: 'Schedule', key: 'name' }, { label: 'Tick', key: 'tick' }, { label: 'Outcome', key: 'outcome' },
      { label: 'Reason', key: 'reason' }, { label: 'Job', key: 'job_id', num: true }, { label: 'Recorded', key: 'recorded_at' },
    ], d.history, { id: 'history' }) : el('p', { className: 'muted' }, 'No ticks recorded yet.'));
}

/* --- the router --- */

/* A fleet's header: which database the pages other than the overview
 * read, and the links to them in it. */
function drawDbs() {
  const dbs = state.session.databases;
  let pick = document.getElementById('db-pick');
  if (!dbs) { if (pick) pick.remove(); return; }
  if (!pick) {
    pick = el('select', { id: 'db-pick', title: 'the database the pages read', onchange: () => {
      const h = location.hash || '#/';
      const rest = h.replace(/^#\/db\/[^/]+/, '#').slice(1);
      state.db = pick.value;
      if (rest === '/' || rest === '') { drawDbs(); return; } /* the overview shows them all */
      /* Another database may have no queue of that name. */
      location.hash = rest.startsWith('/queue/') ? link('/dead') : link(rest);
    } });
    document.querySelector('nav').append(pick);
  }
  pick.replaceChildren(...dbs.map(n => el('option', { value: n, selected: n === state.db }, n)));
  document.getElementById('nav-dead').href = link('/dead');
  document.getElementById('nav-cron').href = link('/cron');
}

function route() {
  let h = location.hash || '#/';
  clearInterval(state.timer);
  state.timer = null;
  for (const a of document.querySelectorAll('nav a')) a.classList.remove('active');
  let m;
  const dbs = state.session.databases;
  if ((m = h.match(/^#\/db\/([^/]+)(\/.*)?$/))) {
    h = '#' + (m[2] || '/');
    if (dbs) state.db = decodeURIComponent(m[1]);
  }
  if (dbs && !dbs.includes(state.db)) state.db = dbs[0];
  if (!dbs) state.db = '';
  drawDbs();
  if ((m = h.match(/^#\/queue\/(.+)$/))) {
    queuePage(decodeURIComponent(m[1]));
  } else if (h.startsWith('#/dead')) {
    document.getElementById('nav-dead').classList.add('active');
    deadPage();
  } else if ((m = h.match(/^#\/cron(?:\/(.+))?$/))) {
    document.getElementById('nav-cron').classList.add('active');
    cronPage(m[1] ? decodeURIComponent(m[1]) : '');
  } else {
    document.getElementById('nav-overview').classList.add('active');
    overview();
    state.timer = setInterval(overview, 2000);
  }
}

window.addEventListener('hashchange', () => { show(''); route(); });
document.addEventListener('DOMContentLoaded', async () => { await loadSession(); route(); });
